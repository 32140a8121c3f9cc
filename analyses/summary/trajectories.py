"""Each claim's paired difference along training, and whether its sign is still moving at the end.

The claims' models are trained with ``--snapshots`` (:mod:`recipes.loop`: the model after 1/32, 1/16, 1/8,
1/4, 1/2, 3/4 and all of its steps). At every such point this module runs the analyses the claims read, with
the demo's settings (:data:`PLAN`, the Makefile's), on every model's checkpoint of that point
(:mod:`analyses.series`), names each checkpoint's result after the model it is a snapshot of, and judges the
claims on them with the claims' own code (:func:`analyses.summary.claims.judge_all`). So every number of a
trajectory is computed exactly as the claims table computes it, and the last point of a seed is that seed's
final model. Each seed records its final weights' sha256 and the corpus identity and settings its results were
computed with; the claims table uses a seed only where these are its own results' and the last point equals its
difference (:mod:`analyses.summary.course_use`). The document's typed records and its codec:
:mod:`analyses.summary.trajectory_doc`.

**Over training** (docs/definitions.md), per comparison of a claim, from the seeds that have a trajectory:
*stable* when every such seed's paired difference has the sign it ends with at every point of the last half
of training (1/2, 3/4 and the end: :data:`LAST_HALF`); *still moving* when any seed's sign changes there; the
column says which seeds it rests on. A claim checked on point values (Fig. 9, Fig. 10) is *stable* when its verdict
on the models with snapshots is the same at every point of the last half. A claim with no trajectory says so.

    $ python -m analyses.summary.trajectories --series-root out/train/series --out out/trajectories
    # writes out/trajectories/claims-over-training.json; the claims table and the report read it when present
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analyses.common import arg, parse_config, read_results, run_main
from analyses.pairs import SIDES, PairInfo
from analyses.summary import trajectory_doc
from analyses.summary.course import LAST_HALF, TRAJECTORY_FILE, check_over_training, last_half_change, over_training
from analyses.summary.trajectory_doc import (
    CheckPoint,
    ClaimCourse,
    CourseCheck,
    CourseComparison,
    CoursePoint,
    CourseSeed,
    Trajectories,
)
from probes.errors import ProbeError

# The analyses the claims read, the demo's settings for them (Makefile: SENTENCES, PPL_TOKENS, CONTEXTS), so that a
# trajectory's last point is computed as the claims table's number is, and the models (seed 0's names; a series of
# <name>-seedN is one of <name>) each runs on, as the demo runs them.
S_LSTM_COMPARISON = ("slstm-small", "bert-small", "albert-small")
PLAN: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "anisotropy": (["--n-sentences", "1500", "--n-tokens", "1500"], S_LSTM_COMPARISON),
    "transitions": (["--n-sentences", "1500"], S_LSTM_COMPARISON),
    "isoscore": (["--n-sentences", "1500", "--n-tokens", "1500"], S_LSTM_COMPARISON),
    "redundancy": (["--window-length", "100"], S_LSTM_COMPARISON),
    "perplexity": (["--overlap", "0", "--overlap", "30", "--max-tokens", "8000"],
                   ("gpt2-small-base", "gpt2-small-recurrent")),
    "topics": (["--n-contexts", "160"], ("gpt2-small-recurrent", "gpt2-small-base")),  # a pair: (A, B) per seed
    "mlm_loss": ([], ("mog-small-wg", "mog-small-sum")),
    "mog": (["--n-sentences", "1500"], ("mog-small", "mog-small-6l")),
}


@dataclass
class Config:
    """Run the claims' analyses at every snapshot of the claims' models and write each claim's differences along
    training."""

    series_root: str = arg("out/train/series", "the folder of series folders (recipes --snapshots)")
    out: str = arg("out/trajectories", "output root: the analyses' results per point and the trajectory file")
    only: list[str] = arg([], "run only these analyses of the plan (default: all whose models have series)")
    figure: str = arg("", "also draw each claim's difference along training per seed to this file (.png or .pdf)")


# ----------------------------------------------------------------------------- which series


def find_series(root: str | os.PathLike) -> list:
    """Every finished series under ``root`` (its last snapshot is the end of training) whose snapshots record a
    registered model name. The analyses of a point already analysed from the same weights and settings are kept
    (``analyses.series.run(reuse=True)``), so the command can run again as each training run ends."""
    from probes.series import resolve

    found = []
    for folder in sorted(Path(root).glob("*")):
        if folder.is_dir() and any(folder.glob("step-*/snapshot.json")):
            s = resolve(folder)
            if s.like is not None and s.points[-1].fraction == 1.0:  # a finished run (one still training waits)
                found.append(s)
    return found


def _uses(analysis: str, s) -> bool:
    from analyses.stats import seed_of

    return seed_of(model_of(s))[0] in PLAN[analysis][1]


def model_of(series) -> str:
    """The model a series is snapshots of: its registry entry, else the series' own name."""
    return series.like or series.name


def fraction(point) -> float:
    return float(point.fraction) if point.fraction is not None else float("nan")


# ----------------------------------------------------------------------------- running the plan


def heldout_blocks(series: list) -> None:
    """Per-block held-out losses of every Graph-Transformer snapshot that lacks them (scripts/heldout_blocks.py),
    which ``analyses.mlm_loss`` pairs over."""
    import subprocess

    script = Path(__file__).resolve().parents[2] / "scripts" / "heldout_blocks.py"
    todo = [p.source for s in series if s.settings.get("family") == "mog" for p in s.points
            if not (Path(p.source) / "heldout_blocks.csv").exists()]
    if todo:
        subprocess.run([sys.executable, str(script), *todo, "--threads", "1"], check=True)


def run_plan(series: list, out: Path, only: list[str]) -> None:
    """Run each analysis of :data:`PLAN` (or of ``only``) along the series it applies to."""
    from analyses import series as series_mod
    from analyses.stats import seed_of

    for analysis, (options, models) in PLAN.items():
        if only and analysis not in only:
            continue
        mine = [s for s in series if _uses(analysis, s)]
        if not mine:
            continue
        if analysis == "mlm_loss":
            heldout_blocks(mine)
        folder = lambda s: Path(s.points[0].source).parent  # noqa: E731
        if analysis == "topics":  # one pair per seed: A's series and B's of the same seed
            seeds = {seed_of(model_of(s)): s for s in mine}
            for (name, seed), a in seeds.items():
                b = seeds.get((models[1], seed))
                if name == models[0] and b is not None:
                    series_mod.run(analysis, [folder(a), folder(b)], out=out, options=options, reuse=True)
        else:
            series_mod.run(analysis, [folder(s) for s in mine], out=out, options=options, reuse=True)


# ----------------------------------------------------------------------------- judging each point


def renamed_result(result, names: dict[str, str]):
    """``result`` as if computed on the models its points are snapshots of (``names``: point -> model)."""
    ident = result.identity
    pair = PairInfo.of(result)
    if pair is not None:  # a pair: each side's own name, the pair named by its analysis's rule
        renamed = pair.renamed(names)
        model = {k: {**ident.model[k], "name": n} for k, n in zip(SIDES, renamed.names)}
        ident = dataclasses.replace(ident, model=model, model_name=renamed.name())
    else:
        ident = dataclasses.replace(ident, model_name=names.get(ident.model_name, ident.model_name))
    return dataclasses.replace(result, identity=ident)


def judge_points(series: list, results: dict[str, list]) -> list[dict]:
    """Per point of training (by fraction), the claims judged on that point's results: a list of
    ``{"fraction", "findings": [Finding], "models", "like"}`` in training order (``like``: analysis -> model name ->
    the corpus identity and settings of its result there, :func:`analyses.summary.evidence.like_key`)."""
    from analyses.summary.claims import CLAIMS, judge_all
    from analyses.summary.course_use import sides
    from analyses.summary.evidence import like_key

    names = {p.name: model_of(s) for s in series for p in s.points}
    where = {p.name: fraction(p) for s in series for p in s.points}
    fractions = sorted({f for f in where.values() if np.isfinite(f)})
    out = []
    for f in fractions:
        at = {a: [renamed_result(r, names) for r in rs if point_of(r, where) == f] for a, rs in results.items()}
        claims = [c for c in CLAIMS if getattr(c, "analysis", None) in at and at[c.analysis]]
        models = {c.statement: sorted(r.model_name for r in at[c.analysis]) for c in claims}
        like = {a: {n: like_key(r) for r in rs for n in sorted(sides(r))} for a, rs in at.items()}
        out.append({"fraction": f, "findings": judge_all(at, claims), "models": models, "like": like})
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


def trajectories(series: list, judged: list[dict]) -> Trajectories:
    """The document written to :data:`TRAJECTORY_FILE` (see the module docstring and
    :mod:`analyses.summary.trajectory_doc`)."""
    steps = {model_of(s): {round(fraction(p), 6): (p.step, p.tokens) for p in s.points} for s in series}
    shas = {model_of(s): _weights_sha(s.points[-1].source) for s in series}
    claims: dict[tuple, ClaimCourse] = {}
    comps: dict[tuple, dict[str, dict[int, CourseSeed]]] = {}  # claim -> against -> seed -> its trajectory
    for point in judged:
        for f in point["findings"]:
            key = (f.paper, f.where, f.claim)
            entry = claims.setdefault(key, ClaimCourse(f.paper, f.where, f.claim, f.quantity, f.contrast,
                                                       f.claimed_sign, []))
            like = point.get("like", {}).get(f.analysis, {})
            if not f.comparisons:  # a check of point values: its verdict at each point, on the models it read
                models = point["models"].get(f.claim, [])
                if entry.check is None:
                    entry.check = CourseCheck(models, {m: shas.get(m) for m in models}, [], "")
                made = like.get(models[0]) if models else None
                entry.check.corpus, entry.check.settings = (made["corpus"], made["settings"]) if made else (None, None)
                entry.check.points.append(CheckPoint(point["fraction"], str(f.verdict)))
            for c in f.comparisons:
                by_seed = comps.setdefault(key, {}).setdefault(c.against, {})
                for r in c.seeds:
                    seed = by_seed.setdefault(r["seed"], CourseSeed(r["seed"], r["a"], r["b"], {
                        "a": shas.get(r["a"]), "b": shas.get(r["b"])}, []))
                    made = like.get(r["a"])  # the last point's: its results were alike (else no seed row)
                    seed.corpus, seed.settings = (made["corpus"], made["settings"]) if made else (None, None)
                    step, tokens = steps.get(r["a"], {}).get(round(point["fraction"], 6), (None, None))
                    seed.points.append(CoursePoint(point["fraction"], step, tokens, r["difference"],
                                                   None if r["interval"] is None else tuple(r["interval"])))
    for key, entry in claims.items():
        for against, by_seed in comps.get(key, {}).items():
            seeds = [by_seed[k] for k in sorted(by_seed)]
            entry.comparisons.append(CourseComparison(against, seeds, over_training(seeds), last_half_change(seeds)))
        if entry.check is not None:
            entry.check.over_training = check_over_training(entry.check.points)
    return Trajectories(f"stable: every seed's difference keeps its final sign at every point from {LAST_HALF:g} of "
                        f"training on; still moving: a seed's sign changes there", LAST_HALF, list(claims.values()))


def _weights_sha(folder: str) -> str | None:
    from probes.checkpoints.identity import weights_sha

    try:
        return weights_sha(Path(folder))
    except (OSError, ValueError):
        return None


def write(doc: Trajectories, out: str | os.PathLike) -> Path:
    """``doc`` as ``<out>/claims-over-training.json``."""
    return trajectory_doc.write(doc, Path(out) / TRAJECTORY_FILE)


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__.split("\n\n")[0])
    unknown = sorted(set(cfg.only) - set(PLAN))
    if unknown:
        raise ProbeError(f"--only {unknown[0]}: the plan has {', '.join(PLAN)}")
    series = find_series(cfg.series_root)
    if not series:
        raise ProbeError(f"{cfg.series_root} holds no series of a registered model (train with --snapshots)")
    out = Path(cfg.out)
    run_plan(series, out, cfg.only)
    # every analysis's results under out, of this run and of earlier ones (series arrive as training ends)
    results = {a: read_results(out, a) for a in PLAN if any((out / "results" / a).glob("*.json"))}
    doc = trajectories(series, judge_points(series, results))
    print(f"wrote {write(doc, out)}")
    if cfg.figure:
        from analyses.summary.claims_figure import trajectories_figure, write_claims_figure

        print(f"wrote {write_claims_figure([], cfg.figure, draw=lambda: trajectories_figure(doc))}")


if __name__ == "__main__":
    run_main(main)
