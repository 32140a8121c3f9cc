"""Each claim's paired difference along training, and whether its sign is still moving at the end.

The claims' models are trained with ``--snapshots`` (:mod:`recipes.loop`: the model after 1/32, 1/16, 1/8,
1/4, 1/2, 3/4 and all of its steps), and the analyses the claims read run on every model's checkpoint of each
such point with the demo's settings (:mod:`analyses.trajectory_plan`, which records the series it ran along in
``<out>/points.json``). This module reads those results and that record, never a checkpoint folder: it names
each checkpoint's result after the model it is a snapshot of, and judges the claims on them with the claims' own
code (:func:`analyses.summary.claims.judge_all`). So every number of a trajectory is computed exactly as the claims
table computes it, and the last point of a seed is that seed's final model. Each seed records its final weights'
sha256 and the corpus identity and settings its results were computed with; the claims table uses a seed only
where these are its own results' and the last point equals its difference (:mod:`analyses.summary.course_use`).
The document's typed records and its codec: :mod:`analyses.summary.trajectory_doc`.

**Over training** (docs/definitions.md), per comparison of a claim, from the seeds that have a trajectory:
*stable* when every such seed's paired difference has the sign it ends with at every point of the last half
of training (1/2, 3/4 and the end: :data:`LAST_HALF`); *still moving* when any seed's sign changes there; the
column says which seeds it rests on. A claim checked on point values (Fig. 9, Fig. 10) is *stable* when its verdict
on the models with snapshots is the same at every point of the last half. A claim with no trajectory says so.

    $ python -m analyses.trajectory_plan --series-root out/train/series --out out/trajectories
    $ python -m analyses.summary.trajectories --out out/trajectories
    # writes out/trajectories/claims-over-training.json; the claims table and the report read it when present
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analyses.common import arg, parse_config, read_results, run_main
from analyses.model_info import ModelPair
from analyses.pairs import PairInfo
from analyses.summary import trajectory_doc
from analyses.summary.claim import Finding
from analyses.summary.course import LAST_HALF, TRAJECTORY_FILE, check_over_training, last_half_change, over_training
from analyses.summary.evidence import LikeKey
from analyses.summary.trajectory_doc import (
    CheckPoint,
    ClaimCourse,
    CourseCheck,
    CourseComparison,
    CoursePoint,
    CourseSeed,
    Trajectories,
)
from analyses.trajectory_plan import PLAN, SeriesRecord, read_points
from probes.errors import ProbeError


@dataclass
class Config:
    """Judge the claims at every snapshot of the claims' models (the results analyses.trajectory_plan wrote) and
    write each claim's differences along training."""

    out: str = arg("out/trajectories", "the results per point and points.json (analyses.trajectory_plan); the "
                                       "trajectory file is written here")
    figure: str = arg("", "also draw each claim's difference along training per seed to this file (.png or .pdf)")


def fraction(point) -> float:
    return float(point.fraction) if point.fraction is not None else float("nan")


# ----------------------------------------------------------------------------- judging each point


def renamed_result(result, names: dict[str, str]):
    """``result`` as if computed on the models its points are snapshots of (``names``: point -> model)."""
    ident = result.identity
    pair = PairInfo.of(result)
    if pair is not None:  # a pair: each side's own name, the pair named by its analysis's rule
        renamed = pair.renamed(names)
        sides = ident.pair
        assert sides is not None  # PairInfo.of found the pair there
        model = ModelPair(sides.a.renamed(renamed.a), sides.b.renamed(renamed.b))
        ident = dataclasses.replace(ident, model=model, model_name=renamed.name())
    else:
        ident = dataclasses.replace(ident, model_name=names.get(ident.model_name, ident.model_name))
    return dataclasses.replace(result, identity=ident)


@dataclass(frozen=True)
class JudgedPoint:
    """The claims judged at one point of training: its fraction, the findings, per claim (by statement) the models
    it read, and ``like``: analysis -> model name -> the corpus identity and settings of its result there
    (:func:`analyses.summary.evidence.like_key`)."""

    fraction: float
    findings: list[Finding]
    models: dict[str, list[str]]
    like: dict[str, dict[str, LikeKey]]


def judge_points(series: list[SeriesRecord], results: dict[str, list]) -> list[JudgedPoint]:
    """Per point of training (by fraction), the claims judged on that point's results, in training order."""
    from analyses.summary.claims import CLAIMS, judge_all
    from analyses.summary.course_use import sides
    from analyses.summary.evidence import like_key

    names = {p.name: s.model for s in series for p in s.points}
    where = {p.name: fraction(p) for s in series for p in s.points}
    fractions = sorted({f for f in where.values() if np.isfinite(f)})
    out = []
    for f in fractions:
        at = {a: [renamed_result(r, names) for r in rs if point_of(r, where) == f] for a, rs in results.items()}
        claims = [c for c in CLAIMS if getattr(c, "analysis", None) in at and at[c.analysis]]
        models = {c.statement: sorted(r.model_name for r in at[c.analysis]) for c in claims}
        like = {a: {n: like_key(r) for r in rs for n in sorted(sides(r))} for a, rs in at.items()}
        out.append(JudgedPoint(f, judge_all(at, claims), models, like))
    return out


def point_of(result, where: dict[str, float]) -> float | None:
    """The fraction of training of the point ``result`` was computed on (``where``: point name -> fraction): the
    point named by its model name, or, for a pair, of the two points its identity names (both at one fraction);
    matched by the names exactly (one series' name may hold another's: bert-small-seed3 in albert-small-seed3)."""
    pair = PairInfo.of(result)
    if pair is not None:
        fs = {where.get(n) for n in pair.names}
        return fs.pop() if len(fs) == 1 else None
    return where.get(str(result.model_name))


# ----------------------------------------------------------------------------- the trajectories


def trajectories(series: list[SeriesRecord], judged: list[JudgedPoint]) -> Trajectories:
    """The document written to :data:`TRAJECTORY_FILE` (see the module docstring and
    :mod:`analyses.summary.trajectory_doc`)."""
    steps = {s.model: {round(fraction(p), 6): (p.step, p.tokens) for p in s.points} for s in series}
    shas = {s.model: s.final_sha256 for s in series}
    claims: dict[tuple, ClaimCourse] = {}
    comps: dict[tuple, dict[str, dict[int, CourseSeed]]] = {}  # claim -> against -> seed -> its trajectory
    for point in judged:
        for f in point.findings:
            key = (f.paper, f.where, f.claim)
            entry = claims.setdefault(key, ClaimCourse(f.paper, f.where, f.claim, f.quantity, f.contrast,
                                                       f.claimed_sign, []))
            like = point.like.get(f.analysis, {})
            if not f.comparisons:  # a check of point values: its verdict at each point, on the models it read
                models = point.models.get(f.claim, [])
                if entry.check is None:
                    entry.check = CourseCheck(models, {m: shas.get(m) for m in models}, [], "")
                made = like.get(models[0]) if models else None
                entry.check.corpus, entry.check.settings = (made.corpus, made.settings) if made else (None, None)
                entry.check.points.append(CheckPoint(point.fraction, str(f.verdict)))
            for c in f.comparisons:
                by_seed = comps.setdefault(key, {}).setdefault(c.against, {})
                for r in c.seeds:
                    seed = by_seed.setdefault(r.seed, CourseSeed(r.seed, r.a, r.b, {
                        "a": shas.get(r.a), "b": shas.get(r.b)}, []))
                    made = like.get(r.a)  # the last point's: its results were alike (else no seed row)
                    seed.corpus, seed.settings = (made.corpus, made.settings) if made else (None, None)
                    step, tokens = steps.get(r.a, {}).get(round(point.fraction, 6), (None, None))
                    seed.points.append(CoursePoint(point.fraction, step, tokens, r.difference,
                                                   None if r.interval is None else (r.interval[0], r.interval[1])))
    for key, entry in claims.items():
        for against, by_seed in comps.get(key, {}).items():
            seeds = [by_seed[k] for k in sorted(by_seed)]
            entry.comparisons.append(CourseComparison(against, seeds, over_training(seeds), last_half_change(seeds)))
        if entry.check is not None:
            entry.check.over_training = check_over_training(entry.check.points)
    return Trajectories(f"stable: every seed's difference keeps its final sign at every point from {LAST_HALF:g} of "
                        f"training on; still moving: a seed's sign changes there", LAST_HALF, list(claims.values()))


def write(doc: Trajectories, out: str | os.PathLike) -> Path:
    """``doc`` as ``<out>/claims-over-training.json``."""
    return trajectory_doc.write(doc, Path(out) / TRAJECTORY_FILE)


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__.split("\n\n")[0])
    series = read_points(cfg.out)
    if not series:
        raise ProbeError(f"{cfg.out}/points.json records no series of a registered model (train with --snapshots)")
    out = Path(cfg.out)
    # every analysis's results under out, of this run and of earlier ones (series arrive as training ends)
    results = {a: read_results(out, a) for a in PLAN if any((out / "results" / a).glob("*.json"))}
    doc = trajectories(series, judge_points(series, results))
    print(f"wrote {write(doc, out)}")
    if cfg.figure:
        from analyses.summary.claims_figure import trajectories_figure, write_claims_figure

        print(f"wrote {write_claims_figure([], cfg.figure, draw=lambda: trajectories_figure(doc))}")


if __name__ == "__main__":
    run_main(main)
