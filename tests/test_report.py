"""The report page and the claim verdicts: every result appears, every image decodes, verdicts come
from the result files, the claim table is one line per claim and compared model with the forest plot under
it and the full evidence folded away, and every model keeps one colour."""

from __future__ import annotations

import base64
import io
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
        self.images, self.alts, self.results, self.cells, self._in_td = [], [], [], [], False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.images.append(a["src"])
            self.alts.append(a["alt"])
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


@pytest.mark.integration
def test_report_shows_every_result_and_every_figure(demo_out):
    path = report.write_report(demo_out)
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    saved = {str(p.relative_to(demo_out)) for p in (demo_out / "results").glob("*/*.json")}
    assert saved and set(page.results) == saved
    pngs = sorted((demo_out / "figures").glob("*.png"))
    assert sorted(page.alts) == sorted([p.stem for p in pngs] + ["claims forest plot"]) and pngs
    for src in page.images:
        head, data = src.split(",", 1)
        assert head == "data:image/png;base64"
        img = mpimg.imread(io.BytesIO(base64.b64decode(data)), format="png")
        assert img.ndim == 3 and img.shape[0] > 50 and img.shape[1] > 50
    assert "http://" not in path.read_text() and "https://" not in path.read_text()  # opens offline


@pytest.mark.integration
def test_claim_verdicts_come_from_the_result_files(demo_out):
    verdicts = {c.claim: c for c in claims.evaluate(demo_out)}
    aniso = next(c for c in verdicts.values() if c.analysis == "anisotropy" and "token" in c.claim)
    assert aniso.verdict == claims.INCONCLUSIVE  # one seed: one trained model does not speak for an architecture
    docs = claims.load_all(demo_out)["anisotropy"]
    values = {d["model_name"]: d["layers"][-1]["token"]["mean"] for d in docs}
    (c,) = aniso.comparisons
    assert c.difference == pytest.approx(abs(values["tiny-slstm"]) - abs(values["tiny-bert"]))
    for name, v in values.items():
        assert f"{name} {v:.3f}" in aniso.evidence
    html = report.render(demo_out)
    page = _Page()
    page.feed(html)
    assert aniso.verdict in page.cells and aniso.evidence not in page.cells  # the evidence is not a table cell
    details = html[html.index('<details class="evidence">'):]
    assert html_escape(aniso.evidence) in details[:details.index("</details>")]  # ... it is folded below the table


def html_escape(text: str) -> str:
    import html

    return html.escape(text).replace("&#x27;", "&#39;")


@pytest.mark.integration
def test_the_claim_table_is_one_line_per_claim_and_compared_model_with_the_forest_plot(demo_out):
    html = report.render(demo_out)
    found, _ = report.present_claims(claims.evaluate(demo_out))
    table = html[html.index('<table class="claims">'):]
    table = table[:table.index("</table>")]
    lines = [ln for f in found for ln in claims.table_lines(f)]
    assert table.count("<tr>") == 1 + len(lines) and len(lines) == 3  # tokens, sentences, transitions: one each
    for f in found:
        (ln,) = claims.table_lines(f)
        assert f'rowspan="1">{f.verdict}</td>' in table and html_escape(ln.difference) in table
    assert all(html_escape(f.evidence) not in table for f in found)  # the evidence paragraphs are folded away
    forest = html.index('alt="claims forest plot"')
    assert html.index("</table>", html.index('<table class="claims">')) < forest < html.index('id="anisotropy"')
    assert "td.not-testable {" in html and "not-testable-here" not in html  # the class a verdict cell gets
    assert report.claim_rows(found)[0]["verdict_class"] in ("holds", "does-not-hold", "inconclusive",
                                                            "not-testable")


def test_missing_results_are_not_testable(tmp_path):
    (tmp_path / "results").mkdir()
    found = claims.evaluate(tmp_path)
    assert {c.verdict for c in found if c.analysis != "checkpoints"} == {claims.UNTESTED}


def test_every_model_keeps_one_colour():
    names = ["minilm-l6", "slstm-small", "bert-small", "albert-small", "mpnet-base", "mog-small"]
    colors = [style.model_color(n) for n in names]
    assert len(set(colors)) == len(colors)  # the demo's models are told apart
    assert colors == [style.model_color(n) for n in reversed(names)][::-1]  # order-independent
    assert style.model_color("some-new-model") == style.model_color("some-new-model")
    assert style.model_color("some-new-model") in style.palette()
    assert list(style.relative_depth(4)) == [0, 0.25, 0.5, 0.75, 1.0]


def test_each_figure_goes_to_the_analysis_that_declares_it(tmp_path):
    import matplotlib.pyplot as plt

    for analysis in ("mog", "mog_lens", "maps"):
        (tmp_path / "results" / analysis).mkdir(parents=True)
        (tmp_path / "results" / analysis / "m.json").write_text('{"model_name": "m"}')
    (tmp_path / "figures").mkdir()
    for stem in ("mog-lens", "mog-subgraph-weights", "maps-minilm-l6", "mogul"):
        fig, _ = plt.subplots()
        fig.savefig(tmp_path / "figures" / f"{stem}.png")
        plt.close(fig)
    got = {s["analysis"]: [f.name for f in s["figures"]] for s in report.sections(tmp_path)}
    assert got == {"maps": ["maps-minilm-l6"], "mog": ["mog-subgraph-weights"], "mog_lens": ["mog-lens"]}
    assert report.caption("maps-minilm-l6") == report.caption("maps-tiny-bert") != "" and report.caption("mogul") == ""


def test_the_report_draws_the_figures_of_results_written_from_python(tmp_path, capsys):
    """Results saved from Python (write_result) come without figures: the report draws them (once; again when a
    newer result arrives) and shows them; a result it cannot read back says, in its section, how to draw them."""
    import json

    from test_display import BUILDERS

    import analyses
    from analyses.common import write_result

    decl = analyses.get("transitions")
    first = decl.Result.from_json(BUILDERS["transitions"]("my-model"))
    write_result(tmp_path, "transitions", "my-model", first, decl.table_rows(first))
    report.write_report(tmp_path)
    assert "drew the figures of transitions" in capsys.readouterr().out
    stems = set(decl.figure_files([first]))
    assert stems and all((tmp_path / "figures" / f"{s}.png").is_file() for s in stems)
    page = _Page()
    page.feed((tmp_path / "report.html").read_text())
    assert set(page.alts) >= stems
    report.write_report(tmp_path)  # up to date: nothing drawn again
    assert "drew" not in capsys.readouterr().out
    bad = tmp_path / "results" / "anisotropy" / "x.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps({"analysis": "anisotropy", "model_name": "x"}))  # a layout this version cannot read
    report.write_report(tmp_path)
    html = (tmp_path / "report.html").read_text()
    assert "probes figures --out" in html and "could not be drawn" in html


def _written(out: Path, name: str, *docs: dict) -> None:
    import analyses
    from analyses.common import write_result

    decl = analyses.get(name)
    for doc in docs:
        result = decl.Result.from_json(doc)
        write_result(out, name, result.model_name, result, decl.table_rows(result))


def test_probes_figures_reads_each_result_file_once(tmp_path, monkeypatch, capsys):
    """probes figures draws every figure and writes the report, its claims table included, from one reading of
    each result file: each file read once and made into its Result once."""
    from test_display import BUILDERS

    import analyses
    from analyses.summary import figures

    _written(tmp_path, "transitions", BUILDERS["transitions"]("m-a"), BUILDERS["transitions"]("m-b"))
    reads: list[str] = []
    read_text = Path.read_text

    def counted_read(path, *args, **kwargs):
        if path.suffix == ".json" and path.parent.parent.name == "results":
            reads.append(path.name)
        return read_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counted_read)
    made: list[str] = []
    cls = analyses.get("transitions").Result
    from_json = cls.from_json.__func__
    monkeypatch.setattr(cls, "from_json",
                        classmethod(lambda c, doc: (made.append(doc["model_name"]), from_json(c, doc))[1]))
    figures.main(["--out", str(tmp_path)])
    assert "report:" in capsys.readouterr().out
    assert sorted(reads) == ["m-a.json", "m-b.json"] and sorted(made) == ["m-a", "m-b"]


def test_the_model_table_lists_both_models_of_a_pair(tmp_path):
    """A pair analysis's result names two models: the model table lists both (the declaration's kind of input
    says it is a pair, Analysis.models reads them), each with what was run on it."""
    from test_display import BUILDERS

    _written(tmp_path, "topics", BUILDERS["topics"]())
    pair = BUILDERS["similarity"]()
    pair["models"] = pair["model"] = {"a": {"name": "m-a", "family": "hf"}, "b": {"name": "m-b", "family": "slstm"}}
    _written(tmp_path, "similarity", pair)
    html = report.render(tmp_path)
    models = html[html.index('<table class="models">'):]
    models = models[:models.index("</table>")]
    rows = [r.split("</td>")[0] for r in models.split("<tr><td>")[1:]]
    assert rows == ["a", "b", "m-a", "m-b"], models
    assert "<td>m-b</td><td>slstm</td>" in models and "similarity" in models and "topics" in models
