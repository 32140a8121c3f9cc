"""Sparse autoencoders (analyses.sae) on planted structure: a TopK SAE recovers a planted dictionary; the
explained variance is the share of the total variance (checked by hand, and against the per-token legacy ratio
where they differ); the per-sentence sums the bootstrap resamples give the same numbers as the direct formulas;
the scale folds back exactly; a saved SAE loads back as it was and refuses another model, another layer, an
edited or a truncated file; bad input is one error line."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from analyses import sae as sae_analysis
from analyses.common import run_main
from analyses.sae.io import WEIGHTS, SaeRecord, load_sae, save_sae
from analyses.sae.metrics import (
    estimates,
    explained_variance,
    held_out_sums,
    legacy_explained_variance,
    matched_cosines,
    mcc,
)
from analyses.sae.model import SAE, SaeShape
from analyses.sae.train import TrainSettings, lr_factor, train_sae
from probes.capture.activations import Activations
from probes.errors import ProbeError


def planted(n: int, d: int, m: int, k: int, seed: int = 0, offset: float = 0.5):
    """(X (n, d) float32, dictionary (m, d) unit rows): each row a sum of exactly k random atoms with coefficients
    in [0.5, 1.5], plus a constant offset (the mean b_dec must take)."""
    rng = np.random.default_rng(seed)
    D = rng.normal(size=(m, d))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    codes = np.zeros((n, m))
    support = np.argsort(rng.random((n, m)), axis=1)[:, :k]
    np.put_along_axis(codes, support, rng.uniform(0.5, 1.5, size=(n, k)), axis=1)
    return (codes @ D + offset).astype(np.float32), D


# ----------------------------------------------------------------------------- planted dictionary


def test_topk_recovers_a_planted_dictionary_at_the_true_l0():
    d, m, k = 32, 64, 3
    data, D = planted(18000, d, m, k)
    X, X_test = data[:16000], data[16000:]
    untrained = SAE(SaeShape("topk", d, m, k), generator=torch.Generator().manual_seed(0))
    assert mcc(untrained.W_dec.detach().numpy(), D) < 0.5  # the bar below is not met by chance
    trained = train_sae(X, SaeShape("topk", d, m, k), TrainSettings(steps=3000, batch=256, lr=3e-3, dead_window=2000))
    W = trained.sae.W_dec.detach().numpy()
    assert np.allclose(np.linalg.norm(W, axis=1), 1, atol=1e-5)  # unit-norm decoder rows
    assert mcc(W, D) > 0.9
    assert np.mean(matched_cosines(W, D) > 0.9) > 0.85  # most atoms found one by one, not a few very well
    with torch.no_grad():
        x_hat, z = trained.sae(torch.from_numpy(X_test))
    assert (z > 0).sum(1).float().mean() <= k
    assert explained_variance(X_test, x_hat.numpy()) > 0.8


def test_mcc_is_one_for_the_same_dictionary_permuted_and_sign_flipped():
    _, D = planted(10, 8, 12, 2)
    perm = np.random.default_rng(0).permutation(12)
    assert mcc(D, -3 * D[perm]) == pytest.approx(1.0)


# ----------------------------------------------------------------------------- explained variance


def test_explained_variance_by_hand():
    x = np.array([[1.0, 2.0], [3.0, 0.0], [2.0, 4.0]])
    x_hat = np.array([[1.0, 1.0], [2.0, 0.0], [2.0, 4.0]])
    err = (1 + 1 + 0) / 3  # E||x - x_hat||^2
    second = (5 + 9 + 20) / 3  # E||x||^2
    mean_sq = 2.0 ** 2 + 2.0 ** 2  # ||E x||^2, E x = (2, 2)
    assert explained_variance(x, x_hat) == pytest.approx(1 - err / (second - mean_sq))
    # the legacy ratio per token: ||x_i - x_bar||^2 = 1 + 0, 1 + 4, 0 + 4
    assert legacy_explained_variance(x, x_hat) == pytest.approx(np.mean([1 - 1 / 1, 1 - 1 / 5, 1 - 0 / 4]))


def test_the_corrected_and_legacy_explained_variance_differ_where_tokens_sit_near_the_mean():
    """Far from the origin, with a tenth of the tokens close to the mean: the same error is a small share of the
    total variance, but a huge share of those tokens' own distance to the mean, which the per-token ratio
    averages; and the uncentred ratio would call even the mean alone a near-perfect reconstruction."""
    rng = np.random.default_rng(0)
    centre = np.full(16, 10.0)
    spread = rng.normal(size=(1000, 16))
    spread[:100] *= 0.01  # near the mean
    x = centre + spread
    x_hat = x + 0.1 * rng.normal(size=x.shape)
    corrected, legacy = explained_variance(x, x_hat), legacy_explained_variance(x, x_hat)
    total = ((x - x.mean(0)) ** 2).sum(1).mean()
    assert corrected == pytest.approx(1 - ((x - x_hat) ** 2).sum(1).mean() / total)
    assert corrected > 0.98 and legacy < 0.1  # the near-mean tokens drag the per-token mean far down
    only_mean = np.broadcast_to(x.mean(0), x.shape)
    assert explained_variance(x, only_mean) == pytest.approx(0, abs=1e-9)
    assert 1 - ((x - only_mean) ** 2).sum(1).mean() / (x ** 2).sum(1).mean() > 0.9  # the uncentred one


def test_the_per_sentence_sums_give_the_direct_formulas_and_intervals_hold_them():
    d, m, k = 16, 32, 2
    X, _ = planted(600, d, m, k, offset=3.0)
    trained = train_sae(X, SaeShape("topk", d, m, k), TrainSettings(steps=100, batch=128, lr=3e-3))
    unit_of = np.repeat(np.arange(30), 20)
    est = estimates(held_out_sums(trained.sae, X, unit_of, 30), resamples=200, seed=0)
    with torch.no_grad():
        x_hat, z = trained.sae(torch.from_numpy(X))
    x_hat, z = x_hat.numpy().astype(np.float64), z.numpy()
    x = X.astype(np.float64)
    direct = {"explained_variance": explained_variance(x, x_hat),
              "explained_variance_legacy": legacy_explained_variance(x, x_hat),
              "mse": ((x - x_hat) ** 2).mean(), "l0": (z > 0).sum(1).mean(),
              "cosine": np.mean((x * x_hat).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(x_hat, axis=1)),
              "l2_ratio": np.mean(np.linalg.norm(x_hat, axis=1) / np.linalg.norm(x, axis=1)),
              "shrinkage": (x_hat ** 2).sum() / (x * x_hat).sum(),
              "dead": float(((z > 0).sum(0) == 0).sum()), "dense": float(((z > 0).mean(0) > 0.1).sum())}
    for name, value in direct.items():
        assert est[name].value == pytest.approx(value, rel=1e-6, abs=1e-9), name
    for name in ("explained_variance", "mse", "cosine", "shrinkage"):
        ci, value = est[name].ci, est[name].value
        assert ci is not None and value is not None, name
        lo, hi = ci
        assert lo <= value <= hi and lo < hi, name


# ----------------------------------------------------------------------------- training and the scale


def test_the_learning_rate_warms_up_holds_and_decays_to_zero():
    f = [lr_factor(s, 100, 0.05, 0.2) for s in range(100)]
    assert f[0] == pytest.approx(0.2) and f[4] == 1 and f[50] == 1 and f[99] == pytest.approx(0.05)
    assert all(a >= b for a, b in zip(f[80:], f[81:]))


@pytest.mark.parametrize("kind", ["topk", "relu"])
def test_folding_the_scale_reads_raw_states_as_the_scaled_sae_read_scaled_ones(kind):
    shape = SaeShape(kind, 8, 16, 3 if kind == "topk" else None)
    sae = SAE(shape, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        sae.b_dec.normal_()
        sae.b_enc.normal_(std=0.1)
    x = torch.randn(50, 8, generator=torch.Generator().manual_seed(2)) * 40
    c = 0.07
    with torch.no_grad():
        scaled_hat, scaled_z = sae(c * x)
        sae.fold_scale(c)
        raw_hat, raw_z = sae(x)
    assert torch.equal(raw_z > 0, scaled_z > 0)
    assert torch.allclose(raw_z, scaled_z / c, rtol=1e-4, atol=1e-3)
    assert torch.allclose(raw_hat, scaled_hat / c, rtol=1e-4, atol=1e-3)


def test_the_b_dec_starts_at_the_mean_and_the_input_scale_sets_the_mean_norm_to_sqrt_d():
    X, _ = planted(500, 16, 32, 2, offset=5.0)
    trained = train_sae(X, SaeShape("topk", 16, 32, 2), TrainSettings(steps=1, lr=1e-12))
    assert np.mean(np.linalg.norm(X * trained.scale, axis=1)) == pytest.approx(4.0, rel=1e-5)
    assert np.allclose(trained.sae.b_dec.detach().numpy(), X.mean(0), atol=1e-4)  # folded back to raw units


# ----------------------------------------------------------------------------- saved SAEs


RECORD = SaeRecord(model="m", fingerprint={"sha256": "abc"}, layer=2, seed=0, scale=0.5, steps=10,
                   special_tokens="excluded")


@pytest.fixture
def saved(tmp_path):
    sae = SAE(SaeShape("topk", 8, 16, 3), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        sae.b_dec.normal_()
    sha = save_sae(sae, tmp_path / "sae", RECORD)
    return sae, tmp_path / "sae", sha


def test_a_saved_sae_loads_back_as_it_was_in_the_sae_lens_layout(saved):
    import hashlib
    import json

    sae, folder, sha = saved
    back, record = load_sae(folder, fingerprint={"sha256": "abc"}, layer=2)
    assert record == RECORD and back.shape == sae.shape
    for name, value in sae.tensors().items():
        assert torch.equal(back.tensors()[name], value)
    cfg = json.loads((folder / "cfg.json").read_text())
    assert {cfg[k] for k in ("architecture", "activation_fn_str")} == {"topk"} and cfg["k"] == 3
    assert (cfg["d_in"], cfg["d_sae"], cfg["hook_layer"], cfg["normalize_activations"]) == (8, 16, 2, "none")
    assert hashlib.sha256((folder / WEIGHTS).read_bytes()).hexdigest() == sha == sae_analysis.weights_sha256(sae)
    assert (folder / "checksums.sha256").read_text().split("\n")[0] == f"{sha}  {WEIGHTS}"


def test_a_saved_sae_refuses_another_model_or_layer(saved):
    _, folder, _ = saved
    with pytest.raises(ProbeError, match="another fingerprint"):
        load_sae(folder, fingerprint={"sha256": "other"}, layer=2)
    with pytest.raises(ProbeError, match="reads layer 2, not layer 3"):
        load_sae(folder, fingerprint={"sha256": "abc"}, layer=3)


@pytest.mark.parametrize("damage", ["edit weights", "truncate weights", "edit cfg", "remove checksums"])
def test_an_edited_or_truncated_sae_file_is_one_error(saved, damage):
    _, folder, _ = saved
    data = (folder / WEIGHTS).read_bytes()
    if damage == "edit weights":
        (folder / WEIGHTS).write_bytes(data[:-5] + bytes([data[-5] ^ 1]) + data[-4:])
    elif damage == "truncate weights":
        (folder / WEIGHTS).write_bytes(data[: len(data) // 2])
    elif damage == "edit cfg":
        cfg = folder / "cfg.json"
        cfg.write_text(cfg.read_text().replace('"hook_layer": 2', '"hook_layer": 3'))
    else:
        (folder / "checksums.sha256").unlink()
    with pytest.raises(ProbeError) as e:
        load_sae(folder)
    assert "\n" not in str(e.value)
    shutil.rmtree(folder)


# ----------------------------------------------------------------------------- bad input and compute


def synthetic_acts(hidden: np.ndarray, n_texts: int) -> Activations:
    """Activations of (L+1, N, d) states split evenly into ``n_texts`` texts, no special tokens."""
    L1, N, d = hidden.shape
    offsets = np.linspace(0, N, n_texts + 1).astype(np.int64)
    return Activations(meta={"model": {"name": "synthetic", "fingerprint": {}}},
                       texts=[f"t{i}" for i in range(n_texts)],
                       tokens=[["x"] * int(n) for n in np.diff(offsets)], offsets=offsets,
                       token_ids=np.zeros(N, np.int64), special=np.zeros(N, bool), hidden=hidden.astype(np.float32),
                       sentence=np.zeros((L1, n_texts, d), np.float32))


def test_nan_states_a_missing_layer_and_k_above_width_are_refused(tmp_path):
    hidden = np.random.default_rng(0).normal(size=(3, 200, 8))
    cfg = sae_analysis.Config(layers=[1], steps=2, width=16, k=4, out=str(tmp_path), save=False, resamples=10)
    bad = hidden.copy()
    bad[1, 7, 3] = np.nan
    with pytest.raises(ProbeError, match="layer 1: 1 of .* NaN"):
        sae_analysis.compute(cfg, acts=synthetic_acts(bad, 10))
    with pytest.raises(ProbeError, match="--layers 5 is out of range"):
        sae_analysis.compute(sae_analysis.Config(layers=[5], save=False), acts=synthetic_acts(hidden, 10))
    with pytest.raises(ProbeError, match="--k 20 is more than --width 16"):
        sae_analysis.compute(sae_analysis.Config(layers=[1], k=20, width=16), acts=synthetic_acts(hidden, 10))
    with pytest.raises(ProbeError, match="--k 80 is more than the SAE's 64 latents"):  # width 0: 8 x d = 64
        sae_analysis.compute(sae_analysis.Config(layers=[1], k=80, save=False), acts=synthetic_acts(hidden, 10))


@pytest.mark.parametrize("argv", [["--layers", "9"], ["--k", "8", "--width", "4"]])
def test_bad_input_on_the_command_line_is_one_error_line(tmp_path, capsys, argv):
    with pytest.raises(SystemExit) as e:
        run_main(sae_analysis.main, ["--model", "tiny-bert", "--n-sentences", "10", "--steps", "2", *argv,
                                     "--out", str(tmp_path)])
    err = capsys.readouterr().err
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip()]  # (progress bars aside)
    assert e.value.code == 2 and lines[-1].startswith("error: ") and err.count("error") == 1, err


def test_compute_saves_every_sae_where_its_row_says_and_it_loads_for_its_own_model_and_layer(tmp_path):
    import hashlib

    hidden = np.random.default_rng(0).normal(size=(3, 400, 8)) + 2.0
    acts = synthetic_acts(hidden, 40)
    acts.meta["model"]["fingerprint"] = {"sha256": "abc", "files": ("a", "b")}  # a tuple reads back as a list
    cfg = sae_analysis.Config(layers=[2, 1], steps=20, width=16, k=2, seeds=2, out=str(tmp_path), resamples=20)
    with pytest.warns(UserWarning, match="held-out sentences"):  # 8 held-out sentences: fewer than 20
        result = sae_analysis.compute(cfg, acts=acts)
    assert [(r.layer, r.seed) for r in result.saes] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert [a.layer for a in result.agreement] == [1, 2]
    assert all(a.mcc is not None and 0 < a.mcc <= 1 for a in result.agreement)
    for row in result.saes:
        folder = tmp_path / "sae" / "synthetic" / f"layer{row.layer}-seed{row.seed}"
        assert hashlib.sha256((folder / WEIGHTS).read_bytes()).hexdigest() == row.weights_sha256
        back, record = load_sae(folder, fingerprint=acts.meta["model"]["fingerprint"], layer=row.layer)
        assert record.seed == row.seed and back.shape == SaeShape("topk", 8, 16, 2)
        assert row.l0 is not None and row.l0 <= 2 and row.n_held_out_tokens == 80
