"""An SAE spliced into the forward pass: what replacing a layer's states by their reconstruction costs the model.

* :class:`Reconstruct` (an :class:`~probes.intervention.Edit`): x -> x_hat = decode(encode(x)), the SAE's
  reconstruction of each state, computed in float32 (the layer's dtype restored after). It is keyed (cached,
  and told apart from other edits) by the SAE's kind, width and k and the sha256 of its weights. ``skip_ids``:
  token ids whose states are left as the model made them (the special tokens, for an SAE trained without
  them: their states are ones it never saw);
* :class:`Zero`: x -> 0, the zero ablation of a layer.

With ``Intervention(l, Reconstruct(sae))`` (and any other interventions of the enclosing blocks) the model's own
objective (:mod:`probes.capture.objective`: the next-token loss of a causal LM, the masked-LM loss of an encoder,
at a seeded share of masked tokens; the reconstruction reaches the mask tokens too, though the SAE was trained on
unmasked text) gives, in nats per scored token over the texts:

* L_clean (the model as it is), L_spliced (the layer replaced by the reconstruction), L_zero (the layer set to 0);
* loss recovered = (L_zero - L_spliced) / (L_zero - L_clean): 1 when the reconstruction costs nothing, 0 when it
  costs as much as deleting the layer's states (None when L_zero = L_clean: nothing to recover);
* KL = the mean over scored positions of KL(p_clean || p_spliced) of the predicted distributions;

each with a percentile bootstrap interval over the texts (ratios of resampled sums; the same resamples for every
statistic, :func:`analyses.stats.resample_weights`).

    $ python -c "from analyses.sae.splice import Zero; print(Zero().identity())"
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from analyses import stats
from analyses.sae.model import SAE, THRESHOLDED, SaeShape
from probes.errors import ProbeError
from probes.intervention import Batch, Edit, Intervention

WEIGHTS = ("W_enc", "b_enc", "W_dec", "b_dec")


@dataclass(frozen=True, eq=False)
class Reconstruct(Edit):
    """x -> the SAE's reconstruction of x (float32), at every real token whose id is not in ``skip_ids``.

    The SAE's weights are copied at construction (read-only): training or editing ``sae`` afterwards changes
    neither what the edit applies nor its identity."""

    sae: Any  # analyses.sae.model.SAE
    skip_ids: Any = ()  # token ids left unedited
    kind: ClassVar[str] = "sae-reconstruct"
    shape: SaeShape = field(init=False)
    weights: tuple = field(init=False)  # W_enc, b_enc, W_dec, b_dec (and threshold): read-only float64 copies

    def __post_init__(self):
        if not isinstance(self.sae, SAE):
            raise ProbeError(f"Reconstruct takes an analyses.sae SAE, not {type(self.sae).__name__}")
        tensors = self.sae.tensors()
        object.__setattr__(self, "shape", self.sae.shape)
        object.__setattr__(self, "weights", tuple(_frozen(tensors[n], n) for n in self.names))
        object.__setattr__(self, "skip_ids", tuple(sorted({int(i) for i in self.skip_ids})))
        object.__setattr__(self, "sae", None)  # the copies above are what the edit applies

    @property
    def names(self) -> tuple[str, ...]:
        """The weights' names, in :attr:`weights`' order."""
        return WEIGHTS + (("threshold",) if self.shape.kind in THRESHOLDED else ())

    @property
    def width(self) -> int:
        return self.shape.d_in

    def reconstructor(self, device) -> SAE:
        """The SAE of the copied weights, float32 on ``device`` (made once per device)."""
        memo: dict = self.__dict__.setdefault("_saes", {})
        key = str(device)
        if key not in memo:
            sae = SAE.from_tensors(self.shape, {n: torch.from_numpy(np.asarray(w, np.float32))
                                                for n, w in zip(self.names, self.weights)})
            memo[key] = sae.to(device).requires_grad_(False)
        return memo[key]

    def apply(self, h: torch.Tensor, batch: Batch) -> torch.Tensor:
        self._check_width(h)
        with torch.no_grad():
            x_hat = self.reconstructor(h.device)(h.float())[0]
        if self.skip_ids and batch.ids is not None:
            skip = torch.isin(batch.ids, torch.tensor(self.skip_ids, device=h.device))
            x_hat = torch.where(skip[..., None], h.float(), x_hat)
        return x_hat

    def settings(self) -> dict:
        out: dict[str, object] = {"sae": self.shape.kind, "width": self.shape.width, "k": self.shape.k}
        if self.skip_ids:
            out["skip_ids"] = list(self.skip_ids)
        return out

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.weights


def _frozen(t: torch.Tensor, name: str) -> np.ndarray:
    """A read-only float64 copy of a weight (float32 to float64 and back is exact); one line if not finite."""
    a = t.detach().to("cpu", torch.float64).numpy().copy()
    if not np.isfinite(a).all():
        raise ProbeError(f"the SAE's {name} holds NaN or inf")
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Zero(Edit):
    """x -> 0: the zero ablation of a layer's states."""

    kind: ClassVar[str] = "zero"

    def apply(self, h: torch.Tensor, batch: Batch) -> torch.Tensor:
        return torch.zeros_like(h)

    def settings(self) -> dict:
        return {}

    def arrays(self) -> tuple[np.ndarray, ...]:
        return ()


# ----------------------------------------------------------------------------- loss recovered and KL


@dataclass(frozen=True)
class SpliceSums:
    """Per text (T,): loss sums clean, spliced and zero-ablated, KL(clean || spliced) sums, scored positions."""

    clean: np.ndarray
    spliced: np.ndarray
    zero: np.ndarray
    kl: np.ndarray
    counts: np.ndarray


@dataclass(frozen=True)
class SpliceStats:
    """The statistics of :class:`SpliceSums` (nats per scored token), each with its bootstrap interval."""

    loss_clean: float
    loss_spliced: float
    loss_zero: float
    loss_recovered: float | None
    loss_recovered_ci: list[float] | None
    kl: float
    kl_ci: list[float] | None
    loss_spliced_ci: list[float] | None


def splice_sums(objective, texts: list[str], layer: int, edit: Edit, *, zero: np.ndarray | None = None,
                mask_prob: float = 0.15, seed: int = 0, batch_size: int = 32) -> SpliceSums:
    """The objective on ``texts`` clean, with ``edit`` at ``layer`` and with the layer zero-ablated (``zero``:
    those loss sums already scored, e.g. for another SAE of the same layer)."""
    div = objective.divergence(texts, [Intervention(layer, edit)], mask_prob, seed, batch_size)
    if zero is None:
        zero = zero_sums(objective, texts, layer, mask_prob=mask_prob, seed=seed, batch_size=batch_size)
    return SpliceSums(div.clean, div.edited, np.asarray(zero, np.float64), div.kl, div.counts)


def zero_sums(objective, texts: list[str], layer: int, *, mask_prob: float = 0.15, seed: int = 0,
              batch_size: int = 32) -> np.ndarray:
    """Each text's loss sum with layer ``layer`` zero-ablated."""
    return objective.score(texts, [Intervention(layer, Zero())], mask_prob, seed, batch_size)[0]


def loss_recovered(clean, spliced, zero) -> np.ndarray:
    """(sum zero - sum spliced) / (sum zero - sum clean) along the last axis (NaN where the denominator is 0)."""
    clean, spliced, zero = (np.asarray(a, np.float64) for a in (clean, spliced, zero))
    den = zero.sum(-1) - clean.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den != 0, (zero.sum(-1) - spliced.sum(-1)) / np.where(den != 0, den, 1.0), np.nan)


def splice_stats(sums: SpliceSums, resamples: int, seed: int, level: float = stats.LEVEL) -> SpliceStats:
    """Loss recovered, KL and the three losses of ``sums``, with percentile bootstrap intervals over the texts."""
    n = int(sums.counts.sum())
    if n == 0:
        raise ProbeError("no position was scored: the texts are too short for the model's objective")
    W = stats.resample_weights(len(sums.counts), resamples, seed)

    def ci(replicates: np.ndarray) -> list[float] | None:
        iv = stats.interval(replicates, level)
        return [float(iv[0]), float(iv[1])] if np.isfinite(iv).all() else None

    recovered = float(loss_recovered(sums.clean, sums.spliced, sums.zero))
    # per resample: each text's sums weighted by how often it is drawn
    rec_reps = loss_recovered(W * sums.clean, W * sums.spliced, W * sums.zero)
    return SpliceStats(
        loss_clean=float(sums.clean.sum() / n), loss_spliced=float(sums.spliced.sum() / n),
        loss_zero=float(sums.zero.sum() / n),
        loss_recovered=recovered if np.isfinite(recovered) else None, loss_recovered_ci=ci(rec_reps),
        kl=float(sums.kl.sum() / n), kl_ci=ci(stats.ratio_replicates(sums.kl, sums.counts, W)),
        loss_spliced_ci=ci(stats.ratio_replicates(sums.spliced, sums.counts, W)))
