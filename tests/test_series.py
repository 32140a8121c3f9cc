"""Checkpoint series (probes.series, analyses.series) on tiny models trained a few steps here with --snapshots.

* A folder of step checkpoints resolves to its points in step order, each registered under
  ``<series>.step-<step>``; HF Trainer's ``checkpoint-N`` folders and ``hf:org/name@rev1,rev2`` lists too.
* An analysis runs along a series from Python and from the command line; each point's number equals the
  number the analysis gives that checkpoint alone (the series adds no arithmetic of its own), and the figure
  draws those numbers against the step.
* A series of the suite's own S-LSTM takes its family from the registry entry it is a run of.
* Bad series are one error line.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

import analyses.anisotropy as anisotropy
from analyses import series as series_mod
from probes.corpus import DEFAULT_CORPUS_DIR
from probes.errors import ProbeError
from probes.series import resolve
from recipes.train import TrainConfig, train

pytestmark = pytest.mark.slow

SMALL = ["--n-sentences", "12", "--n-tokens", "40"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Tiny BERT and S-LSTM runs of the recipe with --snapshots: (final folders, series folders)."""
    root = tmp_path_factory.mktemp("series-train")
    corpus = root / "corpus"
    corpus.mkdir()
    for name in ("austen-emma.txt", "melville-moby-dick.txt"):
        (corpus / name).write_text((DEFAULT_CORPUS_DIR / name).read_text(encoding="utf-8")[:30_000])
    finals, series = {}, {}
    tok = None
    for arch in ("bert", "slstm"):
        cfg = TrainConfig(arch=arch, name=f"tiny-{arch}-run", corpus=str(corpus), out_dir=str(root / "models"),
                          vocab_size=200, width=16, layers=2, heads=2, intermediate=32, max_positions=256, seq_len=48,
                          batch_size=4, steps=8, warmup=1, lr=3e-3, progress=False, threads=1, eval_blocks=8,
                          snapshots=True, snapshot_dir=str(root / "series" / f"tiny-{arch}-run"),
                          **({"tokenizer": tok} if tok else {}))
        finals[arch] = train(cfg)
        tok = str(root / "models" / "wordpiece-200")
        series[arch] = root / "series" / f"tiny-{arch}-run"
    return finals, series


def test_a_folder_of_snapshots_resolves_in_step_order(trained):
    _, series = trained
    s = resolve(series["bert"])
    assert [p.step for p in s.points] == [1, 2, 4, 6, 8] and s.like is None
    assert [p.name for p in s.points][0] == "tiny-bert-run.step-0000001"
    assert all(Path(p.source).is_dir() for p in s.points) and s.points[-1].fraction == 1.0


def test_trainer_folders_and_hub_revisions(trained, tmp_path):
    _, series = trained
    for i, step in enumerate((500, 1000, 50)):
        shutil.copytree(sorted(series["bert"].glob("step-*"))[i], tmp_path / "run" / f"checkpoint-{step}")
    assert [p.step for p in resolve(tmp_path / "run").points] == [50, 500, 1000]
    hub = resolve("hf:EleutherAI/pythia-70m@step1000,step143000,step8000")
    assert [p.step for p in hub.points] == [1000, 8000, 143000]
    assert hub.points[0].source == "hf:EleutherAI/pythia-70m@step1000" and hub.name == "EleutherAI--pythia-70m"


@pytest.mark.parametrize("bad,match", [("no/such/folder", "not a folder"), ("hf:org/m@main,dev", "no step number")])
def test_bad_series_are_one_line(bad, match):
    with pytest.raises(ProbeError, match=match):
        resolve(bad)


def test_an_analysis_runs_along_a_series_from_python_and_equals_each_checkpoint_alone(trained, tmp_path):
    finals, series = trained
    result = series_mod.run("anisotropy", [series["bert"]], out=tmp_path, n_sentences=12, n_tokens=40)
    (line,) = result.lines
    assert [p.step for p in line.points] == [1, 2, 4, 6, 8]
    assert result.statistic == "token cosine, last layer"
    for i, folder in ((0, sorted(series["bert"].glob("step-*"))[0]), (-1, finals["bert"])):  # as a plain run
        anisotropy.ANALYSIS.main(["--model", str(folder), *SMALL, "--out", str(tmp_path / f"alone{i}"), "--no-figures"])
        (doc,) = (tmp_path / f"alone{i}" / "results" / "anisotropy").glob("*.json")
        alone = anisotropy.Result.from_json(json.loads(doc.read_text()))
        assert line.points[i].value == alone.last_layer_mean("token").point
        assert line.points[i].interval == alone.last_layer_mean("token").interval()
    assert len({round(p.value, 6) for p in line.points}) > 1  # the checkpoints differ
    assert all(p.interval is not None and p.interval[0] <= p.value <= p.interval[1] for p in line.points)
    ax = result.plot()
    drawn = ax.get_lines()[0]
    assert np.allclose(drawn.get_xdata(), [1, 2, 4, 6, 8])
    assert np.allclose(drawn.get_ydata(), [p.value for p in line.points])
    assert ax.get_xscale() == "log"


def test_the_command_line_writes_numbers_and_figure_and_takes_the_family_from_the_entry(trained, tmp_path,
                                                                                       monkeypatch, capsys):
    finals, series = trained
    reg = tmp_path / "mine.yaml"
    reg.write_text(yaml.safe_dump({"tiny-slstm-run": {"family": "slstm", "kind": "encoder", "sentence": "g",
                                                      "source": {"path": str(finals["slstm"])}}}))
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(reg))
    series_mod.main(["transitions", "--series", str(series["slstm"]), "--series", str(series["bert"]),
                     "--out", str(tmp_path / "o"), "--", "--n-sentences", "12"])
    doc = json.loads((tmp_path / "o" / "series" / "transitions.json").read_text())
    assert [x["name"] for x in doc["lines"]] == ["tiny-slstm-run", "tiny-bert-run"]
    assert doc["statistic"] == "token L2 change, intermediate layers" and doc["settings"] == ["--n-sentences", "12"]
    assert (tmp_path / "o" / "figures" / "series-transitions.png").exists()
    points = yaml.safe_load((tmp_path / "o" / "series" / "transitions.points.yaml").read_text())
    assert points["tiny-slstm-run.step-0000008"]["family"] == "slstm"
    assert points["tiny-bert-run.step-0000008"]["family"] == "hf"
    saved = json.loads((tmp_path / "o" / "results" / "transitions" / "tiny-slstm-run.step-0000008.json").read_text())
    assert saved["model"]["family"] == "slstm"
    assert "tiny-slstm-run (token L2 change" in capsys.readouterr().out
