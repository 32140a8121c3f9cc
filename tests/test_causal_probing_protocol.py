"""Causal probing's protocol over seeds (analyses.causal_probing.protocol, .verdict): a random control removes the
eraser's share of the states' variance where a rank-matched one removes far less; Holm's test; the verdict per
layer is the same whatever the base seed on a planted model; a result reads back typed from its file with its
headline number (what a series draws), and an old file without seeds still reads."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from analyses import causal_probing
from analyses.causal_probing import erasers
from analyses.causal_probing.protocol import holm
from analyses.causal_probing.rows import MethodRow, TaskRow


def _anisotropic(n=800, d=40, k=3, seed=0):
    """States with a few huge directions (rogue dimensions) and the concept along small ones: a random subspace
    of the eraser's rank removes far less (or more) variance than the eraser does."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    scale = np.r_[np.full(3, 30.0), np.ones(d - 3)]
    X = rng.normal(size=(n, d)) * scale + 2.0 * np.eye(k)[y] @ rng.normal(size=(k, d)) * (scale < 2)
    return X, y


def test_the_random_control_removes_the_erasers_share_of_variance_not_just_its_rank():
    X, y = _anisotropic()
    spectrum = erasers.Spectrum.of(X)
    for e in (erasers.leace(X, y), erasers.inlp(X, y, np.arange(len(y)) // 4, iterations=5).eraser):
        assert e is not None
        target = erasers.removed_share(e, X)
        same_rank = [erasers.removed_share(erasers.orthogonal_random(X, e.rank, s), X) for s in range(5)]
        assert max(abs(v / target - 1) for v in same_rank) > 0.5  # rank alone: not like for like here
        for seed in range(5):
            c = erasers.matched_random(spectrum, e.rank, target, seed)
            assert abs(c.share / target - 1) <= 0.01 and c.rank == e.rank
            assert abs(erasers.removed_share(c.eraser, X) / target - 1) <= 0.01  # measured on the states
            B = c.eraser.left
            np.testing.assert_allclose(B.T @ B, np.eye(c.rank), atol=1e-9)  # an orthogonal projection
    first, again = (erasers.matched_random(spectrum, 2, 0.1, 7).eraser.left for _ in range(2))
    np.testing.assert_array_equal(first, again)  # seeded


def test_a_share_no_subspace_of_that_rank_holds_takes_the_nearest_rank_that_does():
    X, _ = _anisotropic()
    spectrum = erasers.Spectrum.of(X)
    c = erasers.matched_random(spectrum, 1, 0.9, 0)  # one direction holds at most a third of this variance
    assert c.rank > 1 and abs(c.share / 0.9 - 1) <= 0.01


def test_holm_rejects_step_down_and_stops_at_the_first_it_keeps():
    assert holm([0.001, 0.03, 0.004], alpha=0.025) == [True, False, True]  # 0.001 < .025/3, .004 < .025/2
    assert holm([0.001, 0.02, 0.004], alpha=0.025) == [True, True, True]  # then 0.02 < .025/1
    assert holm([0.03, 0.0], alpha=0.025) == [False, True]
    assert holm([], alpha=0.05) == []


def test_used_needs_the_pooled_test_and_every_seed_and_not_used_tolerates_one_seed_of_three():
    from analyses.causal_probing.verdict import verdict

    assert verdict(True, [True, True, True]) == "used"
    assert verdict(True, [True, True, False]) == "inconclusive"  # a claim of use survives every draw, or is open
    assert verdict(False, [True, True, True]) == "inconclusive"  # the seeds, not the pooled replicates
    assert verdict(False, [True, False, False]) == "not used"  # one seed of three, unsupported by the pool: chance
    assert verdict(False, [True, True, False]) == "inconclusive"
    assert verdict(False, [True, False]) == "inconclusive"  # an even split
    assert verdict(True, [True]) == "used" and verdict(False, [False]) == "not used"  # one seed: its own test


def test_the_pooled_test_reads_every_seeds_replicates_with_holm_over_the_layers():
    """Three layers, three seeds of planted bootstrap replicates: a clear effect in every seed (used), none in
    any (not used), and a layer where one seed's replicates lie far above 0 and two seeds' around it (the pool
    does not reject; one seed of three says used: not used)."""
    from analyses.causal_probing.protocol import Draw
    from analyses.causal_probing.rows import SeedEntry
    from analyses.causal_probing.verdict import decide, method_row

    rng = np.random.default_rng(0)

    def draw(center, used):
        reps = center + 0.01 * rng.normal(size=400)
        entry = SeedEntry(seed=0, rank=2, accuracy=0.5, random_accuracy=0.5, removed_variance=0.1,
                          random_removed_variance=[0.1], random_rank=[2], delta_loss=center,
                          random_delta_loss=0.0, excess_loss=center,
                          p_value=float(np.mean(reps <= 0)), used=used)
        return Draw(entry, [0.4, 0.6], [0.4, 0.6], reps, reps, reps, None)

    rows = [method_row([draw(0.2, True)] * 3, True),
            method_row([draw(0.0, False) for _ in range(3)], True),
            method_row([draw(0.3, True), draw(0.0, False), draw(-0.01, False)], True)]
    decide(rows)
    assert [r.verdict for r in rows] == ["used", "not used", "not used"]  # the third: chance, by the rule
    assert rows[0].p_value == 0.0 and rows[2].used_in == 1 and 0.3 < rows[2].p_value < 0.7


def _cyclic():
    from test_causal_probing import _cyclic_lm

    return _cyclic_lm()


@pytest.fixture(scope="module")
def cyclic():
    return _cyclic()


@pytest.mark.slow  # nine runs of the protocol on the tiny LM (about 15 s of CPU)
def test_the_verdict_per_layer_does_not_depend_on_the_base_seed(cyclic):
    """A model trained to read the current word (token identity used at its last layer; at layer 1 its states are
    the word and little else, so an eraser and a control of the same variance both remove nearly everything) and
    with little use for the word's position: for base seeds 0, 1 and 2 every layer gets the same verdict for each
    task, each run over three seeds."""
    model, tok, texts = cyclic
    found = {}
    for base in (0, 1, 2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = causal_probing.run(model, texts, tokenizer=tok, name="cyclic", task=["token_identity", "position"],
                                   layer=[0, 1, 2], seed=base, seeds=3, cache_dir=None, n_boot=200, max_items=600,
                                   cv_folds=2, cs=[1.0], inlp_iterations=3, random_draws=2)
        assert r.seeds == [base, base + 1, base + 2]
        found[base] = {t: causal_probing.verdicts(r, t) for t in ("token_identity", "position")}
    assert found[0] == found[1] == found[2]
    assert found[0]["token_identity"][2] == "used"


def test_a_result_reads_back_typed_with_its_headline_number(cyclic, tmp_path):
    from analyses.files import read_results, write_result

    model, tok, texts = cyclic
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = causal_probing.run(model, texts[:80], tokenizer=tok, name="cyclic", task=["token_identity"], layer=[1, 2],
                               seeds=2, cache_dir=None, n_boot=100, max_items=400, cv_folds=2, cs=[1.0],
                               inlp_iterations=2, random_draws=1)
    (label, sample), = r.headline_numbers().items()
    assert label == "token_identity: LEACE excess loss, mean over layers"
    means = [np.mean([row.leace.seeds[k].excess_loss for row in r.tasks[0].layers]) for k in range(2)]
    assert sample.point == pytest.approx(np.mean(means), rel=1e-6)  # the layers' mean, mean over seeds
    assert sample.replicates.shape == (200,) and sample.interval()[0] < sample.point < sample.interval()[1]
    write_result(tmp_path, "causal_probing", r.model_name, r, causal_probing.table_rows(r))
    back, = read_results(tmp_path, "causal_probing")
    assert isinstance(back.tasks[0], TaskRow) and isinstance(back.tasks[0].layers[0].leace, MethodRow)
    assert back.tasks[0].layers[0].leace.seeds[1].seed == 1 and back.seeds == [0, 1]
    assert causal_probing.verdicts(back, "token_identity") == causal_probing.verdicts(r, "token_identity")
    again = back.headline_numbers()[label]
    assert again.point == pytest.approx(sample.point, abs=1e-6)
    np.testing.assert_allclose(again.replicates, sample.replicates, atol=1e-5)
    frame = back.to_frame()
    assert list(frame["leace_verdict"]) == [row.leace.verdict for row in r.tasks[0].layers]


def test_a_file_written_before_seeds_reads_with_one_seeds_verdict():
    from test_display import causal_probing as saved

    doc = json.loads(json.dumps(saved()))
    r = causal_probing.Result.from_json(doc)
    assert r.seeds == [] and r.tasks[0].layers[1].inlp.iterations == 2
    lows = {row.layer: row.leace.excess_loss_ci[0] for row in r.tasks[0].layers}
    assert causal_probing.used_layers(r, "position") == [k for k, lo in lows.items() if lo > 0]
    assert r.headline_numbers() == {}


def test_the_declared_table_has_a_row_per_task_and_layer_with_each_methods_numbers():
    """The declaration's table (the CSV and to_frame()) of a saved document: one row per task and layer, each
    method's columns flat, numbers where the rows have them."""
    from test_display import causal_probing as saved

    r = causal_probing.Result.from_json(json.loads(json.dumps(saved())))
    rows = causal_probing.ANALYSIS.table_rows(r)
    layers = r.tasks[0].layers
    assert [(row["task"], row["layer"]) for row in rows] == [("position", x.layer) for x in layers]
    assert [row["leace_excess_loss"] for row in rows] == [x.leace.excess_loss for x in layers]
    assert [row["inlp_excess_loss_low"] for row in rows] == [x.inlp.excess_loss_ci[0] for x in layers]
    assert all(isinstance(row["accuracy"], float) for row in rows)  # a number, never a (value, interval) pair
    assert list(r.to_frame()["leace_rank"]) == [2] * len(layers)


def test_two_base_seeds_probe_the_same_sentences_and_the_sample_seed_picks_them():
    """The sentences drawn from a corpus are the data: --seed moves the protocol's draws only, --sample-seed the
    sample."""
    from analyses.causal_probing.inputs import CausalInputs

    def texts(**options):
        cfg = causal_probing.Config(n_sentences=6, **options)
        return CausalInputs().activations("tiny-bert", cfg, cache_dir=None).texts

    first = texts(seed=0)
    assert texts(seed=2) == first and texts(seed=0, sample_seed=1) != first
