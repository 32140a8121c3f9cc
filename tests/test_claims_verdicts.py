"""Verdicts from the evidence (issue 27): a claim holds only when the bootstrap interval of the compared
difference excludes the opposite direction in every seed; planted models within noise are 'inconclusive'."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analyses import stats
from analyses.summary import claims, evidence

MODEL = {"num_layers": 4, "hidden_size": 256, "kind": "encoder"}


def _redundancy_doc(name: str, family: str, k: np.ndarray) -> dict:
    """A redundancy result at n = 100 with per-window k (one column per threshold 0.9, 0.98)."""
    k = np.asarray(k, dtype=float)
    ks = np.stack([k, k + 20], 1)
    block = stats.bootstrap_block("window", len(k), units_id=stats.units_id([name, len(k)]))
    return {"analysis": "redundancy", "model_name": name, "model": {**MODEL, "family": family},
            "windows": [{"window": 100, "n_windows": len(k), "k": ks.tolist(), "bootstrap": block,
                         "thresholds": [{"threshold": p, "mean": float(c.mean())} for p, c in zip((0.9, 0.98), ks.T)]}]}


def _write(tmp_path, analysis: str, docs: list[dict]) -> None:
    folder = tmp_path / "results" / analysis
    folder.mkdir(parents=True, exist_ok=True)
    for d in docs:
        (folder / f"{d['model_name']}.json").write_text(json.dumps(d))


def _k_claim(tmp_path) -> claims.Claim:
    return next(c for c in claims.evaluate(tmp_path) if c.analysis == "redundancy" and "90%" in c.claim)


def _windows(mean: float, seed: int, n: int = 100, sd: float = 3.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(mean, sd, n).round()


def test_a_clear_difference_holds_with_its_interval_and_seed(tmp_path):
    _write(tmp_path, "redundancy", [_redundancy_doc("slstm-small", "slstm", _windows(40, 1)),
                                    _redundancy_doc("bert-small", "bert", _windows(30, 2))])
    c = _k_claim(tmp_path)
    assert c.verdict == claims.HOLDS and c.n_seeds == 1
    lo, hi = c.interval
    assert 0 < lo < c.difference < hi and c.difference == pytest.approx(10, abs=1.5)
    (seed,) = c.seeds
    assert seed["seed"] == 0 and seed["sign"] == 1 and not seed["paired"]
    assert seed["interval_a"][0] < seed["value_a"] < seed["interval_a"][1]
    assert f"slstm-small {seed['value_a']:.1f} [" in c.evidence and " vs bert-small " in c.evidence
    doc = c.to_json()
    assert {"verdict", "difference", "interval", "seeds", "n_seeds", "reason"} <= set(doc)
    json.dumps(doc)  # JSON-ready


def test_a_difference_within_noise_is_inconclusive(tmp_path):
    _write(tmp_path, "redundancy", [_redundancy_doc("slstm-small", "slstm", _windows(30.2, 1, sd=5)),
                                    _redundancy_doc("bert-small", "bert", _windows(30.0, 2, sd=5))])
    c = _k_claim(tmp_path)
    assert c.verdict == claims.INCONCLUSIVE and c.reason == stats.CROSSES_ZERO
    assert c.interval[0] < 0 < c.interval[1]


def test_the_opposite_difference_does_not_hold(tmp_path):
    _write(tmp_path, "redundancy", [_redundancy_doc("slstm-small", "slstm", _windows(25, 1)),
                                    _redundancy_doc("bert-small", "bert", _windows(35, 2))])
    assert _k_claim(tmp_path).verdict == claims.FAILS


def test_seeds_are_grouped_and_must_agree(tmp_path):
    docs = [_redundancy_doc("slstm-small", "slstm", _windows(40, 1)),
            _redundancy_doc("slstm-small-seed1", "slstm", _windows(40, 3)),
            _redundancy_doc("slstm-small-seed2", "slstm", _windows(40, 5)),
            _redundancy_doc("bert-small", "bert", _windows(30, 2)),
            _redundancy_doc("bert-small-seed1", "bert", _windows(30, 4)),
            _redundancy_doc("bert-small-seed2", "bert", _windows(30, 6))]
    _write(tmp_path, "redundancy", docs)
    c = _k_claim(tmp_path)
    assert c.verdict == claims.HOLDS and c.n_seeds == 3
    assert [s["seed"] for s in c.seeds] == [0, 1, 2] and "3 seeds" in c.evidence
    docs[2] = _redundancy_doc("slstm-small-seed2", "slstm", _windows(20, 5))  # seed 2 says the opposite
    _write(tmp_path, "redundancy", docs)
    c = _k_claim(tmp_path)
    assert c.verdict == claims.INCONCLUSIVE and c.reason == stats.SEEDS_DISAGREE


def test_paired_units_give_a_paired_interval():
    rng = np.random.default_rng(0)
    unit = rng.normal(30, 6, 100)  # what each window does to both models
    a = {"model_name": "a", "windows": [], "v": unit + 0.8 + rng.normal(0, 0.5, 100)}
    b = {"model_name": "b", "windows": [], "v": unit + rng.normal(0, 0.5, 100)}
    block = stats.bootstrap_block("window", 100, units_id="sha256:same")
    sample = lambda d: evidence.mean_sample(float(np.mean(d["v"])), d["v"], block)  # noqa: E731
    paired = evidence.compare({"a": {0: a}}, {"b": {0: b}}, sample, 1)
    assert paired["verdict"] == stats.HOLDS and paired["seeds"][0]["paired"]
    other = dict(block, units_id="sha256:other")
    sample_b = lambda d: evidence.mean_sample(float(np.mean(d["v"])), d["v"], block if d is a else other)  # noqa: E731
    unpaired = evidence.compare({"a": {0: a}}, {"b": {0: b}}, sample_b, 1)
    assert not unpaired["seeds"][0]["paired"] and unpaired["verdict"] == stats.INCONCLUSIVE


def test_results_without_replicates_keep_the_point_verdict(tmp_path):
    docs = [_redundancy_doc("slstm-small", "slstm", _windows(40, 1)), _redundancy_doc("bert-small", "bert",
                                                                                     _windows(30, 2))]
    for d in docs:
        del d["windows"][0]["bootstrap"]
    _write(tmp_path, "redundancy", docs)
    c = _k_claim(tmp_path)
    assert c.verdict == claims.HOLDS and c.reason == claims.POINT_ONLY and c.interval is None


def test_seed_names():
    assert evidence.seed_of("bert-small-seed2") == ("bert-small", 2)
    assert evidence.seed_of("bert-small") == ("bert-small", 0)
    assert set(evidence.by_model([{"model_name": "x"}, {"model_name": "x-seed1"}])["x"]) == {0, 1}


def _mog_folder(tmp_path, name: str, fusion: str, loss_per_token: np.ndarray) -> str:
    """A recipe folder with its training record and per-block held-out losses (scripts/heldout_blocks.py)."""
    folder = tmp_path / name
    folder.mkdir()
    cfg = {"fusion": fusion, "half_dim": False, "shared_qkv": False, "layers": 4, "steps": 300, "batch_size": 32,
           "seq_len": 320, "corpus": "c", "split": "train", "lr": 0.001}
    counts = np.random.default_rng(0).integers(30, 50, len(loss_per_token))  # same blocks, same masking
    sums = counts * loss_per_token
    record = {"config": cfg, "heldout_loss": float(sums.sum() / counts.sum()), "last_loss_mean": 6.0}
    (folder / "train_config.json").write_text(json.dumps(record))
    (folder / "heldout_blocks.csv").write_text("block,loss_sum,masked_tokens\n" + "".join(
        f"{i},{s:.6f},{c}\n" for i, (s, c) in enumerate(zip(sums, counts))))
    return f"{name}:\n  family: mog\n  kind: encoder\n  source: {{path: {folder}}}\n  sentence: cls\n"


@pytest.mark.parametrize("gap, verdict", [(-0.05, claims.HOLDS), (0.0005, claims.INCONCLUSIVE),
                                          (0.05, claims.FAILS)])
def test_table2_from_held_out_blocks_paired(tmp_path, monkeypatch, gap, verdict):
    rng = np.random.default_rng(1)
    block = rng.normal(5.7, 0.3, 512)  # what each block does to both models
    wg, sum_ = block + gap + rng.normal(0, 0.02, 512), block + rng.normal(0, 0.02, 512)
    reg = _mog_folder(tmp_path, "x-wg", "weight-gate", wg) + _mog_folder(tmp_path, "x-sum", "sum", sum_)
    (tmp_path / "reg.yaml").write_text(reg)  # x-: sorts after the repository's own mog-small-* entries
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(tmp_path / "reg.yaml"))
    table2 = next(c for c in claims.mog_claims({}) if c.analysis == "checkpoints")
    assert table2.verdict == verdict
    assert table2.seeds[0]["paired"] and table2.interval is not None
    assert "held-out MLM loss per block: x-wg " in table2.evidence


def test_table2_groups_seed_variants_under_their_seed_0_model(tmp_path, monkeypatch):
    """Seed variants of the two fusions give one comparison per seed (paired within a seed), each seed's
    weight-gate model against the same seed's sum model."""
    rng = np.random.default_rng(3)
    reg = ""
    for suffix in ("", "-seed1"):
        block = rng.normal(5.7, 0.3, 512)
        reg += _mog_folder(tmp_path, f"x-wg{suffix}", "weight-gate", block - 0.05 + rng.normal(0, 0.02, 512))
        reg += _mog_folder(tmp_path, f"x-sum{suffix}", "sum", block + rng.normal(0, 0.02, 512))
    (tmp_path / "reg.yaml").write_text(reg)
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(tmp_path / "reg.yaml"))
    table2 = next(c for c in claims.mog_claims({}) if c.analysis == "checkpoints")
    assert table2.verdict == claims.HOLDS and table2.n_seeds == 2
    assert [s["seed"] for s in table2.seeds] == [0, 1] and all(s["paired"] for s in table2.seeds)
    assert [(s["a"], s["b"]) for s in table2.seeds] == [("x-wg", "x-sum"), ("x-wg-seed1", "x-sum-seed1")]


def _ppl_doc(name: str, recurrent: bool, nll_per_token: dict, tokens: np.ndarray) -> dict:
    """A perplexity result: rows per (T, o) and the per-document NLL sums the bootstrap resamples."""
    block = stats.bootstrap_block("document", len(tokens), units_id=stats.units_id(range(len(tokens))))
    rows, documents = [], {}
    for (t, o), per_doc in nll_per_token.items():
        nll = per_doc * tokens
        rows.append({"model": name, "recurrent": recurrent, "window": t, "overlap": o,
                     "token_perplexity": float(np.exp(nll.sum() / tokens.sum()))})
        documents[str(o)] = {"nll": nll.tolist(), "tokens": tokens.tolist()}
    return {"analysis": "perplexity", "model_name": name, "rows": rows, "bootstrap": {**block, "documents": documents}}


@pytest.mark.parametrize("gap, verdict", [(-0.05, claims.HOLDS), (0.0, claims.INCONCLUSIVE)])
def test_perplexity_claim_is_paired_over_documents(tmp_path, gap, verdict):
    rng = np.random.default_rng(2)
    tokens = rng.integers(500, 2000, 40).astype(float)
    doc = rng.normal(3.5, 0.4, 40)  # how hard each document is, for both models
    noise = lambda: rng.normal(0, 0.01, 40)  # noqa: E731
    _write(tmp_path, "perplexity", [
        _ppl_doc("base", False, {(128, 0): doc + noise(), (128, 32): doc - 0.01 + noise()}, tokens),
        _ppl_doc("rec", True, {(128, 0): doc + gap + noise(), (128, 32): doc + gap - 0.01 + noise()}, tokens)])
    equal = next(c for c in claims.evaluate(tmp_path) if c.analysis == "perplexity")
    assert equal.verdict == verdict and all(s["paired"] for s in equal.seeds)
    assert "T=128, o=0: rec " in equal.evidence and equal.interval is not None


def test_topic_claim_uses_the_paired_jsd_interval(tmp_path):
    stats_ = {"mean_jsd_a": 0.30, "mean_jsd_b": 0.31, "share_a_less": 0.6, "n_contexts": 200, "n_ties": 0,
              "sign_test_p_a_less": 0.002, "wilcoxon_p_a_less": 0.001, "mean_difference": -0.01,
              "mean_difference_ci": [-0.03, 0.01]}
    _write(tmp_path, "topics", [{"analysis": "topics", "model_name": "rec__base", "statistics": stats_}])
    c = next(c for c in claims.evaluate(tmp_path) if c.analysis == "topics")
    assert c.verdict == claims.INCONCLUSIVE and c.reason == stats.CROSSES_ZERO and c.interval == [-0.03, 0.01]


def test_markdown_table_has_the_seeds_column(tmp_path, capsys):
    _write(tmp_path, "redundancy", [_redundancy_doc("slstm-small", "slstm", _windows(40, 1)),
                                    _redundancy_doc("slstm-small-seed1", "slstm", _windows(41, 3)),
                                    _redundancy_doc("bert-small", "bert", _windows(30, 2)),
                                    _redundancy_doc("bert-small-seed1", "bert", _windows(31, 4))])
    claims.main(["--out", str(tmp_path), "--markdown"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| paper | where | claim | verdict | seeds |")
    row = next(ln for ln in lines if "90% of the variance" in ln)
    assert "| holds | 2 | " in row and "seed 1: slstm-small-seed1 " in row
    assert next(ln for ln in lines if "§6" in ln).split(" | ")[4] == "point values"  # speed: untested, no seeds
