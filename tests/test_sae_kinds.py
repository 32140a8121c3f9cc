"""The BatchTopK and JumpReLU SAEs and training streamed through a shuffling buffer (analyses.sae): BatchTopK
recovers a planted dictionary and its saved JumpReLU threshold keeps the training L0 at inference; JumpReLU
trains down from its initial loss with an L0 set by its coefficient; every kind saves and loads back as it was;
the shuffling buffer gives every token once a pass, shuffled, never holding more than its size whatever the
number of tokens; the analysis trains from the stream."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from test_sae import planted, synthetic_acts

from analyses import sae as sae_analysis
from analyses.sae.io import SaeRecord, load_sae, save_sae
from analyses.sae.metrics import mcc
from analyses.sae.model import KINDS, SAE, SaeShape
from analyses.sae.stream import ShuffleBuffer, TokenSource
from analyses.sae.train import TrainSettings, train_sae, train_sae_streamed
from probes.errors import ProbeError


def l0(sae: SAE, X: np.ndarray) -> float:
    with torch.no_grad():
        return float((sae.encode(torch.from_numpy(X)) > 0).sum(1).float().mean())


@pytest.mark.slow
def test_batchtopk_recovers_a_planted_dictionary_and_its_threshold_keeps_the_training_l0():
    d, m, k = 32, 64, 3
    data, D = planted(18000, d, m, k)
    X, X_test = data[:16000], data[16000:]
    trained = train_sae(X, SaeShape("batchtopk", d, m, k),
                        TrainSettings(steps=2500, batch=256, lr=3e-3, dead_window=2000))
    assert mcc(trained.sae.W_dec.detach().numpy(), D) > 0.9
    theta = trained.sae.tensors()["threshold"]
    assert torch.all(theta == theta[0]) and theta[0] > 0  # one running threshold, folded to raw units
    # at inference, token by token, the JumpReLU at the running threshold fires k latents per token on average
    assert l0(trained.sae, X) == pytest.approx(k, rel=0.1)
    assert l0(trained.sae, X_test) == pytest.approx(k, rel=0.1)


def test_batchtopk_keeps_k_times_the_batch_over_the_batch_not_per_token():
    sae = SAE(SaeShape("batchtopk", 4, 8, 2))
    pre = torch.zeros(3, 8)
    pre[0, :5] = torch.arange(1.0, 6.0)  # token 0 has the 5 largest, token 1 one, token 2 none
    pre[1, 0] = 0.5
    z = sae.batch_topk(pre)
    assert (z > 0).sum().item() == 6 and (z[0] > 0).sum().item() == 5 and (z[2] > 0).sum().item() == 0


def test_jumprelu_trains_down_from_its_initial_loss_and_its_coefficient_sets_the_l0():
    d, m, k = 32, 64, 3
    X, _ = planted(6000, d, m, k)
    l0s = []
    for coef in (0.03, 1.0):
        trained = train_sae(X, SaeShape("jumprelu", d, m), TrainSettings(steps=600, batch=256, lr=3e-2, l0=coef,
                                                                          dead_window=2000))
        assert trained.final_loss < 0.5 * trained.first_loss
        l0s.append(l0(trained.sae, X))
    assert l0s[1] < l0s[0] / 3  # a 30 x larger coefficient: far fewer latents fire
    assert l0s[1] < 6  # near the planted 3


RECORD = SaeRecord(model="m", fingerprint={"sha256": "abc"}, layer=1, seed=0, scale=0.5, steps=10,
                   special_tokens="excluded")


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_saves_and_loads_back_as_it_was(tmp_path, kind):
    shape = SaeShape(kind, 8, 16, 3 if kind in ("topk", "batchtopk") else None)
    sae = SAE(shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        sae.b_enc.normal_(std=0.5)
        if kind == "batchtopk":
            sae.running_threshold.fill_(0.3)
        if kind == "jumprelu":
            sae.log_threshold.normal_(std=0.5)
    save_sae(sae, tmp_path, RECORD)
    back, record = load_sae(tmp_path, layer=1)
    assert record == RECORD and back.shape == shape
    a, b = sae.tensors(), back.tensors()
    assert a.keys() == b.keys() == sae.tensor_shapes().keys()
    for name in a:
        assert torch.allclose(a[name], b[name], rtol=1e-6, atol=0), name
    cfg = json.loads((tmp_path / "cfg.json").read_text())
    assert cfg["architecture"] == {"topk": "topk", "relu": "standard", "batchtopk": "jumprelu",
                                   "jumprelu": "jumprelu"}[kind]
    x = torch.randn(40, 8, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(sae(x)[0], back(x)[0], atol=1e-5)


@pytest.mark.parametrize("kind", ["batchtopk", "jumprelu"])
def test_folding_the_scale_moves_the_threshold_with_the_pre_activations(kind):
    sae = SAE(SaeShape(kind, 8, 16, 3), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        sae.b_dec.normal_()
        sae.b_enc.normal_(std=0.3)
        if kind == "batchtopk":
            sae.running_threshold.fill_(0.4)
        else:
            sae.log_threshold.fill_(np.log(0.4))
    x = torch.randn(200, 8, generator=torch.Generator().manual_seed(2)) * 40
    c = 0.05
    with torch.no_grad():
        scaled_hat, scaled_z = sae(c * x)
        sae.fold_scale(c)
        raw_hat, raw_z = sae(x)
    assert 0 < (scaled_z > 0).float().mean() < 1
    assert torch.equal(raw_z > 0, scaled_z > 0)
    assert torch.allclose(raw_hat, scaled_hat / c, rtol=1e-4, atol=1e-3)


# ----------------------------------------------------------------------------- streaming


def counting_source(n: int) -> tuple[TokenSource, list[int]]:
    """Token i's state is (i,); ``reads`` records each read's size."""
    reads: list[int] = []

    def read(start: int, stop: int) -> np.ndarray:
        reads.append(stop - start)
        return np.arange(start, stop, dtype=np.float32)[:, None]

    return TokenSource(n=n, d=1, read=read), reads


def test_the_buffer_gives_every_token_once_a_pass_shuffled():
    source, _ = counting_source(10_000)
    buffer = ShuffleBuffer(source, batch=64, buffer_tokens=1000, generator=torch.Generator().manual_seed(0))
    passes = [np.concatenate(list(buffer.one_pass()))[:, 0] for _ in range(2)]
    for order in passes:
        assert np.array_equal(np.sort(order), np.arange(10_000))
        assert np.mean(np.abs(np.diff(order)) == 1) < 0.05  # not read out in order
        assert abs(np.corrcoef(order, np.arange(10_000))[0, 1]) < 0.5
    assert not np.array_equal(passes[0], passes[1])  # a new order each pass
    sizes = [len(b) for b in ShuffleBuffer(source, 64, 1000, torch.Generator()).one_pass()]
    assert all(s == 64 for s in sizes[:-1]) and 0 < sizes[-1] <= 64


def test_the_buffer_holds_the_same_at_most_buffer_tokens_for_1m_and_4m_tokens():
    peaks = []
    for n in (1_000_000, 4_000_000):
        source, reads = counting_source(n)
        buffer = ShuffleBuffer(source, batch=4096, buffer_tokens=16384, generator=torch.Generator().manual_seed(0))
        seen = sum(len(b) for b in buffer.one_pass())
        assert seen == n and max(reads) <= 8192
        peaks.append(buffer.peak)
    assert peaks[0] == peaks[1] <= 16384


def test_a_buffer_smaller_than_two_minibatches_is_refused():
    source, _ = counting_source(100)
    with pytest.raises(ProbeError, match="--buffer-tokens 100 holds fewer than two minibatches"):
        ShuffleBuffer(source, batch=64, buffer_tokens=100, generator=torch.Generator())
    with pytest.raises(ProbeError, match="--buffer-tokens 100 holds fewer"):
        sae_analysis.check_config(sae_analysis.Config(buffer_tokens=100, tokens_per_step=64))


def test_streamed_training_learns_the_planted_dictionary_too():
    d, m, k = 16, 32, 2
    X, D = planted(8000, d, m, k)
    source = TokenSource(n=len(X), d=d, read=lambda a, b: X[a:b])
    trained = train_sae_streamed(source, SaeShape("topk", d, m, k),
                                 TrainSettings(steps=1500, batch=128, lr=3e-3, dead_window=2000), buffer_tokens=1024)
    assert trained.scale == pytest.approx(np.sqrt(d) / np.linalg.norm(X, axis=1).mean(), rel=1e-5)
    assert mcc(trained.sae.W_dec.detach().numpy(), D) > 0.85


def test_compute_streams_when_the_buffer_is_smaller_than_the_training_tokens(tmp_path):
    hidden = np.random.default_rng(0).normal(size=(2, 400, 8)) + 2.0
    acts = synthetic_acts(hidden, 40)
    base = sae_analysis.Config(layers=[1], steps=20, width=16, k=2, out=str(tmp_path), resamples=20, save=False,
                               kind="batchtopk", tokens_per_step=32)
    with pytest.warns(UserWarning, match="held-out sentences"):
        in_memory = sae_analysis.compute(base, acts=acts)
        big_buffer = sae_analysis.compute(dataclasses.replace(base, buffer_tokens=10_000), acts=acts)
        streamed = sae_analysis.compute(dataclasses.replace(base, buffer_tokens=64), acts=acts)
    assert big_buffer.saes[0].weights_sha256 == in_memory.saes[0].weights_sha256  # all fit: the in-memory path
    row = streamed.saes[0]
    assert row.weights_sha256 != in_memory.saes[0].weights_sha256
    assert row.kind == "batchtopk" and row.n_train_tokens == 320 and row.explained_variance is not None
    assert "shuffling buffer of 64" in streamed.definitions["training"]


@pytest.mark.parametrize("kind", ["batchtopk", "jumprelu"])
def test_the_spliced_edit_applies_the_threshold_and_is_told_apart_by_it(kind):
    from analyses.sae.splice import Reconstruct

    sae = SAE(SaeShape(kind, 8, 16, 3), generator=torch.Generator().manual_seed(0))

    def with_threshold(theta: float) -> SAE:
        with torch.no_grad():
            if kind == "batchtopk":
                sae.running_threshold.fill_(theta)
            else:
                sae.log_threshold.fill_(np.log(theta))
        return sae

    x = torch.randn(30, 8, generator=torch.Generator().manual_seed(1))
    low = Reconstruct(with_threshold(0.1))
    high = Reconstruct(with_threshold(0.5))
    with torch.no_grad():
        assert torch.allclose(high.reconstructor("cpu")(x)[0], sae(x)[0], atol=1e-6)
        assert not torch.allclose(low.reconstructor("cpu")(x)[0], sae(x)[0], atol=1e-6)
    assert low.identity() != high.identity()
