"""Training one SAE on one layer's token states.

* Inputs are scaled by c = sqrt(d) / E||x|| (the mean norm over the training tokens) and the SAE is trained on
  c x; :meth:`analyses.sae.model.SAE.fold_scale` folds c back once training ends.
* Minibatches of ``batch`` token states, drawn without replacement from a seeded permutation of the training
  tokens (a new permutation every pass), so neighbouring tokens of one sentence rarely share a step.
* Loss: mean over the batch of ||x - x_hat||^2, plus for ``relu`` l1 * sum_i z_i ||W_dec,i|| (the decoder rows
  are unit-norm, so the plain L1 of z), and for ``topk`` the AuxK loss (Gao et al. 2024) of the dead latents:
  the residual e = x - x_hat (no gradient through it) is reconstructed from the k_aux = min(d / 2, #dead) largest
  pre-activations of the dead latents alone, e_hat = W_dec[dead]^T topk(relu(pre[dead])), and
  aux_coef * ||e - e_hat||^2 / ||e - mean e||^2 (batch means) is added; it moves dead latents towards what the
  live ones miss, which revives them.
* A latent is dead when it has not fired on any of the last ``dead_window`` training tokens.
* Adam (betas 0.9, 0.999), the learning rate warmed up linearly over the first ``warmup`` share of the steps,
  constant, then decayed linearly to 0 over the last ``decay`` share (torch.optim.lr_scheduler.LambdaLR).
* After every step the decoder rows go back to unit norm.

Everything random comes from one torch Generator seeded with ``seed``: the same inputs and seed give the same
SAE (on one device and thread count).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from analyses.sae.model import SAE, SaeShape
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
    aux_coef: float = 1 / 32  # topk only
    seed: int = 0


@dataclass
class Trained:
    """A trained SAE (already reading raw states), the scale it was trained at, and how training ended."""

    sae: SAE
    scale: float  # c: E||c x|| = sqrt(d) on the training tokens
    dead_at_end: int  # latents that fired on none of the last dead_window training tokens
    final_loss: float  # mean loss over the last 10% of the steps (scaled units)


def lr_factor(step: int, steps: int, warmup: float, decay: float) -> float:
    """The learning rate's multiplier at ``step``: linear warm-up, constant, linear decay to 0."""
    w, d = max(1, round(warmup * steps)), max(1, round(decay * steps))
    if step < w:
        return (step + 1) / w
    return min(1.0, (steps - step) / d)


def aux_loss(sae: SAE, pre: torch.Tensor, residual: torch.Tensor, dead: torch.Tensor) -> torch.Tensor:
    """AuxK: how much of ``residual`` (n, d) the dead latents' top-k_aux activations reconstruct, relative to its
    variance; 0 when no latent is dead."""
    n_dead = int(dead.sum())
    if n_dead == 0:
        return pre.new_zeros(())
    k_aux = min(max(1, sae.shape.d_in // 2), n_dead)
    dead_pre = torch.relu(pre[:, dead])
    top = dead_pre.topk(k_aux, dim=-1)
    z = torch.zeros_like(dead_pre).scatter(-1, top.indices, top.values)
    e_hat = z @ sae.W_dec[dead]
    var = (residual - residual.mean(0)).pow(2).sum(-1).mean().clamp_min(1e-12)
    return (residual - e_hat).pow(2).sum(-1).mean() / var


def train_sae(X: np.ndarray, shape: SaeShape, settings: TrainSettings, desc: str = "SAE",
              device: str = "cpu") -> Trained:
    """Train an SAE of ``shape`` on the rows of ``X`` (n, d) (finite float32 states, read-only is fine) on the torch
    ``device``; the trained SAE is returned on the CPU. The permutations and initial weights are drawn on the CPU,
    so a device changes only the arithmetic's rounding."""
    s = settings
    gen = torch.Generator().manual_seed(int(s.seed))
    data = torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32)).to(device)
    n, d = data.shape
    scale = math.sqrt(d) / float(data.norm(dim=1).mean().clamp_min(1e-12))
    sae = SAE(shape, generator=gen).to(device)
    with torch.no_grad():
        sae.b_dec.copy_(data.mean(0) * scale)
    opt = torch.optim.Adam(sae.parameters(), lr=s.lr, betas=(0.9, 0.999))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(step, s.steps, s.warmup, s.decay))
    since_fired = torch.zeros(shape.width, dtype=torch.long, device=device)  # tokens since each latent fired
    batch = min(s.batch, n)
    order, pos = torch.randperm(n, generator=gen), 0
    losses = []
    for _ in tqdm_class()(range(s.steps), desc=desc, unit="step", leave=False):
        if pos + batch > n:
            order, pos = torch.randperm(n, generator=gen), 0
        x = data[order[pos:pos + batch].to(device)] * scale
        pos += batch
        pre = sae.pre_acts(x)
        z = sae.activate(pre)
        x_hat = sae.decode(z)
        loss = (x - x_hat).pow(2).sum(-1).mean()
        if shape.kind == "relu":
            loss = loss + s.l1 * (z * sae.W_dec.norm(dim=1)).sum(-1).mean()
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
        losses.append(loss.detach())  # no device sync per step
    sae.fold_scale(scale)
    tail = losses[-max(1, len(losses) // 10):]
    return Trained(sae=sae.to("cpu").eval(), scale=scale, dead_at_end=int((since_fired >= s.dead_window).sum()),
                   final_loss=float(torch.stack(tail).mean()))
