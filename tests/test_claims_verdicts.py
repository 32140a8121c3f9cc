"""Verdicts from the evidence: a claim holds only when, for every compared model, every seed's bootstrap
interval of the difference and the t interval over the seeds exclude the opposite direction; results made
with another corpus, sample or settings, or on too few units, are not testable, with the reason."""

from __future__ import annotations

import dataclasses
import json

import claims_docs as docs
import numpy as np
import pytest

from analyses import stats
from analyses.summary import claims, evidence


def _claim(out, analysis: str, text: str) -> claims.Finding:
    return next(f for f in claims.evaluate(out) if f.analysis == analysis and text in f.claim)


def _k90(out) -> claims.Finding:
    return _claim(out, "redundancy", "90%")


def _seeded(name: str, seed: int) -> str:
    return name if seed == 0 else f"{name}-seed{seed}"


def _redundancy_pair(out, slstm_means, bert_means, sd: float = 3.0, **ident) -> None:
    found = []
    for seed, (m_s, m_b) in enumerate(zip(slstm_means, bert_means)):
        found += [docs.redundancy(_seeded("slstm-small", seed), "slstm", docs.per_unit(m_s, 10 + seed, sd=sd)),
                  docs.redundancy(_seeded("bert-small", seed), "bert", docs.per_unit(m_b, 20 + seed, sd=sd), **ident)]
    docs.write(out, "redundancy", found)


def test_a_clear_difference_in_every_seed_holds_with_the_interval_over_seeds(tmp_path):
    _redundancy_pair(tmp_path, [40, 41, 39], [30, 30.5, 29])
    f = _k90(tmp_path)
    assert f.verdict == claims.HOLDS and f.n_seeds == 3
    (c,) = f.comparisons
    assert c.against == "slstm-small vs bert-small" and [s.seed for s in c.seeds] == [0, 1, 2]
    diffs = [s.difference for s in c.seeds]
    assert c.difference == pytest.approx(np.mean(diffs)) and c.interval == c.across
    half = 4.302653 * np.std(diffs, ddof=1) / np.sqrt(3)  # t_{0.975, 2}
    assert c.across == pytest.approx([np.mean(diffs) - half, np.mean(diffs) + half], rel=1e-5)
    assert all(s.paired and s.interval[0] > 0 for s in c.seeds)
    assert f"slstm-small {c.seeds[0].value_a:.1f} [" in f.evidence and "over 3 seeds" in f.evidence
    doc = json.loads(json.dumps(f.to_json()))  # JSON-ready
    assert list(doc["comparisons"][0]["seeds"][0]) == [*SEED_KEYS[:7], *VALUE_KEYS, *SEED_KEYS[7:]]


SEED_KEYS = ["seed", "a", "b", "difference", "interval", "sign", "paired", "units", "unit"]
VALUE_KEYS = ["value_a", "interval_a", "value_b", "interval_b"]


def test_a_seed_row_keeps_the_keys_it_was_written_with_and_reads_back():
    from analyses import records

    row = evidence.SeedRow(seed=1, a="x-seed1", b="y-seed1", difference=-0.5, interval=[-0.6, -0.4], sign=-1,
                           paired=True, units=30, unit="sentence")
    assert list(records.to_json(row)) == SEED_KEYS  # a difference one result saved (topics): no values of A and B
    assert records.from_json(evidence.SeedRow, records.to_json(row)) == row
    row.value_a, row.value_b = 0.1, 0.6  # point values: the values' intervals are written as null
    doc = records.to_json(row)
    assert list(doc) == [*SEED_KEYS[:7], *VALUE_KEYS, *SEED_KEYS[7:]] and doc["interval_a"] is None
    assert records.from_json(evidence.SeedRow, doc) == row
    with pytest.raises(TypeError):  # a misspelt field is an error where the row is made, not a missing number
        evidence.SeedRow(seed=1, a="x", b="y", diference=-0.5, interval=None, sign=-1, paired=False,  # type: ignore
                         units=None, unit=None)


def test_one_seed_cannot_speak_for_the_architecture(tmp_path):
    _redundancy_pair(tmp_path, [40], [30])
    f = _k90(tmp_path)
    (c,) = f.comparisons
    assert f.verdict == claims.INCONCLUSIVE and stats.ONE_SEED in f.reason and c.across is None
    assert c.interval == c.seeds[0].interval and c.interval[0] > 0  # the seed's own interval excludes zero


def test_a_difference_within_noise_is_inconclusive(tmp_path):
    _redundancy_pair(tmp_path, [30.2, 30.1, 29.9], [30, 30, 30], sd=5)
    f = _k90(tmp_path)
    assert f.verdict == claims.INCONCLUSIVE and f.reason.startswith((stats.CROSSES_ZERO, stats.SEEDS_DISAGREE))


def test_the_opposite_difference_in_every_seed_does_not_hold(tmp_path):
    _redundancy_pair(tmp_path, [25, 26, 24], [35, 35, 35])
    assert _k90(tmp_path).verdict == claims.FAILS


def test_seeds_that_disagree_are_inconclusive(tmp_path):
    _redundancy_pair(tmp_path, [40, 40, 20], [30, 30, 30])
    f = _k90(tmp_path)
    assert f.verdict == claims.INCONCLUSIVE and f.reason == stats.SEEDS_DISAGREE


def test_every_seed_excluding_zero_is_not_enough_when_the_seeds_scatter(tmp_path):
    _redundancy_pair(tmp_path, [31, 40, 60], [30, 30, 30], sd=1)  # +1, +10, +30: the t interval crosses zero
    f = _k90(tmp_path)
    (c,) = f.comparisons
    assert all(s.interval[0] > 0 for s in c.seeds)
    assert f.verdict == claims.INCONCLUSIVE and stats.ACROSS_CROSSES in f.reason and c.across[0] < 0 < c.across[1]


def test_results_without_replicates_are_point_values(tmp_path):
    _redundancy_pair(tmp_path, [40, 41, 39], [30, 30.5, 29])
    for p in (tmp_path / "results" / "redundancy").glob("*.json"):
        d = json.loads(p.read_text())
        del d["windows"][0]["bootstrap"]
        p.write_text(json.dumps(d))
    f = _k90(tmp_path)
    (c,) = f.comparisons
    assert f.verdict == claims.HOLDS and c.point_values and "point difference" in f.reason
    assert all(s.interval is None for s in c.seeds) and c.across is not None


def test_paired_units_give_a_paired_interval():
    rng = np.random.default_rng(0)
    unit = rng.normal(30, 6, 100)  # what each window does to both models
    a, b = unit + 0.8 + rng.normal(0, 0.5, 100), unit + rng.normal(0, 0.5, 100)
    block = stats.bootstrap_block("window", 100, units_id="sha256:same")
    sa, sb = stats.Sample.of_mean(a.mean(), a, block), stats.Sample.of_mean(b.mean(), b, block)
    paired = stats.difference(sa, sb)
    assert paired.paired and paired.interval()[0] > 0
    unpaired = stats.difference(sa, stats.Sample.of_mean(b.mean(), b,
                                                            dataclasses.replace(block, units_id="sha256:other")))
    assert not unpaired.paired and unpaired.interval()[0] < 0 < unpaired.interval()[1]


# ----------------------------------------------------------------------------- like with like, enough units


def _anisotropy(out, slstm: dict, n_units: int = 100, **slstm_ident) -> None:
    found = []
    for seed in range(3):
        found += [docs.anisotropy(_seeded("slstm-small", seed), "slstm", 0.20 + 0.01 * seed, 0.46, seed=seed,
                                  n_units=n_units, **(slstm_ident if seed == 0 else {})),
                  docs.anisotropy(_seeded("albert-small", seed), "albert", 0.28 + 0.01 * seed, 0.74, seed=10 + seed,
                                  n_units=n_units)]
    found[0].update(slstm)
    docs.write(out, "anisotropy", found)


def test_like_results_hold(tmp_path):
    _anisotropy(tmp_path, {})
    assert _claim(tmp_path, "anisotropy", "token outputs").verdict == claims.HOLDS


def test_a_result_from_another_corpus_is_not_testable(tmp_path):
    """An slstm-small result of 60 sentences of another corpus beside its baselines' results."""
    _anisotropy(tmp_path, {}, corpus={"sha256": "0f" * 32, "n_sampled": 60}, settings={"n_sentences": 60})
    for level in ("token outputs", "sentence vectors"):
        f = _claim(tmp_path, "anisotropy", level)
        assert f.verdict == claims.UNTESTED and "different corpus (sha256: " in f.reason


def test_other_settings_are_not_testable(tmp_path):
    _anisotropy(tmp_path, {}, settings={"n_tokens": 5000})
    f = _claim(tmp_path, "anisotropy", "token outputs")
    assert f.verdict == claims.UNTESTED and "different settings (n_tokens: 5000 vs 300)" in f.reason


def test_run_settings_do_not_make_results_unlike(tmp_path):
    _anisotropy(tmp_path, {}, settings={"batch_size": 4, "dtype": "bfloat16", "device": "cuda"})
    assert _claim(tmp_path, "anisotropy", "token outputs").verdict == claims.HOLDS


def test_two_sentences_are_too_few_units(tmp_path):
    _anisotropy(tmp_path, {}, n_units=2)
    f = _claim(tmp_path, "anisotropy", "sentence vectors")
    assert f.verdict == claims.UNTESTED and "too few units" in f.reason and "2 sentences" in f.reason


def test_a_null_number_is_not_testable_with_its_name(tmp_path):
    _anisotropy(tmp_path, {})
    path = tmp_path / "results" / "anisotropy" / "slstm-small.json"
    d = json.loads(path.read_text())
    d["layers"][-1]["token"]["mean"] = None
    path.write_text(json.dumps(d))
    f = _claim(tmp_path, "anisotropy", "token outputs")
    assert f.verdict == claims.UNTESTED and "slstm-small's last-layer token cosine is missing (null)" in f.evidence


def test_a_result_without_its_identity_is_not_testable(tmp_path):
    _anisotropy(tmp_path, {})
    path = tmp_path / "results" / "anisotropy" / "slstm-small.json"
    d = json.loads(path.read_text())
    del d["config"]
    path.write_text(json.dumps(d))
    f = _claim(tmp_path, "anisotropy", "token outputs")
    assert f.verdict == claims.UNTESTED and "lacks 'config'" in f.reason


def test_models_without_a_seed_in_common_are_not_testable(tmp_path):
    docs.write(tmp_path, "redundancy", [docs.redundancy("slstm-small-seed1", "slstm", docs.per_unit(40, 1)),
                                        docs.redundancy("bert-small", "bert", docs.per_unit(30, 2))])
    f = _k90(tmp_path)
    assert f.verdict == claims.UNTESTED and "no seed in common" in f.reason


def test_the_anisotropy_claim_under_isoscore_reads_each_levels_last_layer(tmp_path):
    """IsoScore higher = more isotropic: planted, the S-LSTM's sentence vectors are more isotropic than both
    baselines' in every seed, its tokens less than bert-small's."""
    found = []
    for seed in range(3):
        found += [docs.isoscore(_seeded("slstm-small", seed), "slstm", 0.11, 0.08, seed=seed),
                  docs.isoscore(_seeded("bert-small", seed), "bert", 0.20 - 0.01 * seed, 0.006, seed=10 + seed),
                  docs.isoscore(_seeded("albert-small", seed), "albert", 0.13, 0.004, seed=20 + seed)]
    docs.write(tmp_path, "isoscore", found)
    tokens, sentences = (_claim(tmp_path, "isoscore", f"{level} ") for level in ("token outputs", "sentence vectors"))
    assert "under IsoScore" in tokens.where and tokens.claimed_sign == 1 and tokens.unit == "sentence"
    assert sentences.verdict == claims.HOLDS and all(c.verdict == claims.HOLDS for c in sentences.comparisons)
    assert tokens.verdict == claims.FAILS
    c = next(c for c in tokens.comparisons if c.against == "slstm-small vs bert-small")
    assert c.difference == pytest.approx(0.11 - 0.19, abs=0.002) and all(s.paired for s in c.seeds)


# ----------------------------------------------------------------------------- the recurrence claims


def _ppl(out, gap: float, seeds=(0, 1, 2), overlaps=(0, 16, 32), units: int = 40, blocks: bool = True) -> None:
    found = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        tokens = rng.integers(256, 400, units).astype(float)
        hard = rng.normal(3.5, 0.4, units)  # how hard each block of text is, for both models
        found += [docs.perplexity(_seeded("base", seed), False,
                                  {o: hard - 0.001 * o + rng.normal(0, 0.01, units) for o in overlaps}, tokens,
                                  blocks=blocks),
                  docs.perplexity(_seeded("rec", seed), True,
                                  {o: hard + gap - 0.001 * o + rng.normal(0, 0.01, units) for o in overlaps}, tokens,
                                  blocks=blocks)]
    docs.write(out, "perplexity", found)


@pytest.mark.parametrize("gap, verdict", [(-0.05, claims.HOLDS), (0.05, claims.FAILS)])
def test_perplexity_claim_is_paired_over_blocks_per_window_and_overlap(tmp_path, gap, verdict):
    _ppl(tmp_path, gap)
    f = _claim(tmp_path, "perplexity", "equal window")
    assert f.verdict == verdict and [c.key for c in f.comparisons] == [(128, 0), (128, 16), (128, 32)]
    assert all(s.paired and s.units == 40 and s.unit == "block" for s in f.seeds)
    assert f.unit == "block" and "(paired over 40 blocks)" in f.evidence
    assert f.comparisons[0].against == "rec vs base at T=128, o=0"


def test_a_perplexity_result_resampling_seven_documents_is_not_testable(tmp_path):
    """A result written before blocks existed resamples its documents: the demo corpus's 7 are too few."""
    _ppl(tmp_path, -0.05, units=7, blocks=False)
    f = _claim(tmp_path, "perplexity", "equal window")
    assert f.verdict == claims.UNTESTED and "rests on 7 documents" in f.reason
    _ppl(tmp_path, -0.05, units=40, blocks=False)  # enough documents: read as before, paired over them
    f = _claim(tmp_path, "perplexity", "equal window")
    assert f.verdict == claims.HOLDS and all(s.paired and s.unit == "document" for s in f.seeds)


def test_claim_2_compares_recurrent_o0_with_the_base_at_t_over_10(tmp_path):
    _ppl(tmp_path, -0.05)
    f = _claim(tmp_path, "perplexity", "o = 0")
    (c,) = f.comparisons
    assert c.key == (128, 0, 16)  # T/10 = 12.8: o = 16, not the largest (32)
    assert all(s.paired for s in c.seeds)  # the blocks are the same at every overlap: paired across overlaps
    assert claims.claim2_overlap(300, [5, 10, 30, 50, 75, 200]) == 30  # the paper's Table 2
    assert claims.claim2_overlap(128, [0]) is None


def test_the_topic_claim_reads_the_paired_jsd_difference_the_right_way_round(tmp_path):
    rng = np.random.default_rng(3)
    found = []
    for seed in range(3):
        ctx = rng.uniform(0.3, 0.8, 200)
        rec, base = ctx - 0.05 + rng.normal(0, 0.02, 200), ctx + rng.normal(0, 0.02, 200)
        a, b = _seeded("rec", seed), _seeded("base", seed)
        found.append(docs.topics(a, b, rec, base) if seed != 1 else docs.topics(b, a, base, rec, rec_is_a=False))
    docs.write(tmp_path, "topics", found)
    f = _claim(tmp_path, "topics", "topic JSD")
    (c,) = f.comparisons
    assert f.verdict == claims.HOLDS and all(s.difference < 0 for s in c.seeds)
    assert [s.a for s in c.seeds] == ["rec", "rec-seed1", "rec-seed2"]


# ----------------------------------------------------------------------------- Table 2 from mlm_loss results


def _table2(out, gaps, steps=(300, 300), blocks=True) -> None:
    found = []
    for seed, gap in enumerate(gaps):
        rng = np.random.default_rng(seed)
        block = rng.normal(5.7, 0.3, 256)  # what each block does to both models
        found += [docs.mlm_loss(_seeded("m-wg", seed), "weight-gate", block + gap + rng.normal(0, 0.02, 256), seed,
                                steps=steps[0], blocks=blocks),
                  docs.mlm_loss(_seeded("m-sum", seed), "sum", block + rng.normal(0, 0.02, 256), seed,
                                steps=steps[1], blocks=blocks)]
    found.append(docs.mlm_loss("m-half", "weight-gate", np.full(256, 1.0), half_dim=True))  # not Table 2's row
    docs.write(out, "mlm_loss", found)


def test_table2_holds_when_weight_gate_is_ahead_in_every_seed_and_over_seeds(tmp_path):
    _table2(tmp_path, [-0.050, -0.052])
    f = _claim(tmp_path, "mlm_loss", "weight-gate")
    (c,) = f.comparisons
    assert f.verdict == claims.HOLDS and c.against == "m-wg vs m-sum" and all(s.paired for s in c.seeds)
    assert [(s.a, s.b) for s in c.seeds] == [("m-wg", "m-sum"), ("m-wg-seed1", "m-sum-seed1")]


def test_table2_of_two_scattered_seeds_is_inconclusive(tmp_path):
    _table2(tmp_path, [0.03, 0.26])  # behind in both seeds, but two seeds this far apart say little more
    f = _claim(tmp_path, "mlm_loss", "weight-gate")
    assert f.verdict == claims.INCONCLUSIVE and stats.ACROSS_CROSSES in f.reason


def test_table2_needs_models_trained_alike(tmp_path):
    _table2(tmp_path, [-0.05, -0.05], steps=(300, 150))
    f = _claim(tmp_path, "mlm_loss", "weight-gate")
    assert f.verdict == claims.UNTESTED and "different training recipe (steps: 300 vs 150)" in f.reason


def test_table2_without_block_losses_is_point_values(tmp_path):
    _table2(tmp_path, [-0.05, -0.051], blocks=False)
    f = _claim(tmp_path, "mlm_loss", "weight-gate")
    assert f.comparisons[0].point_values and f.verdict == claims.HOLDS


# ----------------------------------------------------------------------------- claims from point values


def _speed(name: str, slope: float, family: str | None = None, source: str = "random init") -> dict:
    model = {"source": source, **({"family": family} if family else {})}
    return {"model_name": name, "config": {}, "model": model, "reference": "bert", "reference_median_s": {},
            "definitions": {}, "fit_lengths": [512, 1024], "slope": slope, "intercept": 0.0, "local_slopes": [],
            "crossover": None, "rows": [], "machine": {}}


@pytest.mark.parametrize("slstm_slope, verdict", [(1.05, claims.HOLDS), (1.3, claims.FAILS)])
def test_the_speed_claim_tells_families_apart_by_their_identity(tmp_path, slstm_slope, verdict):
    docs.write(tmp_path, "speed", [_speed("slstm", slstm_slope), _speed("bert", 1.6),
                                   _speed("my-slstm-copy", 1.7, family="hf", source="checkpoints.yaml")])
    f = _claim(tmp_path, "speed", "linearly")
    assert f.verdict == verdict and f.point_values and f.reason == claims.POINT_VALUES


def test_evidence_module_reads_results_strictly(tmp_path):
    docs.write(tmp_path, "redundancy", [docs.redundancy("slstm-small", "slstm", docs.per_unit(40, 1))])
    typed = evidence.typed(evidence.load_all(tmp_path))
    assert type(typed["redundancy"][0]).__name__ == "Result" and typed["redundancy"][0].model_name == "slstm-small"
