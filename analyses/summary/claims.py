"""What the saved results say about each of the papers' claims (declared once, by name, in
:mod:`analyses.summary.papers`).

Every verdict is computed from the result files under ``<out>/results`` (read strictly by
:func:`analyses.common.read_result`, then as each analysis's Result), never from a model folder: a
:class:`~analyses.stats.Verdict` -- holds, does not hold, inconclusive, not testable -- with its reason.
A claim that compares two models (:class:`~analyses.summary.claim.Claim`) reads one typed number of each
result (an accessor of the analysis's Result, with its bootstrap replicates over units) and is decided by
one rule (:func:`analyses.stats.decide`): it holds when, for every compared model, every seed's
interval of the difference AND the t interval over the seeds' differences lie on the claimed side of
zero; one seed cannot speak for an architecture, so a claim resting on one seed is inconclusive at best.
Results made with another corpus, sample or settings, or with fewer than :data:`analyses.stats.MIN_UNITS`
units, make the comparison not testable, with the reason. The claims about one model's curve or slope
(:class:`~analyses.summary.claim.Check`) are decided from point values and say so.

The report page (:mod:`analyses.summary.report`) and the README show the table: one line per claim and
compared model with the verdict and the deciding difference with its interval (:func:`markdown_table`),
the full evidence folded below it, and the forest plot of every seed's difference
(:func:`analyses.summary.claims_figure.claims_figure`).

    $ python -m analyses.summary.claims --out out [--markdown] [--figure docs/claims.png]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from analyses.common import arg, parse_config, run_main
from analyses.files import SavedResults
from analyses.model_info import ModelInfo, ModelPair
from analyses.result import Identity
from analyses.stats import FAILS, HOLDS, INCONCLUSIVE, UNTESTED, Verdict  # noqa: F401 - the verdicts, re-exported
from analyses.summary.claim import (  # noqa: F401 - re-exported for the report and the tests
    ABOVE_ZERO,
    BELOW_ZERO,
    CHECK_LINE,
    DIFFERENCE,
    NEARER_ZERO,
    POINT_VALUES,
    Check,
    Claim,
    Finding,
    Read,
)
from analyses.summary.course import MOVING, NONE, STABLE, TRAJECTORY_FILE  # noqa: F401 - the words, re-exported
from analyses.summary.evidence import (  # noqa: F401 - the readers, re-exported for the report and the tests
    Matchup,
    Pair,
    Untestable,
    by_model,
    distinct_seeds,
    family,
    load_all,
    number,
    seed_pairs,
    typed,
    typed_saved,
    weights_id,
)
from analyses.summary.papers import (  # noqa: F401 - the declarations, re-exported
    CLAIMS,
    CONVBERT_CLAIMS,
    MOG_CLAIMS,
    NAMED,
    RECURRENCE_CLAIMS,
    SLSTM_CLAIMS,
    claim2_overlap,
    claim_named,
)
from analyses.summary.trajectory_doc import Trajectories
from analyses.summary.trajectory_doc import read as read_trajectories
from probes.errors import ProbeError


def judge_all(results: dict[str, list], claims: Sequence[Claim | Check] = CLAIMS) -> list[Finding]:
    """Every claim's verdict on typed results (analysis -> Results)."""
    return [c.judge(results) for c in claims]


def evaluate(out: str | Path, trajectories: str | Path | None = None, *,
             saved: SavedResults | None = None) -> list[Finding]:
    """Every claim's verdict on the results saved under ``out``, with each comparison's course over training
    where a trajectory file is present (``trajectories``, default ``<out>/trajectories/claims-over-training.json``:
    :mod:`analyses.summary.trajectories`). ``saved``: the result files read already (default: read them)."""
    results = typed_saved(saved if saved is not None else SavedResults(out))
    found = judge_all(results)
    path = Path(trajectories) if trajectories else Path(out) / "trajectories" / TRAJECTORY_FILE
    if trajectories or path.is_file():
        attach_over_training(found, results, read_trajectories(path))
    return found


def weights_of(results: dict[str, list]) -> dict[str, str]:
    """model name -> the sha256 of its weights, as the results' model identities record it (a pair: each side)."""
    out: dict[str, str] = {}

    for found in results.values():
        for r in found:
            identity = getattr(r, "identity", None)
            model = identity.model if isinstance(identity, Identity) else None
            sides = model.sides if isinstance(model, ModelPair) else (model,) if model is not None else ()
            for side in sides:
                sha, name = side.weights_sha256, side.name or (r.model_name if isinstance(model, ModelInfo) else "")
                if sha is not None and name:
                    out.setdefault(name, sha)
    return out


def attach_over_training(found: list[Finding], results: dict[str, list], doc: Trajectories) -> None:
    """Fill each finding's ``over_training`` from a trajectory document: per comparison, the rule of
    :func:`analyses.summary.course.over_training` on the seeds whose trajectory is the table's own result at its
    end -- the comparison's seed and sides, the very weights, corpus and settings the comparison's results were
    computed from, and the same difference (:mod:`analyses.summary.course_use`); where none is, why."""
    from analyses.summary import course_use

    course_use.attach(found, results, doc, weights_of(results))


def require_results(out: str | Path) -> None:
    """One line unless ``<out>/results`` holds a result file (the CLIs refuse to print or write a table of
    claims that are all untestable because --out names the wrong folder)."""
    where = Path(out) / "results"
    if not any(where.glob("*/*.json")):
        raise ProbeError(f"{where} holds no result files{'' if where.is_dir() else ' (no such folder)'}: run the "
                         f"analyses first (python -m analyses.anisotropy ... --out {out})")


# ----------------------------------------------------------------------------- the table


def _side_word(sign: int) -> str:
    return "above 0" if sign > 0 else "below 0"


@dataclass(frozen=True)
class TableLine:
    """One line of the claim table, in words: the compared models, the verdict, the deciding difference with its
    interval, the seeds (and how many of their intervals exclude 0), the course over training and the reason."""

    compared: str
    verdict: Verdict
    difference: str
    seeds: str
    why: str
    over: str


def table_lines(f: Finding) -> list[TableLine]:
    """The claim table's lines of one finding: one per compared model (a Check or an untested claim: one),
    each with the verdict, the deciding difference and its interval, the seeds, and the reason."""
    if not f.comparisons:
        return [TableLine(compared=CHECK_LINE, verdict=f.verdict, difference="point values" if f.claimed_sign == 0
                          and f.verdict != UNTESTED else "-", seeds="-", why=f.reason,
                          over=f.over_training.get(CHECK_LINE, "-"))]
    lines = []
    for c in f.comparisons:
        if c.difference is None:
            lines.append(TableLine(compared=c.against, verdict=c.verdict, difference="-", seeds="-", why=c.reason,
                                   over=f.over_training.get(c.against, "-")))
            continue
        d = f.digits
        diff = f"{c.difference:+.{d}f}" + ("" if c.interval is None else
                                          f" [{c.interval[0]:+.{d}f}, {c.interval[1]:+.{d}f}]")
        n = len(c.seeds)
        excluding = sum(1 for r in c.seeds if r.excludes_zero())
        seeds = f"{n} (point values)" if c.point_values else str(n) if n == 1 else \
            f"{n} ({excluding} of {n} exclude 0)"
        lines.append(TableLine(compared=c.against, verdict=c.verdict, difference=f"{f.contrast} = {diff}",
                               seeds=seeds, why=c.reason, over=f.over_training.get(c.against, "-")))
    return lines


def claim_over_training(f: Finding) -> str:
    """The claim's course over training in a word: "still moving" when any comparison's sign still moves in the last
    half of training, "stable" when every comparison with a trajectory keeps its sign, "-" without trajectories."""
    words = [text.split(" (")[0] for text in f.over_training.values()]
    return MOVING if MOVING in words else STABLE if STABLE in words else "-"


def markdown_table(found: list[Finding]) -> str:
    """The README's claim table: one line per claim and compared model -- the claim's verdict on its first line,
    then each comparison's verdict and its deciding difference with its 95% interval (the mean over seeds with the
    t interval when there are several seeds, else the one seed's difference with its bootstrap interval), the
    seeds and how many of their own intervals exclude zero -- then the full evidence of every claim folded in a
    <details> element."""
    cell = lambda x: str(x).replace("|", "\\|")  # noqa: E731
    lines = ["| paper | where | claim | verdict | over training | A vs B | this comparison | difference [95% interval] "
             "| seeds | over training (seeds with a trajectory) | why |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in found:
        for i, ln in enumerate(table_lines(f)):
            head = f"| {cell(f.paper)} | {cell(f.where)} | {cell(f.claim)} | **{f.verdict}** | " \
                   f"{claim_over_training(f)} |" if i == 0 else "| | | | | |"
            lines.append(f"{head} {cell(ln.compared)} | {ln.verdict} | {cell(ln.difference)} | "
                         f"{cell(ln.seeds)} | {cell(ln.over)} | {cell(ln.why)} |")
    details = ["", "<details><summary>The evidence behind each verdict (every seed's numbers with their 95% "
               "bootstrap intervals)</summary>", ""]
    details += [f"- **{f.paper} {f.where}** ({f.verdict}): {f.evidence}" for f in found]
    details += ["", "</details>"]
    return "\n".join(lines + details)


@dataclass
class Config:
    """Print each paper claim's verdict on the saved results."""

    out: str = arg("out", "output root holding results/")
    markdown: bool = arg(False, "print the claim table in Markdown (the README's), not one line per claim")
    figure: str = arg("", "also draw the forest plot of the claims' differences to this file (.png or .pdf)")


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv)
    require_results(cfg.out)
    found = evaluate(cfg.out)
    if cfg.figure:
        from analyses.summary.claims_figure import write_claims_figure

        print(f"wrote {write_claims_figure(found, cfg.figure)}", file=sys.stderr)
    if cfg.markdown:
        print(markdown_table(found))
        return
    for f in found:
        for ln in table_lines(f):
            print(f"[{ln.verdict}] {f.paper} {f.where}: {f.claim} -- {ln.compared}: {ln.difference} ({ln.why})")


if __name__ == "__main__":
    run_main(main)
