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
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

import analyses.anisotropy as anisotropy
from analyses import data
from analyses import series as series_mod
from analyses.causal_probing import Result as CausalResult
from analyses.common import read_results
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


def test_trajectories_judge_the_claims_at_every_snapshot_and_the_table_reads_them(trained, tmp_path, monkeypatch):
    """The S-LSTM anisotropy claims along the tiny S-LSTM and BERT runs (one seed): every point's difference is the
    claims' own comparison of that point's results, and the claim table's "over training" uses a trajectory only
    when it ends at the weights the table's results were computed from."""
    from analyses import trajectory_plan
    from analyses.summary import claims, trajectories

    finals, series = trained
    reg = tmp_path / "mine.yaml"
    entry = lambda family, sentence, arch: {"family": family, "kind": "encoder", "sentence": sentence,  # noqa: E731
                                            "source": {"path": str(finals[arch])}}
    reg.write_text(yaml.safe_dump({"tiny-slstm-run": entry("slstm", "g", "slstm"),
                                   "tiny-bert-run": entry("hf", "cls", "bert")}))
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(reg))
    found = trajectory_plan.find_series(series["bert"].parent)
    assert [s.like for s in found] == ["tiny-bert-run", "tiny-slstm-run"]
    trajectory_plan.write_points(trajectory_plan.record(found), tmp_path / "traj")
    points = trajectory_plan.read_points(tmp_path / "traj")  # what the summary reads: no checkpoint folder
    assert [s.model for s in points] == ["tiny-bert-run", "tiny-slstm-run"] and all(s.final_sha256 for s in points)
    out, enough = tmp_path / "traj", ["--n-sentences", "24", "--n-tokens", "48"]  # a verdict needs 20 units
    series_mod.run("anisotropy", [series["slstm"], series["bert"]], out=out, options=enough)
    results = {"anisotropy": read_results(out, "anisotropy")}
    judged = trajectories.judge_points(points, results)
    assert [round(p.fraction, 3) for p in judged] == [0.125, 0.25, 0.5, 0.75, 1.0]
    doc = trajectories.trajectories(points, judged)
    (token,) = [c for c in doc.claims if c.claim.startswith("S-LSTM token outputs are less anisotropic")]
    (comp,) = token.comparisons
    (seed,) = comp.seeds
    assert comp.against == "tiny-slstm-run vs tiny-bert-run" and seed.a == "tiny-slstm-run"
    assert [p.step for p in seed.points] == [1, 2, 4, 6, 8]
    from analyses.summary.claims_figure import trajectories_figure

    fig = trajectories_figure(doc)
    panels = [ax for ax in fig.axes if ax.get_lines()]
    assert len(panels) == sum(len(c.comparisons) for c in doc.claims)
    drawn = panels[[c.claim for c in doc.claims].index(token.claim)].get_lines()[0]
    assert np.allclose(drawn.get_xdata(), [p.fraction for p in seed.points])
    assert np.allclose(drawn.get_ydata(), [p.difference for p in seed.points])
    # the last point is the final models' comparison, as the claims table computes it on their own results
    table_out = tmp_path / "table"
    anisotropy.ANALYSIS.main(["--model", "tiny-slstm-run", "--model", "tiny-bert-run", *enough, "--out",
                              str(table_out), "--no-figures"])
    trajectories.write(doc, table_out / "trajectories")
    (f,) = [x for x in claims.evaluate(table_out) if x.claim == token.claim]
    assert f.comparisons[0].seeds[0].difference == pytest.approx(seed.points[-1].difference, abs=1e-12)
    from analyses.summary.course import describe

    word = describe(comp.seeds)
    assert word.startswith(f"{comp.over_training} (seed 0") and f.over_training[comp.against] == word
    line = [ln for ln in claims.markdown_table([f]).splitlines() if "tiny-bert-run" in ln][0]
    assert f"| {word} |" in line
    from analyses.summary.report import render

    assert 'alt="the claims\' differences along training"' in render(table_out).replace("&#39;", "'")
    # a trajectory of other weights is not used: retrain-free check by editing the recorded final hash
    seed.final_sha256["b"] = "0" * 64
    trajectories.write(doc, table_out / "trajectories")
    (f,) = [x for x in claims.evaluate(table_out) if x.claim == token.claim]
    assert f.over_training[comp.against] == "no trajectory of these weights"


@pytest.mark.parametrize("late,expected,cell", [
    ([+1, +2, +3], "stable", "stable (seed 7; size +200% over the last half)"),
    ([-1, +2, +3], "still moving", "still moving (seed 7)"),
    ([+1, +2, -0.1], "still moving", "still moving (seed 7)"),
    ([-2, -1.5, -1], "stable", "stable (seed 7; size -50% over the last half)"),
    ([], "no trajectory", "no trajectory")])
def test_the_over_training_rule_reads_the_last_half(late, expected, cell):
    from analyses.summary.course import describe, over_training
    from analyses.summary.trajectory_doc import CoursePoint, CourseSeed

    early = [CoursePoint(f, None, None, -5.0, None) for f in (1 / 32, 1 / 16, 1 / 8, 1 / 4)]  # early signs: no
    points = early + [CoursePoint(f, None, None, d, None) for f, d in zip((0.5, 0.75, 1.0), late)]
    seeds = [CourseSeed(7, "a", "b", {"a": None, "b": None}, points if late else [])]
    assert over_training(seeds) == expected and describe(seeds) == cell


def test_reuse_runs_only_points_not_analysed_from_the_same_weights_and_options(trained, tmp_path, monkeypatch):
    _, series = trained
    first = series_mod.run("transitions", [series["bert"]], out=tmp_path, options=["--n-sentences", "12"], reuse=True)
    calls = []
    monkeypatch.delenv("PROBES_CHECKPOINTS", raising=False)
    monkeypatch.setattr(data, "run_config", lambda analysis, cfg, specs=None: calls.append(cfg) or seen.append(
        (os.environ.get("PROBES_CHECKPOINTS"), sorted(specs or {}))))
    seen: list = []
    again = series_mod.run("transitions", [series["bert"]], out=tmp_path, options=["--n-sentences", "12"], reuse=True)
    assert calls == [] and again.lines[0].points == first.lines[0].points
    series_mod.run("transitions", [series["bert"]], out=tmp_path, n_sentences=12, reuse=True)  # the same, from Python
    assert calls == []
    series_mod.run("transitions", [series["bert"]], out=tmp_path, options=["--n-sentences", "13"], reuse=True)
    assert len(calls) == 1 and len(calls[0].model) == len(first.lines[0].points)  # other settings: all again
    assert calls[0].n_sentences == 13 and not calls[0].figures  # a typed Config, not command-line words
    assert seen == [(None, sorted(calls[0].model))]  # the points handed over as specs, no registry in the environment


def test_causal_probing_runs_along_a_series_and_draws_its_headline(trained, tmp_path):
    """`probes series causal_probing` draws LEACE's excess loss against the step, each point the checkpoint's own
    result's headline with its interval."""
    _, series = trained
    out = tmp_path / "o"
    series_mod.main(["causal_probing", "--series", str(series["bert"]), "--out", str(out), "--",
                     "--n-sentences", "40", "--max-items", "150", "--task", "position", "--n-boot", "50",
                     "--seeds", "2", "--random-draws", "1"])
    doc = json.loads((out / "series" / "causal_probing.json").read_text())
    assert doc["statistic"].startswith("position: LEACE excess loss")
    (line,) = doc["lines"]
    assert [p["step"] for p in line["points"]] == [1, 2, 4, 6, 8]
    assert (out / "figures" / "series-causal_probing.png").exists()
    last = CausalResult.from_json(json.loads(
        (out / "results" / "causal_probing" / "tiny-bert-run.step-0000008.json").read_text()))
    sample = last.headline_numbers()[doc["statistic"]]
    assert line["points"][-1]["value"] == pytest.approx(sample.point, abs=1e-7)
