"""Probing that finishes: a task the sentences cannot build is skipped with one line
naming it and the fix while the other tasks run; a task with fewer test items than --min-test-items is
marked in its result and in the figure's panel title."""

from __future__ import annotations

import numpy as np
import pytest

from analyses import probing as pr
from probes.capture.activations import Activations
from probes.errors import ProbeError


def acts_of(n_texts: int = 60, seed: int = 0) -> Activations:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(40)]
    token_lists = [list(rng.choice(words, size=rng.integers(5, 12))) for _ in range(n_texts)]
    tokens = [["[CLS]", *t, "[SEP]"] for t in token_lists]
    lengths = [len(t) for t in tokens]
    n = sum(lengths)
    special = np.array([tok in ("[CLS]", "[SEP]") for t in tokens for tok in t])
    return Activations(meta={"model": {"name": "fake", "sentence_vector": "cls"}, "key": "k", "n_texts": n_texts,
                             "n_tokens": n},
                       texts=[" ".join(t) for t in token_lists], tokens=tokens,
                       offsets=np.concatenate([[0], np.cumsum(lengths)]), token_ids=np.arange(n), special=special,
                       hidden=rng.normal(size=(2, n, 4)).astype(np.float32),
                       sentence=rng.normal(size=(2, n_texts, 4)).astype(np.float32))


CFG = dict(min_per_class=3, cs=[1.0], cv_folds=2, n_boot=20, max_items=300)


def test_a_task_that_cannot_be_built_is_skipped_and_the_others_run(capsys):
    cfg = pr.Config(task=["word_content", "sent_len", "position"], **CFG)
    res = pr.compute(cfg, acts=acts_of())
    assert [t.task for t in res.tasks] == ["sent_len", "position"]
    assert [s.task for s in res.skipped] == ["word_content"]
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if "skipped task word_content" in ln)
    assert "--n-sentences" in line and "--word-content-skip" in line and "--task" in line
    assert pr.Result.from_json(res.to_json()).skipped == res.skipped


def test_small_test_sets_are_marked_in_the_result_and_the_figure(capsys):
    import matplotlib.pyplot as plt

    res = pr.compute(pr.Config(task=["sent_len"], min_test_items=50, **CFG), acts=acts_of())
    entry = res.tasks[0]
    assert entry.n_test < 50 and entry.small_test is True
    assert "only" in capsys.readouterr().err
    ax = res.plot()  # on one Axes: said in the legend's title (a Result.plot sets no title)
    legends = [ax.get_legend()] if ax.get_legend() is not None else ax.figure.legends
    assert any(f"only {entry.n_test} test items" in lg.get_title().get_text() for lg in legends)
    assert not ax.get_title()
    plt.close(ax.figure)
    big = pr.compute(pr.Config(task=["sent_len"], min_test_items=5, **CFG), acts=acts_of())
    assert big.tasks[0].small_test is False


def test_no_task_at_all_is_an_error(capsys):
    with pytest.raises(ProbeError, match="^corpus too small for task word_content"):  # one task: its own reason
        pr.compute(pr.Config(task=["word_content"], **CFG), acts=acts_of(12))
    assert "skipped" not in capsys.readouterr().err  # the error line alone, no "skipped" line before it
