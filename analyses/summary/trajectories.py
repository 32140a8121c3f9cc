"""Each claim's paired difference along training, and whether its sign is still moving at the end.

The claims' models are trained with ``--snapshots`` (:mod:`recipes.loop`: the model after 1/32, 1/16, 1/8,
1/4, 1/2, 3/4 and all of its steps). At every such point this module runs the analyses the claims read, with
the demo's settings (:data:`PLAN`, the Makefile's), on every model's checkpoint of that point
(:mod:`analyses.series`), names each checkpoint's result after the model it is a snapshot of, and judges the
claims on them with the claims' own code (:func:`analyses.summary.claims.judge_all`). So every number of a
trajectory is computed exactly as the claims table computes it, and the last point of a seed is that seed's
final model: the point records the weights' sha256, which the claims table checks against its own result
before it uses the trajectory.

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
from analyses.summary.course import LAST_HALF, TRAJECTORY_FILE, check_over_training, last_half_change, over_training
from probes.errors import ProbeError
from probes.io import atomic_write, strict_json

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


def _renamed(result, names: dict[str, str]):
    """``result`` as if computed on the models its points are snapshots of (``names``: point -> model)."""
    ident = result.identity
    if isinstance(ident.model, dict) and set(ident.model) == {"a", "b"}:  # a pair: each side's own name
        model = {k: {**v, "name": names.get(v.get("name"), v.get("name"))} for k, v in ident.model.items()}
        name = "-vs-".join(model[k]["name"] for k in ("a", "b"))
        ident = dataclasses.replace(ident, model=model, model_name=name)
    else:
        ident = dataclasses.replace(ident, model_name=names.get(ident.model_name, ident.model_name))
    return dataclasses.replace(result, identity=ident)


def judge_points(series: list, results: dict[str, list]) -> list[dict]:
    """Per point of training (by fraction), the claims judged on that point's results: a list of
    ``{"fraction", "findings": [Finding]}`` in training order."""
    from analyses.summary.claims import CLAIMS, judge_all

    names = {p.name: model_of(s) for s in series for p in s.points}
    where = {p.name: fraction(p) for s in series for p in s.points}
    fractions = sorted({f for f in where.values() if np.isfinite(f)})
    out = []
    for f in fractions:
        at = {a: [_renamed(r, names) for r in rs if _point_of(r, where) == f] for a, rs in results.items()}
        claims = [c for c in CLAIMS if getattr(c, "analysis", None) in at and at[c.analysis]]
        models = {c.statement: sorted(r.model_name for r in at[c.analysis]) for c in claims}
        out.append({"fraction": f, "findings": judge_all(at, claims), "models": models})
    return out


def _point_of(result, where: dict[str, float]) -> float | None:
    hits = [f for name, f in where.items() if name == result.model_name or f"{name}-vs-" in result.model_name]
    return hits[0] if hits else None


# ----------------------------------------------------------------------------- the trajectories


def trajectories(series: list, judged: list[dict]) -> dict:
    """The document written to :data:`TRAJECTORY_FILE` (see the module docstring)."""
    steps = {model_of(s): {round(fraction(p), 6): (p.step, p.tokens) for p in s.points} for s in series}
    shas = {model_of(s): _weights_sha(s.points[-1].source) for s in series}
    claims: dict[tuple, dict] = {}
    for point in judged:
        for f in point["findings"]:
            key = (f.paper, f.where, f.claim)
            entry = claims.setdefault(key, {"paper": f.paper, "where": f.where, "claim": f.claim,
                                            "quantity": f.quantity, "contrast": f.contrast,
                                            "claimed_sign": f.claimed_sign, "comparisons": {}})
            if not f.comparisons:  # a check of point values: its verdict at each point, on the models it read
                models = point["models"].get(f.claim, [])
                check = entry.setdefault("check", {"models": models, "final_sha256": {m: shas.get(m) for m in models},
                                                   "points": []})
                check["points"].append({"fraction": point["fraction"], "verdict": str(f.verdict)})
            for c in f.comparisons:
                comp = entry["comparisons"].setdefault(c.against, {"against": c.against, "seeds": {}})
                for r in c.seeds:
                    seed = comp["seeds"].setdefault(r["seed"], {"seed": r["seed"], "a": r["a"], "b": r["b"],
                                                               "final_sha256": {"a": shas.get(r["a"]),
                                                                                "b": shas.get(r["b"])},
                                                               "points": []})
                    step, tokens = steps.get(r["a"], {}).get(round(point["fraction"], 6), (None, None))
                    seed["points"].append({"fraction": point["fraction"], "step": step, "tokens": tokens,
                                           "difference": r["difference"], "interval": r["interval"]})
    out = []
    for entry in claims.values():
        comps = []
        for comp in entry["comparisons"].values():
            seeds = [comp["seeds"][k] for k in sorted(comp["seeds"])]
            comps.append({"against": comp["against"], "seeds": seeds, "over_training": over_training(seeds),
                          "last_half_change": last_half_change(seeds)})
        if "check" in entry:
            entry["check"]["over_training"] = check_over_training(entry["check"]["points"])
        out.append({**entry, "comparisons": comps})
    return {"rule": f"stable: every seed's difference keeps its final sign at every point from {LAST_HALF:g} of "
                    f"training on; still moving: a seed's sign changes there", "last_half": LAST_HALF, "claims": out}


def _weights_sha(folder: str) -> str | None:
    from probes.checkpoints.identity import weights_sha

    try:
        return weights_sha(Path(folder))
    except (OSError, ValueError):
        return None


def write(doc: dict, out: str | os.PathLike) -> Path:
    path = Path(out) / TRAJECTORY_FILE
    atomic_write(path, (strict_json(doc) + "\n").encode("utf-8"))
    return path


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
