"""The sparse autoencoder itself: encoder, sparsifying activation, unit-norm decoder, in torch.

    z = act(W_enc (x - b_dec) + b_enc)        x_hat = W_dec z + b_dec

with ``act`` one of

* ``topk`` (Gao et al. 2024): ReLU of the k largest pre-activations, every other latent 0 (L0 <= k exactly);
* ``relu`` (Bricken et al. 2023): ReLU, sparsity from the L1 penalty in the loss (:mod:`analyses.sae.train`);
* ``jumprelu`` (Rajamanoharan et al. 2024): z_i = pre_i H(pre_i - theta_i), a learned threshold theta_i > 0 per
  latent (trained as log theta_i with a straight-through estimator and an L0 penalty, :mod:`analyses.sae.train`);
* ``batchtopk`` (Bussmann et al. 2024): in training the k B largest ReLU pre-activations over a whole batch of B
  tokens (:meth:`SAE.batch_topk`; L0 = k on average over the batch, not per token), and a running threshold theta
  (the exponential moving average of the smallest kept activation); at inference, and as saved, it is a JumpReLU
  with theta_i = theta for every latent (:meth:`SAE.activate`), so one token's latents never depend on the others.

:data:`ARCHITECTURE` is the name sae-lens gives each (``standard`` for ReLU, ``jumprelu`` for BatchTopK too);
a JumpReLU or BatchTopK SAE carries a ``threshold`` (m,) tensor beside the four weights (:meth:`SAE.tensors`).

Shapes follow sae-lens: ``W_enc`` (d, m), ``b_enc`` (m,), ``W_dec`` (m, d) with unit-norm rows (one row per
latent: its dictionary direction), ``b_dec`` (d,). Initialisation: decoder rows uniformly random on the unit
sphere, the encoder their transpose, ``b_enc`` 0 and ``b_dec`` the mean of the training inputs.

The SAE trains on inputs scaled by one number c so that E||c x|| = sqrt(d) (the same learning rate and L1
coefficient suit every model's scale). :meth:`SAE.fold_scale` folds c back so the saved SAE reads raw states:
b_dec /= c, b_enc /= c and theta /= c, so every pre-activation and latent is 1/c of its scaled value (ReLU, TopK
and a JumpReLU whose threshold is scaled too commute with a positive factor: the same latents fire), W_dec stays
unit-norm, and x_hat is in raw units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

KINDS = ("topk", "relu", "batchtopk", "jumprelu")
ARCHITECTURE = {"topk": "topk", "relu": "standard", "batchtopk": "jumprelu", "jumprelu": "jumprelu"}
THRESHOLDED = ("batchtopk", "jumprelu")  # kinds that carry a threshold tensor
INIT_THRESHOLD = 0.01  # jumprelu: theta_i at initialisation (sae-lens's default)


@dataclass(frozen=True)
class SaeShape:
    """What an SAE is: its architecture, input width d, dictionary width m, and k (TopK, BatchTopK) or None."""

    kind: str
    d_in: int
    width: int
    k: int | None = None


class SAE(nn.Module):
    """A sparse autoencoder of :class:`SaeShape` ``shape`` (float32)."""

    running_threshold: torch.Tensor  # batchtopk only (a buffer)
    log_threshold: nn.Parameter  # jumprelu only

    def __init__(self, shape: SaeShape, generator: torch.Generator | None = None,
                 init_threshold: float = INIT_THRESHOLD):
        super().__init__()
        if shape.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {shape.kind!r}")
        self.shape = shape
        d, m = shape.d_in, shape.width
        W = torch.randn(m, d, generator=generator)
        W = W / W.norm(dim=1, keepdim=True)
        self.W_dec = nn.Parameter(W.clone())
        self.W_enc = nn.Parameter(W.T.clone())
        self.b_enc = nn.Parameter(torch.zeros(m))
        self.b_dec = nn.Parameter(torch.zeros(d))
        if shape.kind == "jumprelu":
            self.log_threshold = nn.Parameter(torch.full((m,), math.log(init_threshold)))
        elif shape.kind == "batchtopk":  # not trained by the optimiser: the running mean of training's cut-off
            self.register_buffer("running_threshold", torch.zeros(m))

    def threshold(self) -> torch.Tensor:
        """(m,) theta of a JumpReLU or BatchTopK SAE."""
        if self.shape.kind == "jumprelu":
            return self.log_threshold.exp()
        if self.shape.kind == "batchtopk":
            return self.running_threshold
        raise ValueError(f"a {self.shape.kind} SAE has no threshold")

    def pre_acts(self, x: torch.Tensor) -> torch.Tensor:
        """(n, m) W_enc (x - b_dec) + b_enc."""
        return (x - self.b_dec) @ self.W_enc + self.b_enc

    def activate(self, pre: torch.Tensor) -> torch.Tensor:
        """(n, m) the latents z from the pre-activations, token by token (BatchTopK: its inference JumpReLU)."""
        if self.shape.kind == "relu":
            return torch.relu(pre)
        if self.shape.kind in THRESHOLDED:
            return torch.relu(pre) * (pre > self.threshold())
        top = pre.topk(int(self.shape.k or 0), dim=-1)
        return torch.zeros_like(pre).scatter(-1, top.indices, torch.relu(top.values))

    def batch_topk(self, pre: torch.Tensor) -> torch.Tensor:
        """(n, m) BatchTopK's training latents: the k n largest ReLU pre-activations of the whole batch kept, every
        other latent 0."""
        flat = torch.relu(pre).flatten()
        top = flat.topk(min(int(self.shape.k or 0) * len(pre), flat.numel()))
        return torch.zeros_like(flat).scatter(-1, top.indices, top.values).view_as(pre)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.activate(self.pre_acts(x))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return z @ self.W_dec + self.b_dec

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(x_hat, z)."""
        z = self.encode(x)
        return self.decode(z), z

    @torch.no_grad()
    def normalize_decoder(self) -> None:
        """Every decoder row back to unit norm (after each optimiser step)."""
        self.W_dec.div_(self.W_dec.norm(dim=1, keepdim=True).clamp_min(1e-12))

    @torch.no_grad()
    def fold_scale(self, c: float) -> None:
        """Make an SAE trained on c x read x: b_dec /= c, b_enc /= c, theta /= c (latents become 1/c of the scaled
        ones)."""
        self.b_dec.div_(c)
        self.b_enc.div_(c)
        if self.shape.kind == "jumprelu":
            self.log_threshold.sub_(math.log(c))
        elif self.shape.kind == "batchtopk":
            self.running_threshold.div_(c)

    def tensors(self) -> dict[str, torch.Tensor]:
        """The sae-lens weight names and their (contiguous, float32, CPU) tensors: W_enc, b_enc, W_dec, b_dec and,
        for JumpReLU and BatchTopK, ``threshold`` (m,)."""
        out = {name: getattr(self, name).detach().to("cpu", torch.float32).contiguous()
               for name in ("W_enc", "b_enc", "W_dec", "b_dec")}
        if self.shape.kind in THRESHOLDED:
            out["threshold"] = self.threshold().detach().to("cpu", torch.float32).contiguous()
        return out

    def tensor_shapes(self) -> dict[str, tuple[int, ...]]:
        """The shape of each tensor :meth:`tensors` gives."""
        d, m = self.shape.d_in, self.shape.width
        out = {"W_enc": (d, m), "b_enc": (m,), "W_dec": (m, d), "b_dec": (d,)}
        return {**out, "threshold": (m,)} if self.shape.kind in THRESHOLDED else out

    @classmethod
    def from_tensors(cls, shape: SaeShape, tensors: dict[str, torch.Tensor]) -> SAE:
        sae = cls(shape)
        with torch.no_grad():
            for name, value in tensors.items():
                if name != "threshold":
                    getattr(sae, name).copy_(value)
                elif shape.kind == "jumprelu":
                    sae.log_threshold.copy_(value.log())
                else:
                    sae.running_threshold.copy_(value)
        return sae
