"""analyses.probing against planted structure: linear codes, independent noise, type-identity features."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from analyses import probing as pr
from analyses import records
from analyses.probing import tasks as pt
from probes.capture.activations import Activations
from probes.errors import ProbeError

REPO = Path(__file__).resolve().parent.parent
FAST = pr.Config(cs=[0.01, 1.0], cv_folds=2, n_boot=300, max_iter=200)


def layers_of(*Xs):
    return np.stack(Xs)  # (L+1, n, d)


def test_linearly_encoded_label_is_read_at_near_one_and_noise_is_not():
    rng = np.random.default_rng(0)
    n, d, k = 600, 20, 4
    y = rng.integers(k, size=n)
    code = rng.normal(size=(k, d)) * 3
    planted = code[y] + rng.normal(size=(n, d))  # the label is a linear function of the features
    noise = rng.normal(size=(n, d))  # independent of the label
    rows, sizes = pr.probe_layers(layers_of(noise, planted), y, np.arange(n), FAST)
    assert sizes.n_train + sizes.n_test == n and sizes.n_test == 150
    assert rows[1].accuracy > 0.97 and rows[1].ci_low > 0.9
    assert rows[0].accuracy < 0.45  # chance is 0.25
    assert rows[1].n_params == (d + 1) * k and rows[1].C in FAST.cs
    for r in rows:
        assert r.ci_low <= r.accuracy <= r.ci_high
        assert r.selectivity is None and "selectivity" not in records.to_json(r)  # no control given


def test_independent_features_give_the_majority_baseline_within_the_interval():
    rng = np.random.default_rng(1)
    n, d = 800, 30
    y = (rng.random(n) < 0.3).astype(int)  # 70 / 30: the majority baseline is ~0.7
    X = rng.normal(size=(n, d))
    rows, _ = pr.probe_layers(layers_of(X), y, np.arange(n), FAST)
    r = rows[0]
    assert r.majority == pytest.approx(0.7, abs=0.06)
    assert r.ci_low <= r.majority <= r.ci_high
    assert r.n_params == d + 1  # two classes: one weight vector


def test_control_task_on_type_identity_features_is_high_and_selectivity_low():
    rng = np.random.default_rng(2)
    n_types, n, d = 30, 1500, 40
    types = rng.integers(n_types, size=n)
    groups = np.arange(n) // 10  # 150 "sentences" of 10 tokens
    X = rng.normal(size=(n_types, d))[types] * 3 + rng.normal(size=(n, d)) * 0.5  # type identity only
    labels = rng.integers(5, size=n)  # a property of the position, not of the type
    control = pt.control_labels(types, labels, 5, seed=0)
    rows, _ = pr.probe_layers(layers_of(X), labels, groups, FAST, control=control)
    r = rows[0]
    assert r.control_accuracy > 0.9  # the probe memorises each type's control label
    assert r.accuracy < 0.35  # chance 0.2: the task is not in the features
    assert r.selectivity == pytest.approx(r.accuracy - r.control_accuracy)
    assert r.selectivity_ci_low <= r.selectivity <= r.selectivity_ci_high < 0


def test_selective_features_beat_their_control():
    rng = np.random.default_rng(3)
    n, d = 1500, 20
    types = rng.integers(200, size=n)  # many rare types: control labels cannot be memorised from X
    labels = rng.integers(3, size=n)
    X = rng.normal(size=(3, d))[labels] * 3 + rng.normal(size=(n, d))
    control = pt.control_labels(types, labels, 3, seed=0)
    rows, _ = pr.probe_layers(layers_of(X), labels, np.arange(n) // 10, FAST, control=control)
    assert rows[0].accuracy > 0.95 and rows[0].selectivity_ci_low > 0.4


def test_control_labels_are_per_type_seeded_and_follow_the_label_distribution():
    rng = np.random.default_rng(4)
    types = rng.integers(2000, size=20000)
    labels = rng.choice(3, size=20000, p=[0.6, 0.3, 0.1])
    c = pt.control_labels(types, labels, 3, seed=5)
    for t in np.unique(types)[:50]:
        assert len(np.unique(c[types == t])) == 1
    per_type = np.array([c[types == t][0] for t in np.unique(types)])
    np.testing.assert_allclose(np.bincount(per_type, minlength=3) / len(per_type), [0.6, 0.3, 0.1], atol=0.04)
    np.testing.assert_array_equal(c, pt.control_labels(types, labels, 3, seed=5))
    assert not np.array_equal(c, pt.control_labels(types, labels, 3, seed=6))


def test_bootstrap_resamples_whole_sentences():
    rng = np.random.default_rng(5)
    v = np.repeat(rng.random(40) < 0.5, 25).astype(float)  # 40 sentences, perfectly correlated within
    lo_g, hi_g = pr.bootstrap_interval(v, np.arange(1000) // 25, 2000, 0)
    lo_i, hi_i = pr.bootstrap_interval(v, np.arange(1000), 2000, 0)
    assert lo_g <= v.mean() <= hi_g and lo_i <= v.mean() <= hi_i
    assert (hi_g - lo_g) > 3 * (hi_i - lo_i)  # 40 independent units, not 1000
    assert (lo_g, hi_g) == pr.bootstrap_interval(v, np.arange(1000) // 25, 2000, 0)


def test_token_split_never_separates_a_sentence():
    groups = np.arange(500) // 7
    train, test = pr.split(np.zeros(500, int), groups, 0.25, 0)
    assert not set(groups[train]) & set(groups[test]) and len(train) + len(test) == 500


# ----------------------------------------------------------------------------- tasks from text


TEXTS = [" ".join(["word"] * n) + " end." for n in range(4, 40)] * 5


def test_sent_len_bins_are_balanced_and_ordered_by_length():
    task = pt.sent_len(TEXTS, seed=0)
    counts = np.bincount(task.labels)
    assert len(counts) == 6 and len(set(counts)) == 1
    lengths = np.array([len(TEXTS[i].split()) for i in task.items])
    for k in range(5):
        assert lengths[task.labels == k].max() < lengths[task.labels == k + 1].min()


def test_word_content_sentences_hold_exactly_their_word():
    rng = np.random.default_rng(6)
    vocab = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(10) for j in range(10)]
    texts = [" ".join(["the", "a"] + list(rng.choice(vocab, size=3, replace=False))) for _ in range(3000)]
    task = pt.word_content(texts, seed=0, vocab=40, skip_top=2, min_per_class=10)
    chosen = set(task.classes)
    assert len(chosen) >= 2 and len(set(np.bincount(task.labels))) == 1  # balanced
    for item, label in zip(task.items, task.labels):
        assert set(texts[item].split()) & chosen == {task.classes[label]}


def test_bigram_shift_swaps_one_adjacent_lowercase_pair():
    texts = [f"The cat number{i} sat on the mat today ." for i in range(200)]
    orig, pert, new = pt.bigram_shift_plan(texts, seed=0)
    assert len(orig) + len(pert) == 200 and not set(orig) & set(pert) and len(pert) == 100
    for i, t in zip(pert, new):
        a, b = texts[i].split(), t.split()
        diff = [j for j in range(len(a)) if a[j] != b[j]]
        assert len(diff) == 2 and diff[1] == diff[0] + 1 and diff[0] >= 1
        assert a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]] and a[diff[0]].isalpha()
    task = pt.bigram_shift(texts, seed=0)
    assert task.balance() == {"original": 100, "swapped": 100}
    assert (new, tuple(orig)) == (pt.bigram_shift_plan(texts, 0)[2], tuple(pt.bigram_shift_plan(texts, 0)[0]))
    mixed = texts[:50] + ["Yes, Sir John.", "Oh! Mr. Knightley, Emma."] * 25  # no swappable pair in these
    orig, pert, _ = pt.bigram_shift_plan(mixed, seed=1)
    assert sorted([*orig, *pert]) == list(range(50)) and len(pert) == 25  # only eligible sentences take part


def fake_acts(token_lists):
    tokens = [["[CLS]", *t, "[SEP]"] for t in token_lists]
    lengths = [len(t) for t in tokens]
    n = sum(lengths)
    special = np.array([tok in ("[CLS]", "[SEP]") for t in tokens for tok in t])
    return Activations(meta={"model": {"name": "fake"}}, texts=[" ".join(t) for t in token_lists], tokens=tokens,
                       offsets=np.concatenate([[0], np.cumsum(lengths)]), token_ids=np.arange(n), special=special,
                       hidden=np.zeros((2, n, 3), np.float32), sentence=np.zeros((2, len(tokens), 3), np.float32))


def test_word_units_take_the_first_sub_token_and_skip_special_tokens():
    acts = fake_acts([["the", "un", "##happ", "##y", "cat", ","], ["no"]])
    first, text, names, types = pt.word_units(acts)
    np.testing.assert_array_equal(first, [1, 2, 5, 6, 9])
    np.testing.assert_array_equal(text, [0, 0, 0, 0, 1])
    assert [names[t] for t in types] == ["the", "unhappy", "cat", ",", "no"]
    marked = fake_acts([["ĠThe", "Ġun", "happy", "Ġcat", ","]])
    first, _, names, types = pt.word_units(marked)
    np.testing.assert_array_equal(first, [1, 2, 4, 5])
    assert [names[t] for t in types] == ["the", "unhappy", "cat", ","]


def test_position_labels_are_relative_word_positions():
    acts = fake_acts([[f"w{i}" for i in range(10)], ["a", "b"]])
    task = pt.position(acts, seed=0, bins=5, max_items=100)
    got = dict(zip(task.items.tolist(), task.labels.tolist()))
    assert [got[i] for i in range(1, 11)] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert [got[13], got[14]] == [0, 2]


# ----------------------------------------------------------------------------- CLI, files, figures


SMALL = ["--n-sentences", "400", "--min-per-class", "5", "--word-content-skip", "20", "--max-items", "500",
         "--cs", "0.01", "--cs", "1", "--cv-folds", "2", "--n-boot", "200"]


@pytest.mark.slow
def test_end_to_end_is_byte_identical_and_redraws(tmp_path):
    from matplotlib.colors import to_hex

    from analyses.common import write_result
    from analyses.style import model_color

    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):  # the same command twice (the second reads the cached activations)
        pr.main(["--model", "tiny-bert", *SMALL, "--out", str(out)])
    pr.main(["--model", "tiny-slstm", *SMALL, "--out", str(a)])
    for ext in ("json", "csv"):
        name = f"results/probing/tiny-bert.{ext}"
        assert (a / name).read_bytes() == (b / name).read_bytes()
    doc = json.loads((a / "results/probing/tiny-slstm.json").read_text())
    assert [t["task"] for t in doc["tasks"]] == list(pt.TASKS)
    assert doc["config"]["seed"] == 0 and doc["model"]["sentence_vector"] == "g" and doc["scikit_learn"]
    for t in doc["tasks"]:
        assert len(t["layers"]) == 3 and t["n_train"] + t["n_test"] == t["n_items"] <= 500
        assert all(0 <= r["ci_low"] <= r["accuracy"] <= r["ci_high"] <= 1 for r in t["layers"])
        # a control task for position; none for token_identity, whose label is the word type itself
        assert ("selectivity" in t["layers"][0]) == (t["task"] == "position")
    tok = next(t for t in doc["tasks"] if t["task"] == "token_identity")
    assert tok["layers"][0]["accuracy"] > 0.8  # layer 0 of any model holds its word identity
    assert "selectivity would be 0 by construction" in tok["control"] and "control_balance" not in tok
    pos = next(t for t in doc["tasks"] if t["task"] == "position")
    results = [pr.Result.from_json(json.loads((a / f"results/probing/{m}.json").read_text()))
               for m in ("tiny-bert", "tiny-slstm")]
    fig = pr.plot(results)
    sl = fig.axes[0]
    # tiny-bert's sentence vector is [CLS], tiny-slstm's its node g: the accuracy figure (sentence tasks) says so
    lines = [ln for ln in sl.get_lines() if ln.get_label() == "tiny-slstm (sentence node)"]
    np.testing.assert_allclose(lines[0].get_ydata(), [r["accuracy"] for r in doc["tasks"][0]["layers"]])
    np.testing.assert_allclose(lines[0].get_xdata(), [0, 0.5, 1])
    assert to_hex(lines[0].get_color()) == model_color("tiny-slstm")
    small = {t.task: t.n_test for t in results[-1].tasks if t.small_test}  # marked in the title
    assert [ax.get_title() for ax in fig.axes] == [f"{n} (only {small[n]} test items)" if n in small else n
                                                  for n in pt.TASKS]
    sel = pr.plot_selectivity(results)
    assert [ax.get_title() for ax in sel.axes if ax.get_visible()][:1] == ["position"]
    ys = [ln.get_ydata() for ln in sel.axes[0].get_lines() if ln.get_label() == "tiny-slstm"][0]
    np.testing.assert_allclose(ys, [r["selectivity"] for r in pos["layers"]])
    from analyses.summary import figures

    redrawn = {p.name for p in figures.redraw(str(a))}  # analyses.summary.figures redraws from the saved results
    assert {"probing.png", "probing-selectivity.pdf"} <= redrawn
    assert pr.Result.from_json(results[0].to_json()) == results[0]
    # read back, the result holds only its own keys, and writing it again gives the same file
    assert list(results[1].to_json()) == [k for k in doc if k not in ("analysis", "provenance")]
    again, _ = write_result(tmp_path / "c", "probing", "tiny-slstm", results[1], pr.table_rows(results[1]))
    assert again.read_bytes() == (a / "results/probing/tiny-slstm.json").read_bytes()


def run_cli(*args, tmp_path, capsys):
    """(exit status, stderr lines but progress bars) of ``python -m analyses.probing --model tiny-bert ARGS``,
    run in this process as ``python -m`` runs it (tests/test_cli.py starts the real process)."""
    from probes.config import run_main

    code = 0
    try:
        run_main(pr.main, ["--model", "tiny-bert", *args, "--out", str(tmp_path / "out")])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    return code, [ln for ln in err.splitlines() if ln.strip() and "it/s]" not in ln and "text/s]" not in ln]


def test_unknown_task_is_one_clear_line(tmp_path, capsys):
    rc, lines = run_cli("--task", "pos_tags", tmp_path=tmp_path, capsys=capsys)
    # arg(choices=pt.TASKS) refuses it when the command line is parsed
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: argument --task: invalid choice: 'pos_tags'")


def test_corpus_too_small_for_the_classes_is_one_clear_line(tmp_path, capsys):
    corpus = tmp_path / "small.txt"
    corpus.write_text(" ".join(f"This is sentence number {i} of a small text." for i in range(30)))
    rc, lines = run_cli("--corpus", str(corpus), "--n-sentences", "30", "--task", "sent_len", tmp_path=tmp_path,
                        capsys=capsys)
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: corpus too small for task sent_len")


def test_unknown_task_in_compute_and_missing_shifted_are_errors():
    acts = fake_acts([["a", "b"]])
    with pytest.raises(ProbeError, match="unknown task"):
        pr.compute(pr.Config(task=["nope"]), acts=acts)
    with pytest.raises(ProbeError, match="perturbed"):
        pr.compute(pr.Config(task=["bigram_shift"]), acts=fake_acts([["the cat sat on the mat"]] * 30))


def test_only_a_task_whose_label_is_not_the_word_type_gets_a_control_task():
    assert pt.label_follows_type(np.array([3, 3, 5, 7]), np.array([0, 0, 1, 2]))  # token_identity's shape
    assert not pt.label_follows_type(np.array([3, 3, 5]), np.array([0, 1, 1]))  # position: a type at two places
