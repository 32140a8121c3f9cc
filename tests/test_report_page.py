"""The report for whoever's results they are (issue 25, item 5): the models present come first, claims
appear only where their inputs are in the folder (the rest in one line), every table names its model and
scrolls sideways, a missing value is an empty cell with a footnote, captions match their figures; and in
a real headless browser (Debian's Chromium) the page does not overflow at two widths.

The results are small saved documents of one user's folder model (tests/test_display.py builds them)."""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from test_display import BUILDERS

from analyses.summary import report

REPO = Path(__file__).resolve().parents[1]
NAME, GIVEN = "dir--my-bert--abcdef12", "../models/my-bert"


def _write(out: Path, analysis: str, doc: dict, rows: list[dict]) -> None:
    folder = out / "results" / analysis
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{NAME}.json").write_text(json.dumps({"analysis": analysis, **doc}))
    with open(folder / f"{NAME}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.fixture(scope="module")
def user_out(tmp_path_factory):
    """An --out of one folder model run through anisotropy and probing (a sentence task: no control)."""
    from analyses.summary.figures import redraw

    out = tmp_path_factory.mktemp("user-report")
    model = {"name": NAME, "family": "hf", "kind": "encoder", "num_layers": 3, "hidden_size": 8,
             "sentence_vector": "cls"}
    for analysis in ("anisotropy", "probing"):
        doc = {**BUILDERS[analysis](NAME), "model": model, "model_requested": GIVEN}
        rows = ([{"layer": row["layer"], "token_mean": row["token"]["mean"]} for row in doc["layers"]]
                if analysis == "anisotropy" else
                [{"task": "sent_len", "layer": 0, "accuracy": 0.5, "control_accuracy": ""}])  # empty: NaN
        _write(out, analysis, doc, rows)
    redraw(str(out))
    report.write_report(out)
    return out


def test_the_page_is_about_the_users_models(user_out):
    html = (user_out / "report.html").read_text()
    models_at, claims_at = html.index("The models in these results"), html.index("claims on these results")
    assert models_at < claims_at < html.index('id="anisotropy"')
    row = html[models_at:claims_at]
    assert GIVEN in row and "<td>3</td>" in row and "<td>8</td>" in row and "anisotropy, probing" in row
    assert "No claim of the papers can be tested with these results." in html
    assert "Not testable with these results: S-LSTM" in html  # one line, not fourteen rows
    assert 'class="does-not-hold"' not in html and 'class="holds"' not in html


def test_every_table_names_its_model_and_empty_cells_have_a_footnote(user_out):
    html = (user_out / "report.html").read_text()
    assert f'<p class="table-title">{GIVEN}: anisotropy</p>' in html.replace("&#34;", '"').replace("&#39;", "'")
    assert f"{GIVEN}: probing" in html
    assert html.count('class="table table-scroll"') == 2
    assert ">nan<" not in html.lower() and html.count('class="footnote"') == 1  # only probing has a gap
    assert f"{NAME}: provenance" not in html and f"{GIVEN}: provenance" in html


def test_captions_match_their_figures():
    assert "every measure" not in report.caption("similarity-a__sentence").lower()
    assert report.caption("similarity-a__sentence").startswith("Linear CKA")
    assert "SVCCA, RSA" in report.caption("similarity-a__b__sentence")
    assert report.caption("maps-my-bert") == report.caption("maps-tiny-bert") != ""


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
