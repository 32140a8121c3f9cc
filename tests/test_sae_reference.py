"""The suite's SAEs against sae-lens 6.54 (the optional extra ``sae-reference``; skipped where sae_lens is missing).

* a suite SAE saved by :func:`analyses.sae.io.save_sae` and loaded by ``sae_lens.SAE.load_from_disk`` encodes and
  decodes as the suite's does (topk, relu, jumprelu, and batchtopk saved as the JumpReLU it is at inference);
* explained variance equals ``sae_lens.evals.ExplainedVarianceCalculator`` to 1e-9 on the same arrays (states
  far from the origin: the difference of two large numbers), and on a planted case the legacy per-token ratio
  (sae-lens's ``explained_variance_legacy``) differs from it by the Jensen gap computed by hand;
* the BatchTopK activation, its running-threshold update and the JumpReLU straight-through gradients equal
  sae-lens's on fixed tensors, and AuxK's dead-latent reconstruction equals sae-lens's; the losses differ by
  construction, and the test pins the exact factor (the suite follows Gao et al. 2024 and sparsify: the squared
  error over the residual's variance, ReLU before the dead latents' top-k; sae-lens drops the variance, scales by
  min(#dead / (d / 2), 1) and keeps the top-k of the raw pre-activations);
* trained for 100 steps from the same initial weights on the same batch sequence, the suite's loop and sae-lens's
  ``SAETrainer.fit`` (TopK, constant learning rate, no dead latents) end at the same weights to float32 round-off
  (bitwise here) once sae-lens's two differences are taken out: it clips the gradient norm at 1 (hard-coded in
  ``SAETrainer._train_step``) and leaves the decoder rows free (the suite puts them back to unit norm after every
  step); as shipped, the runs part (a test checks that too).

    $ pytest tests/test_sae_reference.py        # with sae-lens: pip install -e '.[sae-reference]'
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

sae_lens = pytest.importorskip("sae_lens", reason="sae-lens is not installed (make test-sae-reference runs these "
                                                  "in an environment of their own)")

from analyses.sae.io import SaeRecord, save_sae  # noqa: E402
from analyses.sae.metrics import (  # noqa: E402
    estimates,
    explained_variance,
    held_out_sums,
    legacy_explained_variance,
)
from analyses.sae.model import SAE, SaeShape  # noqa: E402
from analyses.sae.ste import jumprelu, step  # noqa: E402
from analyses.sae.train import aux_loss, aux_reconstruction, update_threshold  # noqa: E402

RECORD = SaeRecord(model="m", fingerprint={"sha256": "abc"}, layer=1, seed=0, scale=1.0, steps=1,
                   special_tokens="excluded")


def random_sae(kind: str, d: int = 12, m: int = 40, k: int | None = 4, seed: int = 0) -> SAE:
    """An SAE with random weights, b_enc, b_dec and (thresholded kinds) thresholds that some latents cross."""
    g = torch.Generator().manual_seed(seed)
    sae = SAE(SaeShape(kind, d, m, k if kind in ("topk", "batchtopk") else None), generator=g)
    with torch.no_grad():
        sae.b_dec.copy_(torch.randn(d, generator=g))
        sae.b_enc.copy_(0.3 * torch.randn(m, generator=g))
        if kind == "jumprelu":
            sae.log_threshold.copy_(torch.log(0.2 + torch.rand(m, generator=g)))
        elif kind == "batchtopk":
            sae.running_threshold.fill_(0.7)
    return sae


@pytest.mark.parametrize("kind", ["topk", "relu", "jumprelu", "batchtopk"])
def test_sae_lens_loads_the_saved_sae_and_encodes_and_decodes_as_the_suite(tmp_path, kind):
    sae = random_sae(kind)
    save_sae(sae, tmp_path, RECORD)
    lens = sae_lens.SAE.load_from_disk(str(tmp_path), device="cpu")
    want = {"topk": "TopKSAE", "relu": "StandardSAE", "jumprelu": "JumpReLUSAE", "batchtopk": "JumpReLUSAE"}[kind]
    assert type(lens).__name__ == want
    x = 3 * torch.randn(300, 12, generator=torch.Generator().manual_seed(1)) + 1
    with torch.no_grad():
        z, z_lens = sae.encode(x), lens.encode(x)
        fired = (z > 0).float().mean()
        assert 0.02 < fired < 0.9  # a test that can fail: some latents fire, not all
        assert torch.allclose(z_lens, z, atol=1e-6, rtol=0)
        assert torch.allclose(lens.decode(z), sae.decode(z), atol=1e-6, rtol=0)
        assert torch.allclose(lens(x), sae(x)[0], atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------- explained variance


def test_explained_variance_equals_sae_lens_calculator_on_states_far_from_the_origin():
    from sae_lens.evals import ExplainedVarianceCalculator

    rng = np.random.default_rng(0)
    x = (rng.normal(size=(2000, 16)) * rng.uniform(0.5, 2, 16) + 40.0).astype(np.float32)  # mean far from 0
    x_hat = (x + rng.normal(scale=0.6, size=x.shape)).astype(np.float32)
    calc = ExplainedVarianceCalculator()
    for s in range(0, len(x), 300):  # batches of unequal size: the last has 200
        calc.add_batch(sae_output=torch.from_numpy(x_hat[s:s + 300]).double(),
                       hidden_acts=torch.from_numpy(x[s:s + 300]).double())
    ours = explained_variance(x, x_hat)
    assert 0.5 < ours < 0.99
    assert ours == pytest.approx(calc.compute(), abs=1e-9)
    uncentred = 1 - ((x - x_hat.astype(np.float64)) ** 2).sum(1).mean() / (x.astype(np.float64) ** 2).sum(1).mean()
    assert uncentred - ours > 0.05  # the variance about zero would credit the mean


def test_the_evaluated_sae_explained_variance_equals_sae_lens_calculator():
    from sae_lens.evals import ExplainedVarianceCalculator

    sae = random_sae("topk", k=6)
    g = torch.Generator().manual_seed(3)
    X = (torch.randn(900, 12, generator=g) * 2 + sae.b_dec.detach()).numpy()
    unit_of = np.repeat(np.arange(90), 10)
    point = estimates(held_out_sums(sae, X, unit_of, 90), resamples=20, seed=0)["explained_variance"].value
    with torch.no_grad():
        x_hat = sae(torch.from_numpy(X))[0]
    calc = ExplainedVarianceCalculator()
    calc.add_batch(sae_output=x_hat.double(), hidden_acts=torch.from_numpy(X).double())
    assert point == pytest.approx(calc.compute(), abs=1e-9)


def test_the_legacy_ratio_differs_from_explained_variance_by_the_jensen_gap():
    """Planted: tokens x_bar +- sqrt(a) e1 (half) and x_bar +- sqrt(b) e2 (half), each reconstructed with an
    error sqrt(E) e3. Explained variance 1 - E / ((a + b) / 2); the per-token ratio 1 - E (1/a + 1/b) / 2."""
    a, b, E, n = 1.0, 9.0, 0.5, 400
    d = 5
    x_bar = np.array([3.0, -2.0, 7.0, 1.0, 4.0])
    dev = np.zeros((n, d))
    q = n // 4
    dev[:q, 0], dev[q:2 * q, 0] = np.sqrt(a), -np.sqrt(a)
    dev[2 * q:3 * q, 1], dev[3 * q:, 1] = np.sqrt(b), -np.sqrt(b)
    x = x_bar + dev
    x_hat = x.copy()
    x_hat[:, 2] += np.sqrt(E)
    corrected, legacy = 1 - E / ((a + b) / 2), 1 - E * (1 / a + 1 / b) / 2
    assert explained_variance(x, x_hat) == pytest.approx(corrected, abs=1e-12)
    assert legacy_explained_variance(x, x_hat) == pytest.approx(legacy, abs=1e-12)
    gap = E * ((1 / a + 1 / b) / 2 - 2 / (a + b))
    assert explained_variance(x, x_hat) - legacy_explained_variance(x, x_hat) == pytest.approx(gap, abs=1e-12)
    assert gap > 0.17
    # sae-lens's own legacy formula (sae_lens/evals.py, get_sparsity_and_variance_metrics), on one batch
    xt, ht = torch.from_numpy(x), torch.from_numpy(x_hat)
    lens_legacy = (1 - (xt - ht).pow(2).sum(-1) / (xt - xt.mean(0)).pow(2).sum(-1)).mean().item()
    assert legacy_explained_variance(x, x_hat) == pytest.approx(lens_legacy, abs=1e-12)


# ----------------------------------------------------------------------------- training pieces


def lens_topk_trainer(sae: SAE, coefficient: float = 1.0):
    from sae_lens.saes.topk_sae import TopKTrainingSAE, TopKTrainingSAEConfig

    cfg = TopKTrainingSAEConfig(d_in=sae.shape.d_in, d_sae=sae.shape.width, k=int(sae.shape.k or 1),
                                aux_loss_coefficient=coefficient, rescale_acts_by_decoder_norm=False)
    lens = TopKTrainingSAE(cfg)
    with torch.no_grad():
        for name, value in sae.tensors().items():
            getattr(lens, name).copy_(value)
    return lens


@pytest.mark.parametrize("n_dead", [3, 30])
def test_auxk_reconstruction_equals_sae_lens_and_the_losses_differ_by_the_stated_factor(n_dead):
    sae = random_sae("topk", d=12, m=40, k=4)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(64, 12, generator=g) + sae.b_dec.detach()
    dead = torch.zeros(40, dtype=torch.bool)
    dead[torch.randperm(40, generator=g)[:n_dead]] = True
    with torch.no_grad():
        pre = sae.pre_acts(x)
        pre[:, dead] = pre[:, dead].abs() + 0.01  # positive: where the two definitions pick the same latents
        x_hat = sae.decode(sae.activate(pre))
    coefficient = 0.25
    lens = lens_topk_trainer(sae, coefficient)
    residual = (x - x_hat).detach()
    lens_loss = lens.calculate_topk_aux_loss(sae_in=x, sae_out=x_hat, hidden_pre=pre, dead_neuron_mask=dead)
    e_hat = aux_reconstruction(sae, pre, dead)
    assert torch.allclose(lens_loss, coefficient * min(n_dead / 6, 1.0) * (residual - e_hat).pow(2).sum(-1).mean(),
                          rtol=1e-6)
    var = (residual - residual.mean(0)).pow(2).sum(-1).mean()
    ours = aux_loss(sae, pre, residual, dead)
    assert torch.allclose(ours * var * coefficient * min(n_dead / 6, 1.0), lens_loss, rtol=1e-5)
    assert not torch.allclose(ours, lens_loss, rtol=1e-2)  # the stated difference is there


def test_batchtopk_activation_and_threshold_update_equal_sae_lens():
    from sae_lens.saes.batchtopk_sae import BatchTopK, BatchTopKTrainingSAE, BatchTopKTrainingSAEConfig

    sae = random_sae("batchtopk", d=12, m=40, k=4)
    cfg = BatchTopKTrainingSAEConfig(d_in=12, d_sae=40, k=4, topk_threshold_lr=0.05)
    lens = BatchTopKTrainingSAE(cfg)
    g = torch.Generator().manual_seed(7)
    theta = torch.zeros(40)
    started = False
    for i in range(30):
        pre = sae.pre_acts(torch.randn(32, 12, generator=g) * 2)
        z = sae.batch_topk(pre)
        assert torch.equal(z, BatchTopK(4)(pre))
        assert int((z > 0).sum()) == 4 * 32
        started = update_threshold(theta, z, 0.05, started)
        if i == 0:  # the suite starts at the first batch's cut-off, sae-lens at 0: start sae-lens there too
            lens.topk_threshold.fill_(float(theta[0]))
        else:
            lens.update_topk_threshold(z)
        assert float(theta[0]) == pytest.approx(float(lens.topk_threshold), rel=1e-6)
        assert bool((theta == theta[0]).all())
    assert 0.1 < float(theta[0]) < 10


def test_a_batch_where_nothing_fires_leaves_the_threshold_as_sae_lens_does():
    from sae_lens.saes.batchtopk_sae import BatchTopKTrainingSAE, BatchTopKTrainingSAEConfig

    lens = BatchTopKTrainingSAE(BatchTopKTrainingSAEConfig(d_in=4, d_sae=6, k=2, topk_threshold_lr=0.1))
    lens.topk_threshold.fill_(0.5)
    theta = torch.full((6,), 0.5)
    assert update_threshold(theta, torch.zeros(3, 6), 0.1, True)
    lens.update_topk_threshold(torch.zeros(3, 6))
    assert float(theta[0]) == float(lens.topk_threshold) == 0.5


@pytest.mark.parametrize("fn", ["jumprelu", "step"])
def test_the_jumprelu_straight_through_gradients_equal_sae_lens(fn):
    from sae_lens.saes.jumprelu_sae import JumpReLU, Step

    g = torch.Generator().manual_seed(9)
    pre0 = torch.randn(50, 20, generator=g)
    theta0 = 0.3 + 0.2 * torch.rand(20, generator=g)
    upstream = torch.randn(50, 20, generator=g)
    grads = []
    for impl in ("ours", "lens"):
        pre, theta = pre0.clone().requires_grad_(True), theta0.clone().requires_grad_(True)
        if impl == "ours":
            out = (jumprelu if fn == "jumprelu" else step)(pre, theta, 0.1)
        else:
            out = (JumpReLU if fn == "jumprelu" else Step).apply(pre, theta, 0.1, False)
        (out * upstream).sum().backward()
        grads.append((out.detach(), pre.grad, theta.grad))
    (o1, gp1, gt1), (o2, gp2, gt2) = grads
    assert torch.equal(o1, o2)
    assert gt1 is not None and gt2 is not None
    assert torch.allclose(gt1, gt2, atol=1e-6) and float(gt1.abs().sum()) > 0
    if fn == "jumprelu":
        assert gp1 is not None and gp2 is not None and torch.equal(gp1, gp2)
    else:
        assert gp1 is None and gp2 is None


# ----------------------------------------------------------------------------- training, end to end


def run_both(monkeypatch, as_shipped: bool, steps: int = 100, batch: int = 64):
    """The suite's training loop (analyses.sae.train.train_loop, scale 1) and sae-lens's SAETrainer.fit, TopK, from the
    same initial weights on the same batch sequence, constant learning rate, no dead latents (AuxK 0 in both).
    Unless ``as_shipped``, sae-lens's two differences are removed: its gradient-norm clipping at 1 (hard-coded in
    SAETrainer._train_step) and the suite's unit-norm decoder rows after every step (sae-lens keeps the rows free).
    (suite SAE, sae-lens SAE)."""
    from sae_lens.config import LoggingConfig, SAETrainerConfig
    from sae_lens.training.sae_trainer import SAETrainer

    from analyses.sae.train import TrainSettings, train_loop

    d, m, k, seed = 12, 48, 4, 3
    g = torch.Generator().manual_seed(11)
    D = torch.randn(m, d, generator=g)
    batches = [(torch.rand(batch, m, generator=g) < 0.08).float() @ D + 1.0 for _ in range(steps)]
    mean = torch.cat(batches).mean(0)
    shape = SaeShape("topk", d, m, k)
    start = SAE(shape, generator=torch.Generator().manual_seed(seed))  # what train_loop draws first from its seed
    with torch.no_grad():
        start.b_dec.copy_(mean)
    lens = lens_topk_trainer(start)
    settings = TrainSettings(steps=steps, batch=batch, lr=1e-3, warmup=0.0, decay=0.0, dead_window=10**9, seed=seed)
    ours = train_loop(lambda gen: iter(batches), 1.0, mean, shape, settings, "suite", "cpu").sae

    if not as_shipped:
        monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda params, max_norm: torch.zeros(()))
    trainer = SAETrainer(SAETrainerConfig(total_training_samples=steps * batch, train_batch_size_samples=batch,
                                          lr=1e-3, lr_end=1e-3, dead_feature_window=10**6,
                                          feature_sampling_window=10**6, logger=LoggingConfig(log_to_wandb=False)),
                         lens, iter(batches))
    if not as_shipped:
        step = trainer.optimizer.step

        def step_then_unit_rows(*args, **kwargs):
            out = step(*args, **kwargs)
            with torch.no_grad():
                lens.W_dec.div_(lens.W_dec.norm(dim=1, keepdim=True).clamp_min(1e-12))
            return out

        trainer.optimizer.step = step_then_unit_rows  # type: ignore[method-assign]
    trainer.fit()
    return ours, lens


def largest_gap(ours: SAE, lens) -> float:
    return max(float((value - getattr(lens, name).detach()).abs().max()) for name, value in ours.tensors().items())


def test_trained_100_steps_from_the_same_start_both_agree_to_round_off_without_clipping(monkeypatch):
    ours, lens = run_both(monkeypatch, as_shipped=False)
    start = SAE(ours.shape, generator=torch.Generator().manual_seed(3)).W_dec.detach()
    moved = float((ours.W_dec.detach() - start).abs().max())
    assert moved > 0.02  # training moved the weights
    assert largest_gap(ours, lens) < 1e-6  # 0.0 here: the same operations in the same order


def test_as_shipped_sae_lens_clips_gradients_and_leaves_decoder_norms_free_so_the_runs_part(monkeypatch):
    ours, lens = run_both(monkeypatch, as_shipped=True)
    assert largest_gap(ours, lens) > 1e-3
    norms = lens.W_dec.detach().norm(dim=1)
    assert float((norms - 1).abs().max()) > 1e-4  # sae-lens's rows drift from unit norm
