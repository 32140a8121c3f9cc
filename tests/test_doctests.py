"""The ``>>>`` examples in the docstrings of ``probes/`` and ``analyses/`` run, as doctests, in the fast tier: an
example a reader copies works as shown. Every module whose source holds ``>>>`` is collected; an example that
needs a model uses a seeded random-init model of ``checkpoints.yaml`` (``tiny-bert``, ``tiny-gpt2``: built offline
in a second) and writes nothing outside the session's cache. A sketch that cannot run as written (undefined inputs,
a trained model, a network) is written without ``>>>`` (indented code, or a ``$ python ...`` line)."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def with_examples() -> list[str]:
    """The modules of probes/ and analyses/ whose source holds a ``>>>`` example."""
    paths = [p for folder in ("probes", "analyses") for p in sorted((REPO / folder).rglob("*.py"))]
    return [module_name(p) for p in paths if ">>>" in p.read_text(encoding="utf-8")]


MODULES = with_examples()


def test_modules_with_examples_are_found():
    assert "analyses.summary.course" in MODULES and "probes" in MODULES, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=FLAGS)
    tests = [t for t in finder.find(module, name) if t.examples]
    assert tests, f"{name} holds '>>>' but doctest finds no example in its docstrings"
    failures = []
    for test in tests:
        out: list[str] = []
        result = runner.run(test, out=out.append, clear_globs=True)
        if result.failed:
            failures.append("".join(out))
    assert not failures, "\n".join(failures)
