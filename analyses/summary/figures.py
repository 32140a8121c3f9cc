"""Redraw every figure and table from saved results, without running any model, then the report.

For every analysis in :data:`analyses.ANALYSES` that has results under ``<out>/results/<analysis>/``, read
them back as its Result objects and draw the figures and tables its declaration lists
(:meth:`analyses.analysis.Analysis.save_figures`); then write the one-page report ``<out>/report.html``
(:mod:`analyses.summary.report`). Each result file is read and made into its Result once
(:class:`analyses.files.SavedResults`), and the report and its claims table are given what was read.

    $ python -m analyses.summary.figures [--out out] [--model minilm-l6 --model tiny-bert] [--jobs 2]

Drawing is mostly matplotlib's text layout and PDF font subsetting; ``--jobs`` draws the analyses in that many
processes at once (the files are the same whatever the number).
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import analyses
from analyses.common import arg, parse_config, run_main, unique
from analyses.files import SavedFile, SavedResults, pick_results
from analyses.summary.report import write_report
from probes.errors import ProbeError


@dataclass
class Config:
    """Redraw all figures from saved results."""

    out: str = arg("out", "output root holding results/; figures go to <out>/figures/")
    model: list[str] = arg([], "only these models, in this order (default: every saved result)")
    jobs: int = arg(1, "analyses drawn at once, each in its own process", min=1)


def redraw(out: str, models: list[str] | None = None, jobs: int = 1, saved: SavedResults | None = None) -> list[Path]:
    """Redraw every analysis that has saved results, ``jobs`` at a time; returns the figure and table paths (in
    the order of analyses.ANALYSES). ``saved``: the result files read already (default: read them)."""
    saved = saved if saved is not None else SavedResults(out)
    todo = []
    for name in analyses.ANALYSES:
        stems = {f.path.stem for f in saved.files(name)}
        wanted = [m for m in models if m in stems] if models else None  # analyses without them are skipped
        if stems and wanted != []:
            by_stem = {f.path.stem: f for f in saved.files(name)}
            todo.append((name, [by_stem[m] for m in wanted] if wanted else saved.files(name), wanted is None))
    if jobs == 1 or len(todo) < 2:
        return [p for name, files, every in todo for p in draw(out, name, files, every)]
    # fork where there is one: the children start with everything imported
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    with ProcessPoolExecutor(min(jobs, len(todo)), mp_context=context) as pool:
        drawn = [pool.submit(draw, out, name, files, every) for name, files, every in todo]
        return [p for job in drawn for p in job.result()]


def draw(out: str, name: str, files: list[SavedFile], every: bool = True) -> list[Path]:
    """The figures and tables of analysis ``name`` from its result files read already (``every``: the whole
    folder, so files that are not results of ``name`` are left out with a warning)."""
    results = pick_results(files, name, every)
    if not results:  # only files that are not results of this analysis
        return []
    try:
        return analyses.get(name).save_figures(results, out)
    except (KeyError, TypeError, IndexError) as e:  # a result written by another version of the suite
        raise ProbeError(f"the saved {name} results under {out}/results/{name} do not have the layout this "
                         f"version draws (missing {e}); run python -m analyses.{name} again") from None


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__.split("\n\n")[0])
    saved = SavedResults(cfg.out)  # every result file read once, for the figures and the report
    paths = redraw(cfg.out, unique(cfg.model), cfg.jobs, saved)
    if not paths:
        which = f" for {', '.join(cfg.model)}" if cfg.model else ""
        raise ProbeError(f"nothing to draw: no saved results{which} under {cfg.out}/results "
                         "(run an analysis first, e.g. make demo)")
    for p in paths:
        print(p)
    print(f"report: {write_report(cfg.out, saved)}")


if __name__ == "__main__":
    run_main(main)
