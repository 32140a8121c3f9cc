"""Causal probing's figures: the excess loss (an eraser's loss change minus its variance-matched random controls')
against relative depth, one panel per task, one line per model, its band the interval over seeds and held-out
sentences, the layers used filled, inconclusive ones open; and the probe's accuracy before and after LEACE with
the majority baseline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from analyses import style
from analyses.causal_probing.inputs import TASKS
from analyses.causal_probing.protocol import LEVEL
from analyses.causal_probing.rows import LayerRow, TaskRow

if TYPE_CHECKING:
    from analyses.causal_probing import Result


def task_entry(result: Result, task: str | None) -> TaskRow:
    """The task's rows (default: the first task); one error line for a task the result does not hold."""
    from probes.errors import ProbeError

    names = [t.task for t in result.tasks]
    task = task or (names[0] if names else None)
    if task not in names:
        have = ", ".join(names) or "none"
        raise ProbeError(f"{result.model_name} has no causal probing task {task!r}; it has {have}")
    return result.tasks[names.index(task)]


def _n_layers(result: Result) -> int | None:
    return result.model.num_layers


def depth(rows: list[LayerRow], n_layers: int | None) -> np.ndarray:
    """Relative depth l / L of the rows (L: the model's layers, else the deepest layer of the rows)."""
    layers = np.array([r.layer for r in rows])
    return layers / max(int(n_layers or layers.max(initial=1)), 1)


def excess_panel(ax, drawn: list, task: str, method: str) -> None:
    """The excess loss of ``method`` for ``task`` against relative depth, one line (and band) per result; a layer
    used (the pooled test and every seed) a filled marker, inconclusive (they disagree) an open one."""
    for d in drawn:
        entry = next((e for e in d.result.tasks if e.task == task), None)
        rows = [r for r in (entry.layers if entry else []) if r.method(method).excess_loss is not None]
        if not rows:
            continue
        x = depth(rows, _n_layers(d.result))
        y = np.array([r.method(method).excess_loss for r in rows], float)
        ax.plot(x, y, **d.line(marker="o", ms=3))
        if d.band:
            ci = np.array([r.method(method).excess_loss_ci or [np.nan, np.nan] for r in rows], float)
            ax.fill_between(x, ci[:, 0], ci[:, 1], alpha=0.18, lw=0, color=d.color)
        verdicts = [r.method(method).verdict for r in rows]
        for kind, face in (("used", d.color), ("inconclusive", "white")):
            pick = [i for i, v in enumerate(verdicts) if v == kind]
            if pick:
                ax.scatter(x[pick], y[pick], s=28, facecolors=face, edgecolors=d.color, zorder=3, lw=1)
    ax.axhline(0, color="0.4", lw=0.6)
    ax.set_xlabel("relative depth l / L")
    ax.set_ylabel(f"{method.upper()} loss change - random's (nats)")


def accuracy_panel(ax, drawn: list, task: str) -> None:
    for d in drawn:
        entry = next((e for e in d.result.tasks if e.task == task), None)
        if entry is None:
            continue
        rows = entry.layers
        x = depth(rows, _n_layers(d.result))
        ax.plot(x, [r.accuracy for r in rows], **d.line(marker="o", ms=3))
        ax.plot(x, [r.leace.accuracy for r in rows], ls="--", lw=1, color=d.color)
        ax.plot(x, [r.majority for r in rows], ls=":", lw=0.8, color=d.color)
    ax.set_xlabel("relative depth l / L")
    ax.set_ylabel("accuracy (-- after LEACE, : majority)")


def _panels(results: list[Result], fig, draw, legend: str):
    named = list(dict.fromkeys(e.task for r in results for e in r.tasks))
    present = [t for t in TASKS if t in named] + [t for t in named if t not in TASKS]  # the caller's tasks last
    fig, axes = style.panel_grid(fig, len(present))
    drawn = style.in_figure(results)
    for ax, task in zip(axes, present):
        draw(ax, drawn, task)
        ax.set_title(task)
    if present:
        style.legend(axes[:len(present)], title=legend)
    return fig


@style.drawing
def plot(results: list[Result], fig=None):
    """The excess loss of LEACE (its loss change minus variance-matched random erasures') against relative depth,
    one panel per task, one line per model (band: 95% interval over seeds and held-out sentences; filled: a
    layer used, open: inconclusive). ``fig``: a Figure or SubFigure to draw into (default: a new
    figure). Returns the figure."""
    return _panels(results, fig, lambda ax, drawn, task: excess_panel(ax, drawn, task, "leace"),
                   f"band: {LEVEL:.0%} interval; filled: used,\nopen: inconclusive")


@style.drawing
def plot_accuracy(results: list[Result], fig=None):
    """The probe's held-out accuracy before (solid) and after LEACE (dashed) and the majority baseline (dotted)
    against relative depth, one panel per task (means over seeds)."""
    return _panels(results, fig, accuracy_panel, "solid: the states; dashed: after LEACE;\ndotted: majority")
