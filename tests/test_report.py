"""The report page and the claim verdicts: every result appears, every image decodes, verdicts come
from the result files, and every model keeps one colour."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image as mpimg
import pytest

from analyses import style
from analyses.summary import claims, report

REPO = Path(__file__).resolve().parent.parent


class _Page(HTMLParser):
    """Collects the images, the result provenance blocks and the claim-table cells of a report."""

    def __init__(self):
        super().__init__()
        self.images, self.results, self.cells, self._in_td = [], [], [], False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.images.append(a["src"])
        if tag == "details" and "data-result" in a:
            self.results.append(a["data-result"])
        self._in_td = tag == "td"

    def handle_data(self, data):
        if self._in_td and data.strip():
            self.cells.append(data.strip())

    def handle_endtag(self, tag):
        if tag == "td":
            self._in_td = False


def _run(*args, out: Path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", *args, "--out", str(out)], cwd=REPO, capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory):
    """A miniature demo: two analyses on two tiny models, then every figure and the report."""
    out = tmp_path_factory.mktemp("report")
    models = ["--model", "tiny-bert", "--model", "tiny-slstm"]
    _run("analyses.anisotropy", *models, "--n-sentences", "40", "--n-tokens", "200", "--bins", "20", out=out)
    _run("analyses.transitions", *models, "--n-sentences", "40", out=out)
    _run("analyses.summary.figures", out=out)
    return out


def test_report_shows_every_result_and_every_figure(demo_out):
    path = report.write_report(demo_out)
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    saved = {str(p.relative_to(demo_out)) for p in (demo_out / "results").glob("*/*.json")}
    assert saved and set(page.results) == saved
    pngs = sorted((demo_out / "figures").glob("*.png"))
    assert len(page.images) == len(pngs) > 0
    for src in page.images:
        head, data = src.split(",", 1)
        assert head == "data:image/png;base64"
        img = mpimg.imread(io.BytesIO(base64.b64decode(data)), format="png")
        assert img.ndim == 3 and img.shape[0] > 50 and img.shape[1] > 50
    assert "http://" not in path.read_text() and "https://" not in path.read_text()  # opens offline


def test_claim_verdicts_come_from_the_result_files(demo_out):
    verdicts = {c.claim: c for c in claims.evaluate(demo_out)}
    aniso = next(c for c in verdicts.values() if c.analysis == "anisotropy" and "token" in c.claim)
    assert aniso.verdict in (claims.HOLDS, claims.FAILS)
    docs = claims.load_all(demo_out)["anisotropy"]
    values = {d["model_name"]: d["layers"][-1]["token"]["mean"] for d in docs}
    expected = claims.HOLDS if abs(values["tiny-slstm"]) < abs(values["tiny-bert"]) else claims.FAILS
    assert aniso.verdict == expected
    for name, v in values.items():
        assert f"{name} {v:.3f}" in aniso.evidence
    page = _Page()
    page.feed(report.render(demo_out))
    assert aniso.verdict in page.cells and aniso.evidence in page.cells


def _perplexity_doc(name: str, recurrent: bool, ppl: dict) -> dict:
    rows = [{"model": name, "recurrent": recurrent, "window": t, "overlap": o, "token_perplexity": v}
            for (t, o), v in ppl.items()]
    return {"analysis": "perplexity", "model_name": name, "rows": rows}


@pytest.mark.parametrize("rec0, equal_verdict, o0_verdict", [
    (97.5, claims.HOLDS, claims.HOLDS),  # better than base at o = 0 and than base at o = 32 (98)
    (99.0, claims.HOLDS, claims.FAILS),  # better than base at o = 0 only
    (101.0, claims.FAILS, claims.FAILS),
])
def test_perplexity_claims_follow_the_numbers(tmp_path, rec0, equal_verdict, o0_verdict):
    folder = tmp_path / "results" / "perplexity"
    folder.mkdir(parents=True)
    (folder / "base.json").write_text(json.dumps(_perplexity_doc("base", False, {(128, 0): 100.0, (128, 32): 98.0})))
    (folder / "rec.json").write_text(json.dumps(_perplexity_doc("rec", True, {(128, 0): rec0, (128, 32): 97.0})))
    equal, o0 = [c for c in claims.evaluate(tmp_path) if c.analysis == "perplexity"]
    assert (equal.verdict, o0.verdict) == (equal_verdict, o0_verdict)


def test_missing_results_are_not_testable(tmp_path):
    (tmp_path / "results").mkdir()
    found = claims.evaluate(tmp_path)
    assert {c.verdict for c in found if c.analysis != "checkpoints"} == {claims.UNTESTED}


def _mog_registry(tmp_path, monkeypatch, records: dict[str, dict]):
    lines = []
    for name, rec in records.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / "train_config.json").write_text(json.dumps(rec))
        lines.append(f"{name}:\n  family: mog\n  kind: encoder\n  source: {{path: {folder}}}\n  sentence: cls\n")
    lines.append("mog-absent:\n  family: mog\n  kind: encoder\n  source: {path: nowhere}\n  sentence: cls\n")
    (tmp_path / "reg.yaml").write_text("".join(lines))
    monkeypatch.setenv("PROBES_BUILTIN_CHECKPOINTS", str(tmp_path / "reg.yaml"))


def _record(fusion, held, steps=300, last=6.0, half_dim=False):
    cfg = {"fusion": fusion, "half_dim": half_dim, "shared_qkv": False, "layers": 4, "steps": steps,
           "batch_size": 32, "seq_len": 320, "corpus": "data/train-corpus", "split": "train", "lr": 0.001}
    return {"config": cfg, "heldout_loss": held, "last_loss_mean": last}


@pytest.mark.parametrize("wg, sum_, sum_steps, verdict", [
    (5.70, 5.80, 300, claims.HOLDS),
    (5.90, 5.80, 300, claims.FAILS),
    (5.70, 5.80, 150, claims.UNTESTED),  # a first-round sum model is no comparison for a second-round one
])
def test_table2_compares_held_out_losses_of_equally_trained_models(tmp_path, monkeypatch, wg, sum_, sum_steps,
                                                                   verdict):
    _mog_registry(tmp_path, monkeypatch, {
        "m-wg": _record("weight-gate", wg), "m-sum": _record("sum", sum_, steps=sum_steps),
        "m-self": _record("self-gate", 5.75), "m-half": _record("weight-gate", 1.0, half_dim=True)})
    (tmp_path / "results").mkdir()
    table2 = next(c for c in claims.evaluate(tmp_path) if c.analysis == "checkpoints")
    assert table2.verdict == verdict
    if verdict != claims.UNTESTED:
        assert f"held-out MLM loss m-wg {wg:.3f} vs m-sum {sum_:.3f}" in table2.evidence
        assert "m-self (self-gate) 5.750" in table2.evidence and "m-half" not in table2.evidence


def test_table2_falls_back_to_the_training_loss(tmp_path, monkeypatch):
    _mog_registry(tmp_path, monkeypatch, {"m-wg": _record("weight-gate", None, last=6.2),
                                          "m-sum": _record("sum", None, last=6.1)})
    (tmp_path / "results").mkdir()
    table2 = next(c for c in claims.evaluate(tmp_path) if c.analysis == "checkpoints")
    assert table2.verdict == claims.FAILS and "training, last steps MLM loss m-wg 6.200" in table2.evidence


def test_every_model_keeps_one_colour():
    names = ["minilm-l6", "slstm-small", "bert-small", "albert-small", "mpnet-base", "mog-small"]
    colors = [style.model_color(n) for n in names]
    assert len(set(colors)) == len(colors)  # the demo's models are told apart
    assert colors == [style.model_color(n) for n in reversed(names)][::-1]  # order-independent
    assert style.model_color("some-new-model") == style.model_color("some-new-model")
    assert style.model_color("some-new-model") in style.palette()
    assert list(style.relative_depth(4)) == [0, 0.25, 0.5, 0.75, 1.0]


def test_each_figure_goes_to_the_analysis_with_the_longest_matching_name(tmp_path):
    import matplotlib.pyplot as plt

    for analysis in ("mog", "mog_lens", "maps"):
        (tmp_path / "results" / analysis).mkdir(parents=True)
        (tmp_path / "results" / analysis / "m.json").write_text('{"model_name": "m"}')
    (tmp_path / "figures").mkdir()
    for stem in ("mog-lens", "mog-subgraph-weights", "maps-minilm-l6", "mogul"):
        fig, _ = plt.subplots()
        fig.savefig(tmp_path / "figures" / f"{stem}.png")
        plt.close(fig)
    got = {s["analysis"]: [f["name"] for f in s["figures"]] for s in report.sections(tmp_path)}
    assert got == {"maps": ["maps-minilm-l6"], "mog": ["mog-subgraph-weights"], "mog_lens": ["mog-lens"]}
    assert report.caption("maps-minilm-l6") == report.CAPTIONS["maps-"] and report.caption("mogul") == ""
