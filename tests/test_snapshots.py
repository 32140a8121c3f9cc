"""``--snapshots``: the recipes keep the model at log-spaced points of training as loadable folders.

* The snapshot steps are :data:`recipes.loop.SNAPSHOT_FRACTIONS` of the run's steps, final included.
* A run with snapshots trains the same model, bit for bit, as one without (a snapshot draws no random number
  and leaves the model as it was), for the masked-LM recipe and for both causal-LM fine-tunes.
* The last snapshot is the final model (the same weights); every snapshot records its step and tokens, and a
  masked-LM snapshot its held-out loss at that step.
* A run paused (exit 75) and resumed keeps the snapshots it wrote and ends with the same series.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import load_file

from probes.corpus import DEFAULT_CORPUS_DIR
from recipes.loop import SNAPSHOT_FRACTIONS, SNAPSHOT_RECORD, Paused, snapshot_steps
from recipes.train import TrainConfig, train
from recipes.train_lm import FinetuneConfig, PretrainConfig, finetune, pretrain

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    for name in ("austen-emma.txt", "melville-moby-dick.txt"):
        (folder / name).write_text((DEFAULT_CORPUS_DIR / name).read_text(encoding="utf-8")[:30_000])
    return folder


def mlm(corpus, out_dir, **kw) -> TrainConfig:
    base = dict(arch="bert", corpus=str(corpus), out_dir=str(out_dir), vocab_size=200, width=16, layers=2, heads=2,
                intermediate=32, max_positions=64, seq_len=48, batch_size=4, steps=8, warmup=1, lr=3e-3,
                log_every=1, progress=False, threads=1, eval_blocks=8)
    return TrainConfig(**{**base, **kw})


def weights(folder: Path) -> dict:
    return {k: v.float().numpy() for k, v in load_file(str(folder / "model.safetensors")).items()}


def same(a: Path, b: Path) -> bool:
    x, y = weights(a), weights(b)
    return x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)


def test_snapshot_steps_are_the_fractions_of_training_final_included():
    assert snapshot_steps(300) == [9, 19, 38, 75, 150, 225, 300]
    assert snapshot_steps(750)[-1] == 750 and len(snapshot_steps(750)) == len(SNAPSHOT_FRACTIONS)
    assert snapshot_steps(4) == [1, 2, 3, 4]  # a short run has fewer, each once
    steps = snapshot_steps(3000)
    assert all(b / a >= 4 / 3 - 1e-9 for a, b in zip(steps, steps[1:]))  # log-spaced: each at least 4/3 the last


@pytest.mark.parametrize("arch", ["bert", "slstm"])
def test_masked_lm_snapshots_change_nothing_and_end_at_the_final_model(arch, corpus, tmp_path):
    plain = train(mlm(corpus, tmp_path / "plain", arch=arch))
    tok = str(plain.parent / "wordpiece-200")
    series = tmp_path / "series"
    snap = train(mlm(corpus, tmp_path / "snap", arch=arch, tokenizer=tok, snapshots=True, snapshot_dir=str(series)))
    again = train(mlm(corpus, tmp_path / "again", arch=arch, tokenizer=tok))
    assert same(plain, again) and same(plain, snap)
    folders = sorted(series.glob("step-*"))
    assert [int(f.name[5:]) for f in folders] == snapshot_steps(8)
    assert same(folders[-1], snap)
    assert not same(folders[0], snap)
    for f in folders:
        rec = json.loads((f / SNAPSHOT_RECORD).read_text())
        record = json.loads((f / "train_config.json").read_text())
        assert rec["step"] == int(f.name[5:]) and rec["steps"] == 8 and rec["seed"] == 0
        assert np.isfinite(record["heldout_loss"]) and record["heldout_masked_tokens"] > 0
        assert (f / "config.json").exists() and (f / "tokenizer.json").exists()
    final = json.loads((snap / "train_config.json").read_text())
    last = json.loads((folders[-1] / "train_config.json").read_text())
    assert last["heldout_loss"] == pytest.approx(final["heldout_loss"], abs=1e-9)


def test_a_paused_run_keeps_its_snapshots_and_ends_with_the_same_series(corpus, tmp_path):
    ref_series, series = tmp_path / "ref-series", tmp_path / "series"
    ref = train(mlm(corpus, tmp_path / "ref", snapshots=True, snapshot_dir=str(ref_series)))
    tok = str(ref.parent / "wordpiece-200")
    with pytest.raises(Paused):
        train(mlm(corpus, tmp_path / "piece", tokenizer=tok, snapshots=True, snapshot_dir=str(series),
                  max_minutes=1e-9))
    assert [f.name for f in series.glob("step-*")] == ["step-0000001"]
    done = train(mlm(corpus, tmp_path / "piece", tokenizer=tok, snapshots=True, snapshot_dir=str(series)))
    assert same(ref, done)
    for a, b in zip(sorted(ref_series.glob("step-*")), sorted(series.glob("step-*")), strict=True):
        assert a.name == b.name and same(a, b)


@pytest.mark.parametrize("recurrent", [False, True])
def test_causal_lm_fine_tune_snapshots_change_nothing(recurrent, corpus, tmp_path_factory):
    pre = tmp_path_factory.getbasetemp() / "pretrained"
    if not (pre / "config.json").exists():
        pretrain(PretrainConfig(out=str(pre), corpus=str(corpus), vocab_size=300, n_layer=2, n_embd=32, n_head=2,
                                n_positions=32, steps=3, batch_size=4, warmup=1, threads=1, progress=False))
    tmp = tmp_path_factory.mktemp("ft")
    kw = dict(init=str(pre), corpus=str(corpus), recurrent=recurrent, window=16, windows_per_sequence=2, steps=4,
              batch_size=2, warmup=1, l_ins=1, ffn_hidden=[8], threads=1, progress=False)
    plain = finetune(FinetuneConfig(out=str(tmp / "plain"), **kw))
    snap = finetune(FinetuneConfig(out=str(tmp / "snap"), snapshots=True, snapshot_dir=str(tmp / "series"), **kw))
    assert same(plain, snap)
    folders = sorted((tmp / "series").glob("step-*"))
    assert [int(f.name[5:]) for f in folders] == snapshot_steps(4)
    assert same(folders[-1], snap) and not same(folders[0], snap)
    assert (folders[0] / "recurrence.json").exists() == recurrent
    if recurrent:
        a, b = load_file(str(folders[-1] / "recurrence.safetensors")), load_file(str(snap / "recurrence.safetensors"))
        assert all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)
    cfg = json.loads((folders[-1] / "config.json").read_text())
    assert cfg.get("_attn_implementation", "eager") in ("eager", None)
