"""The command lines, as a user runs them: bad input, reproducibility, result files, figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analyses import anisotropy, figures

REPO = Path(__file__).resolve().parent.parent
SMALL = ["--n-sentences", "80", "--n-tokens", "300", "--bins", "20"]


def run_cli(*args, tmp_path, env=None):
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf-home"), **(env or {})}
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True,
                          env=env, timeout=120)


def assert_one_line_error(proc, *fragments):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]  # progress bars may come first
    errors = [ln for ln in lines if "error" in ln.lower()]
    assert len(errors) == 1 and lines[-1] == errors[0] and errors[0].startswith("error: "), proc.stderr
    for f in fragments:
        assert f in errors[0]


def test_unknown_model_is_one_clear_line(tmp_path):
    proc = run_cli("analyses.anisotropy", "--model", "no-such-model", "--out", str(tmp_path), tmp_path=tmp_path)
    assert_one_line_error(proc, "unknown model 'no-such-model'", "minilm-l6")


def test_missing_corpus_is_one_clear_line(tmp_path):
    proc = run_cli("analyses.anisotropy", "--model", "tiny-bert", "--corpus", "/no/such/path",
                   "--out", str(tmp_path), tmp_path=tmp_path)
    assert_one_line_error(proc, "/no/such/path", "does not exist")


def test_hub_model_without_hub_is_one_clear_line_and_quick(tmp_path):
    t0 = time.monotonic()
    proc = run_cli("analyses.anisotropy", "--model", "roberta-large", *SMALL, "--out", str(tmp_path),
                   tmp_path=tmp_path)
    if proc.returncode == 0:
        pytest.skip("the hub is reachable from this machine")
    assert_one_line_error(proc, "roberta-large", "cannot be reached")
    assert time.monotonic() - t0 < 60


def test_bad_layer_is_one_clear_line(tmp_path):
    proc = run_cli("analyses.anisotropy", "--model", "tiny-bert", *SMALL, "--layer", "9", "--out", str(tmp_path),
                   tmp_path=tmp_path)
    assert_one_line_error(proc, "--layer 9", "2 layers")


def test_same_seed_gives_identical_files_and_a_new_seed_does_not(tmp_path):
    outs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    for out, seed in zip(outs, (0, 0, 1)):
        anisotropy.main(["--model", "tiny-bert", *SMALL, "--seed", str(seed), "--out", str(out)])
    read = lambda out, ext: (out / "results" / "anisotropy" / f"tiny-bert.{ext}").read_bytes()
    assert read(outs[0], "json") == read(outs[1], "json")
    assert read(outs[0], "csv") == read(outs[1], "csv")
    assert read(outs[0], "json") != read(outs[2], "json")


def test_result_file_says_how_it_was_computed_and_figures_redraw(tmp_path):
    out = tmp_path / "out"
    anisotropy.main(["--model", "tiny-bert", "--model", "tiny-gpt2", *SMALL, "--out", str(out)])
    doc = json.loads((out / "results" / "anisotropy" / "tiny-bert.json").read_text())
    assert doc["config"]["seed"] == 0 and doc["config"]["n_tokens"] == 300
    assert doc["model"]["sentence_vector"] == "cls" and doc["model"]["fingerprint"]["seed"] == 0
    assert len(doc["corpus"]["sha256"]) == 64 and doc["corpus"]["n_sampled"] == 80
    assert doc["definitions"]["special_tokens"] == "excluded from token statistics"
    assert "torch" in doc["provenance"]["packages"]
    assert len(doc["layers"]) == 3  # embeddings + 2 layers
    gpt = json.loads((out / "results" / "anisotropy" / "tiny-gpt2.json").read_text())
    assert gpt["model"]["sentence_vector"] == "last"
    for name in ("anisotropy", "anisotropy-layers"):
        (out / "figures" / f"{name}.png").unlink()
    paths = figures.redraw(str(out))
    assert {p.name for p in paths} == {"anisotropy.png", "anisotropy.pdf", "anisotropy-layers.png",
                                       "anisotropy-layers.pdf"}
    assert all(p.stat().st_size > 1000 for p in paths)


def test_second_run_reuses_the_cache(tmp_path, monkeypatch):
    out = tmp_path / "out"
    anisotropy.main(["--model", "tiny-bert", *SMALL, "--out", str(out)])
    first = (out / "results" / "anisotropy" / "tiny-bert.json").read_bytes()
    import probes

    def no_model(*a, **k):
        raise AssertionError("the model was loaded although the activations are cached")

    monkeypatch.setattr(probes, "load", no_model)
    anisotropy.main(["--model", "tiny-bert", *SMALL, "--out", str(out)])
    assert (out / "results" / "anisotropy" / "tiny-bert.json").read_bytes() == first
