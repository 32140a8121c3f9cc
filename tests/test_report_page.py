"""The report for whoever's results they are: the models present come first; the papers' claims, none of which
applies to a user's own models, are one line at the end; each analysis says in words what its results show; the
similarity matrices are a compact table (the long CSV linked); probing shows accuracy before selectivity; every
table names its model and scrolls sideways, a missing value is an empty cell with a footnote, captions match their
figures; and in a real headless browser (Debian's Chromium) the page does not overflow at two widths.

The results are small saved documents of one user's folder model and the embedded minilm-l6 (tests/test_display.py
builds them)."""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from test_display import BUILDERS

from analyses.summary import report

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
NAME, GIVEN = "dir--my-bert--abcdef12", "../models/my-bert"


def _write(out: Path, analysis: str, doc: dict, rows: list[dict], stem: str = NAME) -> None:
    folder = out / "results" / analysis
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.json").write_text(json.dumps({"analysis": analysis, **doc}))
    with open(folder / f"{stem}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.fixture(scope="module")
def user_out(tmp_path_factory):
    """An --out of one folder model run through anisotropy and probing (a sentence task: no control) and compared
    with minilm-l6 by anisotropy and similarity."""
    import analyses
    from analyses.summary.figures import redraw

    out = tmp_path_factory.mktemp("user-report")
    model = {"name": NAME, "family": "hf", "kind": "encoder", "num_layers": 3, "hidden_size": 8,
             "sentence_vector": "cls"}
    for analysis in ("anisotropy", "probing"):
        doc = {**BUILDERS[analysis](NAME), "model": model, "model_requested": GIVEN}
        if analysis == "anisotropy":
            doc["layers"][-1]["token"]["mean"] = 0.985
        rows = ([{"layer": row["layer"], "token_mean": row["token"]["mean"]} for row in doc["layers"]]
                if analysis == "anisotropy" else
                [{"task": "sent_len", "layer": 0, "accuracy": 0.5, "control_accuracy": ""}])  # empty: NaN
        _write(out, analysis, doc, rows)
    other = BUILDERS["anisotropy"]("minilm-l6")
    other["layers"][-1]["token"]["mean"] = 0.091
    _write(out, "anisotropy", other, [{"layer": row["layer"], "token_mean": row["token"]["mean"]}
                                      for row in other["layers"]], "minilm-l6")
    sim = BUILDERS["similarity"](f"{NAME}__minilm-l6__sentence")
    sim.update(model_a=NAME, model_b="minilm-l6", measures=["cka", "svcca", "rsa"])
    sim["matrices"]["svcca"] = sim["matrices"]["cka"]
    decl = analyses.get("similarity")
    _write(out, "similarity", sim, decl.table_rows(decl.Result.from_json(sim)), sim["model_name"])
    redraw(str(out))
    report.write_report(out)
    return out


def test_the_page_is_about_the_users_models(user_out):
    html = (user_out / "report.html").read_text()
    models_at, first = html.index("The models in these results"), html.index('id="anisotropy"')
    row = html[models_at:first]
    assert GIVEN in row and "<td>3</td>" in row and "<td>8</td>" in row and "anisotropy, probing" in row
    # no claim applies to a user's own models: no claims section, one line at the end of the page
    assert "claims on these results" not in html and '<table class="claims">' not in html
    assert 'href="#claims"' not in html and "forest plot" not in html
    (line,) = [ln for ln in html.splitlines() if "papers' claims" in ln]
    assert line.startswith('<p class="untestable">None of the papers\' claims (') and "S-LSTM" in line
    assert html.index(line) > html.rindex('class="provenance"')
    assert 'class="does-not-hold"' not in html and 'class="holds"' not in html


def test_each_analysis_says_in_words_what_its_results_show(user_out):
    html = (user_out / "report.html").read_text().replace("&#39;", "'")
    section = html[html.index('id="anisotropy"'):html.index('id="probing"')]
    assert (f"<li>{GIVEN}'s last-layer tokens are far more anisotropic than minilm-l6's: 0.985 vs 0.091 (mean cosine "
            "of random pairs: 0 isotropic, 1 one direction).</li>") in section
    assert section.index('class="findings"') < section.index("<figure>")  # the words come before the figures
    probing = html[html.index('id="probing"'):html.index('id="similarity"')]
    assert f"{GIVEN} is probed best for sentence_length at layer 3 (0.800 against a majority baseline of 0.300)" \
        in probing


def test_similarity_is_a_compact_table_with_the_long_csv_linked(user_out):
    html = (user_out / "report.html").read_text().replace("&#39;", "'")
    section = html[html.index('id="similarity"'):]
    assert section.count("<tr>") == 1 + 3  # a header and one row per measure of the one pair
    assert f"<td>{NAME} vs minilm-l6</td><td>sentence</td><td>CKA</td><td>0.300</td><td>0.80, 0.80, 0.30, 0.30</td>" \
        f"<td>0, 1, 2, 0</td>" in section
    rows = sum(1 for _ in open(user_out / "results" / "similarity" / f"{NAME}__minilm-l6__sentence.csv")) - 1
    assert rows > report.LONG_TABLE and f'({rows} rows)' in section
    assert f'href="results/similarity/{NAME}__minilm-l6__sentence.csv"' in section and "row_layer" not in section


def test_probing_shows_accuracy_before_selectivity(user_out):
    html = (user_out / "report.html").read_text()
    assert 0 < html.index('alt="probing"') < html.index('alt="probing-selectivity"')


def test_every_table_names_its_model_and_empty_cells_have_a_footnote(user_out):
    html = (user_out / "report.html").read_text()
    assert f'<p class="table-title">{GIVEN}: anisotropy</p>' in html.replace("&#34;", '"').replace("&#39;", "'")
    assert f"{GIVEN}: probing" in html
    assert html.count('class="table table-scroll"') == 3  # anisotropy of two models, probing; similarity is linked
    assert ">nan<" not in html.lower() and html.count('class="footnote"') == 1  # only probing has a gap
    assert f"{NAME}: provenance" not in html and f"{GIVEN}: provenance" in html


def test_captions_match_their_figures():
    assert "every measure" not in report.caption("similarity-a__sentence").lower()
    assert report.caption("similarity-a__sentence").startswith("Linear CKA")
    assert "SVCCA, RSA" in report.caption("similarity-a__b__sentence")
    assert report.caption("maps-my-bert") == report.caption("maps-tiny-bert") != ""


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_no_overflow_in_a_real_browser_at_two_widths(user_out, tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("report_screenshots", REPO / "scripts" / "report_screenshots.py")
    shots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shots)
    with pytest.raises(SystemExit) as done:
        shots.main(["--out", str(user_out), "--name", "test", "--width", "1400", "--width", "800",
                    "--height", "1200", "--dest", str(tmp_path)])
    printed = capsys.readouterr().out
    assert done.value.code == 0, printed  # 0: the page is no wider than the window at either width
    for width in (1400, 800):
        png = tmp_path / f"report-test-{width}.png"
        assert png.is_file() and 10_000 < png.stat().st_size < 300_000
