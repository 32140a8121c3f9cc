"""The claims' forest plot: per claim and compared model, each seed's difference with its 95% bootstrap
interval, the t interval over the seeds, the zero line and the side of zero the claim says (shaded).

One panel per comparison (the numbers of different claims have different units, so no common axis): a
row per seed (a dot with its interval; a hollow dot where the results keep no per-unit values) and, with
two or more seeds, a row "over seeds" (a diamond with the t interval). The panel's title names the claim
and the models; its right corner the verdict.

    fig = claims_figure(claims.evaluate("out"))   # a matplotlib Figure (claims: analyses.summary.claims)
    $ python -m analyses.summary.claims --out out --figure docs/claims.png
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from analyses.stats import FAILS, HOLDS, INCONCLUSIVE, UNTESTED
from analyses.summary.claim import Finding
from analyses.summary.evidence import Comparison
from analyses.summary.trajectory_doc import ClaimCourse, CourseComparison, Trajectories

VERDICT_COLORS = {HOLDS: "#2e7d32", FAILS: "#c62828", INCONCLUSIVE: "#ef6c00", UNTESTED: "#757575"}
CLAIMED_SHADE = "#c8e6c9"  # the side of zero the claim says


def drawn(found: list[Finding]) -> list[tuple[Finding, Comparison]]:
    """(finding, comparison) of every comparison with at least one seed's difference: the panels, in order."""
    return [(f, c) for f in found for c in f.comparisons if c.seeds]


def _panel(ax, f: Finding, c: Comparison) -> None:
    from matplotlib.ticker import MaxNLocator

    rows = list(c.seeds)
    n = len(rows)
    ys = list(range(n, 0, -1))  # seed rows from the top; the row over seeds at 0
    for y, r in zip(ys, rows):
        iv = r.interval
        xerr = None if iv is None else [[r.difference - iv[0]], [iv[1] - r.difference]]
        ax.errorbar([r.difference], [y], xerr=xerr, fmt="o", ms=4, color="#37474f", capsize=2, lw=1,
                    mfc="white" if iv is None else "#37474f", label=f"seed {r.seed}")
    labels = [f"seed {r.seed}" for r in rows]
    if c.across is not None:
        lo, hi = c.across
        ax.errorbar([c.difference], [0], xerr=[[c.difference - lo], [hi - c.difference]], fmt="D", ms=5,
                    color=VERDICT_COLORS[c.verdict], capsize=3, lw=1.6, label="over seeds (t interval)")
        labels.append("over seeds")
        ys.append(0)
    xs = [x for r in rows for x in ([r.difference] + list(r.interval or []))] + list(c.across or [])
    lo, hi = min(xs + [0.0]), max(xs + [0.0])
    pad = 0.08 * (hi - lo) or 0.1 * max(abs(lo), abs(hi), 1e-12)
    lo, hi = lo - pad, hi + pad
    ax.set_xlim(lo, hi)
    if c.claimed_sign > 0:
        ax.axvspan(0, hi, color=CLAIMED_SHADE, alpha=0.6, lw=0, zorder=0)
    else:
        ax.axvspan(lo, 0, color=CLAIMED_SHADE, alpha=0.6, lw=0, zorder=0)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(ys, labels, fontsize=6.5)
    ax.set_ylim(min(ys) - 0.7, max(ys) + 0.7)
    ax.tick_params(axis="x", labelsize=6.5)
    ax.xaxis.set_major_locator(MaxNLocator(6))
    over = f.over_training.get(c.against)
    ax.set_xlabel(f"{f.contrast} of {f.quantity}" + (" (point values)" if c.point_values else "")
                  + (f"\nover training: {over}" if over else ""), fontsize=6.5)
    ax.set_title(f"{f.paper} {f.where}\n{c.against}", fontsize=7, loc="left", pad=6)
    # the verdict on the level of the title's first line (the paper), clear of the compared models' longer line
    ax.annotate(str(c.verdict), xy=(1, 1), xycoords="axes fraction", xytext=(0, 6 + 1.2 * 7),
                textcoords="offset points", ha="right", va="bottom", fontsize=7.5, color=VERDICT_COLORS[c.verdict],
                fontweight="bold")


def claims_figure(found: list, fig=None, columns: int = 2):
    """The forest plot of ``found`` (:func:`analyses.summary.claims.evaluate`) on ``fig`` (default: a new
    matplotlib Figure, not registered with pyplot). Returns the Figure."""
    from matplotlib.figure import Figure

    panels = drawn(found)
    cols = 1 if len(panels) <= 3 else columns
    grid_rows = max(1, math.ceil(len(panels) / cols))
    heights = [max(len(c.seeds) + (c.across is not None) for _, c in panels[i * cols:(i + 1) * cols]) + 2.2
               for i in range(grid_rows)] if panels else [2]
    fig = fig or Figure(figsize=(4.2 * cols, 0.26 * sum(heights) + 0.5))
    if not panels:
        ax = fig.add_subplot()
        ax.axis("off")
        ax.text(0.5, 0.5, "no claim compares two models with these results", ha="center", va="center")
        return fig
    gs = fig.add_gridspec(grid_rows, cols, height_ratios=heights, hspace=1.2, wspace=0.4,
                          top=1 - 0.95 / fig.get_figheight())
    for k, (f, c) in enumerate(panels):
        _panel(fig.add_subplot(gs[k // cols, k % cols]), f, c)
    fig.suptitle("The claims' differences per seed (95% bootstrap intervals) and over seeds (95% t interval); "
                 "shaded: the side the claim says", fontsize=8, y=1 - 0.1 / fig.get_figheight(), va="top")
    return fig


def _course(ax, claim: ClaimCourse, comp: CourseComparison) -> None:
    """One comparison's paired difference along training: a line per seed (its 95% interval at every point as a
    band), the zero line, the claimed side shaded; the rule's word in the corner."""
    for k, seed in enumerate(comp.seeds):
        pts = [p for p in seed.points if p.difference is not None]
        x = [p.fraction for p in pts]
        color = f"C{k}"
        ax.plot(x, [p.difference for p in pts], marker="o", ms=2.5, lw=1, color=color, label=f"seed {seed.seed}")
        bands = [p.interval for p in pts]
        if all(bands):
            ax.fill_between(x, [iv[0] for iv in bands if iv], [iv[1] for iv in bands if iv], color=color,
                            alpha=0.15, lw=0)
    ax.set_xscale("log", base=2)
    ax.axhline(0, color="black", lw=0.8)
    lo, hi = ax.get_ylim()
    side = (0, max(hi, 0)) if claim.claimed_sign > 0 else (min(lo, 0), 0)
    ax.axhspan(*side, color=CLAIMED_SHADE, alpha=0.6, lw=0, zorder=0)
    ax.set_ylim(lo, hi)
    ax.axvspan(0.5, 1, color="#eeeeee", lw=0, zorder=-1)  # the last half, which the rule reads
    ax.tick_params(labelsize=6.5)
    ax.set_xlabel("fraction of training (log scale; shaded grey: the last half)", fontsize=6.5)
    ax.set_ylabel(claim.contrast or "A - B", fontsize=6.5)
    title = "\n".join([textwrap.fill(f"{claim.paper} {claim.where}", 48), textwrap.fill(comp.against, 52)])
    ax.set_title(title, fontsize=7, loc="left", pad=6)
    # the rule's word on a line of its own above the title (beside it, a long title would run into it)
    ax.annotate(comp.over_training, xy=(0, 1), xycoords="axes fraction",
                xytext=(0, 6 + 1.2 * 7 * (title.count("\n") + 1) + 1), textcoords="offset points", ha="left",
                va="bottom", fontsize=7.5, fontweight="bold", color=_course_color(comp.over_training))
    if len(comp.seeds) > 1:
        ax.legend(fontsize=6, frameon=False)


def trajectories_figure(doc: Trajectories, fig=None, columns: int = 3):
    """Each claim's paired difference per seed along training (:mod:`analyses.summary.trajectories`' document,
    typed: :class:`~analyses.summary.trajectory_doc.Trajectories`),
    one panel per claim and compared model, and below them the claims checked on point values (Fig. 9/10: a row per
    check, a dot per snapshot, filled where the check holds), on ``fig`` (default: a new Figure). Returns the
    Figure."""
    from matplotlib.figure import Figure

    panels = [(c, comp) for c in doc.claims for comp in c.comparisons if comp.seeds]
    checks = [c for c in doc.claims if c.check is not None and c.check.points]
    cols = max(1, min(columns, len(panels)))
    rows = math.ceil(len(panels) / cols)
    check_height = 0.3 * len(checks) + 1.0 if checks else 0.0
    fig = fig or Figure(figsize=(3.4 * cols, 2.9 * rows + check_height + 0.4))
    if not panels and not checks:
        ax = fig.add_subplot()
        ax.axis("off")
        ax.text(0.5, 0.5, "no claim has a trajectory", ha="center", va="center")
        return fig
    ratios = [2.9] * rows + ([check_height] if checks else [])
    gs = fig.add_gridspec(len(ratios), cols, height_ratios=ratios, hspace=1.1, wspace=0.45,
                          top=1 - 0.7 / fig.get_figheight())
    for k, (claim, comp) in enumerate(panels):
        _course(fig.add_subplot(gs[k // cols, k % cols]), claim, comp)
    if checks:
        _checks(fig.add_subplot(gs[rows, 1:] if cols > 1 else gs[rows, 0]), checks)
    fig.suptitle("The claims' paired differences along training, per seed (bands: 95% bootstrap intervals); "
                 "shaded green: the side the claim says", fontsize=8, y=1 - 0.1 / fig.get_figheight(), va="top")
    return fig


def _checks(ax, checks: list[ClaimCourse]) -> None:
    """The claims checked on point values along training: a row per check (its label on the left), a dot per
    snapshot (filled green where the check holds, hollow grey where it does not), the rule's word on the right."""
    for row, claim in enumerate(checks):
        points = claim.check.points if claim.check is not None else []
        for holds in (True, False):
            x = [p.fraction for p in points if (p.verdict == HOLDS) == holds]
            ax.scatter(x, [row] * len(x), s=22, zorder=3, facecolors=VERDICT_COLORS[HOLDS] if holds else "none",
                       edgecolors=VERDICT_COLORS[HOLDS] if holds else "#757575")
        word = claim.check.over_training if claim.check is not None else ""
        ax.annotate(word, xy=(1, row), xycoords=("axes fraction", "data"), xytext=(8, 0), textcoords="offset points",
                    va="center", fontsize=7, fontweight="bold", color=_course_color(word))
    ax.set_xscale("log", base=2)
    ax.set_yticks(range(len(checks)),
                  [textwrap.fill(f"{c.where}: {c.claim}", 58) for c in checks], fontsize=6.5)
    ax.set_ylim(len(checks) - 0.5, -0.5)
    ax.axvspan(0.5, 1, color="#eeeeee", lw=0, zorder=-1)
    ax.tick_params(axis="x", labelsize=6.5)
    ax.set_xlabel("fraction of training (log scale; shaded grey: the last half)", fontsize=6.5)
    models = sorted({m for c in checks if c.check is not None for m in c.check.models})
    ax.set_title(f"{checks[0].paper}: the checks on point values at every snapshot of {', '.join(models)}\n"
                 "filled: the check holds; hollow: it does not", fontsize=7, loc="left", pad=6)


def _course_color(word: str) -> str:
    return "#2e7d32" if word == "stable" else "#ef6c00"


def write_claims_figure(found: list, path: str | Path, draw=None) -> Path:
    """Draw :func:`claims_figure` (or ``draw()``'s Figure) to ``path`` (.png at 200 dpi, or .pdf), atomically.
    Returns the path."""
    import io

    from analyses.common import atomic_write

    path = Path(path)
    fig = draw() if draw is not None else claims_figure(found)
    buf = io.BytesIO()
    fmt = path.suffix.lstrip(".").lower() or "png"
    fig.savefig(buf, format=fmt, dpi=200, bbox_inches="tight", **({"metadata": {"CreationDate": None}}
                                                                      if fmt == "pdf" else {}))
    atomic_write(path, buf.getvalue())
    return path
