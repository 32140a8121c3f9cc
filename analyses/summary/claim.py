"""A paper's claim, declared once, and its verdict on saved results (:class:`Finding`).

Two kinds of declaration, each built with keyword arguments and named (``name``: what the recurrence tables and
the tests pick it by):

* :class:`Claim`: "A's number is smaller (larger) than B's" -- the paper, the place, the statement, the
  analysis whose results it reads, the typed number it compares (``read``: a :class:`Read` of one of the
  analysis's Result accessors, returning :class:`analyses.stats.Sample`), the contrast and the sign the
  claim gives it, and the unit the intervals resample and pair on. Its ``matchups`` say what is compared
  with what (one line of the table each); :func:`analyses.summary.evidence.compare` decides each one by
  the one rule and :func:`analyses.stats.combine` decides the claim from them.
* :class:`Check`: a claim about one model's curve or slope with no two-model difference to compare
  (Fig. 9's weights, a log-log slope): a rule over point values, and the verdict says "point values".

A claim names its analysis and its accessor by reference, checked when it is declared: an analysis that is not
in :data:`analyses.ANALYSES`, an accessor its Result lacks (an AttributeError when the module is imported) or an
accessor of another analysis's Result is an error, never a claim that is "not testable". Only what the data
can lack (a number never computed, a null, too few units: :data:`analyses.summary.evidence.INPUT_ERRORS`) makes a
claim not testable; a misspelt row key inside an accessor is a KeyError, raised.

    $ python -m analyses.summary.claims --out out
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np

from analyses import stats
from analyses.stats import Verdict
from analyses.summary.evidence import (
    INPUT_ERRORS,
    Comparison,
    Matchup,
    SeedRow,
    Unreadable,
    compare,
    untestable_reason,
)

POINT_VALUES = "point values: the results keep no per-unit values, so no interval"
CHECK_LINE = "-"  # a Check's one line of the table: what Finding.over_training files its words under

# the sign a claim gives its contrast (A's number minus B's, or |A| - |B|): below zero, or above it
BELOW_ZERO, ABOVE_ZERO = -1, 1

R = TypeVar("R")


class Read(Generic[R]):
    """One number of each result a claim compares: ``method(result, *args, *more)``, where ``method`` is an
    accessor of an analysis's Result named by reference (``Read(anisotropy.Result.last_layer_mean, "token")``),
    so a misspelt accessor fails where the claim is declared, and ``more`` is what a matchup adds (a window and
    an overlap). Returns an :class:`analyses.stats.Sample`."""

    def __init__(self, method: Callable[..., stats.Sample], *args: Any):
        if not callable(method):
            raise TypeError(f"a claim reads a Result accessor, not {method!r}")
        self.method, self.args = method, args

    def __call__(self, result: R, *more: Any) -> stats.Sample:
        return self.method(result, *self.args, *more)

    @property
    def module(self) -> str:
        """The module that defines the accessor (its analysis's, or a module of the analysis's package)."""
        return str(self.method.__module__)

    def __repr__(self) -> str:
        return f"Read({self.method.__qualname__}{''.join(f', {a!r}' for a in self.args)})"


def check_analysis_name(claim: str, analysis: str, read: Read | None = None) -> None:
    """A ValueError unless ``analysis`` is registered (:data:`analyses.ANALYSES`) and ``read`` (if any) is an accessor
    of that analysis's Result (defined in its module or its package)."""
    import analyses

    if analysis not in analyses.ANALYSES:
        raise ValueError(f"claim {claim!r} reads analysis {analysis!r}, which is not registered; analyses: "
                         f"{', '.join(analyses.ANALYSES)}")
    module = analyses.ANALYSES[analysis]
    if read is not None and read.module != module and not read.module.startswith(module + "."):
        raise ValueError(f"claim {claim!r} reads {analysis} results with {read!r}, an accessor of {read.module}")


@dataclass(frozen=True)
class Contrast:
    """What a claim computes from A's and B's numbers, and how it reads."""

    name: str  # e.g. "A - B"
    fn: Callable = np.subtract


DIFFERENCE = Contrast("A - B")
NEARER_ZERO = Contrast("|A| - |B|", lambda a, b: np.abs(a) - np.abs(b))  # < 0: A nearer zero than B


@dataclass
class Finding:
    """A claim's verdict on the results: what the claim table, the report and the forest plot show."""

    paper: str  # which paper (short name)
    where: str  # section / table / figure of the paper
    claim: str  # the claim, in one sentence
    verdict: Verdict
    evidence: str  # the full evidence in words (the numbers per seed), or why it is not testable
    analysis: str  # the result folder it reads
    reason: str = ""  # why this verdict, in a few words
    comparisons: list[Comparison] = field(default_factory=list)  # one per compared model (and window, ...)
    quantity: str = ""  # the number compared
    unit: str = ""  # the unit of pairing
    contrast: str = ""  # e.g. "A - B"
    claimed_sign: int = 0  # the sign the claim gives the contrast (0: a Check)
    digits: int = 3
    # comparison (its ``against``; a Check: CHECK_LINE) -> its course over training in words (trajectories)
    over_training: dict[str, str] = field(default_factory=dict)

    @property
    def deciding(self) -> Comparison | None:
        """The comparison that decides the verdict (:func:`analyses.stats.combine`)."""
        if not self.comparisons:
            return None
        return self.comparisons[stats.combine([c.verdict for c in self.comparisons])[1]]

    @property
    def difference(self) -> float | None:
        return None if self.deciding is None else self.deciding.difference

    @property
    def interval(self) -> list | None:
        return None if self.deciding is None else self.deciding.interval

    @property
    def seeds(self) -> list[SeedRow]:
        return [s for c in self.comparisons for s in c.seeds]

    @property
    def n_seeds(self) -> int:
        return max((len(c.seeds) for c in self.comparisons if c.verdict != stats.UNTESTED), default=0)

    @property
    def point_values(self) -> bool:
        return self.claimed_sign == 0 or any(c.point_values for c in self.comparisons)

    def to_json(self) -> dict:
        doc = asdict(self)
        doc.update(verdict=str(self.verdict), comparisons=[c.to_json() for c in self.comparisons],
                   difference=self.difference, interval=self.interval, n_seeds=self.n_seeds)
        return doc


@dataclass(frozen=True, kw_only=True)
class Claim:
    """A claim that A's number is smaller (``claimed_sign`` :data:`BELOW_ZERO`) or larger (:data:`ABOVE_ZERO`)
    than B's, in ``contrast``."""

    name: str  # how it is picked (the recurrence tables, tests): short, unique among the claims
    paper: str
    where: str
    statement: str
    analysis: str  # the result folder it reads (a registered analysis)
    quantity: str  # the number compared, in words (a reason names it: "slstm-small's <quantity> is null")
    unit: str  # what the intervals resample and the pairs match on: sentence, window, document, block, context
    contrast: Contrast
    claimed_sign: int
    read: Read  # the number of each result compared
    matchups: Callable[[Sequence, Read], list[Matchup]]  # the analysis's results, read -> what is compared with what
    missing: str  # why it is not testable when there is nothing to compare
    like: Callable | None = None  # result -> settings that must also agree (a training recipe)
    digits: int = 3

    def __post_init__(self) -> None:
        if self.claimed_sign not in (BELOW_ZERO, ABOVE_ZERO):
            raise ValueError(f"claim {self.name!r}: claimed_sign is BELOW_ZERO or ABOVE_ZERO, not {self.claimed_sign}")
        check_analysis_name(self.name, self.analysis, self.read)

    def judge(self, results: dict[str, list]) -> Finding:
        """The verdict on typed results (analysis -> Results)."""
        found = results.get(self.analysis, [])
        head: dict[str, Any] = dict(paper=self.paper, where=self.where, claim=self.statement, analysis=self.analysis,
                                    quantity=self.quantity, unit=self.unit, contrast=self.contrast.name,
                                    claimed_sign=self.claimed_sign, digits=self.digits)  # Finding's fields
        bad = next((r for r in found if isinstance(r, Unreadable)), None)
        try:
            if bad is not None:
                raise ValueError(bad.reason)
            matchups = self.matchups(found, self.read)
        except INPUT_ERRORS as e:
            why = bad.reason if bad is not None else untestable_reason(e)
            return Finding(verdict=stats.UNTESTED, evidence=why, reason=why, **head)
        if not matchups:
            return Finding(verdict=stats.UNTESTED, evidence=self.missing, reason=self.missing, **head)
        comps = [compare(m, self.quantity, self.claimed_sign, self.contrast.fn, self.like) for m in matchups]
        verdict, k = stats.combine([c.verdict for c in comps])
        evidence = "; ".join(evidence_text(c, self.digits, self.unit) for c in comps)
        return Finding(verdict=verdict, evidence=evidence, reason=comps[k].reason, comparisons=comps, **head)


@dataclass(frozen=True, kw_only=True)
class Check:
    """A claim decided by ``rule(results) -> (verdict, evidence)`` over point values (no per-unit values
    exist for it, and no two-model difference): its verdict is marked "point values"."""

    name: str  # how it is picked: short, unique among the claims
    paper: str
    where: str
    statement: str
    analysis: str  # the result folder it reads (a registered analysis)
    rule: Callable[[list], tuple[Verdict, str]]
    missing: str

    def __post_init__(self) -> None:
        check_analysis_name(self.name, self.analysis)

    def judge(self, results: dict[str, list]) -> Finding:
        found = [r for r in results.get(self.analysis, [])]
        head: dict[str, Any] = dict(paper=self.paper, where=self.where, claim=self.statement, analysis=self.analysis)
        bad = next((r for r in found if isinstance(r, Unreadable)), None)
        if bad is not None:
            return Finding(verdict=stats.UNTESTED, evidence=bad.reason, reason=bad.reason, **head)
        if not found:
            return Finding(verdict=stats.UNTESTED, evidence=self.missing, reason=self.missing, **head)
        try:
            verdict, evidence = self.rule(found)
        except INPUT_ERRORS as e:
            return Finding(verdict=stats.UNTESTED, evidence=untestable_reason(e), reason=untestable_reason(e), **head)
        reason = evidence if verdict == stats.UNTESTED else POINT_VALUES
        return Finding(verdict=verdict, evidence=evidence, reason=reason, **head)


# ----------------------------------------------------------------------------- the evidence in words


def fmt_interval(iv: Sequence[float] | None, digits: int) -> str:
    return "" if iv is None else f" [{iv[0]:.{digits}f}, {iv[1]:.{digits}f}]"


def evidence_text(c: Comparison, digits: int, unit: str = "") -> str:
    """'slstm-small 0.199 [0.190, 0.210] vs bert-small 0.276 [0.270, 0.283], difference -0.077 [...] (paired)'
    per seed, then the interval over seeds and the verdict with its reason."""
    if c.verdict == stats.UNTESTED and not c.seeds:
        return f"{c.against}: not testable ({c.reason})"
    parts = []
    for r in c.seeds:
        head = f"seed {r.seed}: " if len(c.seeds) > 1 else ""
        values = (f"{r.a} {r.value_a:.{digits}f}{fmt_interval(r.interval_a, digits)} vs {r.b} "
                  f"{r.value_b:.{digits}f}{fmt_interval(r.interval_b, digits)}, " if r.value_a is not None
                  and r.value_b is not None else f"{r.a} - {r.b}: ")
        paired = f" (paired over {r.units} {unit}s)" if r.paired and r.units else ""
        parts.append(f"{head}{values}difference {r.difference:+.{digits}f}"
                     f"{fmt_interval(r.interval, digits)}{paired}")
    n = len(c.seeds)
    over = f"; over {n} seeds {c.difference:+.{digits}f}{fmt_interval(c.across, digits)} (t interval)" if c.across \
        else ""
    points = " (point values)" if c.point_values else ""
    return ", ".join(parts) + over + f" ({n} seed{'s' if n > 1 else ''}{points}: {c.verdict}, {c.reason})"
