"""What :func:`analyses.effect.run` returns, how it is shown and how it is stored: an :class:`EffectResult` (each run's
value and the paired differences with their intervals), its table (``to_frame()``), its one-line ``repr`` and
HTML display, its figure (:func:`plot`), and its one file codec (``to_json`` / ``from_json``), which
``python -m analyses.effect`` writes to ``<out>/effects/<analysis>/<name>.json`` and the report's effect section
reads back.

    $ python -m analyses.effect --model tiny-gpt2 --edit add --arrays v.npy --option overlap=0
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analyses import style
from analyses.result import AnalysisResult
from probes.errors import ProbeError

FORMAT = "probes-effect/1"  # what an effect file says it is
FORMAT_FIELD = "format"  # where it says so

@dataclass(frozen=True)
class Estimate:
    """A number with its percentile interval (``low``, ``high``; NaN where the resamples leave it undefined)."""

    value: float
    low: float
    high: float

    def covers(self, x: float) -> bool:
        """Whether ``x`` lies in the interval (ends included)."""
        return bool(self.low <= x <= self.high)

    def __str__(self) -> str:
        return f"{self.value:.4g} [{self.low:.4g}, {self.high:.4g}]"


@dataclass(frozen=True, eq=False, repr=False)
class EffectResult:
    """The effect of an edit on one headline number: each run's value and the paired differences, with intervals.

    ``difference`` is edited - clean; with a control, ``control_difference`` is control - clean and
    ``beyond_control`` edited - control (the edit's effect beyond that of a random edit of its size), all paired
    over the same ``n_units`` units. ``edit`` and ``control_edit`` are the runs' labels (:mod:`analyses.edited`);
    ``runs`` the analysis's Results (clean, edited[, control])."""

    analysis: str
    statistic: str
    model: str  # the clean run's name
    edit: str  # the edited run's label (+kind@layer_hash)
    edit_description: str  # the edits in words
    control_edit: str  # the control run's label ("" without a control)
    control_kind: str  # "random same-rank subspace", "random vector of the same norm", "given" or ""
    unit: str
    n_units: int
    resamples: int
    seed: int
    level: float  # the nominal level
    interval_level: float  # the level the percentile intervals are read at (expanded for n_units)
    clean: Estimate
    edited: Estimate
    difference: Estimate
    control: Estimate | None = None
    control_difference: Estimate | None = None
    beyond_control: Estimate | None = None
    runs: tuple[AnalysisResult, ...] = field(default=(), compare=False)

    def rows(self) -> list[tuple[str, str, Estimate]]:
        """(row name, the run's edit label, estimate) for every run and difference held."""
        out = [("clean", "", self.clean), ("edited", self.edit, self.edited), ("edited - clean", self.edit,
                                                                                 self.difference)]
        if self.control is not None and self.control_difference is not None and self.beyond_control is not None:
            out += [("control", self.control_edit, self.control),
                    ("control - clean", self.control_edit, self.control_difference),
                    ("edited - control", self.edit, self.beyond_control)]
        return out

    def to_frame(self):
        """One row per run (clean, edited, control) and per paired difference, with its interval."""
        import pandas as pd

        return pd.DataFrame([{"analysis": self.analysis, "model": self.model, "statistic": self.statistic,
                              "run": name, "edit": label, "value": e.value, "low": e.low, "high": e.high,
                              "level": self.level, "unit": self.unit, "n_units": self.n_units}
                             for name, label, e in self.rows()])

    def __repr__(self) -> str:
        text = (f"<effect of {self.edit} on {self.model}, {self.analysis} {self.statistic}: clean "
                f"{self.clean.value:.4g}, edited {self.edited.value:.4g}, difference {self.difference} over "
                f"{self.n_units} {self.unit}s")
        if self.control_difference is not None and self.beyond_control is not None:
            text += f"; control ({self.control_kind}) {self.control_difference}, beyond it {self.beyond_control}"
        return text + ">"

    def _repr_html_(self) -> str:
        return self.to_frame()[["run", "edit", "value", "low", "high"]].to_html(index=False)

    def plot(self, ax=None, **kwargs):
        """:func:`plot` of this result."""
        return plot(self, ax=ax, **kwargs)

    def name(self) -> str:
        """The file name of this effect (no suffix): the edited run's name and the statistic, filesystem-safe."""
        return f"{self.model}{self.edit}__{re.sub(r'[^A-Za-z0-9.=-]+', '-', self.statistic).strip('-')}"

    def to_json(self) -> dict:
        """The document ``python -m analyses.effect`` writes (every field but the runs; an interval end that the
        resamples leave undefined is null)."""
        doc: dict[str, Any] = {FORMAT_FIELD: FORMAT}
        for f in dataclasses.fields(self):
            if f.name == "runs":
                continue
            v = getattr(self, f.name)
            doc[f.name] = [_num(v.value), _num(v.low), _num(v.high)] if isinstance(v, Estimate) else v
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> EffectResult:
        """The EffectResult a document of :meth:`to_json` holds (without its runs); one ProbeError line for a
        document that is not one."""
        if not isinstance(doc, dict) or doc.get(FORMAT_FIELD) != FORMAT:
            raise ProbeError(f"not an effect document (its format is not {FORMAT})")
        kw: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name == "runs" or (f.name not in doc and f.default is not dataclasses.MISSING):
                continue
            if f.name not in doc:
                raise ProbeError(f"the effect document has no {f.name}")
            v = doc[f.name]
            estimate = "Estimate" in str(f.type)
            if estimate and v is not None:
                if not isinstance(v, list) or len(v) != 3:
                    raise ProbeError(f"the effect document's {f.name} is not [value, low, high]")
                v = Estimate(*(math.nan if x is None else float(x) for x in v))
            kw[f.name] = v
        return cls(**kw)


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


# ----------------------------------------------------------------------------- figure


@style.drawing
def plot(result: EffectResult, ax=None, **kwargs):
    """Each run's value with its interval (clean, edited, control), like a scikit-learn Display: one point and
    error bar per run on ``ax`` (a new figure when None); beside the edited and the control run, their paired
    differences from the clean run (the runs' own intervals may overlap
    where the paired difference's excludes 0). ``kwargs`` go to ``ax.errorbar``. Returns the Axes."""
    ax = style.one_axes(ax, (4.2, 2.9))
    runs = [("clean", result.clean, None), ("edited", result.edited, result.difference)]
    if result.control is not None:
        runs.append(("control", result.control, result.control_difference))
    for x, (_, e, d) in enumerate(runs):
        err = np.array([[e.value - e.low], [e.high - e.value]])
        ax.errorbar([x], [e.value], yerr=None if not np.isfinite(err).all() else err,
                    **{"fmt": "o", "capsize": 3, **kwargs})
        if d is not None:  # the paired difference from the clean run, beside its point
            ax.annotate(f"\u0394 {d.value:+.3g}\n[{d.low:.3g}, {d.high:.3g}]", (x, e.value), xytext=(6, 0),
                        textcoords="offset points", va="center", fontsize="x-small")
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels([name for name, _, _ in runs])
    ax.set_xlim(-0.5, len(runs) - 0.2)
    ax.set_ylabel(result.statistic)
    if math.isfinite(result.clean.value):
        ax.axhline(result.clean.value, color="0.5", lw=0.6, ls=":")
    return ax
