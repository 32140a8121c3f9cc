"""The README's ten lines of Python, run as written (on tiny registry models and 24 sentences instead of
minilm-l6, slstm-small and 500), give the numbers the CLIs write for the same models and sentences."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
REPO = Path(__file__).resolve().parent.parent


def readme_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Ten lines of Python"):]
    code = section[section.index("```python") + len("```python"):]
    return code[:code.index("```")]


@pytest.mark.slow
def test_the_readme_example_runs_and_equals_the_cli(tmp_path, monkeypatch):
    code = readme_example()
    assert len([ln for ln in code.splitlines() if ln.strip()]) <= 12
    for real, tiny in (('"minilm-l6"', '"tiny-bert"'), ('"slstm-small"', '"tiny-slstm"'), ("500", "24")):
        assert real in code
        code = code.replace(real, tiny)
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 -- our own README, as a user runs it
    assert (tmp_path / "two-models.png").stat().st_size > 0
    left, right = scope["left"], scope["right"]
    assert left.get_title().startswith("tiny-bert") and "tiny-slstm" in right.get_title()

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for args in (["analyses.anisotropy", "--model", "tiny-bert", "--n-sentences", "24"],
                 ["analyses.similarity", "--model", "tiny-bert", "--model", "tiny-slstm", "--n-sentences", "24"]):
        run = subprocess.run([sys.executable, "-m", *args, "--out", str(tmp_path / "cli")], capture_output=True,
                             text=True, cwd=REPO, env=env)
        assert run.returncode == 0, run.stderr[-2000:]
    from analyses import anisotropy, similarity

    a, b = scope["a"], scope["b"]
    mine = anisotropy.compute(acts=a)
    cli = json.loads((tmp_path / "cli/results/anisotropy/tiny-bert.json").read_text())
    for m, c in zip(mine.layers, cli["layers"], strict=True):
        assert m["token"]["mean"] == pytest.approx(c["token"]["mean"], abs=1e-6)
        assert m["sentence"]["mean"] == pytest.approx(c["sentence"]["mean"], abs=1e-6)
    pair = similarity.compute(acts_a=a, acts_b=b)
    cli_pair = json.loads(next((tmp_path / "cli/results/similarity").glob("tiny-bert__tiny-slstm*.json")).read_text())
    np.testing.assert_allclose(np.asarray(pair.to_json()["matrices"]["cka"]["ab"], float),
                               np.asarray(cli_pair["matrices"]["cka"]["ab"], float), atol=1e-6)
