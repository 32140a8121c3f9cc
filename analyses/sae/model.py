"""The sparse autoencoder itself: encoder, sparsifying activation, unit-norm decoder, in torch.

    z = act(W_enc (x - b_dec) + b_enc)        x_hat = W_dec z + b_dec

with ``act`` one of

* ``topk`` (Gao et al. 2024): ReLU of the k largest pre-activations, every other latent 0 (L0 <= k exactly);
* ``relu`` (Bricken et al. 2023): ReLU, sparsity from the L1 penalty in the loss (:mod:`analyses.sae.train`).

Shapes follow sae-lens: ``W_enc`` (d, m), ``b_enc`` (m,), ``W_dec`` (m, d) with unit-norm rows (one row per
latent: its dictionary direction), ``b_dec`` (d,). Initialisation: decoder rows uniformly random on the unit
sphere, the encoder their transpose, ``b_enc`` 0 and ``b_dec`` the mean of the training inputs.

The SAE trains on inputs scaled by one number c so that E||c x|| = sqrt(d) (the same learning rate and L1
coefficient suit every model's scale). :meth:`SAE.fold_scale` folds c back so the saved SAE reads raw states:
b_dec /= c and b_enc /= c, so every pre-activation and latent is 1/c of its scaled value (ReLU and TopK commute
with a positive factor: the same latents fire), W_dec stays unit-norm, and x_hat is in raw units.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

KINDS = ("topk", "relu")


@dataclass(frozen=True)
class SaeShape:
    """What an SAE is: its architecture, input width d, dictionary width m, and k (TopK) or None (ReLU)."""

    kind: str
    d_in: int
    width: int
    k: int | None = None


class SAE(nn.Module):
    """A TopK or ReLU sparse autoencoder of :class:`SaeShape` ``shape`` (float32)."""

    def __init__(self, shape: SaeShape, generator: torch.Generator | None = None):
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

    def pre_acts(self, x: torch.Tensor) -> torch.Tensor:
        """(n, m) W_enc (x - b_dec) + b_enc."""
        return (x - self.b_dec) @ self.W_enc + self.b_enc

    def activate(self, pre: torch.Tensor) -> torch.Tensor:
        """(n, m) the latents z from the pre-activations."""
        if self.shape.kind == "relu":
            return torch.relu(pre)
        top = pre.topk(int(self.shape.k or 0), dim=-1)
        return torch.zeros_like(pre).scatter(-1, top.indices, torch.relu(top.values))

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
        """Make an SAE trained on c x read x: b_dec /= c, b_enc /= c (latents become 1/c of the scaled ones)."""
        self.b_dec.div_(c)
        self.b_enc.div_(c)

    def tensors(self) -> dict[str, torch.Tensor]:
        """The sae-lens weight names and their (contiguous, float32, CPU) tensors."""
        return {name: getattr(self, name).detach().to("cpu", torch.float32).contiguous()
                for name in ("W_enc", "b_enc", "W_dec", "b_dec")}

    @classmethod
    def from_tensors(cls, shape: SaeShape, tensors: dict[str, torch.Tensor]) -> SAE:
        sae = cls(shape)
        with torch.no_grad():
            for name, value in tensors.items():
                getattr(sae, name).copy_(value)
        return sae
