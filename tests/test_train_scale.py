"""recipes.loop under the recipes: pausing and resuming, gradient accumulation, two processes.

* A run stopped by ``--max-minutes`` (exit 75) and resumed by the same command ends with the same
  weights and loss log, bit for bit, as the run that was never stopped (MLM and causal LM).
* ``--grad-accum 2`` and two torchrun processes (gloo, one thread each) take the same optimiser
  steps as one process with one micro-batch, up to float rounding.
* A state written under other settings is refused with one line; ``--no-resume`` starts over.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import load_file

import probes
from probes.corpus import DEFAULT_CORPUS_DIR
from probes.errors import ProbeError
from recipes.loop import PAUSED_EXIT, Paused
from recipes.train import TrainConfig, train
from recipes.train_lm import PretrainConfig, pretrain

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    for name in ("austen-emma.txt", "melville-moby-dick.txt"):
        (folder / name).write_text((DEFAULT_CORPUS_DIR / name).read_text(encoding="utf-8")[:30_000])
    return folder


def cfg(corpus, out_dir, **kw) -> TrainConfig:
    base = dict(arch="bert", corpus=str(corpus), out_dir=str(out_dir), vocab_size=200, width=16, layers=2, heads=2,
                intermediate=32, max_positions=64, seq_len=48, batch_size=4, steps=6, warmup=1, lr=3e-3,
                log_every=1, progress=False, threads=1, eval_blocks=8)
    return TrainConfig(**{**base, **kw})


def weights(folder: Path) -> dict:
    return {k: v.float().numpy() for k, v in load_file(str(folder / "model.safetensors")).items()}


def losses(folder: Path) -> list[float]:
    import csv

    with open(folder / "train_log.csv") as f:
        return [float(r["loss"]) for r in csv.DictReader(f)]


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    """One uninterrupted single-process run (its tokenizer is shared by every other run here)."""
    out = tmp_path_factory.mktemp("ref")
    return train(cfg(corpus, out, dtype="float32"))


@pytest.mark.parametrize("arch", ["bert", "slstm"])
def test_paused_run_resumes_to_the_same_weights(arch, corpus, tmp_path, reference):
    tok = str(reference.parent / "wordpiece-200")
    ref = train(cfg(corpus, tmp_path / "ref", arch=arch, tokenizer=tok, dtype="float32"))
    out = tmp_path / "pieces"
    with pytest.raises(Paused) as e:  # stops after its first step
        train(cfg(corpus, out, arch=arch, tokenizer=tok, dtype="float32", max_minutes=1e-9))
    assert e.value.code == PAUSED_EXIT
    assert (out / f".{arch}-small.state" / "state.pt").exists() and not (out / f"{arch}-small").exists()
    done = train(cfg(corpus, out, arch=arch, tokenizer=tok, dtype="float32"))
    assert not (out / f".{arch}-small.state").exists()  # removed once the folder is written
    a, b = weights(ref), weights(done)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert losses(ref) == losses(done)
    info = json.loads((done / "train_config.json").read_text())
    assert info["tokens_seen"] == json.loads((ref / "train_config.json").read_text())["tokens_seen"]


def test_heldout_loss_is_recorded_and_finite(reference):
    info = json.loads((reference / "train_config.json").read_text())
    assert info["corpus"]["split"] == "train" and info["heldout_blocks"] > 0
    assert np.isfinite(info["heldout_loss"]) and info["heldout_loss"] < 1.2 * info["uniform_loss"]
    import csv

    with open(reference / "train_log.csv") as f:
        rows = list(csv.DictReader(f))
    assert float(rows[-1]["heldout_loss"]) == pytest.approx(info["heldout_loss"], abs=1e-5)


def test_grad_accumulation_takes_the_same_steps(corpus, tmp_path, reference):
    tok = str(reference.parent / "wordpiece-200")
    two = train(cfg(corpus, tmp_path, tokenizer=tok, dtype="float32", grad_accum=2))
    np.testing.assert_allclose(losses(two), losses(reference), rtol=0, atol=2e-5)
    a, b = weights(reference), weights(two)
    assert max(float(np.abs(a[k] - b[k]).max()) for k in a) < 1e-4
    with pytest.raises(ProbeError, match="divisible by processes x --grad-accum"):
        train(cfg(corpus, tmp_path, tokenizer=tok, grad_accum=3, overwrite=True))


def test_a_state_from_other_settings_is_refused(corpus, tmp_path, reference):
    tok = str(reference.parent / "wordpiece-200")
    with pytest.raises(Paused):
        train(cfg(corpus, tmp_path, tokenizer=tok, max_minutes=1e-9))
    with pytest.raises(ProbeError, match=r"other settings \(lr\).*--no-resume"):
        train(cfg(corpus, tmp_path, tokenizer=tok, lr=1e-2))
    assert train(cfg(corpus, tmp_path, tokenizer=tok, lr=1e-2, resume=False)).exists()


@pytest.mark.integration
def test_two_processes_match_one(corpus, tmp_path, reference):
    """torchrun, 2 CPU processes (gloo, 1 thread each): the folder loads, the loss falls, and the
    weights equal the one-process run's up to float rounding (the gradient sum's order)."""
    tok = str(reference.parent / "wordpiece-200")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO),
           "TMPDIR": str(tmp_path)}  # torchrun leaves a torchelastic_* folder in the temporary folder
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "recipes.train", "--arch", "bert", "--corpus", str(corpus), "--out-dir", str(tmp_path),
           "--tokenizer", tok, "--vocab-size", "200", "--width", "16", "--layers", "2", "--heads", "2",
           "--intermediate", "32", "--max-positions", "64", "--seq-len", "48", "--batch-size", "4", "--steps", "6",
           "--warmup", "1", "--lr", "3e-3", "--no-progress", "--threads", "1", "--eval-blocks", "8",
           "--dtype", "float32"]
    run = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    folder = tmp_path / "bert-small"
    info = json.loads((folder / "train_config.json").read_text())
    assert info["processes"] == 2 and info["command"].startswith("torchrun --nproc_per_node 2")
    ls = losses(folder)
    assert np.mean(ls[-2:]) < np.mean(ls[:2])
    np.testing.assert_allclose(ls, losses(reference), rtol=0, atol=2e-5)
    a, b = weights(reference), weights(folder)
    assert max(float(np.abs(a[k] - b[k]).max()) for k in a) < 1e-4
    reg = tmp_path / "checkpoints.yaml"
    reg.write_text(f"two-proc:\n  family: hf\n  kind: encoder\n  source: {{path: {folder}}}\n  sentence: cls\n")
    os.environ["PROBES_CHECKPOINTS"] = str(reg)
    try:
        acts = probes.extract("two-proc", ["The whale swam on."], cache_dir=None, progress=False)
    finally:
        del os.environ["PROBES_CHECKPOINTS"]
    assert acts.hidden.shape[0] == 3 and np.isfinite(acts.hidden).all()


def test_causal_lm_pretraining_resumes_exactly(corpus, tmp_path):
    kw = dict(corpus=str(corpus), vocab_size=300, n_layer=2, n_embd=32, n_head=2, n_positions=32, steps=5,
              batch_size=4, warmup=1, threads=1, progress=False)
    ref = pretrain(PretrainConfig(out=str(tmp_path / "ref"), **kw))
    with pytest.raises(Paused):
        pretrain(PretrainConfig(out=str(tmp_path / "piece"), max_minutes=1e-9, **kw))
    state = tmp_path / ".piece.state"
    with pytest.raises(Paused):  # starting over keeps the run's tokenizer beside the new state
        pretrain(PretrainConfig(out=str(tmp_path / "piece"), max_minutes=1e-9, resume=False, **kw))
    assert (state / "state.pt").exists() and (state / "tokenizer" / "tokenizer.json").exists()
    done = pretrain(PretrainConfig(out=str(tmp_path / "piece"), **kw))
    assert not state.exists()
    a, b = weights(ref), weights(done)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert (ref / "loss.csv").read_text().splitlines()[1:] != []
    assert [r.split(",")[:2] for r in (ref / "loss.csv").read_text().splitlines()] == \
        [r.split(",")[:2] for r in (done / "loss.csv").read_text().splitlines()]
    with pytest.raises(ProbeError, match="pass --overwrite"):  # checked before any training
        pretrain(PretrainConfig(out=str(ref), **kw))


@pytest.mark.parametrize("name,ok", [("slstm-small", True), ("a" * 100, True), ("a" * 101, False), ("../x", False),
                                     (".hidden", False), ("x/y", False), ("x..y", False), ("", False)])
def test_a_checkpoint_name_is_one_safe_folder_name(name, ok):
    from recipes.loop import check_name

    if ok:
        check_name(name)
    else:
        with pytest.raises(ProbeError, match="one folder name"):
            check_name(name)
