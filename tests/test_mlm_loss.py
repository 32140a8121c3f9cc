"""analyses.mlm_loss: the held-out MLM loss of a trained checkpoint from its training record and per-block
losses, with its interval over blocks; a file that does not match the record is one error line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analyses import mlm_loss, stats
from probes.errors import ProbeError


def _folder(tmp_path, monkeypatch, name: str, losses: np.ndarray | None, held: float | None = 5.8,
            counts_total: int | None = None) -> str:
    """A recipe folder (train_config.json, and heldout_blocks.csv when ``losses`` is given) in a user registry."""
    folder = tmp_path / name
    folder.mkdir()
    cfg = {"arch": "mog", "fusion": "weight-gate", "width": 256, "layers": 4, "half_dim": False, "shared_qkv": False,
           "steps": 300, "batch_size": 32, "seq_len": 320, "corpus": "c", "split": "train", "lr": 0.001, "seed": 0,
           "eval_blocks": 0 if losses is None else len(losses), "mask_prob": 0.15}
    record = {"config": cfg, "heldout_loss": held, "last_loss_mean": 6.2}
    if losses is not None:
        counts = np.random.default_rng(0).integers(30, 50, len(losses))
        record["heldout_masked_tokens"] = int(counts.sum()) if counts_total is None else counts_total
        (folder / "heldout_blocks.csv").write_text("block,loss_sum,masked_tokens\n" + "".join(
            f"{i},{s:.6f},{c}\n" for i, (s, c) in enumerate(zip(counts * losses, counts))))
    (folder / "train_config.json").write_text(json.dumps(record))
    (folder / "model.safetensors").write_bytes(name.encode())  # the weights the fingerprint hashes
    registry = tmp_path / "reg.yaml"
    with open(registry, "a") as f:
        f.write(f"{name}:\n  family: mog\n  kind: encoder\n  source: {{path: {folder}}}\n  sentence: cls\n")
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(registry))
    return name


def _result(name: str) -> mlm_loss.Result:
    cfg = mlm_loss.Config()
    return mlm_loss.compute(cfg, **mlm_loss.load_inputs(name, cfg))


def test_the_loss_per_masked_token_and_its_interval_over_blocks(tmp_path, monkeypatch):
    losses = np.random.default_rng(1).normal(5.7, 0.3, 200)
    r = _result(_folder(tmp_path, monkeypatch, "m-wg", losses))
    sums, counts = np.array(r.blocks.loss_sum), np.array(r.blocks.masked_tokens)
    assert r.loss == pytest.approx(sums.sum() / counts.sum()) and r.loss_source == "held-out blocks"
    # a block bootstrap over runs of 10 consecutive held-out blocks: the longest runs that leave 20 (analyses.blocks)
    assert r.loss_ci[0] < r.loss < r.loss_ci[1] and r.bootstrap.n_units == 20
    assert r.bootstrap.block_length == 10 and r.bootstrap.runs == list(range(0, 200, 10))
    assert r.bootstrap.interval_level > r.bootstrap.level == 0.95  # read at the expanded level
    s = r.heldout_loss()
    assert s.interval() == pytest.approx(r.loss_ci) and s.n_units == 20 and s.unit == "block"
    assert s.pairing == (stats.units_id(counts.tolist()), 0, stats.RESAMPLES)  # equal counts: the same blocks
    again = mlm_loss.Result.from_json(json.loads(json.dumps(r.to_json())))
    assert again.heldout_loss().interval() == pytest.approx(r.loss_ci)
    assert r.recipe.fusion == "weight-gate" and r.corpus["split"] == "heldout"


def test_without_block_losses_the_recorded_loss_is_a_point_value(tmp_path, monkeypatch):
    r = _result(_folder(tmp_path, monkeypatch, "m-rec", None, held=5.8))
    assert (r.loss, r.loss_source, r.blocks, r.loss_ci) == (5.8, "held-out, recorded", None, None)
    assert r.heldout_loss().replicates is None
    r = _result(_folder(tmp_path, monkeypatch, "m-train", None, held=None))
    assert (r.loss, r.loss_source) == (6.2, "training, last steps")


def test_block_losses_of_other_blocks_are_one_error(tmp_path, monkeypatch):
    name = _folder(tmp_path, monkeypatch, "m-bad", np.full(10, 5.0), counts_total=1)
    with pytest.raises(ProbeError, match="scored other blocks"):
        _result(name)


@pytest.mark.parametrize("content, expected", [("block,loss_sum\n0,1.0\n", "not a held-out blocks file"),
                                               ("block,loss_sum,masked_tokens\n", "holds no blocks"),
                                               ("block,loss_sum,masked_tokens\n0,nan,3\n", "not finite")])
def test_a_damaged_blocks_file_is_one_error(tmp_path, monkeypatch, content, expected):
    name = _folder(tmp_path, monkeypatch, "m-dmg", np.full(10, 5.0))
    (tmp_path / "m-dmg" / "heldout_blocks.csv").write_text(content)
    with pytest.raises(ProbeError, match=expected):
        _result(name)


def test_a_model_without_a_training_record_is_one_error(tmp_path, monkeypatch):
    name = _folder(tmp_path, monkeypatch, "m-none", None)
    (tmp_path / "m-none" / "train_config.json").unlink()
    with pytest.raises(ProbeError, match="has no training record"):
        _result(name)
