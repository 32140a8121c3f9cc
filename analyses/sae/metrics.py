"""How well an SAE reconstructs held-out token states, with bootstrap intervals over held-out sentences.

Over the held-out tokens x (raw states) with reconstructions x_hat and latents z (E: the mean over tokens):

* L0 = E ||z||_0, the latents firing per token;
* MSE = E ||x - x_hat||^2 / d, per coordinate;
* explained variance = 1 - E||x - x_hat||^2 / (E||x||^2 - ||E x||^2): the share of the states' total variance
  (trace of their covariance) the reconstruction accounts for. Not the uncentred 1 - E||x - x_hat||^2 / E||x||^2,
  which credits an SAE for the mean (b_dec alone scores near 1 on states far from the origin);
* legacy explained variance = E [1 - ||x - x_hat||^2 / ||x - x_bar||^2], the per-token ratio with the mean x_bar
  over the held-out tokens (once used by sae-lens): a mean of ratios, dominated by the tokens closest to the mean,
  reported only to compare with published numbers;
* cosine = E cos(x, x_hat); l2 ratio = E ||x_hat|| / ||x||;
* relative reconstruction bias gamma = E||x_hat||^2 / E[x . x_hat] (Rajamanoharan et al. 2024): the factor
  gamma that minimises E||x_hat / gamma - x||^2; 1 = unbiased, below 1 = shrinkage (L1 pulls latents to 0);
* firing density of latent i = the share of held-out tokens where z_i > 0; dead = latents with density 0,
  dense = latents with density above :data:`DENSE` (0.1).

Each statistic is a function of per-sentence sums (tokens, squared error, ||x||^2, the sum of x, ...), so a
bootstrap resample of the held-out sentences (:func:`analyses.stats.resample_weights`) recomputes it from
weighted sums: the interval accounts for tokens of one sentence being alike. x_bar of the legacy formula is
the full held-out mean in every resample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from analyses import stats
from analyses.sae.model import SAE
from analyses.sae.stream import TokenSource

DENSE = 0.1  # a latent firing on more than this share of tokens is dense
# Counts of latents over the whole held-out sample, not means over its sentences: a resample holds about 63% of the
# distinct sentences, so more latents are silent in it and the percentile interval would lie above the count itself
# (1 dead latent: [5, 27] on MiniLM-L6). They get no interval.
NO_INTERVAL = ("dead", "dense")
STATISTICS = ("l0", "mse", "explained_variance", "explained_variance_legacy", "cosine", "l2_ratio",
              "shrinkage", "density", "dead", "dense")
EPS = 1e-12


def explained_variance(x: np.ndarray, x_hat: np.ndarray) -> float:
    """1 - E||x - x_hat||^2 / (E||x||^2 - ||E x||^2) over the rows of x (n, d)."""
    x, x_hat = np.asarray(x, np.float64), np.asarray(x_hat, np.float64)
    total = (x * x).sum(1).mean() - np.square(x.mean(0)).sum()
    return float(1 - ((x - x_hat) ** 2).sum(1).mean() / total)


def legacy_explained_variance(x: np.ndarray, x_hat: np.ndarray) -> float:
    """E [1 - ||x - x_hat||^2 / ||x - x_bar||^2] over the rows of x (n, d), x_bar their mean: the per-token ratio."""
    x, x_hat = np.asarray(x, np.float64), np.asarray(x_hat, np.float64)
    ratio = ((x - x_hat) ** 2).sum(1) / ((x - x.mean(0)) ** 2).sum(1)
    return float(np.mean(1 - ratio))


@dataclass
class HeldOutSums:
    """Per held-out sentence (n_units rows) the sums every statistic is made of."""

    tokens: np.ndarray  # (n,)
    sq_error: np.ndarray  # (n,) sum ||x - x_hat||^2
    sq_norm: np.ndarray  # (n,) sum ||x||^2
    x_sum: np.ndarray  # (n, d) sum x
    l0: np.ndarray  # (n,) sum ||z||_0
    cosine: np.ndarray  # (n,) sum cos(x, x_hat)
    l2_ratio: np.ndarray  # (n,) sum ||x_hat|| / ||x||
    hat_sq: np.ndarray  # (n,) sum ||x_hat||^2
    dot: np.ndarray  # (n,) sum x . x_hat
    legacy: np.ndarray  # (n,) sum 1 - ||x - x_hat||^2 / ||x - x_bar||^2
    fires: np.ndarray  # (n, m) tokens where each latent fires


def as_source(X: np.ndarray | TokenSource) -> TokenSource:
    """``X`` (n, d) as a :class:`TokenSource` (a source is returned as it is)."""
    if isinstance(X, TokenSource):
        return X
    X = np.asarray(X)
    return TokenSource(n=len(X), d=int(X.shape[1]), read=lambda start, stop: X[start:stop])


def streamed_mean(source: TokenSource, block: int) -> np.ndarray:
    """(d,) float64 mean of the source's tokens, read ``block`` at a time."""
    total = np.zeros(source.d)
    for s in range(0, source.n, block):
        total += np.asarray(source.read(s, min(s + block, source.n)), np.float64).sum(0)
    return total / max(source.n, 1)


@torch.no_grad()
def held_out_sums(sae: SAE, X: np.ndarray | TokenSource, unit_of: np.ndarray, n_units: int,
                  block: int = 4096) -> HeldOutSums:
    """The per-sentence sums of the SAE on the held-out states ``X`` (n_tokens, d), or streamed from a
    :class:`analyses.sae.stream.TokenSource` (two passes of ``block`` tokens at a time: the mean x_bar of the
    legacy ratio, then the sums; memory does not grow with the number of tokens), ``unit_of`` (n_tokens,) the
    sentence (0..n_units-1) of each token."""
    source = as_source(X)
    unit_of = np.asarray(unit_of, dtype=np.int64)
    d, m = source.d, sae.shape.width
    x_bar = streamed_mean(source, block)
    zeros = {name: np.zeros(n_units) for name in ("sq_error", "sq_norm", "l0", "cosine", "l2_ratio", "hat_sq", "dot",
                                                   "legacy")}
    out = HeldOutSums(tokens=np.bincount(unit_of, minlength=n_units).astype(np.float64), x_sum=np.zeros((n_units, d)),
                      fires=np.zeros((n_units, m)), **zeros)
    for s in range(0, source.n, block):
        x = torch.from_numpy(np.ascontiguousarray(source.read(s, min(s + block, source.n)), dtype=np.float32))
        u = unit_of[s:s + block]
        x_hat, z = sae(x)
        x64, h64 = x.double(), x_hat.double()
        err = (x64 - h64).pow(2).sum(1)
        nx, nh = x64.norm(dim=1), h64.norm(dim=1)
        per_token = {"sq_error": err, "sq_norm": nx.pow(2), "l0": (z > 0).sum(1).double(),
                     "cosine": (x64 * h64).sum(1) / (nx * nh).clamp_min(EPS),
                     "l2_ratio": nh / nx.clamp_min(EPS), "hat_sq": nh.pow(2), "dot": (x64 * h64).sum(1),
                     "legacy": 1 - err / (x64 - torch.from_numpy(x_bar)).pow(2).sum(1).clamp_min(EPS)}
        for name, values in per_token.items():
            np.add.at(getattr(out, name), u, values.numpy())
        np.add.at(out.x_sum, u, x64.numpy())
        np.add.at(out.fires, u, (z > 0).double().numpy())
    return out


def statistics(sums: HeldOutSums, w: np.ndarray) -> dict[str, np.ndarray]:
    """Every statistic (:data:`STATISTICS`) under sentence weights ``w`` (B, n_units): (B,) each."""
    n = w @ sums.tokens
    with np.errstate(divide="ignore", invalid="ignore"):

        def mean(per_unit: np.ndarray) -> np.ndarray:
            return w @ per_unit / n

        sq_error = mean(sums.sq_error)
        total = mean(sums.sq_norm) - np.square(w @ sums.x_sum / n[:, None]).sum(1)
        density = (w @ sums.fires) / n[:, None]  # (B, m)
        return {"l0": mean(sums.l0), "mse": sq_error / sums.x_sum.shape[1],
                "explained_variance": 1 - sq_error / total,
                "explained_variance_legacy": mean(sums.legacy), "cosine": mean(sums.cosine),
                "l2_ratio": mean(sums.l2_ratio), "shrinkage": (w @ sums.hat_sq) / (w @ sums.dot),
                "density": density.mean(1), "dead": (density == 0).sum(1).astype(np.float64),
                "dense": (density > DENSE).sum(1).astype(np.float64)}


@dataclass
class Estimate:
    """A statistic's value on every held-out sentence and its percentile interval over resampled sentences."""

    value: float | None
    ci: list[float] | None


def estimates(sums: HeldOutSums, resamples: int, seed: int, level: float = stats.LEVEL) -> dict[str, Estimate]:
    """Each statistic's point value and bootstrap interval (resampling held-out sentences; the weights depend
    only on (n_units, resamples, seed), so SAEs evaluated on the same sentences are resampled alike)."""
    n_units = len(sums.tokens)
    point = statistics(sums, np.ones((1, n_units)))
    reps: dict[str, list[np.ndarray]] = {name: [] for name in STATISTICS}
    for W in stats.resample_weight_blocks(n_units, resamples, seed):
        for name, values in statistics(sums, W).items():
            reps[name].append(values)
    out = {}
    for name in STATISTICS:
        iv = stats.interval(np.concatenate(reps[name]), level)
        value = float(point[name][0])
        out[name] = Estimate(value if np.isfinite(value) else None,
                             [float(iv[0]), float(iv[1])] if np.isfinite(iv).all() and name not in NO_INTERVAL
                             else None)
    return out


def matched_cosines(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """|cos| of the rows of A (m, d) and B (m', d) paired one to one by the Hungarian assignment that maximises
    their sum (scipy.optimize.linear_sum_assignment): (min(m, m'),)."""
    from scipy.optimize import linear_sum_assignment

    A = np.asarray(A, np.float64) / np.maximum(np.linalg.norm(A, axis=1, keepdims=True), EPS)
    B = np.asarray(B, np.float64) / np.maximum(np.linalg.norm(B, axis=1, keepdims=True), EPS)
    C = np.abs(A @ B.T)
    rows, cols = linear_sum_assignment(C, maximize=True)
    return C[rows, cols]


def mcc(A: np.ndarray, B: np.ndarray) -> float:
    """Mean correlation coefficient of two dictionaries: the mean of :func:`matched_cosines`."""
    return float(matched_cosines(A, B).mean())
