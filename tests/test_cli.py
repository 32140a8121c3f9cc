"""The command lines, as a user runs them: bad input, reproducibility, result files, figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from analyses import anisotropy
from analyses.summary import figures

REPO = Path(__file__).resolve().parent.parent
SMALL = ["--n-sentences", "80", "--n-tokens", "300", "--bins", "20"]


def run_cli(*args, tmp_path, env=None):
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf-home"), **(env or {})}
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True,
                          env=env, timeout=120)


def assert_one_line_error(proc, *fragments):
    assert proc.returncode == 2, proc.stderr
    assert_one_error_line(proc.stderr, *fragments)


def assert_one_error_line(stderr: str, *fragments):
    assert "Traceback" not in stderr
    lines = [ln for ln in stderr.splitlines() if ln.strip()]  # progress bars may come first
    errors = [ln for ln in lines if "error" in ln.lower()]
    assert len(errors) == 1 and lines[-1] == errors[0] and errors[0].startswith("error: "), stderr
    for f in fragments:
        assert f in errors[0]


def anisotropy_error(args, capsys) -> str:
    """stderr of ``python -m analyses.anisotropy ARGS`` run in this process as ``python -m`` runs it (run_main;
    test_bad_input_as_a_user_runs_it starts the real process), which must exit with status 2."""
    from probes.config import run_main

    with pytest.raises(SystemExit) as done:
        run_main(anisotropy.main, list(args))
    err = capsys.readouterr().err
    assert done.value.code == 2, err
    return err


def test_unknown_model_is_one_clear_line(tmp_path, capsys):
    err = anisotropy_error(["--model", "no-such-model", "--out", str(tmp_path)], capsys)
    assert_one_error_line(err, "unknown model 'no-such-model'", "minilm-l6")


def test_missing_corpus_is_one_clear_line(tmp_path, capsys):
    err = anisotropy_error(["--model", "tiny-bert", "--corpus", "/no/such/path", "--out", str(tmp_path)], capsys)
    assert_one_error_line(err, "/no/such/path", "does not exist")


@pytest.mark.integration
def test_hub_model_without_hub_is_one_clear_line_and_quick(tmp_path):
    t0 = time.monotonic()
    proc = run_cli("analyses.anisotropy", "--model", "roberta-large", *SMALL, "--out", str(tmp_path),
                   tmp_path=tmp_path)
    if proc.returncode == 0:
        pytest.skip("the hub is reachable from this machine")
    assert_one_line_error(proc, "roberta-large", "cannot be reached")
    assert time.monotonic() - t0 < 60


def test_bad_layer_is_one_clear_line(tmp_path, capsys):
    err = anisotropy_error(["--model", "tiny-bert", *SMALL, "--layer", "9", "--out", str(tmp_path)], capsys)
    assert_one_error_line(err, "--layer 9", "2 layers")


@pytest.mark.slow
def test_same_seed_gives_identical_files_and_a_new_seed_does_not(tmp_path):
    outs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    for out, seed in zip(outs, (0, 0, 1)):
        anisotropy.main(["--model", "tiny-bert", *SMALL, "--seed", str(seed), "--out", str(out)])
    read = lambda out, ext: (out / "results" / "anisotropy" / f"tiny-bert.{ext}").read_bytes()
    assert read(outs[0], "json") == read(outs[1], "json")
    assert read(outs[0], "csv") == read(outs[1], "csv")
    assert read(outs[0], "json") != read(outs[2], "json")


@pytest.mark.slow
def test_figures_drawn_in_two_processes_are_the_files_drawn_in_one(tmp_path):
    import shutil

    from analyses import transitions

    one, two = tmp_path / "one", tmp_path / "two"
    anisotropy.main(["--model", "tiny-bert", *SMALL, "--no-figures", "--out", str(one)])
    transitions.main(["--model", "tiny-bert", "--n-sentences", "80", "--no-figures", "--out", str(one)])
    shutil.copytree(one / "results", two / "results")
    drawn_one, drawn_two = figures.redraw(str(one)), figures.redraw(str(two), jobs=2)
    assert [p.name for p in drawn_one] == [p.name for p in drawn_two]
    assert {"anisotropy.png", "transitions.png"} <= {p.name for p in drawn_one}
    for a, b in zip(drawn_one, drawn_two):
        if a.suffix == ".png":
            assert a.read_bytes() == b.read_bytes(), a.name


@pytest.mark.slow
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
    # the figures show the saved numbers: line y-data = layer statistics, histogram heights = counts
    import matplotlib.pyplot as plt
    from matplotlib.patches import StepPatch

    fig = anisotropy.plot_layers([anisotropy.Result.from_json(d) for d in (doc, gpt)])
    for ax, (key, _) in zip(fig.axes, anisotropy.LAYER_PANELS):
        model_lines = [ln for ln in ax.get_lines() if ln.get_label() in ("tiny-bert", "tiny-gpt2")]
        for ln, res in zip(model_lines, (doc, gpt)):
            assert ln.get_label() == res["model_name"]
            np.testing.assert_allclose(ln.get_ydata(), [row[key] for row in res["layers"]])
    # tiny-gpt2's last hidden state is after ln_f: its last point is marked, tiny-bert's is not
    assert gpt["model"]["final_norm_on_last_hidden"] and not doc["model"]["final_norm_on_last_hidden"]
    marks = [ln.get_label() for ln in fig.axes[0].get_lines() if "final norm" in ln.get_label()]
    assert marks == ["tiny-gpt2: last layer after the final norm"]
    plt.close(fig)
    fig = anisotropy.plot([anisotropy.Result.from_json(doc)])
    for ax, level in zip(fig.axes, ("token", "sentence")):
        (patch,) = [p for p in ax.patches if isinstance(p, StepPatch)]
        counts = np.asarray(doc["layers"][doc["headline_layer"]][level]["counts"], float)
        heights, edges = patch.get_data()[:2]
        np.testing.assert_allclose(heights * np.diff(edges) * counts.sum(), counts)
    plt.close(fig)


def test_second_run_reuses_the_cache(tmp_path, monkeypatch):
    out = tmp_path / "out"
    anisotropy.main(["--model", "tiny-bert", *SMALL, "--no-figures", "--out", str(out)])
    first = (out / "results" / "anisotropy" / "tiny-bert.json").read_bytes()
    import probes

    def no_model(*a, **k):
        raise AssertionError("the model was loaded although the activations are cached")

    monkeypatch.setattr(probes, "load", no_model)
    anisotropy.main(["--model", "tiny-bert", *SMALL, "--no-figures", "--out", str(out)])
    assert (out / "results" / "anisotropy" / "tiny-bert.json").read_bytes() == first


# ----------------------------------------------------------------------------- bad input, every entry point
# (entry point, arguments, a fragment of the one error line). "{out}" is a fresh folder, "{file}" an
# existing file, "{corrupt}" an output root whose one saved result is not valid JSON.

BAD_INPUT = [
    ("analyses.anisotropy", ["--model", "tiny-bert", "--batch-size", "0"], "--batch-size must be >= 1"),
    ("analyses.anisotropy", ["--model", "tiny-bert", "--batch-size", "-4"], "--batch-size must be >= 1"),
    ("analyses.anisotropy", ["--model", "tiny-bert", "--seed", "-1"], "--seed must be >= 0"),
    ("analyses.anisotropy", ["--model", "tiny-bert", "--bins", "0"], "--bins must be >= 1"),
    ("analyses.anisotropy", ["--model", "tiny-bert", "--n-tokens", "-5"], "--n-tokens must be >= 2"),
    ("analyses.anisotropy", ["--model", "tiny-bert", "--max-occurrences", "1"], "--max-occurrences must be >= 2"),
    ("analyses.anisotropy", ["--model", "tiny-bert", "--n-sentences", "abc"], "--n-sentences expects int"),
    ("analyses.anisotropy", ["--model", "tiny-bert", "--device", "banana"], "--device 'banana'"),
    ("analyses.anisotropy", ["--model", "tiny-bert", "--out", "{file}"], "is a file"),
    ("analyses.anisotropy", ["--model", "tiny-bert", "--out", "{file}/sub"], "is not writable"),
    ("analyses.transitions", ["--model", "tiny-bert", "--n-sentences", "0"], "--n-sentences must be >= 1"),
    ("analyses.maps", ["--model", "tiny-bert", "--local-radius", "-1"], "--local-radius must be >= 0"),
    ("analyses.maps", ["--model", "tiny-bert", "--position-bins", "0"], "--position-bins must be >= 1"),
    ("analyses.redundancy", ["--model", "tiny-bert", "--window-length", "1"], "--window-length must be >= 2"),
    ("analyses.redundancy", ["--model", "tiny-bert", "--n-windows", "0"], "--n-windows must be >= 1"),
    ("analyses.redundancy", ["--model", "tiny-bert", "--threshold", "1.5"], "--threshold must be <= 1.0"),
    ("analyses.perplexity", ["--model", "tiny-gpt2", "--window", "-5"], "--window must be >= 0"),
    ("analyses.perplexity", ["--model", "tiny-gpt2", "--max-tokens", "-5"], "--max-tokens must be >= 0"),
    ("analyses.perplexity", ["--model", "tiny-gpt2", "--overlap", "-1"], "--overlap must be >= 0"),
    ("analyses.perplexity", ["--model", "tiny-gpt2", "--split", "test"], "invalid choice: 'test'"),
    ("analyses.topics", ["--model-a", "tiny-gpt2", "--context-tokens", "-4"], "--context-tokens must be >= 0"),
    ("analyses.topics", ["--model-a", "tiny-gpt2", "--n-contexts", "0"], "--n-contexts must be >= 1"),
    ("analyses.topics", ["--model-a", "tiny-gpt2", "--no-above", "2"], "--no-above must be <= 1.0"),
    ("analyses.speed", ["--lengths", "0"], "--lengths must be >= 1"),
    ("analyses.speed", ["--repeats", "0"], "--repeats must be >= 1"),
    ("analyses.summary.figures", ["--out", "{out}"], "nothing to draw"),
    ("analyses.summary.figures", ["--out", "{corrupt}"], "is not a valid result file"),
    ("recipes.train", ["--steps", "0"], "--steps must be >= 1"),
    ("recipes.train", ["--arch", "gpt"], "invalid choice: 'gpt'"),
    ("recipes.train_lm", ["pretrain", "--steps", "0"], "--steps must be >= 1"),
    ("recipes.train_lm", ["finetune", "--window", "0"], "--window must be >= 1"),
    ("probes.models.slstm_import", ["{file}", "--out", "{out}"], "--sentencepiece is required"),
    ("probes.models.slstm_import", ["{file}", "--num-layers", "0"], "--num-layers must be >= 1"),
    ("benchmarks.bench_pairwise", ["--n", "0"], "--n must be >= 2"),
    ("analyses.probing", ["--cv-folds", "1"], "--cv-folds must be >= 2"),
    ("analyses.probing", ["--task", "no-such-task", "--out", "{out}"], "argument --task: invalid choice"),
    ("analyses.similarity", ["--max-units", "1"], "--max-units must be >= 4"),
    ("analyses.mog", ["--n-sentences", "0"], "--n-sentences must be >= 1"),
    ("analyses.mog_lens", ["--batch-size", "0"], "--batch-size must be >= 1"),
    ("probes.capture.cache", ["--older-than", "-5"], "--older-than must be >= -1.0"),
    ("scripts.compare_results", ["{out}", "{out}", "--tol", "-1"], "--tol must be >= 0.0"),
]


def _fill(args, tmp_path):
    (tmp_path / "file").write_text("not a folder")
    corrupt = tmp_path / "corrupt" / "results" / "anisotropy"
    corrupt.mkdir(parents=True, exist_ok=True)
    (corrupt / "tiny-bert.json").write_text('{"analysis": "anisotropy", ')
    (tmp_path / "out").mkdir(exist_ok=True)
    subs = {"{out}": tmp_path / "out", "{file}": tmp_path / "file", "{corrupt}": tmp_path / "corrupt"}
    out = []
    for a in args:
        for k, v in subs.items():
            a = a.replace(k, str(v))
        out.append(a)
    return out


def _entry(module: str):
    import importlib
    import importlib.util

    if module.startswith("scripts."):
        path = REPO / "scripts" / (module.split(".", 1)[1] + ".py")
        spec = importlib.util.spec_from_file_location(module, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[module] = mod  # dataclasses look their module up
        spec.loader.exec_module(mod)
        return mod.main
    return importlib.import_module(module).main


@pytest.mark.parametrize("module,args,fragment", BAD_INPUT, ids=[f"{m} {' '.join(a)}" for m, a, _ in BAD_INPUT])
def test_bad_input_is_one_error_line_and_exit_2(module, args, fragment, tmp_path, capsys):
    """Every entry point, through run_main exactly as ``python -m`` runs it."""
    from probes.config import run_main

    with pytest.raises(SystemExit) as exc:
        run_main(_entry(module), _fill(args, tmp_path))
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert fragment in lines[0], lines[0]
    assert not list((tmp_path / "out").iterdir())  # nothing written


FIRST_OF_EACH = list({m: (m, a, f) for m, a, f in reversed(BAD_INPUT)}.values())


@pytest.mark.integration
@pytest.mark.parametrize("module,args,fragment", FIRST_OF_EACH, ids=[m for m, _, _ in FIRST_OF_EACH])
def test_bad_input_as_a_user_runs_it(module, args, fragment, tmp_path):
    """One case per entry point as a real subprocess: the ``__main__`` wiring is run_main too."""
    cmd = ["scripts/" + module.split(".", 1)[1] + ".py"] if module.startswith("scripts.") else ["-m", module]
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf-home")}
    proc = subprocess.run([sys.executable, *cmd, *_fill(args, tmp_path)], cwd=REPO, capture_output=True,
                          text=True, env=env, timeout=120)
    assert_one_line_error(proc, fragment)


@pytest.mark.integration
def test_debug_shows_the_traceback(tmp_path):
    proc = run_cli("analyses.anisotropy", "--model", "tiny-bert", "--device", "banana", "--out", str(tmp_path),
                   tmp_path=tmp_path, env={"PROBES_DEBUG": "1"})
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "ProbeError" in proc.stderr


def test_a_repeated_model_is_computed_once(tmp_path, capsys):
    out = tmp_path / "out"
    anisotropy.main(["--model", "tiny-bert", "--model", "tiny-bert", *SMALL, "--no-figures", "--out", str(out)])
    assert capsys.readouterr().out.count("tiny-bert: wrote") == 1


def test_every_result_is_strict_json_and_a_nan_becomes_null_with_a_reason(tmp_path):
    from analyses.common import write_result

    json_path, _ = write_result(tmp_path, "demo", "m", {"ok": 1.0, "rows": [{"mev": float("nan")}]}, [])
    doc = json.loads(json_path.read_text(), parse_constant=lambda c: pytest.fail(f"bare {c} in the JSON"))
    assert doc["rows"][0]["mev"] is None and doc["nulls"]["paths"] == ["/rows/0/mev"]
    assert "not a finite number" in doc["nulls"]["reason"]
