"""The trajectory document (``<out>/trajectories/claims-over-training.json``, docs/claims-over-training.json) as
typed records, with the one codec that reads and writes its JSON.

What :mod:`analyses.summary.trajectories` writes: the rule, and per claim (paper, where, statement, quantity,
contrast, claimed sign) one :class:`CourseComparison` per compared model, each with a :class:`CourseSeed` per seed
trained with snapshots -- the two models compared (``a``, ``b``), the sha256 of their final weights, the corpus
identity and the settings the seed's results were computed with (the claims' like-with-like key,
:func:`analyses.summary.evidence.like_key`) and a :class:`CoursePoint` per snapshot (fraction of training, step,
tokens, the paired difference and its 95% interval; a difference the claims could not compute is null). A claim
checked on point values has a :class:`CourseCheck` instead: its models, their final weights, and its verdict per
snapshot.

:meth:`Trajectories.from_json` reads exactly that structure. A key missing, a key it does not know (it would be
dropped), a value of another type (``claims`` null, a difference ``"big"``, a fraction ``"end"``, ``comparisons``
a mapping) is one :class:`~probes.errors.ProbeError` line that names the file and the place; so is a file that is
not JSON (:func:`read`). The only keys a file may lack are ``corpus`` and ``settings``, which files written before
they were recorded do not have: they read as None, and the claims table does not use such a seed (it says why).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probes.errors import ProbeError

OPTIONAL = ("corpus", "settings")  # the keys a trajectory written before they were recorded lacks


class Malformed(ValueError):
    """The document is not what :mod:`analyses.summary.trajectories` writes (the message says where and why)."""


@dataclass(frozen=True)
class CoursePoint:
    """One snapshot of a seed: how far into training, and the claim's paired difference there (None: the claims
    could not compute it) with its 95% interval."""

    fraction: float
    step: int | None
    tokens: int | None
    difference: float | None
    interval: tuple[float, float] | None


@dataclass
class CourseSeed:
    """One seed's trajectory: models ``a`` and ``b`` compared at every snapshot, the sha256 of their final weights,
    and what its results were computed with (None in files written before it was recorded)."""

    seed: int
    a: str
    b: str
    final_sha256: dict[str, str | None]  # "a" and "b": each side's final weights (None: not readable)
    points: list[CoursePoint]
    corpus: dict | None = None  # the corpus identity (like_key's "corpus") of the last point's results
    settings: dict | None = None  # the settings that change the numbers (like_key's "settings")

    @property
    def last(self) -> CoursePoint | None:
        return self.points[-1] if self.points else None


@dataclass
class CourseComparison:
    """One compared model of a claim (a line of the claims table) along training, per seed."""

    against: str
    seeds: list[CourseSeed]
    over_training: str  # the rule's word on all the seeds of the file
    last_half_change: float | None


@dataclass(frozen=True)
class CheckPoint:
    fraction: float
    verdict: str


@dataclass
class CourseCheck:
    """A claim checked on point values: its verdict at every snapshot of the models it read."""

    models: list[str]
    final_sha256: dict[str, str | None]  # model -> its final weights
    points: list[CheckPoint]
    over_training: str
    corpus: dict | None = None
    settings: dict | None = None


@dataclass
class ClaimCourse:
    """One claim's course over training."""

    paper: str
    where: str
    claim: str
    quantity: str
    contrast: str
    claimed_sign: int
    comparisons: list[CourseComparison]
    check: CourseCheck | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return self.paper, self.where, self.claim


@dataclass
class Trajectories:
    """The whole document."""

    rule: str
    last_half: float
    claims: list[ClaimCourse] = field(default_factory=list)

    @classmethod
    def from_json(cls, doc: Any) -> Trajectories:
        """The typed document; :class:`Malformed` (naming the place) for any structure
        :mod:`analyses.summary.trajectories` does not write."""
        r = _Obj(doc, "the document", ("rule", "last_half", "claims"))
        return cls(r.text("rule"), r.number("last_half"), [_claim(c, f"claims[{i}]")
                                                          for i, c in enumerate(r.list("claims"))])

    def to_json(self) -> dict:
        return {"rule": self.rule, "last_half": self.last_half, "claims": [_claim_json(c) for c in self.claims]}


def read(path: str | os.PathLike) -> Trajectories:
    """The trajectory file at ``path``, read strictly (:func:`analyses.files.read_result`: JSON, no NaN), as
    typed records; one ProbeError line that names the file otherwise."""
    from analyses.files import read_result

    doc = read_result(path)
    try:
        return Trajectories.from_json(doc)
    except Malformed as e:
        raise ProbeError(f"{path} is not a valid trajectory file ({e}); run make trajectories again") from None


def write(doc: Trajectories, path: str | os.PathLike) -> Path:
    """``doc`` as JSON at ``path``, atomically."""
    from probes.io import atomic_write, strict_json

    path = Path(path)
    atomic_write(path, (strict_json(doc.to_json()) + "\n").encode("utf-8"))
    return path


# ----------------------------------------------------------------------------- reading


class _Obj:
    """A JSON object at ``where`` with exactly the keys ``required`` (and any of ``optional``)."""

    def __init__(self, x: Any, where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()):
        if not isinstance(x, dict):
            raise Malformed(f"{where} is {_kind(x)}, not an object")
        lacks = [k for k in required if k not in x]
        if lacks:
            raise Malformed(f"{where} lacks {', '.join(map(repr, lacks))}")
        unknown = [k for k in x if k not in required and k not in optional]
        if unknown:
            raise Malformed(f"{where} has {', '.join(map(repr, unknown))}, which a trajectory file does not hold")
        self.x, self.where = x, where

    def at(self, key: str) -> str:
        return f"{self.where}.{key}"

    def value(self, key: str) -> Any:
        return self.x.get(key)

    def text(self, key: str) -> str:
        v = self.x[key]
        if not isinstance(v, str):
            raise Malformed(f"{self.at(key)} is {_kind(v)}, not a text")
        return v

    def number(self, key: str, *, null: bool = False) -> Any:
        return _number(self.x[key], self.at(key), null=null)

    def whole(self, key: str, *, null: bool = False) -> Any:
        v = self.x[key]
        if v is None and null:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            raise Malformed(f"{self.at(key)} is {_kind(v)}, not a whole number")
        return v

    def list(self, key: str) -> list:
        v = self.x[key]
        if not isinstance(v, list):
            raise Malformed(f"{self.at(key)} is {_kind(v)}, not a list")
        return v

    def mapping(self, key: str) -> dict | None:
        v = self.x.get(key)
        if v is not None and not isinstance(v, dict):
            raise Malformed(f"{self.at(key)} is {_kind(v)}, not an object")
        return v


def _kind(x: Any) -> str:
    if x is None:
        return "null"
    if isinstance(x, str):
        return f"the text {x[:30]!r}"
    return {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object"}.get(
        type(x), type(x).__name__)


def _number(v: Any, where: str, *, null: bool = False) -> float | None:
    if v is None and null:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise Malformed(f"{where} is {_kind(v)}, not a finite number")
    return float(v)


def _shas(x: Any, where: str, keys: list[str] | None) -> dict[str, str | None]:
    if not isinstance(x, dict):
        raise Malformed(f"{where} is {_kind(x)}, not an object")
    if keys is not None and sorted(x) != sorted(keys):
        raise Malformed(f"{where} names {sorted(x)}, not {sorted(keys)}")
    for k, v in x.items():
        if v is not None and not isinstance(v, str):  # null: weights that could not be read
            raise Malformed(f"{where}.{k} is {_kind(v)}, not a sha256")
    return dict(x)


def _point(x: Any, where: str) -> CoursePoint:
    r = _Obj(x, where, ("fraction", "step", "tokens", "difference", "interval"))
    fraction = r.number("fraction")
    if not 0 < fraction <= 1:
        raise Malformed(f"{r.at('fraction')} is {fraction}, not a fraction of training in (0, 1]")
    iv = r.value("interval")
    if iv is not None:
        if not isinstance(iv, list) or len(iv) != 2:
            raise Malformed(f"{r.at('interval')} is {_kind(iv)}, not a list of two numbers")
        iv = (_number(iv[0], r.at("interval[0]")), _number(iv[1], r.at("interval[1]")))
    return CoursePoint(fraction, r.whole("step", null=True), r.whole("tokens", null=True),
                       r.number("difference", null=True), iv)


def _ordered(points: list, where: str) -> None:
    fractions = [p.fraction for p in points]
    if fractions != sorted(set(fractions)):
        raise Malformed(f"{where} are not in training order")


def _seed(x: Any, where: str) -> CourseSeed:
    r = _Obj(x, where, ("seed", "a", "b", "final_sha256", "points"), OPTIONAL)
    points = [_point(p, f"{where}.points[{i}]") for i, p in enumerate(r.list("points"))]
    _ordered(points, r.at("points"))
    return CourseSeed(r.whole("seed"), r.text("a"), r.text("b"), _shas(r.value("final_sha256"),
                                                                       r.at("final_sha256"), ["a", "b"]),
                      points, r.mapping("corpus"), r.mapping("settings"))


def _comparison(x: Any, where: str) -> CourseComparison:
    r = _Obj(x, where, ("against", "seeds", "over_training", "last_half_change"))
    seeds = [_seed(s, f"{where}.seeds[{i}]") for i, s in enumerate(r.list("seeds"))]
    return CourseComparison(r.text("against"), seeds, r.text("over_training"), r.number("last_half_change", null=True))


def _check(x: Any, where: str) -> CourseCheck:
    r = _Obj(x, where, ("models", "final_sha256", "points", "over_training"), OPTIONAL)
    models = r.list("models")
    for i, m in enumerate(models):
        if not isinstance(m, str):
            raise Malformed(f"{where}.models[{i}] is {_kind(m)}, not a model name")
    points = []
    for i, p in enumerate(r.list("points")):
        q = _Obj(p, f"{where}.points[{i}]", ("fraction", "verdict"))
        points.append(CheckPoint(q.number("fraction"), q.text("verdict")))
    _ordered(points, r.at("points"))
    return CourseCheck(models, _shas(r.value("final_sha256"), r.at("final_sha256"), models), points,
                       r.text("over_training"), r.mapping("corpus"), r.mapping("settings"))


def _claim(x: Any, where: str) -> ClaimCourse:
    r = _Obj(x, where, ("paper", "where", "claim", "quantity", "contrast", "claimed_sign", "comparisons"), ("check",))
    sign = r.whole("claimed_sign")
    if sign not in (-1, 0, 1):
        raise Malformed(f"{r.at('claimed_sign')} is {sign}, not -1, 0 or 1")
    comps = [_comparison(c, f"{where}.comparisons[{i}]") for i, c in enumerate(r.list("comparisons"))]
    check = None if "check" not in x else _check(r.value("check"), r.at("check"))
    return ClaimCourse(r.text("paper"), r.text("where"), r.text("claim"), r.text("quantity"), r.text("contrast"), sign,
                       comps, check)


# ----------------------------------------------------------------------------- writing


def _point_json(p: CoursePoint) -> dict:
    return {"fraction": p.fraction, "step": p.step, "tokens": p.tokens, "difference": p.difference,
            "interval": None if p.interval is None else list(p.interval)}


def _recorded(corpus: dict | None, settings: dict | None) -> dict:
    return {k: v for k, v in (("corpus", corpus), ("settings", settings)) if v is not None}


def _claim_json(c: ClaimCourse) -> dict:
    out: dict[str, Any] = {"paper": c.paper, "where": c.where, "claim": c.claim, "quantity": c.quantity,
                           "contrast": c.contrast, "claimed_sign": c.claimed_sign, "comparisons": [
                               {"against": comp.against,
                                "seeds": [{"seed": s.seed, "a": s.a, "b": s.b, "final_sha256": dict(s.final_sha256),
                                           **_recorded(s.corpus, s.settings),
                                           "points": [_point_json(p) for p in s.points]} for s in comp.seeds],
                                "over_training": comp.over_training, "last_half_change": comp.last_half_change}
                               for comp in c.comparisons]}
    if c.check is not None:
        k = c.check
        out["check"] = {"models": list(k.models), "final_sha256": dict(k.final_sha256),
                        **_recorded(k.corpus, k.settings),
                        "points": [{"fraction": p.fraction, "verdict": p.verdict} for p in k.points],
                        "over_training": k.over_training}
    return out
