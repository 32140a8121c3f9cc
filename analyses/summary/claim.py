"""What every claim check shares: the :class:`Claim` record, strict numbers, and the two ways a verdict is
reached -- from point values, or from the bootstrap intervals of the compared difference per seed (issue 27,
:mod:`analyses.summary.evidence`). The checks of each paper are in :mod:`analyses.summary.claims`.

    $ python -m analyses.summary.claims --out out
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

from analyses import stats
from analyses.common import read_result
from analyses.summary import evidence

HOLDS, FAILS, UNTESTED = "holds", "does not hold", "not testable here"
INCONCLUSIVE = stats.INCONCLUSIVE  # the intervals of the seeds disagree, or one crosses zero (issue 27)
POINT_ONLY = "point values only: the results carry no bootstrap replicates (rerun the analysis)"


@dataclass(frozen=True)
class Claim:
    """One claim of one paper and its verdict on our results."""

    paper: str  # which paper (short name)
    where: str  # section / table / figure of the paper
    claim: str  # the claim, in one sentence
    verdict: str  # HOLDS, FAILS or UNTESTED
    evidence: str  # the numbers the verdict rests on (or why it cannot be tested)
    analysis: str  # the result folder it reads
    # issue 27, the evidence (absent = point values only: the results carry no bootstrap replicates)
    difference: float | None = None  # the compared difference (the deciding model pair, its first seed)
    interval: list | None = None  # its bootstrap interval [lo, hi]
    seeds: list | None = None  # per model pair and seed: values, their intervals, difference, interval, sign, paired
    n_seeds: int = 0  # seeds the verdict rests on (0: point values only)
    reason: str = ""  # why this verdict: every interval excludes ..., seeds disagree, the interval crosses zero

    def to_json(self) -> dict:
        return asdict(self)


# ----------------------------------------------------------------------------- reading results


def load_all(out: str | Path) -> dict[str, list[dict]]:
    """analysis name -> the saved result documents (JSON) under ``<out>/results/<analysis>/``, each read by
    :func:`~analyses.common.read_result` (one error line naming a damaged file)."""
    found = {}
    for folder in sorted((Path(out) / "results").glob("*")):
        docs = [read_result(p) for p in sorted(folder.glob("*.json"))]
        if docs:
            found[folder.name] = docs
    return found


class Untestable(Exception):
    """A number a verdict needs is missing, null, non-finite or not a number: the claim is not testable."""


def number(x, what: str = "a value") -> float:
    """``x`` as a float when it is a finite int or float (not a bool, not text); else :class:`Untestable`."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise Untestable(f"{what} is {'missing (null)' if x is None else f'not a number ({x!r})'}")
    if not math.isfinite(x):
        raise Untestable(f"{what} is not finite ({x})")
    return float(x)


def untestable_reason(e: Exception) -> str:
    """Why a claim's inputs cannot give a verdict, in words."""
    if isinstance(e, Untestable):
        return str(e)
    if isinstance(e, KeyError):
        return f"a result lacks {e}"
    return f"a result is not of the expected shape ({type(e).__name__}: {e})"


INPUT_ERRORS = (Untestable, KeyError, IndexError, TypeError, AttributeError, ValueError)


def family(doc: dict) -> str:
    model = doc.get("model")
    return model.get("family", "") if isinstance(model, dict) else ""


def size(doc: dict) -> tuple:
    m = doc.get("model") or {}
    return m.get("num_layers"), m.get("hidden_size")


def split_slstm(docs: list[dict]) -> tuple[list[dict], list[dict]]:
    """(S-LSTM results, the Transformer encoders they are compared with) among ``docs``. As in the
    paper, the comparison is between models of one size and recipe: the Transformer encoders with the
    S-LSTM's depth and width (bert-small, albert-small) when any are present, else all of them."""
    slstm = [d for d in docs if family(d) == "slstm"]
    others = [d for d in docs if family(d) not in ("slstm", "recurrent", "mog")
              and (d.get("model") or {}).get("kind", "encoder") == "encoder"]
    same = [d for d in others if any(size(d) == size(s) for s in slstm)]
    return slstm, same or others


def fmt(pairs: list[tuple[str, float]], digits: int = 3) -> str:
    return ", ".join(f"{n} {v:.{digits}f}" for n, v in pairs)


def interval_claim(paper, where, claim, analysis, a_docs, b_docs, sample, claimed_sign, contrast=None,
                    digits=3) -> Claim | None:
    """Issue 27: the verdict from the bootstrap intervals of ``contrast(A, B)`` (default A - B) per
    model pair and seed (:func:`analyses.summary.evidence.compare`); None when a result has no replicates."""
    try:
        found = evidence.compare(evidence.by_model(a_docs), evidence.by_model(b_docs), sample, claimed_sign,
                                 contrast or (lambda a, b: a - b), digits)
    except INPUT_ERRORS as e:
        return Claim(paper, where, claim, UNTESTED, untestable_reason(e), analysis)
    if found is None:
        return None
    return Claim(paper, where, claim, found["verdict"], found["evidence"], analysis, found["difference"],
                 found["interval"], found["seeds"], found["n_seeds"], found["reason"])


def compare_slstm(paper, where, claim, analysis, docs, value, better, digits=3, sample=None, claimed_sign=1,
             contrast=None) -> Claim:
    """S-LSTM vs every Transformer encoder on ``value(doc)``; ``better(a, b)``: a beats b. With
    ``sample`` (doc -> analyses.summary.evidence.Sample) the verdict comes from the intervals of
    ``contrast(S-LSTM, other)``, whose sign the claim says is ``claimed_sign`` (issue 27)."""
    slstm, others = split_slstm(docs)
    if not slstm or not others:
        return Claim(paper, where, claim, UNTESTED, "needs an S-LSTM and a Transformer encoder result", analysis)
    try:
        values = {id(d): number(value(d), f"{d['model_name']}'s value") for d in slstm + others}
    except INPUT_ERRORS as e:
        return Claim(paper, where, claim, UNTESTED, untestable_reason(e), analysis)
    if sample is not None:
        found = interval_claim(paper, where, claim, analysis, slstm, others, sample, claimed_sign, contrast, digits)
        if found is not None:
            return found
    vals = [(str(d["model_name"]), values[id(d)]) for d in slstm + others]
    held = all(better(values[id(s)], values[id(o)]) for s in slstm for o in others)
    return Claim(paper, where, claim, HOLDS if held else FAILS, fmt(vals, digits), analysis, reason=POINT_ONLY)
