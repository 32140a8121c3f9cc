"""IsoScore: how uniformly does a layer use its dimensions? (Rudman et al. 2022, the ``isoscore`` package)

The mean cosine of random pairs (analyses.anisotropy) can mislead: once the mean is removed it is blind to a
few dominant directions. IsoScore looks at the spectrum of the point cloud instead. For points X (N, n), the
paper's algorithm, transcribed step for step in :func:`isoscore`:

1. reorient the points by PCA (the principal components of their covariance);
2. the variance vector Sigma_D: the variance along each principal component (the eigenvalues of the sample
   covariance, ddof 1; the ``isoscore`` package takes ``torch.linalg.svdvals(torch.cov(X.T))``);
3. normalise it to length sqrt(n): Sigma_hat = sqrt(n) Sigma_D / ||Sigma_D||;
4. the distance to the identity's variance vector (1, ..., 1), scaled to [0, 1]:
   delta = ||Sigma_hat - 1|| / sqrt(2 (n - sqrt(n)));
5. the isotropy defect in dimensions: k = (n - delta^2 (n - sqrt(n)))^2 / n, the fraction phi = k / n;
6. IsoScore = (n phi - 1) / (n - 1) = ((n - delta^2 (n - sqrt(n)))^2 - n) / (n (n - 1)), in [0, 1].

1 = every direction carries the same variance (isotropic); 0 = all variance on one line. Algebraically the
score equals (PR - 1) / (n - 1) with PR = (sum lambda)^2 / sum lambda^2 the participation ratio of the
covariance's eigenvalues (:func:`participation_ratio`); the bootstrap uses that identity, which needs only
Gram matrices of the points, never an eigen-decomposition per resample.

For every layer l = 0..L, on N random token occurrences (special tokens excluded unless --keep-special; the
same draw as analyses.anisotropy) and on the sentence vectors of the sampled sentences. Intervals: percentile
bootstrap resampling sentences (a token goes with its sentence); each resample's covariance is that of the
resampled multiset of points, recomputed exactly.

    $ python -m analyses.isoscore --model minilm-l6 [--model bert-small] [--n-sentences 5000] [--n-tokens 5000]

Writes out/results/isoscore/<model>.json (+ .csv, one row per layer) and out/figures/isoscore.{png,pdf}.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyses import common, stats, style
from analyses.analysis import Analysis, Figure
from analyses.common import SentenceConfig, activations_identity
from analyses.inputs import Sentences
from analyses.layer_points import LEVELS, clouds, draw_tokens, finite, level_panel, plot_levels
from probes.capture.activations import Activations
from probes.config import arg, tqdm_class
from probes.errors import ProbeError

BLOCK_ELEMENTS = 2**22  # Gram rows per block x points: 32 MiB of float64 per block


@dataclass
class Config(SentenceConfig):
    """IsoScore (Rudman et al. 2022) of token and sentence vectors at every layer, with bootstrap intervals."""

    n_tokens: int = arg(5000, "random token occurrences per layer (the anisotropy analysis's draw)", min=3)
    keep_special: bool = arg(False, "include special tokens ([CLS], [SEP], <s>, ...) in the token sample")
    resamples: int = arg(stats.RESAMPLES, "bootstrap resamples of sentences", min=1)


# ----------------------------------------------------------------------------- the score


def isoscore(points) -> float:
    """IsoScore of the rows of ``points`` (N, n), transcribed from Rudman et al. (2022), Algorithm 1, as the
    ``isoscore`` package (2.0.1) computes it: the variance vector is the spectrum of the sample covariance.
    NaN when the points have no variance or n < 2."""
    X = np.asarray(points, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ProbeError(f"IsoScore needs at least 2 points as rows of an (N, n) array, got shape {X.shape}")
    n = X.shape[1]
    if n < 2:
        return float("nan")
    cov = np.cov(X, rowvar=False)  # (n, n), ddof 1
    variances = np.clip(np.linalg.eigvalsh(cov)[::-1], 0, None)  # steps 1-2: variance along each PC
    norm = np.linalg.norm(variances)
    if not norm > 0:
        return float("nan")
    normalised = variances * np.sqrt(n) / norm  # step 3
    defect = np.linalg.norm(normalised - 1) / np.sqrt(2 * (n - np.sqrt(n)))  # step 4
    k = (n - defect**2 * (n - np.sqrt(n)))**2 / n  # step 5: dimensions uniformly used
    return float((n * (k / n) - 1) / (n - 1))  # step 6


def participation_ratio(eigenvalues) -> float:
    """(sum lambda)^2 / sum lambda^2; IsoScore = (PR - 1) / (n - 1) for n dimensions."""
    lam = np.asarray(eigenvalues, dtype=np.float64)
    return float(lam.sum()**2 / np.sum(lam**2))


def isoscore_replicates(X, unit_of, weights: np.ndarray) -> np.ndarray:
    """IsoScore of each resample (B,): row b of ``weights`` (B, n_units) says how often each unit (sentence)
    is drawn, and every point of unit u comes with it. The resample's covariance C_b (of the multiset of
    points) enters only through tr C_b and ||C_b||_F^2, both sums over pairs of points, computed from Gram
    blocks of the centred points: memory O(B N + block), never an (N, N) matrix at once. X (N, n)."""
    X = np.asarray(X, dtype=np.float64)
    X = X - X.mean(0)  # a shift changes no covariance; centring keeps the expansions below well conditioned
    N, n = X.shape
    w = np.asarray(weights, dtype=np.float64)[:, np.asarray(unit_of)]  # (B, N) copies of each point
    nb = w.sum(1)  # (B,) points in each resample
    P = np.zeros_like(w)  # (B, N): (W G)[b, j] = sum_i w_bi x_i . x_j
    Q = np.zeros_like(w)  # (B, N): (W (G o G))[b, j]
    rows = max(1, BLOCK_ELEMENTS // max(N, 1))
    for s in range(0, N, rows):
        G = X[s:s + rows] @ X.T  # (rows, N)
        P += w[:, s:s + rows] @ G
        Q += w[:, s:s + rows] @ (G * G)
    sq = np.einsum("ij,ij->i", X, X)  # (N,) |x_i|^2
    m2 = np.einsum("bj,bj->b", P, w) / nb**2  # |m_b|^2, m_b the resample's mean
    trace = w @ sq - nb * m2  # (N_b - 1) tr C_b
    a = P / nb[:, None]  # x_j . m_b
    frob = np.einsum("bj,bj->b", Q, w) - 2 * nb * np.einsum("bj,bj->b", w, a * a) + nb**2 * m2**2
    with np.errstate(divide="ignore", invalid="ignore"):
        return (trace**2 / frob - 1) / (n - 1)  # (PR_b - 1) / (n - 1)


# ----------------------------------------------------------------------------- compute


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """One model's IsoScore per layer: the saved document's keys, in order."""

    definitions: dict  # prose only: nothing reads numbers from it
    layers: list[dict]  # per layer 0..L: {"layer", "token": {isoscore, isoscore_ci, n_points, dimension,
    #                     total_variance[, note]}, "sentence": {...}}
    bootstrap: dict | None = None  # analyses.stats.bootstrap_block + "replicates": the last layer's token and sentence
    #                                IsoScore per resample (two models on the same sentences pair resample by resample)

    @style.drawing
    def plot(self, ax=None, level: str = "token", **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display: IsoScore of
        ``level`` ("token" or "sentence") vectors by layer with its bootstrap band. ``kwargs`` (``color=``,
        ``label=``, ``linestyle=``, ``marker=`` ...) go to the line; without ``color=`` the next colour of the
        Axes' cycle; the label (default: the model) enters the legend, so results drawn on one Axes overlay.
        Fonts and colours follow the caller's rcParams. Returns the Axes."""
        if level not in LEVELS:
            raise ProbeError(f"level must be 'token' or 'sentence', got {level!r}")
        ax = style.one_axes(ax, (3.8, 2.9))
        level_panel(ax, [style.on_axes(ax, self, kwargs)], "isoscore", level, False, "IsoScore (1 = isotropic)")
        return style.finish(ax)

    def headline(self) -> dict[str, str]:
        last = self.layers[-1]
        return {f"{level} IsoScore, last layer": "n/a" if last[level]["isoscore"] is None
                else f"{last[level]['isoscore']:.3f}" for level in LEVELS}

    def last_layer_isoscore(self, level: str) -> stats.Sample:
        """The last layer's IsoScore of ``level`` ("token" / "sentence") vectors with its bootstrap replicates
        over sentences (the point value alone when the result saved none for the last layer)."""
        point = self.layers[-1][level]["isoscore"]
        reps = (self.bootstrap or {}).get("replicates") or {}
        if reps.get("layer") != len(self.layers) - 1:
            return stats.Sample(point)
        return stats.Sample.saved(point, reps.get(level), self.bootstrap)


def compute(cfg: Config | None = None, *, acts: Activations) -> Result:
    """IsoScore of the token sample and of the sentence vectors at every layer, with percentile intervals
    resampling sentences."""
    cfg = cfg or Config()
    if acts.n_texts < 2:
        raise ProbeError(f"IsoScore needs at least 2 sentences, got {acts.n_texts}")
    tokens = draw_tokens(acts, cfg.n_tokens, cfg.seed, cfg.keep_special)
    boot = stats.bootstrap_block("sentence", acts.n_texts, cfg.resamples, seed=cfg.seed,
                                 units_id=stats.units_id(acts.texts))
    weights = stats.resample_weights(acts.n_texts, cfg.resamples, cfg.seed)
    layers, last = [], {}
    for lyr in tqdm_class()(range(acts.n_layers + 1), desc=f"isoscore {acts.meta['model']['name']}", unit="layer"):
        row = {"layer": lyr}
        for level, (X, unit_of) in clouds(acts, lyr, tokens).items():
            rep = last[level] = isoscore_replicates(X, unit_of, weights)
            row[level] = {"isoscore": finite(isoscore(X)), "isoscore_ci": finite(stats.interval(rep, boot["level"])),
                          "n_points": len(X), "dimension": X.shape[1], "total_variance": float(np.var(X, 0).sum())}
            if not row[level]["total_variance"] > 0:  # e.g. [CLS] at the embedding layer: one vector for all
                row[level].update(isoscore=None, isoscore_ci=None,
                                  note="every vector is the same (no variance): IsoScore is undefined")
        layers.append(row)
    return Result(
        identity=activations_identity(acts, cfg),
        definitions={
            "layers": "0 = embedding output, l = output of layer l",
            "isoscore": "Rudman et al. (2022): eigenvalues of the sample covariance (the variances along the "
                        "principal components), scaled to length sqrt(n), distance to (1, ..., 1) scaled to "
                        "[0, 1], rescaled to the fraction of dimensions used: 1 isotropic, 0 one direction; "
                        "n = the vectors' dimension",
            "special_tokens": "kept" if cfg.keep_special else "excluded from the token sample",
            "token_sample": f"{len(tokens)} occurrences drawn without replacement (seed {cfg.seed}), "
                            "the anisotropy analysis's token sample",
            "sentence_vector": acts.meta["model"]["sentence_vector"],
            "intervals": "percentile bootstrap over sentences (a token goes with its sentence); each resample's "
                         "IsoScore from the covariance of the resampled points, (PR - 1) / (n - 1)",
        },
        layers=layers,
        bootstrap={**boot, "replicates": {"layer": acts.n_layers,
                                          **{k: finite(stats.rounded(v)) for k, v in last.items()}}},
    )


def table_rows(result: Result | dict) -> list[dict]:
    """One row per layer: token and sentence IsoScore with their intervals."""
    rows = []
    for r in Result.from_json(result).layers:
        row = {"layer": r["layer"]}
        for level in LEVELS:
            s = r[level]
            lo, hi = s["isoscore_ci"] if s["isoscore_ci"] is not None else (None, None)
            row.update({f"{level}_isoscore": s["isoscore"], f"{level}_isoscore_lo": lo,
                        f"{level}_isoscore_hi": hi, f"{level}_n": s["n_points"]})
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- plot


@style.drawing
def plot(results: list[Result], fig=None, relative_depth: bool | None = None):
    """IsoScore by layer, token level left and sentence level right, one line per model in its colour (band:
    bootstrap interval over sentences). ``fig``: a Figure or SubFigure to draw into. Returns the figure."""
    results = [Result.from_json(r) for r in results]
    return plot_levels(results, "isoscore", "IsoScore (1 = isotropic)", fig, relative_depth)


ANALYSIS = Analysis(
    name="isoscore",
    inputs=Sentences(),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows,
    figures=(
        Figure("isoscore", plot, "IsoScore (Rudman et al. 2022) of token vectors (left) and sentence vectors (right) "
               "at every layer, one line per model, band: 95% bootstrap interval over sentences. 1 means every "
               "principal direction carries the same variance; 0 means all variance lies on one line. Unlike the "
               "mean cosine of random pairs, it does not depend on where the cloud's mean lies, so a model can look "
               "anisotropic by cosine (a shared offset) and still use its dimensions evenly, or the reverse."),
    ),
    example=("--model", "tiny-bert", "--n-sentences", "12", "--n-tokens", "40", "--resamples", "50"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line

if __name__ == "__main__":
    ANALYSIS.main()
