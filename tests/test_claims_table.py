"""The claim table a reader takes in at a glance (one line per claim and compared model) and the forest plot
of the per-seed differences: what they show is the findings' numbers."""

from __future__ import annotations

import claims_docs as docs
import numpy as np
import pytest

from analyses.mog import ORDERS
from analyses.summary import claims
from analyses.summary.claims_figure import VERDICT_COLORS, claims_figure, drawn


@pytest.fixture
def out(tmp_path):
    """Redundancy of an S-LSTM against two encoders on three seeds, one of them unlike the others."""
    found = []
    for seed in range(3):
        name = lambda m, seed=seed: m if seed == 0 else f"{m}-seed{seed}"  # noqa: E731
        found += [docs.redundancy(name("slstm-small"), "slstm", docs.per_unit(40 + seed, 10 + seed)),
                  docs.redundancy(name("bert-small"), "bert", docs.per_unit(30, 20 + seed)),
                  docs.redundancy(name("albert-small"), "albert", docs.per_unit(30, 30 + seed),
                                  settings={"n_sentences": 60} if seed == 2 else None)]
    docs.write(tmp_path, "redundancy", found)
    return tmp_path


def test_one_line_per_claim_and_compared_model(out, capsys):
    claims.main(["--out", str(out), "--markdown"])
    text = capsys.readouterr().out
    lines = text.split("\n\n<details>")[0].splitlines()
    assert lines[0] == ("| paper | where | claim | verdict | over training | A vs B | this comparison | "
                        "difference [95% interval] | seeds | over training (seeds with a trajectory) | why |")
    k90 = next(f for f in claims.evaluate(out) if "90%" in f.claim)
    first = next(i for i, ln in enumerate(lines) if "90% of the variance" in ln)
    albert, bert = lines[first], lines[first + 1]
    assert "| **not testable** | - | slstm-small vs albert-small | not testable |" in albert  # no trajectory: -
    assert "different settings" in albert
    c = next(c for c in k90.comparisons if c.against.endswith("bert-small") and "albert" not in c.against)
    assert bert.startswith("| | | | | |") and f"| holds | A - B = {c.difference:+.1f} [{c.across[0]:+.1f}, " in bert
    assert "| 3 (3 of 3 exclude 0) |" in bert
    assert k90.verdict == claims.UNTESTED  # one compared model is not testable: the claim is not
    speed = next(ln for ln in lines if "§6" in ln)
    assert "| **not testable** | - | - | not testable | - | - | - | no speed result" in speed
    details = text.split("<details>")[1]
    assert "</details>" in details and k90.evidence in details and len(text.split("</details>")[1].strip()) == 0


def test_the_forest_plot_draws_each_seeds_difference_and_the_interval_over_seeds(out):
    found = claims.evaluate(out)
    fig = claims_figure(found)
    panels = drawn(found)
    axes = fig.axes
    assert len(axes) == len(panels) == 2  # 90% and 98%, each against bert-small; albert-small has no seeds drawn
    for ax, (_, c) in zip(axes, panels):
        bars = ax.containers
        assert len(bars) == len(c.seeds) + 1  # the seeds and the interval over them
        for bar, s in zip(bars, c.seeds):
            x = bar.lines[0].get_xdata()[0]
            assert x == pytest.approx(s.difference)
            seg = bar.lines[2][0].get_segments()[0]
            assert [seg[0][0], seg[1][0]] == pytest.approx(s.interval)
        over = bars[-1].lines[2][0].get_segments()[0]
        assert [over[0][0], over[1][0]] == pytest.approx(c.across)
        assert any(abs(line.get_xdata()[0]) < 1e-12 for line in ax.lines if len(set(line.get_xdata())) == 1)
        span = ax.patches[0]
        shade = sorted([span.get_x(), span.get_x() + span.get_width()])
        assert shade[0] == 0 if c.claimed_sign > 0 else shade[1] == 0  # the side the claim says
        assert any(t.get_text() == str(c.verdict) and t.get_color() == VERDICT_COLORS[c.verdict] for t in ax.texts)


def test_the_figure_command_writes_an_image(out, capsys):
    path = out / "claims.png"
    claims.main(["--out", str(out), "--figure", str(path)])
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "not testable" in capsys.readouterr().out


def test_an_empty_figure_says_so():
    fig = claims_figure([])
    assert "no claim compares two models" in fig.axes[0].texts[0].get_text()


def test_point_value_claims_are_marked(tmp_path):
    w = np.linspace(0.45, 0.55, 6).tolist()
    doc = {**docs.identity("mog-small", "mog", settings={"min_bucket": 10}), "fusion": "weight-gate", "n_layers": 6,
           "bucket_labels": ["a", "b"], "bucket_counts": [20, 20], "w_by_bucket": [w, [x + 0.01 for x in w]],
           "w_layer_mean": w, "spearman_length": None, "claims": {}, "slot_weights": None,
           "entropy": {o: [0.7] * 6 for o in ORDERS}, "entropy_normalised": {o: [0.5] * 6 for o in ORDERS},
           "example": {"text": "a", "tokens": ["a"], "layer": 6, **{o: [[1.0]] for o in ORDERS}}}
    docs.write(tmp_path, "mog", [doc])
    found = {f.claim: f for f in claims.evaluate(tmp_path) if f.analysis == "mog"}
    rise = next(f for c, f in found.items() if "rises" in c)
    longer = next(f for c, f in found.items() if "longer" in c)
    assert rise.verdict == claims.HOLDS and rise.point_values and rise.reason == claims.POINT_VALUES
    assert longer.verdict == claims.HOLDS and "+0.0100" in longer.evidence
    line = claims.table_lines(rise)[0]
    assert line.difference == "point values" and line.verdict == claims.HOLDS


def _course_doc(long_against: str):
    """A trajectories document (analyses.summary.trajectories): one compared pair over four snapshots and two
    claims checked on point values (Fig. 9/10 style), one of them holding at two snapshots only."""
    from analyses.summary.trajectory_doc import Trajectories

    fractions = [0.125, 0.25, 0.5, 1.0]
    points = [{"fraction": f, "step": int(8 * f), "tokens": None, "difference": d, "interval": [d - 0.1, d + 0.1]}
              for f, d in zip(fractions, [0.3, 0.1, -0.2, -0.25])]
    comparison = {"against": long_against, "over_training": "still moving", "last_half_change": None,
                  "seeds": [{"seed": 0, "a": "a", "b": "b", "final_sha256": {"a": None, "b": None}, "points": points}]}

    def check(claim, holds_at):
        return {"paper": "Graph-Transformer", "where": "Fig. 9", "claim": claim, "quantity": "", "contrast": "",
                "claimed_sign": 0, "comparisons": [],
                "check": {"models": ["m-seed1"], "final_sha256": {"m-seed1": None},
                          "over_training": "stable" if not holds_at else "still moving",
                          "points": [{"fraction": f, "verdict": "holds" if f in holds_at else "does not hold"}
                                     for f in fractions]}}

    return Trajectories.from_json({"rule": "r", "last_half": 0.5, "claims": [
        {"paper": "S-LSTM", "where": "§7.1, Fig. 6, under IsoScore with a long title", "claim": "c", "quantity": "q",
         "contrast": "A - B", "claimed_sign": -1, "comparisons": [comparison]},
        check("w rises with the layer", []), check("a dip at layer 4", [0.25, 0.5])]})


def test_the_course_figure_draws_the_checks_at_every_snapshot_and_keeps_the_words_clear_of_the_titles():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    from analyses.summary.claims_figure import trajectories_figure

    doc = _course_doc("gpt2-small-recurrent vs gpt2-small-base at T=128, o=30 (recurrent at o=0)")
    fig = trajectories_figure(doc)
    course, checks = fig.axes
    assert np.allclose(course.get_lines()[0].get_ydata(), [0.3, 0.1, -0.2, -0.25])
    for row, claim in enumerate(doc.claims[1:]):  # a row per check; filled dots where it holds
        held = {p.fraction for p in claim.check.points if p.verdict == "holds"}
        dots = [(tuple(xy), bool(np.asarray(c.get_facecolors()).size)) for c in checks.collections
                for xy in c.get_offsets() if xy[1] == row]
        assert sorted(x for (x, _), _ in dots) == [0.125, 0.25, 0.5, 1.0]
        assert {x for (x, _), filled in dots if filled} == held
    labels = [t.get_text().replace("\n", " ") for t in checks.get_yticklabels()]
    assert labels == ["Fig. 9: w rises with the layer", "Fig. 9: a dip at layer 4"]
    words = {t.get_text(): t for ax in fig.axes for t in ax.texts}
    assert set(words) == {"still moving", "stable"}
    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # titles take their place when drawn
    renderer = canvas.get_renderer()
    for ax in fig.axes:  # no rule's word runs into a title, however long the title
        (title,) = [t for t in ax.get_children() if isinstance(t, Text) and t.get_text() == ax.get_title(loc="left")]
        box = title.get_window_extent(renderer)
        assert box.width > 0 and not any(t.get_window_extent(renderer).overlaps(box) for t in ax.texts), title
