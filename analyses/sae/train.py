"""Training one SAE on one layer's token states.

* Inputs are scaled by c = sqrt(d) / E||x|| (the mean norm over the training tokens) and the SAE is trained on
  c x; :meth:`analyses.sae.model.SAE.fold_scale` folds c back once training ends.
* Minibatches of ``batch`` token states, drawn without replacement from a seeded permutation of the training
  tokens (a new permutation every pass), so neighbouring tokens of one sentence rarely share a step
  (:func:`train_sae`, the states in memory); or streamed from a :class:`analyses.sae.stream.TokenSource` through a
  shuffling buffer of ``buffer_tokens`` states (:func:`train_sae_streamed`: memory does not grow with the number of
  training tokens; c and the mean come from one streamed pass first).
* Loss: mean over the batch of ||x - x_hat||^2, plus for ``relu`` l1 * sum_i z_i ||W_dec,i|| (the decoder rows
  are unit-norm, so the plain L1 of z), for ``jumprelu`` l0 * sum_i H(pre_i - theta_i) (the L0, with the
  straight-through gradient of :mod:`analyses.sae.ste`, bandwidth ``bandwidth``), and for ``topk`` and
  ``batchtopk`` the AuxK loss (Gao et al. 2024) of the dead latents:
  the residual e = x - x_hat (no gradient through it) is reconstructed from the k_aux = min(d / 2, #dead) largest
  pre-activations of the dead latents alone, e_hat = W_dec[dead]^T topk(relu(pre[dead])), and
  aux_coef * ||e - e_hat||^2 / ||e - mean e||^2 (batch means) is added; it moves dead latents towards what the
  live ones miss, which revives them. (Gao et al.'s and sparsify's normalised form; sae-lens 6.54 instead adds
  aux_coef min(#dead / (d / 2), 1) ||e - e_hat||^2 with the top-k of the raw pre-activations:
  tests/test_sae_reference.py pins the factor.)
* ``batchtopk`` trains with the batch-wide top k B (:meth:`analyses.sae.model.SAE.batch_topk`); after every step
  its threshold theta <- theta + threshold_rate (a - theta), a the smallest activation kept in that batch (theta
  starts at the first batch's a): the running mean the inference JumpReLU uses.
* A latent is dead when it has not fired on any of the last ``dead_window`` training tokens.
* Adam (betas 0.9, 0.999), the learning rate warmed up linearly over the first ``warmup`` share of the steps,
  constant, then decayed linearly to 0 over the last ``decay`` share (torch.optim.lr_scheduler.LambdaLR).
* After every step the decoder rows go back to unit norm. Gradients are not clipped. (sae-lens's SAETrainer clips
  their norm at 1 and leaves the rows free; with those two taken out it reaches the same weights: the oracle test.)

Everything random comes from one torch Generator seeded with ``seed``: the same inputs and seed give the same
SAE (on one device and thread count).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import torch

from analyses.sae.model import INIT_THRESHOLD, SAE, SaeShape
from analyses.sae.ste import jumprelu, step
from analyses.sae.stream import ShuffleBuffer, TokenSource, moments
from probes.config import tqdm_class


@dataclass(frozen=True)
class TrainSettings:
    """How one SAE is trained (analyses.sae's Config makes it from its flags)."""

    steps: int = 2000
    batch: int = 1024
    lr: float = 1e-3
    l1: float = 1.0  # relu only
    warmup: float = 0.05  # share of the steps
    decay: float = 0.2  # share of the steps
    dead_window: int = 10_000  # tokens without firing: dead
    aux_coef: float = 1 / 32  # topk and batchtopk
    l0: float = 1.0  # jumprelu only: the L0 coefficient
    bandwidth: float = 0.05  # jumprelu only: eps of the straight-through estimator (scaled units)
    init_threshold: float = INIT_THRESHOLD  # jumprelu only: theta at initialisation (scaled units)
    threshold_rate: float = 0.01  # batchtopk only: the running threshold's update rate
    seed: int = 0


@dataclass
class Trained:
    """A trained SAE (already reading raw states), the scale it was trained at, and how training ended."""

    sae: SAE
    scale: float  # c: E||c x|| = sqrt(d) on the training tokens
    dead_at_end: int  # latents that fired on none of the last dead_window training tokens
    final_loss: float  # mean loss over the last 10% of the steps (scaled units)
    first_loss: float = float("nan")  # the loss of the first step, before any update (scaled units)


def lr_factor(step: int, steps: int, warmup: float, decay: float) -> float:
    """The learning rate's multiplier at ``step``: linear warm-up, constant, linear decay to 0."""
    w, d = max(1, round(warmup * steps)), max(1, round(decay * steps))
    if step < w:
        return (step + 1) / w
    return min(1.0, (steps - step) / d)


def aux_reconstruction(sae: SAE, pre: torch.Tensor, dead: torch.Tensor) -> torch.Tensor:
    """(n, d) e_hat = W_dec[dead]^T topk(relu(pre[:, dead])), the k_aux = min(d / 2, #dead) largest ReLU
    pre-activations of the dead latents (``dead`` (m,) bool, at least one True) decoded without b_dec."""
    k_aux = min(max(1, sae.shape.d_in // 2), int(dead.sum()))
    dead_pre = torch.relu(pre[:, dead])
    top = dead_pre.topk(k_aux, dim=-1)
    z = torch.zeros_like(dead_pre).scatter(-1, top.indices, top.values)
    return z @ sae.W_dec[dead]


def aux_loss(sae: SAE, pre: torch.Tensor, residual: torch.Tensor, dead: torch.Tensor) -> torch.Tensor:
    """AuxK: how much of ``residual`` (n, d) the dead latents' top-k_aux activations reconstruct, relative to its
    variance (Gao et al. 2024's normalised MSE); 0 when no latent is dead."""
    if not bool(dead.any()):
        return pre.new_zeros(())
    e_hat = aux_reconstruction(sae, pre, dead)
    var = (residual - residual.mean(0)).pow(2).sum(-1).mean().clamp_min(1e-12)
    return (residual - e_hat).pow(2).sum(-1).mean() / var


@torch.no_grad()
def update_threshold(theta: torch.Tensor, z: torch.Tensor, rate: float, started: bool) -> bool:
    """BatchTopK's running threshold ``theta`` (m,) updated in place from one batch's latents ``z`` (n, m):
    theta <- theta + rate (a - theta), a the smallest positive latent (theta <- a on the first batch, when not
    ``started``); a batch where nothing fires leaves it. Returns whether theta has started."""
    fired = z > 0
    if not bool(fired.any()):
        return started
    smallest = z[fired].min()
    theta.copy_(theta + rate * (smallest - theta) if started else smallest.expand_as(theta))
    return True


def train_sae(X: np.ndarray, shape: SaeShape, settings: TrainSettings, desc: str = "SAE",
              device: str = "cpu") -> Trained:
    """Train an SAE of ``shape`` on the rows of ``X`` (n, d) (finite float32 states, read-only is fine) on the torch
    ``device``; the trained SAE is returned on the CPU. The permutations and initial weights are drawn on the CPU,
    so a device changes only the arithmetic's rounding."""
    data = torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32)).to(device)
    n = len(data)
    scale = math.sqrt(data.shape[1]) / float(data.norm(dim=1).mean().clamp_min(1e-12))
    batch = min(settings.batch, n)

    def batches(gen: torch.Generator) -> Iterable[torch.Tensor]:
        order, pos = torch.randperm(n, generator=gen), 0
        while True:
            if pos + batch > n:
                order, pos = torch.randperm(n, generator=gen), 0
            yield data[order[pos:pos + batch].to(device)]
            pos += batch

    return train_loop(batches, scale, data.mean(0), shape, settings, desc, device)


def train_sae_streamed(source: TokenSource, shape: SaeShape, settings: TrainSettings, buffer_tokens: int,
                       desc: str = "SAE", device: str = "cpu") -> Trained:
    """Train an SAE of ``shape`` on the ``source``'s token states streamed through a :class:`ShuffleBuffer` of
    ``buffer_tokens`` states (memory: the buffer, not the number of tokens); otherwise as :func:`train_sae`."""
    mean_norm, mean = moments(source, max(1, buffer_tokens // 2))
    scale = math.sqrt(source.d) / max(mean_norm, 1e-12)

    def batches(gen: torch.Generator) -> Iterable[torch.Tensor]:
        for x in ShuffleBuffer(source, min(settings.batch, source.n), buffer_tokens, gen):
            yield torch.from_numpy(x).to(device)

    return train_loop(batches, scale, torch.from_numpy(mean).to(device), shape, settings, desc, device)


def train_loop(batches: Callable[[torch.Generator], Iterable[torch.Tensor]], scale: float, mean: torch.Tensor,
               shape: SaeShape, settings: TrainSettings, desc: str, device: str) -> Trained:
    """The training loop on the minibatches ``batches(generator)`` yields (raw states), scaled by ``scale``."""
    s = settings
    gen = torch.Generator().manual_seed(int(s.seed))
    sae = SAE(shape, generator=gen, init_threshold=s.init_threshold).to(device)
    with torch.no_grad():
        sae.b_dec.copy_(mean * scale)
    opt = torch.optim.Adam(sae.parameters(), lr=s.lr, betas=(0.9, 0.999))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(step, s.steps, s.warmup, s.decay))
    since_fired = torch.zeros(shape.width, dtype=torch.long, device=device)  # tokens since each latent fired
    tail_from = s.steps - max(1, s.steps // 10)  # final_loss: the mean over the steps from here on
    tail_sum, first_loss = torch.zeros((), device=device), torch.zeros((), device=device)
    threshold_started = False
    stream = iter(batches(gen))  # drawn from gen after the initial weights, as before streaming existed
    for i in tqdm_class()(range(s.steps), desc=desc, unit="step", leave=False):
        x = next(stream) * scale
        pre = sae.pre_acts(x)
        if shape.kind == "batchtopk":
            z = sae.batch_topk(pre)
        elif shape.kind == "jumprelu":
            z = jumprelu(pre, sae.threshold(), s.bandwidth)
        else:
            z = sae.activate(pre)
        x_hat = sae.decode(z)
        loss = (x - x_hat).pow(2).sum(-1).mean()
        if shape.kind == "relu":
            loss = loss + s.l1 * (z * sae.W_dec.norm(dim=1)).sum(-1).mean()
        elif shape.kind == "jumprelu":
            loss = loss + s.l0 * step(pre, sae.threshold(), s.bandwidth).sum(-1).mean()
        else:
            dead = since_fired >= s.dead_window
            loss = loss + s.aux_coef * aux_loss(sae, pre, (x - x_hat).detach(), dead)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        sae.normalize_decoder()
        with torch.no_grad():
            fired = (z > 0).any(0)
            since_fired = torch.where(fired, torch.zeros_like(since_fired), since_fired + len(x))
            if shape.kind == "batchtopk":
                threshold_started = update_threshold(sae.running_threshold, z, s.threshold_rate, threshold_started)
            if i == 0:  # kept on the device: no sync per step, and memory does not grow with the steps
                first_loss = loss.detach()
            if i >= tail_from:
                tail_sum += loss.detach()
    sae.fold_scale(scale)
    return Trained(sae=sae.to("cpu").eval(), scale=scale, dead_at_end=int((since_fired >= s.dead_window).sum()),
                   final_loss=float(tail_sum) / (s.steps - tail_from), first_loss=float(first_loss))
