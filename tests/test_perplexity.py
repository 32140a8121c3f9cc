"""analyses.perplexity: perplexities from windowed scoring, FLOPs, CLI (the windows: tests/test_windows.py)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from figure_data import line_drawing

from analyses import perplexity as pp
from analyses.common import Identity
from analyses.records import Definitions
from probes.capture.windows import windowed_nll
from probes.models.lm import load_lm, non_embedding_parameters

REPO = Path(__file__).resolve().parent.parent
SETTINGS = [(8, 0), (8, 3), (5, 4), (40, 0)]


@pytest.fixture(scope="module")
def models():
    return {"plain": load_lm("tiny-gpt2"), "recurrent": load_lm("tiny-gpt2-recurrent")}


def doc_ids(n=30, seed=0):
    return torch.randint(1000, 30000, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def test_flops_per_token_reproduce_the_papers_gpt2_small_numbers():
    from transformers import GPT2Config, GPT2LMHeadModel

    with torch.device("meta"):
        model = GPT2LMHeadModel(GPT2Config())
    n = non_embedding_parameters(model)
    d = 768
    assert n == 12 * (12 * d * d + 13 * d) + 2 * d  # GPT-2 small without its embeddings: 85,056,000
    per = pp.kaplan_flops(n, 12, d, 300)
    assert per == 2 * n + 2 * 12 * 300 * d  # 1.756e8 at o = 0
    # within 0.7% of the paper (1.756e8 vs 1.75e8, 1.952e8 vs 1.94e8 at o = 30: see the module docstring)
    for o, paper in [(0, 1.75e8), (5, 1.78e8), (10, 1.81e8), (30, 1.94e8), (50, 2.10e8)]:
        assert 0 < per * 300 / (300 - o) / paper - 1 < 0.007, o


def test_compute_word_and_token_perplexity(models, tmp_path):
    text = tmp_path / "book.txt"
    text.write_text("\n\n".join(f"Paragraph {i} of the small test book, with a few words in it." for i in range(6)))
    lm = models["recurrent"]
    cfg = pp.Config(model=[lm.name], window=16, overlap=[0, 4], corpus=str(text), split="all")
    res = pp.compute(cfg, lm=lm)
    ids = lm.encode(text.read_text())
    for row in res.rows:
        nll = windowed_nll(lm, ids, 16, row.overlap)["nll"]
        assert row.scored_tokens == len(ids) - 1 and row.words == len(text.read_text().split())
        assert math.isclose(row.token_perplexity, math.exp(nll.mean()), rel_tol=1e-9)
        assert math.isclose(row.word_perplexity, math.exp(nll.sum() / row.words), rel_tol=1e-9)
    f0, f4 = (r.flops_per_token for r in res.rows)
    assert f4 > f0  # overlap costs compute
    assert res.overlap_matches_training == pp.TrainedOverlaps({0: True, 4: False})
    assert res.overlap_matches_training.at(0) is True and res.to_json()["overlap_matches_training"] == {"0": True,
                                                                                                    "4": False}


def test_cli_end_to_end_on_tiny_models(tmp_path, drawn):
    out = tmp_path / "out"
    pp.main(["--model", "tiny-gpt2", "--model", "tiny-gpt2-recurrent", "--window", "32", "--overlap", "0",
             "--overlap", "8", "--n-documents", "2", "--max-tokens", "300", "--out", str(out)])
    for name in ("tiny-gpt2", "tiny-gpt2-recurrent"):
        doc = json.loads((out / "results" / "perplexity" / f"{name}.json").read_text())
        assert [r["overlap"] for r in doc["rows"]] == [0, 8] and doc["corpus"]["split"] == "heldout"
        assert (out / "results" / "perplexity" / f"{name}.csv").read_text().count("\n") == 3
    assert "tiny-gpt2-recurrent" in (out / "results" / "perplexity" / "table.md").read_text()
    assert all((out / "figures" / f"{f}.{e}").is_file() for f in ("perplexity", "perplexity-flops")
               for e in ("png", "pdf"))
    # the figures draw the result files' numbers: token and word perplexity by overlap, word perplexity by FLOPs
    (token, word), (flops,) = drawn["perplexity"].axes[:2], drawn["perplexity-flops"].axes
    for name in ("tiny-gpt2", "tiny-gpt2-recurrent"):
        rows = json.loads((out / "results" / "perplexity" / f"{name}.json").read_text())["rows"]
        line_drawing(token, [r["token_perplexity"] for r in rows], x=[r["overlap"] for r in rows])
        line_drawing(word, [r["word_perplexity"] for r in rows], x=[r["overlap"] for r in rows])
        line_drawing(flops, [r["word_perplexity"] for r in rows], x=[r["flops_per_token"] for r in rows])
    # the saved document reads back into the typed Result and writes the same bytes again
    from analyses.common import write_result

    path = out / "results" / "perplexity" / "tiny-gpt2.json"
    doc = json.loads(path.read_text())
    res = pp.Result.from_json(doc)
    assert list(res.to_json()) == [k for k in doc if k not in ("analysis", "provenance", "nulls")]
    again, _ = write_result(tmp_path / "again", "perplexity", "tiny-gpt2", res, pp.table_rows(res))
    assert again.read_bytes() == path.read_bytes()


def planted_result(name, overlaps=(0, 8, 16), base=50.0):
    rows = [pp.Row(model=name, recurrent=False, window=32, overlap=o, token_perplexity=base + o,
                   word_perplexity=2 * base + o, nll_per_token=1.0, scored_tokens=100, words=80, windows=4,
                   tokens_processed=120, flops_per_token=1e6 * (1 + o / 32)) for o in overlaps]
    return pp.Result(identity=Identity(model_name=name, config={}, model={"name": name}, corpus={}),
                     non_embedding_parameters=10, overlap_matches_training=None, definitions=Definitions(),
                     rows=rows[::-1])  # unsorted on purpose


def test_figures_plot_the_result_values_in_each_models_colour():
    import matplotlib.pyplot as plt

    from analyses.style import model_color

    results = [planted_result("gpt2-small-base"), planted_result("gpt2-small-recurrent", base=40.0)]
    fig = pp.plot([results[0], pp.Result.from_json(results[1].to_json())])  # a saved document, read back
    for ax, key in zip(fig.axes, ("token_perplexity", "word_perplexity")):
        assert ax.get_ylabel() and ax.get_xlabel()
        for line, res in zip(ax.lines, results):
            rows = sorted(res.rows, key=lambda r: r.overlap)
            assert list(line.get_xdata()) == [0, 8, 16]
            assert list(line.get_ydata()) == [r.perplexity(key) for r in rows]
            assert line.get_color() == model_color(res.model_name)
    plt.close(fig)
    fig = pp.plot_flops(results)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "FLOPs per scored token (forward)" and ax.get_ylabel()
    for line, res in zip(ax.lines, results):
        rows = sorted(res.rows, key=lambda r: r.overlap)
        assert list(line.get_xdata()) == [r.flops_per_token for r in rows]
        assert list(line.get_ydata()) == [r.word_perplexity for r in rows]
        assert line.get_color() == model_color(res.model_name)
    plt.close(fig)
    assert model_color("gpt2-small-base") != model_color("gpt2-small-recurrent")


def test_one_results_plot_draws_each_perplexity_with_its_interval():
    """A result's own panel: the points at each overlap and a bar from each interval's low to its high end, in
    the line's colour; a file without intervals draws the points alone."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba

    res = planted_result("gpt2-small-base")
    for r in res.rows:
        r.token_perplexity_ci = [r.token_perplexity - 2.0, r.token_perplexity + 3.0]
    ax = res.plot(color="C3")
    (line,), (bars,) = ax.lines, ax.collections
    rows = sorted(res.rows, key=lambda r: r.overlap)
    assert list(line.get_ydata()) == [r.token_perplexity for r in rows]
    segments = [seg.tolist() for seg in bars.get_segments()]
    assert segments == [[[r.overlap, r.token_perplexity - 2.0], [r.overlap, r.token_perplexity + 3.0]] for r in rows]
    assert tuple(bars.get_colors()[0]) == to_rgba(line.get_color())
    plt.close(ax.figure)
    ax = planted_result("gpt2-small-base").plot(key="word_perplexity")  # no intervals in these rows
    assert len(ax.lines) == 1 and not ax.collections
    plt.close(ax.figure)


@pytest.mark.integration
def test_cli_encoder_model_is_one_clear_line(tmp_path):
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf-home")}
    proc = subprocess.run([sys.executable, "-m", "analyses.perplexity", "--model", "tiny-bert", "--out",
                           str(tmp_path)], cwd=REPO, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("error: model 'tiny-bert' is not a causal language model"), proc.stderr


def test_block_cuts_tile_a_documents_targets():
    assert pp.block_cuts(10, 4) == [0, 4, 10]  # the remainder joins the last block
    assert pp.block_cuts(8, 4) == [0, 4, 8] and pp.block_cuts(3, 4) == [0, 3]  # a short document is one block


def test_blocks_are_runs_of_scored_tokens_the_same_at_every_overlap_and_paired_across_models(models):
    """The bootstrap's units: consecutive targets of one document, identical for both models and every overlap,
    their NLL sums those of windowed scoring; the recurrence claims then pair the two models block by block."""
    from analyses.inputs import caller_documents
    from analyses.summary import claims

    texts = [" ".join(f"word{i % 37} and more text" for i in range(150)), "A short text of a few words."]
    cfg = pp.Config(window=16, overlap=[0, 4], block_tokens=20)
    res = {k: pp.compute(cfg, lm=lm, documents=caller_documents(lm, texts)) for k, lm in models.items()}
    lm, r = models["recurrent"], res["recurrent"]
    b = r.bootstrap
    assert b.unit == "block" and b.n_units == len(b.blocks["tokens"]) >= 20
    assert b.units_id == res["plain"].bootstrap.units_id  # same tokenizer, same texts: the same blocks
    ids = [lm.encode(t) for t in texts]
    for row in r.rows:
        assert sum(b.blocks["tokens"]) == row.scored_tokens and sum(b.blocks["words"]) == row.words
        per_doc = [windowed_nll(lm, x, 16, row.overlap)["nll"] for x in ids]
        want = [x[t - 1:t - 1 + n].sum() for d, t, n in zip(b.blocks["document"], b.blocks["first_target"],
                                                            b.blocks["tokens"]) for x in [per_doc[int(d[5:])]]]
        assert b.nll[str(row.overlap)] == pytest.approx(want, rel=1e-9)
    assert [n for d, n in zip(b.blocks["document"], b.blocks["tokens"]) if d == "text-0"][:-1] == \
        [20] * (sum(d == "text-0" for d in b.blocks["document"]) - 1)
    assert b.blocks["document"].count("text-1") == 1  # fewer targets than a block: one block
    # the caller's texts: no corpus split, corpus or document draw applied, so none is recorded
    assert not {"split", "n_documents", "corpus"} & set(r.config) and r.config["block_tokens"] == 20
    found = claims.claim_named("recurrent-perplexity-equal-window").judge({"perplexity": list(res.values())})
    assert [c.key for c in found.comparisons] == [(16, 0), (16, 4)]
    assert all(s.paired and s.unit == "block" and s.units == b.n_units for s in found.seeds)


def test_default_blocks_follow_the_block_bootstrap_rule_and_the_result_records_them(models):
    """Without --block-tokens the blocks are the longest that leave 20 (analyses.blocks), the bootstrap block records
    their length and the rule, and the intervals are read at the expanded level."""
    import numpy as np

    from analyses import blocks, stats
    from analyses.inputs import caller_documents

    lm = models["plain"]
    texts = [" ".join(f"word{i % 41} of a longer text" for i in range(120)), "Another text, " * 30]
    r = pp.compute(pp.Config(window=16, overlap=[0]), lm=lm, documents=caller_documents(lm, texts))
    b = r.bootstrap
    targets = [len(lm.encode(t)) - 1 for t in texts]
    length = blocks.block_length(targets)
    assert b.block_length == length and b.block_length_of == "tokens" and "at least 20" in b.rule
    assert b.n_units == sum(max(1, n // length) for n in targets) >= 20 and r.config["block_tokens"] == 0
    assert b.method == "percentile, expanded" and b.interval_level == blocks.expanded_level(0.95, b.n_units)
    W = stats.resample_weights(b.n_units, b.resamples, b.seed)
    rep = stats.ratio_replicates(b.nll["0"], b.blocks["tokens"], W)
    assert r.rows[0].token_perplexity_ci == pytest.approx(np.exp(stats.interval(rep, b.interval_level)))
    assert r.token_perplexity(16, 0).interval() == pytest.approx(r.rows[0].token_perplexity_ci)


def test_a_set_without_a_recurrent_model_is_drawn_model_by_model_with_its_intervals(tmp_path, drawn):
    """Not the recurrence comparison: each model's token perplexity and its interval as the result files hold
    them, no overlap or FLOPs view (the recurrent pair keeps those: test_cli_end_to_end_on_tiny_models)."""
    import numpy as np

    out = tmp_path / "out"
    pp.main(["--model", "tiny-gpt2", "--model", "tiny-llama", "--window", "32", "--overlap", "0", "--overlap",
             "8", "--n-documents", "2", "--max-tokens", "200", "--out", str(out)])
    assert not (out / "figures" / "perplexity.png").exists() and not (out / "figures" / "perplexity-flops.png").exists()
    (ax,) = drawn["perplexity-models"].axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["tiny-gpt2", "tiny-llama"]
    rows = {name: json.loads((out / "results" / "perplexity" / f"{name}.json").read_text())["rows"]
            for name in ("tiny-gpt2", "tiny-llama")}
    for k, overlap in enumerate((0, 8)):
        want = [next(r for r in rows[m] if r["overlap"] == overlap) for m in ("tiny-gpt2", "tiny-llama")]
        line = line_drawing(ax, [r["token_perplexity"] for r in want])
        x = np.asarray(line.get_xdata(), float)
        np.testing.assert_allclose(np.round(x), [0, 1])
        bars = [c for c in ax.collections if len(c.get_segments()) == 2][k]
        for seg, r in zip(bars.get_segments(), want):
            np.testing.assert_allclose(sorted(np.asarray(seg)[:, 1]), r["token_perplexity_ci"], rtol=1e-6)
            assert r["token_perplexity_ci"][0] < r["token_perplexity"] < r["token_perplexity_ci"][1]
