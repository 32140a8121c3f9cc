"""Redundancy: how many principal components does a window of running text need? (S-LSTM §7.2, Table 6)

Windows of exactly n tokens (n = 100 and 300 by default) are cut from the running text of one
document (never across documents) and encoded as one sequence each; the model adds its own
special tokens ([CLS] ... [SEP] for BERT, none for GPT-2), which are left out of H. For each
window, H (n x d) holds its n tokens' states at one layer (default: the last). Its columns are
centred (PCA; ``--no-center`` gives the raw SVD), sigma are its singular values (float64), and

    r_k = sum_{i<=k} sigma_i^2 / sum_i sigma_i^2,   k(p) = smallest k with r_k >= p,

for p in {0.90, 0.92, 0.94, 0.96, 0.98}. The result reports mean, std and count of k over
windows for every (n, p), and the mean r_k curve. Fewer components = more redundant features.

    $ python -m analyses.redundancy --model minilm-l6 [--model tiny-bert] [--corpus PATH] [--layer L]
          [--window-length 100 --window-length 300] [--n-windows 100] [--no-center] [--seed 0] [--out out]

Writes out/results/redundancy/<model>.json (+ .csv, one row per window size and threshold),
out/results/redundancy/table6.md (Table 6: models x thresholds, one block per window size),
out/figures/redundancy.{png,pdf} (k versus p, one panel per window size, one line per model) and
out/figures/redundancy-spectrum.{png,pdf} (the mean r_k curves).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from analyses import common, stats, style
from analyses.absent import Absent
from analyses.analysis import Analysis, Figure
from analyses.common import Identity, caller_texts, settings_used
from analyses.inputs import WindowConfig, Windows, non_special_counts
from analyses.records import Definitions, omitted
from probes.capture.activations import Activations, layer_index
from probes.config import arg
from probes.errors import ProbeError

THRESHOLDS = (0.90, 0.92, 0.94, 0.96, 0.98)
TOLERANCE = 1e-12  # r_k >= p - TOLERANCE: a ratio that is p up to rounding counts as reaching p


@dataclass
class Config(WindowConfig):
    """Principal components needed to keep 90-98% of a token window's variance (S-LSTM Table 6)."""

    layer: int = arg(-1, "layer whose states form H (0 = embeddings, -1 = last)")
    window_length: list[int] = arg([100, 300], "window length n in tokens (special tokens not counted)", min=2)
    threshold: list[float] = arg(list(THRESHOLDS), "retained-variance thresholds p in (0, 1]", max=1.0)
    n_windows: int = arg(100, "windows per window length, drawn without overlap from running text", min=1)
    center: bool = arg(True, "centre H's columns (PCA); --no-center gives the raw SVD")
    batch_size: int = arg(16, "windows per forward pass", min=1)
    # The spectrum of a centred window is what is left after subtracting the mean: for a model whose
    # states have nearly collapsed to one vector (albert-small), float16 rounding of |x| is larger than
    # that remainder and moved k(90%) from 31.96 to 32.21. Windows are their own cache entries, so the
    # exact default costs no sharing.
    cache_dtype: str = arg("float32", "how cached states are stored: float32 (exact; the default here, see "
                           "above) or float16", choices=["float16", "float32"])


# ----------------------------------------------------------------------------- the statistic


def _spectrum(H: np.ndarray, center: bool) -> np.ndarray:
    """Squared singular values (float64, descending) of H (n, d), columns centred if ``center``."""
    H = np.asarray(H, dtype=np.float64)
    if H.ndim != 2 or H.shape[0] == 0 or H.shape[1] == 0:
        raise ProbeError(f"H must be a non-empty (n, d) matrix, got shape {H.shape}")
    if not np.isfinite(H).all():
        raise ProbeError("H contains NaN or infinite values")
    scale = float(np.linalg.norm(H))
    X = H - H.mean(axis=0) if center else H
    s = np.linalg.svd(X, compute_uv=False)
    if s.size == 0 or s[0] <= 1e-9 * scale:  # all zero (up to rounding of the centring)
        what = " after centring its columns (every row is the same vector)" if center and scale > 0 else ""
        raise ProbeError(f"H ({H.shape[0]} x {H.shape[1]}) is all zero{what}: it has no variance to explain")
    return s**2


def cumulative_variance(H: np.ndarray, center: bool = True) -> np.ndarray:
    """r_k for k = 1..min(n, d): the fraction of sum sigma_i^2 kept by the first k components."""
    e = _spectrum(H, center)
    return np.cumsum(e) / e.sum()


def k_from_ratio(r: np.ndarray, thresholds) -> np.ndarray:
    """k(p): the fewest components whose cumulative variance ratio ``r`` reaches each threshold p
    (up to TOLERANCE of rounding); a threshold outside (0, 1] is a user error."""
    p = np.asarray(thresholds, dtype=np.float64)
    if p.ndim != 1 or p.size == 0 or not ((p > 0) & (p <= 1)).all():
        raise ProbeError(f"thresholds must be in (0, 1], got {list(np.atleast_1d(thresholds))}")
    k = np.searchsorted(r, p - TOLERANCE, side="left") + 1  # r is non-decreasing
    return np.minimum(k, len(r)).astype(int)


def components_needed(H: np.ndarray, thresholds=THRESHOLDS, center: bool = True) -> np.ndarray:
    """k(p) for each threshold p: the fewest principal components of H (n, d) whose squared singular
    values keep at least a fraction p of sum_i sigma_i^2. Columns are centred (PCA) when ``center``,
    else the raw SVD. SVD in float64; r_k >= p is tested as r_k >= p - 1e-12. (len(thresholds),) int."""
    return k_from_ratio(cumulative_variance(H, center), thresholds)


# ----------------------------------------------------------------------------- compute


def window_matrices(acts: Activations, layer: int, load: bool = True) -> tuple[int, list[np.ndarray]]:
    """(n, [H_t]): every text's non-special token states at ``layer``, each (n, d) float64, with one
    n for all texts (else ProbeError). ``load=False`` only checks and returns (n, [])."""
    counts = non_special_counts(acts)
    if len(counts) == 0:
        raise ProbeError("no windows in the activations")
    n = int(counts[0])
    if (counts != n).any():
        raise ProbeError(f"windows must all have the same number of non-special tokens, got "
                         f"{sorted(set(counts.tolist()))}")
    if not load:
        return n, []
    hidden = acts.layer_hidden(layer)
    mats = []
    for t in range(acts.n_texts):
        rows = np.flatnonzero(~acts.special[acts.offsets[t]:acts.offsets[t + 1]]) + acts.offsets[t]
        mats.append(np.asarray(hidden[rows], dtype=np.float64))
    return n, mats


def _one_blas_thread():
    """Many small SVDs run fastest on one BLAS thread (threads only contend, and torch's own pool
    makes it worse: 10-100x slower on a busy machine)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn brings threadpoolctl
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def k_intervals(ks: np.ndarray, units: str, seed: int = stats.SEED) -> tuple[list, stats.Bootstrap]:
    """Percentile intervals of the mean k(p) over windows (resampling windows), one [lo, hi]
    per threshold, and the bootstrap block (the per-window k stay in the result for paired use)."""
    boot = stats.bootstrap_block("window", len(ks), seed=seed, units_id=units)
    rep = stats.mean_replicates(ks, stats.resample_weights(len(ks), boot.resamples, seed))  # (B, n_p)
    return stats.interval(rep, boot.level).T.tolist(), boot


@dataclass
class ThresholdK:
    """k(p) of one threshold p over the windows of one length: mean, std (ddof = 0), median, min, max, count."""

    threshold: float
    mean: float
    std: float
    median: float
    min: int
    max: int
    count: int  # windows


@dataclass(kw_only=True)
class WindowRow:
    """The statistics of the windows of one length (a row of :attr:`Result.windows`, the saved keys in order): per
    threshold its k summary, the mean cumulative variance r_k, the per-window k (n_windows, n_p) and the
    bootstrap intervals of the mean k (absent from old files)."""

    window: int  # n tokens
    n_windows: int
    hidden_size: int
    max_components: int
    thresholds: list[ThresholdK]
    mean_cumulative_variance: list[float]
    k: list[list[int]] | None = omitted()  # (n_windows, n_p)
    k_mean_ci: list[list[float]] | None = omitted()  # per threshold (in the order of thresholds): [lo, hi] of the mean
    bootstrap: stats.Bootstrap | None = omitted()

    def at(self, threshold: float) -> tuple[int, ThresholdK] | None:
        """(its column in ``k``, the summary) of ``threshold`` (to 1e-9), or None."""
        return next(((j, t) for j, t in enumerate(self.thresholds) if abs(t.threshold - threshold) < 1e-9), None)


def window_stats(acts: Activations, layer: int, thresholds=THRESHOLDS, center: bool = True) -> WindowRow:
    """k(p) per window of one window length, summarised over windows."""
    n, mats = window_matrices(acts, layer)
    with _one_blas_thread():
        curves = np.stack([cumulative_variance(H, center) for H in mats])  # (n_windows, min(n, d))
    ks = np.stack([k_from_ratio(r, thresholds) for r in curves])  # (n_windows, n_thresholds)
    d = mats[0].shape[1]
    rows = [ThresholdK(threshold=float(p), mean=float(col.mean()), std=float(col.std()),
                       median=float(np.median(col)), min=int(col.min()), max=int(col.max()), count=len(col))
            for p, col in zip(thresholds, ks.T)]
    k_mean_ci, boot = k_intervals(ks, stats.units_id(acts.texts))
    return WindowRow(window=n, n_windows=len(mats), hidden_size=d, max_components=min(n - 1 if center else n, d),
                     thresholds=rows, mean_cumulative_variance=curves.mean(0).tolist(), k=ks.tolist(),
                     k_mean_ci=k_mean_ci, bootstrap=boot)


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """One model's Table 6 numbers: the saved document's keys, in order. The identity's activations
    are a list (per window length: its cache entry); its corpus has "windows": length -> windows."""

    layer: int  # layer whose states form H (0 = embeddings)
    thresholds: list[float]  # retained-variance thresholds p
    definitions: Definitions  # prose only: nothing reads numbers from it
    windows: list[WindowRow]  # per window length (window_stats)

    @style.drawing
    def plot(self, ax=None, window: int | None = None, **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display: k against p
        for one window length (default: the longest), Table 6 as a curve, with its band (± std over windows)
        and bootstrap bars. ``kwargs`` (``color=``, ``label=``, ``linestyle=``, ``marker=`` ...) go to the
        line; without ``color=`` the next colour of the Axes' cycle; the label (default: the model and the
        window length) enters the legend, so results drawn on one Axes overlay. Fonts and colours follow the
        caller's rcParams. Returns the Axes."""
        ax = style.one_axes(ax, (3.6, 3.0))
        n = max(w.window for w in self.windows) if window is None else window
        if _window(self, n) is None:
            raise ProbeError(f"{self.model_name} has no window of {n} tokens; it has "
                             f"{', '.join(str(w.window) for w in self.windows)}")
        _k_panel(ax, [style.on_axes(ax, self, kwargs, f"{style.display_name(self.model_name)}, n = {n}")], n,
                 title=False)
        ax.set_ylabel("principal components k")
        return style.finish(ax, loc="upper left", title=LEGEND)

    def headline_numbers(self) -> dict[str, stats.Sample]:
        return {f"k({_pct(t.threshold)}), n = {w.window}": self.mean_k(w.window, t.threshold)
                for w in self.windows for t in w.thresholds}

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws first: the mean k of each threshold p at the longest window."""
        return common.as_floats(t.mean for t in max(self.windows, key=lambda w: w.window).thresholds)

    def headline(self) -> dict[str, str]:
        return {f"k({_pct(t.threshold)}), n = {w.window}": f"{t.mean:.2f} ± {t.std:.2f} (of at most "
                                                           f"{w.max_components})"
                for w in self.windows for t in w.thresholds[:1]}

    def mean_k(self, window: int, threshold: float) -> stats.Sample:
        """The mean over windows of ``window`` tokens of k(p = ``threshold``), with its bootstrap replicates
        over windows (the per-window k resampled; the point value alone when the result saved none).
        :class:`~analyses.absent.Absent` when the result has no such k."""
        for w in self.windows:
            found = w.at(threshold) if w.window == window else None
            if found is not None:
                j, t = found
                if w.bootstrap is None or w.k is None:
                    return stats.Sample(t.mean)
                return stats.Sample.of_mean(t.mean, np.asarray(w.k, dtype=np.float64)[:, j], w.bootstrap)
        raise Absent(f"k at n = {window}, p = {threshold}")


def check_config(cfg: Config) -> None:
    """Bad thresholds fail before anything is extracted (each model's window lengths: the Windows kind)."""
    k_from_ratio(np.ones(1), cfg.threshold)


def compute(cfg: Config | None = None, *, acts: Activations | list[Activations]) -> Result:
    """Table 6 numbers for one model: one Activations per window length (each text one window)."""
    cfg = cfg or Config()
    acts_list = [acts] if isinstance(acts, Activations) else list(acts)
    if not acts_list:
        raise ProbeError("no activations given")
    L = acts_list[0].n_layers
    layer = layer_index(cfg.layer, L, f"--layer {cfg.layer}")
    windows = [window_stats(a, layer, cfg.threshold, cfg.center) for a in acts_list]
    first = acts_list[0].meta
    corpus = first.get("corpus")
    if corpus is not None:
        corpus = {k: v for k, v in corpus.items() if k not in ("window", "n_windows")}
        corpus["windows"] = {str(w.window): w.n_windows for w in windows}
    else:
        corpus = caller_texts([t for a in acts_list for t in a.texts])
    identity = Identity(
        model_name=first["model"]["name"], config=settings_used(cfg, first, corpus), model=first["model"],
        activations=[{"window": w.window, **{k: a.meta.get(k) for k in
                                                ("key", "n_texts", "n_tokens", "truncated_texts", "intervention")
                                                if k in a.meta or k != "intervention"}}
                     for w, a in zip(windows, acts_list)],
        corpus=corpus)
    return Result(
        identity=identity,
        layer=layer,
        thresholds=[float(p) for p in cfg.threshold],
        definitions=Definitions({
            "window": "n consecutive token ids cut from the running text of one document (paragraphs "
                      "tokenized separately and concatenated; never across documents), encoded as one sequence",
            "special_tokens": "added by the model around each window and excluded from H",
            "H": f"(n, d): the n window tokens' states at layer {layer} "
                 f"({'the last layer' if layer == L else 'embeddings' if layer == 0 else 'output of that layer'})",
            "layers": "0 = embedding output, l = output of layer l",
            "centring": "columns of H centred (PCA)" if cfg.center else "none (raw SVD of H)",
            "svd": "numpy.linalg.svd of H in float64",
            "r_k": "sum_{i<=k} sigma_i^2 / sum_i sigma_i^2",
            "k": f"smallest k with r_k >= p - {TOLERANCE:g}",
            "std": "population standard deviation over windows (ddof = 0)",
            "max_components": "rank bound min(n - 1, d) with centring, min(n, d) without",
        }),
        windows=windows,
    )


def table_rows(result: Result) -> list[dict]:
    """Flat CSV rows, one per (window length, threshold)."""
    rows = []
    for w in result.windows:
        for t in w.thresholds:
            rows.append({"window": w.window, "threshold": t.threshold,
                         "layer": result.layer, "center": result.config["center"],
                         "k_mean": t.mean, "k_std": t.std, "k_median": t.median, "k_min": t.min,
                         "k_max": t.max, "n_windows": t.count, "max_components": w.max_components})
    return rows


# ----------------------------------------------------------------------------- table and plots


def _window_sizes(results: list[Result]) -> list[int]:
    return sorted({w.window for r in results for w in r.windows})


def _thresholds(results: list[Result]) -> list[float]:
    return sorted({t.threshold for r in results for w in r.windows for t in w.thresholds})


def _window(result: Result, n: int) -> WindowRow | None:
    """The statistics of ``result`` for windows of n tokens, or None."""
    return next((w for w in result.windows if w.window == n), None)


def _pct(p: float) -> str:
    return f"{100 * p:g}%"


def markdown_table(results: list[Result]) -> str:
    """Table 6: rows = models (one block per window length), columns = thresholds, "mean ± std" of k."""
    ps = _thresholds(results)
    lines = ["# Principal components k needed to keep a fraction p of a window's variance (S-LSTM Table 6)", "",
             "| Length | Model | " + " | ".join(_pct(p) for p in ps) + " |",
             "|---|---|" + "---:|" * len(ps)]
    for n in _window_sizes(results):
        first = True
        for r in results:
            w = _window(r, n)
            if w is None:
                continue
            by_p = {t.threshold: t for t in w.thresholds}
            cells = [f"{by_p[p].mean:.2f} ± {by_p[p].std:.2f}" if p in by_p else "–" for p in ps]
            lines.append(f"| {f'n={n}' if first else ''} | {r.model_name} | " + " | ".join(cells) + " |")
            first = False
    lines += ["", "Mean ± standard deviation (ddof = 0) over windows. Per model:", ""]
    for r in results:
        sizes = ", ".join(f"{w.n_windows} windows of n={w.window} (k <= {w.max_components})"
                          for w in r.windows)
        lines.append(f"- {r.model_name}: layer {r.layer}, {r.definitions['centring']}, {sizes}; "
                     f"seed {r.config['seed']}, corpus {r.config.get('corpus') or r.corpus.get('source')}")
    lines += ["", "Windows are cut from the running text of one document; the model's special tokens are "
              "excluded from H; SVD in float64; k = smallest k with r_k >= p.", ""]
    return "\n".join(lines)


def _panels(results: list[Result], fig):
    """(window sizes, one axis per size, figure) for both redundancy plots; ``fig`` a Figure or
    SubFigure to draw into, or None for a new one."""
    sizes = _window_sizes(results)
    fig = style.new_figure(fig, (3.4 * len(sizes) + 0.4, 3.0))
    axes = np.ravel(fig.subplots(1, len(sizes), squeeze=False))
    return sizes, axes, fig


LEGEND = "band: ± std over windows; bars: 95% bootstrap CI of the mean"


def _k_panel(ax, drawn: list[style.Drawn], n: int, title: bool = True) -> None:
    """k versus p for windows of ``n`` tokens on ``ax``, one line per result (mean ± std over windows)."""
    for d in drawn:
        w = _window(d.result, n)
        if w is None:
            continue
        p = np.array([t.threshold for t in w.thresholds]) * 100
        m = np.array([t.mean for t in w.thresholds])
        s = np.array([t.std for t in w.thresholds])
        ax.plot(p, m, **d.line(marker="o", ms=3.5))
        if d.band:  # seed variants: a line each, one band
            ax.fill_between(p, m - s, m + s, alpha=0.15, lw=0, **d.quiet)
        if w.k_mean_ci is not None and len(w.k_mean_ci) == len(p):  # the bootstrap interval of the mean over windows
            ax.vlines(p, *np.array(w.k_mean_ci, dtype=float).T, lw=2.0, alpha=0.9, **d.quiet)
    ax.set_xticks([100 * p for p in _thresholds([d.result for d in drawn])])
    if title:
        ax.set_title(f"n = {n} tokens")
    ax.set_xlabel("retained variance p (%)")


@style.drawing
def plot(results: list[Result], fig=None):
    """k versus p: one panel per window length, one line per model in its colour (mean ± std over
    windows). ``fig``: a Figure or SubFigure to draw into (default: a new figure). Returns the figure."""
    sizes, axes, fig = _panels(results, fig)
    for ax, n in zip(axes, sizes):
        _k_panel(ax, style.in_figure(results), n)
    axes[0].set_ylabel("principal components k")
    axes[0].legend(loc="upper left", title=LEGEND)
    return fig


@style.drawing
def plot_spectrum(results: list[Result], fig=None):
    """Mean r_k (cumulative explained variance) against k: one panel per window length."""
    sizes, axes, fig = _panels(results, fig)
    for ax, n in zip(axes, sizes):
        ps = set()
        for d in style.in_figure(results):
            w = _window(d.result, n)
            if w is None:
                continue
            y = np.asarray(w.mean_cumulative_variance)
            ax.plot(np.arange(1, len(y) + 1), y, **d.line(lw=1.2))
            ps |= {t.threshold for t in w.thresholds}
        for p in sorted(ps):
            ax.axhline(p, color="0.5", lw=0.5, ls=":")
        ax.set_ylim(0, 1.01)
        ax.set_xlim(left=0)
        ax.set_title(f"n = {n} tokens")
        ax.set_xlabel("principal components k")
    axes[0].set_ylabel("mean cumulative variance $r_k$ (fraction)")
    axes[0].legend(loc="lower right")
    return fig


ANALYSIS = Analysis(
    name="redundancy",
    inputs=Windows(),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows, check=check_config,
    figures=(
        Figure("redundancy", plot, "Principal components k needed to keep a fraction p of a token window's variance "
               "(S-LSTM Table 6): higher = less redundant features."),
        Figure("redundancy-spectrum", plot_spectrum, "Cumulative explained variance r_k of one window's states "
               "against k."),
    ),
    tables={"table6.md": markdown_table},
    example=("--model", "tiny-bert", "--window-length", "8", "--n-windows", "3"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line

if __name__ == "__main__":
    ANALYSIS.main()
