"""The claims' analyses at every snapshot of the claims' models: the results the claims' trajectories are judged on.

The claims' models are trained with ``--snapshots`` (:mod:`recipes.loop`: the model after 1/32, 1/16, 1/8, 1/4,
1/2, 3/4 and all of its steps). This runs each analysis the claims read, with the demo's settings (:data:`PLAN`,
the Makefile's), along every finished series of those models (:mod:`analyses.series`; a point already analysed
from the same weights and settings is not run again, so the command can run again as each training run ends), and
records what the summary needs to know of each series without reading checkpoint folders: the model it is
snapshots of, each point's name, fraction of training, step and tokens, and the final weights' sha256
(:class:`SeriesRecord`, written to ``<out>/points.json``). :mod:`analyses.summary.trajectories` then judges the
claims on these results.

The Graph-Transformer snapshots need their per-block held-out losses (``heldout_blocks.csv``, which
``analyses.mlm_loss`` reads) before this runs: ``make trajectories`` makes them with ``scripts/heldout_blocks.py``.

    $ python -m analyses.trajectory_plan --series-root out/train/series --out out/trajectories
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

from analyses.common import arg, parse_config, run_main
from probes.errors import ProbeError
from probes.io import atomic_write, strict_json

POINTS_FILE = "points.json"  # under the trajectories' out: the series the results were computed along

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
    """Run the claims' analyses at every snapshot of the claims' models (their results and points.json)."""

    series_root: str = arg("out/train/series", "the folder of series folders (recipes --snapshots)")
    out: str = arg("out/trajectories", "output root: the analyses' results per point and points.json")
    only: list[str] = arg([], "run only these analyses of the plan (default: all whose models have series)")


# ----------------------------------------------------------------------------- what the summary reads


@dataclass(frozen=True)
class PointRecord:
    """One snapshot: its registry name (its results' model name), fraction of training, step and tokens seen."""

    name: str
    fraction: float | None
    step: int
    tokens: int | None = None


@dataclass(frozen=True)
class SeriesRecord:
    """One series: the model it is snapshots of (its registry entry, else the series' name), its points in
    training order and the sha256 of its last point's weights (the final model's; None: not readable)."""

    model: str
    points: list[PointRecord]
    final_sha256: str | None = None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, doc: dict) -> SeriesRecord:
        return cls(doc["model"], [PointRecord(**p) for p in doc["points"]], doc["final_sha256"])


def write_points(records: list[SeriesRecord], out: str | os.PathLike) -> Path:
    """``records`` as ``<out>/points.json`` (atomically)."""
    path = Path(out) / POINTS_FILE
    atomic_write(path, (strict_json({"series": [r.to_json() for r in records]}) + "\n").encode("utf-8"))
    return path


def read_points(out: str | os.PathLike) -> list[SeriesRecord]:
    """The series recorded in ``<out>/points.json``; one error line when it is missing or not of this shape."""
    path = Path(out) / POINTS_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return [SeriesRecord.from_json(s) for s in doc["series"]]
    except FileNotFoundError:
        raise ProbeError(f"{path} is missing: run python -m analyses.trajectory_plan --out {out} first") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ProbeError(f"{path} is not a record of series points ({type(e).__name__}: {e})") from None


# ----------------------------------------------------------------------------- which series


def find_series(root: str | os.PathLike) -> list:
    """Every finished series under ``root`` (its last snapshot is the end of training) whose snapshots record a
    registered model name."""
    from probes.series import resolve

    found = []
    for folder in sorted(Path(root).glob("*")):
        if folder.is_dir() and any(folder.glob("step-*/snapshot.json")):
            s = resolve(folder)
            if s.like is not None and s.points[-1].fraction == 1.0:  # a finished run (one still training waits)
                found.append(s)
    return found


def model_of(series) -> str:
    """The model a series is snapshots of: its registry entry, else the series' own name."""
    return series.like or series.name


def record(series: list) -> list[SeriesRecord]:
    """What the summary needs of each series (:class:`SeriesRecord`), read from its folders once, here."""
    return [SeriesRecord(model_of(s), [PointRecord(p.name, None if p.fraction is None else float(p.fraction), p.step,
                                                   p.tokens) for p in s.points], _weights_sha(s.points[-1].source))
            for s in series]


def _weights_sha(folder: str) -> str | None:
    from probes.checkpoints.identity import weights_sha

    try:
        return weights_sha(Path(folder))
    except (OSError, ValueError):
        return None


def _uses(analysis: str, s) -> bool:
    from analyses.stats import seed_of

    return seed_of(model_of(s))[0] in PLAN[analysis][1]


# ----------------------------------------------------------------------------- running the plan


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
            lacking = [p.source for s in mine for p in s.points if not (Path(p.source) / "heldout_blocks.csv").exists()]
            if lacking:
                raise ProbeError(f"{lacking[0]} has no heldout_blocks.csv (and {len(lacking) - 1} more): run "
                                 "python scripts/heldout_blocks.py on the Graph-Transformer snapshots first "
                                 "(make trajectories)")
        folder = lambda s: Path(s.points[0].source).parent  # noqa: E731
        if analysis == "topics":  # one pair per seed: A's series and B's of the same seed
            seeds = {seed_of(model_of(s)): s for s in mine}
            for (name, seed), a in seeds.items():
                b = seeds.get((models[1], seed))
                if name == models[0] and b is not None:
                    series_mod.run(analysis, [folder(a), folder(b)], out=out, options=options, reuse=True)
        else:
            series_mod.run(analysis, [folder(s) for s in mine], out=out, options=options, reuse=True)


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__.split("\n\n")[0])
    unknown = sorted(set(cfg.only) - set(PLAN))
    if unknown:
        raise ProbeError(f"--only {unknown[0]}: the plan has {', '.join(PLAN)}")
    series = find_series(cfg.series_root)
    if not series:
        raise ProbeError(f"{cfg.series_root} holds no series of a registered model (train with --snapshots)")
    run_plan(series, Path(cfg.out), cfg.only)
    print(f"wrote {write_points(record(series), cfg.out)}")


if __name__ == "__main__":
    run_main(main)
