"""Similarity across all layer pairs: ``similarity_matrices`` (CKA) against the float32 stacked-GEMM floor.

Two seeded synthetic "models" of 7 layers x 384 features (each layer a noisy nonlinear map of the one
below, with per-feature scales and offsets: correlated, anisotropic, off-centre, like hidden states)
on the same n units (default n = 5,000 and 20,000). Timed side by side, one thread, process CPU time,
interleaved rounds (start order rotating):

* floor: the float32 products CKA cannot do without, on the stacked, centred layers (stacked and centred
  outside the timing): the cross products of every pair, X_all^T Y_all (n x 2688)^T (n x 2688), and each
  layer's own Gram X_i^T X_i and Y_j^T Y_j (n x 384)^T (n x 384), which every CKA value divides by;
* cka: ``similarity_matrices(xs, ys, ["cka"])``: every one of the 7 x 7 pairs (and each layer with
  itself, which the debiased CKA needs), from the raw layers.

Prints one ratio line per n: cka / floor in process CPU time (goal <= 1.5; the median over rounds of
each round's paired ratio), and the largest difference from the float64 streamed sums
(``dtype=float64``; goal <= 1e-6).

    $ python -m benchmarks.bench_similarity [--n 5000 --n 20000] [--layers 7] [--d 384] [--rounds 3]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchmarks.bench_extract import Row, goal_text, interleave, median, paired_ratio, run_alone
from probes.config import arg, run_main

GOAL = 1.5  # similarity_matrices (cka) / stacked float32 GEMM


@dataclass
class Settings:
    """Time all-pairs CKA against one stacked float32 matrix product."""

    n: list[int] = arg([5000, 20000], "units (rows); one measurement per value")
    layers: int = arg(7, "layers per model", min=1)
    d: int = arg(384, "features per layer", min=1)
    seed: int = arg(0, "seed of the layers", min=0)
    rounds: int = arg(3, "timed rounds of each contender (median reported)", min=1)
    warmup: int = arg(1, "untimed runs of each contender first", min=0)


def model_layers(n: int, layers: int, d: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    h, out = rng.standard_normal((n, d), dtype=np.float32), []
    for _ in range(layers):
        w = rng.standard_normal((d, d), dtype=np.float32) / np.float32(np.sqrt(d))
        h = np.tanh(h @ w + np.float32(0.3) * rng.standard_normal((n, d), dtype=np.float32))
        out.append(h * rng.uniform(0.2, 3, d).astype(np.float32) + rng.uniform(-2, 2, d).astype(np.float32))
    return out


def floor_products(X: np.ndarray, Y: np.ndarray, layers: int) -> list[np.ndarray]:
    """What CKA of every layer pair needs at the least: X_all^T Y_all and every layer's Gram on both sides."""
    dx, dy = X.shape[1] // layers, Y.shape[1] // layers
    grams = [Z[:, k * dz:(k + 1) * dz].T @ Z[:, k * dz:(k + 1) * dz] for Z, dz in ((X, dx), (Y, dy))
             for k in range(layers)]
    return [X.T @ Y, *grams]


def run(cfg: Settings) -> list[Row]:
    from analyses.similarity.measures import similarity_matrices

    rows = []
    for n in cfg.n:
        xs, ys = model_layers(n, cfg.layers, cfg.d, cfg.seed), model_layers(n, cfg.layers, cfg.d, cfg.seed + 1)
        X = np.concatenate([x - x.mean(0) for x in xs], 1)  # (n, L d) float32, centred: the floor's input
        Y = np.concatenate([y - y.mean(0) for y in ys], 1)
        cpu: dict[str, list[float]] = {}
        wall = interleave({"floor": lambda X=X, Y=Y: floor_products(X, Y, cfg.layers),
                           "cka": lambda xs=xs, ys=ys: similarity_matrices(xs, ys, ["cka"])},
                          cfg.rounds, cfg.warmup, cpu=cpu)
        got = similarity_matrices(xs, ys, ["cka"])["cka"]
        exact = similarity_matrices(xs, ys, ["cka"], dtype=np.float64)["cka"]
        err = float(np.abs(got - exact).max())
        floor, cka = median(cpu["floor"]), median(cpu["cka"])
        ratio = paired_ratio(cpu, "cka", "floor")
        print(f"similarity: CKA {cfg.layers} x {cfg.layers} pairs, n = {n}, d = {cfg.d}: {ratio:.2f} x the float32 "
              f"floor (cross products and per-layer Grams) in CPU time (CPU {cka:.2f} s / {floor:.2f} s; goal <= "
              f"{GOAL}); max |float32 - float64 sums| = {err:.1e}", flush=True)
        rows += [Row("similarity", f"floor: X_all^T Y_all + per-layer Grams, float32 (n = {n})", floor,
                     median(wall["floor"])),
                 Row("similarity", f"CKA, {cfg.layers} x {cfg.layers} pairs (n = {n})", cka, median(wall["cka"]),
                     f"{ratio:.2f} x floor (CPU)", goal_text(ratio, GOAL), f"max diff to float64 {err:.1e}")]
    return rows


def main(argv: list[str] | None = None) -> None:
    run_alone(Settings, run, __doc__, argv)


if __name__ == "__main__":
    run_main(main)
