"""What an analysis's results show, in words, and the compact tables the report shows in place of long ones.

The report page opens each analysis's section with a few sentences generated from the typed Results: the
headline number of each model, compared across the models present ("my-bert's last-layer tokens are far more
anisotropic than minilm-l6's: 0.985 vs 0.091 (mean cosine of random pairs: 0 isotropic, 1 one direction)").
An analysis without its own sentence here is described by its Results' ``headline()`` (every Result has one),
so a new analysis gets sentences with no edit here.

Comparisons name the largest and smallest value and how far apart they are: "far more" when the smaller is
less than half the larger (the gap is at least half of the larger magnitude), "more" when the gap is at least
a tenth of it, else "about as". These are words for the size of a gap, not tests: whether a difference holds
over sentences and seeds is the claims table's (:mod:`analyses.summary.claims`).

    sentences("anisotropy", results)      # results: the analysis's Result objects
    compact_tables("similarity", results)  # per pair and measure: last x last, diagonal, best matches
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from analyses.summary.evidence import INPUT_ERRORS

if TYPE_CHECKING:  # the Result classes the sentences read (for the type checker; the report imports them anyway)
    from analyses.anisotropy import Result as Anisotropy
    from analyses.causal_probing import Result as CausalProbing
    from analyses.common import AnalysisResult
    from analyses.intrinsic_dimension import Result as IntrinsicDimension
    from analyses.isoscore import Result as IsoScore
    from analyses.perplexity import Result as Perplexity
    from analyses.probing import Result as Probing
    from analyses.redundancy import Result as Redundancy
    from analyses.similarity import Result as Similarity
    from analyses.topics import Result as Topics
    from analyses.transitions import Result as Transitions

# A result the sentence or table writer cannot phrase (a null where a number reads, a value of another shape) is
# described by its headline instead, or not at all: prose never stops the report page. (The claims, which decide
# verdicts, do not take KeyError, TypeError or AttributeError for missing data.)
PHRASING_ERRORS = (*INPUT_ERRORS, KeyError, TypeError, AttributeError)

FAR, CLEAR = 0.5, 0.1  # the gap, as a share of the larger magnitude, that reads "far more" / "more"


def shown(result: AnalysisResult) -> str:
    """The name a result's model is shown under: its registry name, or, for a folder or ``hf:`` model, the name
    the user gave it."""
    name, requested = str(result.model_name), result.identity.model_requested
    if isinstance(requested, str) and requested and name.startswith(("dir--", "hf--")):
        return requested
    return name


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def degree(high: float, low: float) -> str:
    """How far apart two values read: "far", "clear" or "close" (see the module docstring)."""
    scale = max(abs(high), abs(low))
    gap = (high - low) / scale if scale > 0 else 0.0
    return "far" if gap >= FAR else "clear" if gap >= CLEAR else "close"


def compare(values: Mapping[str, float | None], subject: str, adjective: str | None, measure: str,
            fmt: str = ".3f") -> str:
    """One sentence comparing ``values`` (model -> number): one model, its value; two, which is larger and by
    how much; more, the largest and the smallest. ``subject`` is what the number describes; with an
    ``adjective`` (what a larger number means: "anisotropic") the sentence says "X's <subject> are far more
    <adjective> than Y's", else "X's <subject> is far higher than Y's"; ``measure`` says what it is."""
    found = {k: v for k, v in values.items() if v is not None and _finite(v)}
    if not found:
        return ""
    ranked = sorted(found, key=lambda k: -found[k])
    hi, lo = ranked[0], ranked[-1]
    a, b = format(found[hi], fmt), format(found[lo], fmt)
    if len(found) == 1:
        return f"{hi}'s {subject}: {a} ({measure})."
    if len(found) > 2:
        most = ("the most " + adjective, "the least") if adjective else ("the highest", "the lowest")
        verb = "are" if adjective else "is"
        return f"Of these {len(found)} models, {hi}'s {subject} {verb} {most[0]} ({a}) and {lo}'s {most[1]} ({b}) " \
               f"({measure})."
    how = degree(found[hi], found[lo])
    if how == "close":
        same = f"are about as {adjective}" if adjective else "are about equal"
        return f"{hi}'s and {lo}'s {subject} {same}: {a} vs {b} ({measure})."
    far = "far " if how == "far" else ""
    more = f"are {far}more {adjective}" if adjective else f"is {far}higher"
    return f"{hi}'s {subject} {more} than {lo}'s: {a} vs {b} ({measure})."


def _anisotropy(results: Sequence[Anisotropy]) -> list[str]:
    measure = "mean cosine of random pairs: 0 isotropic, 1 one direction"
    return [compare({shown(r): r.layers[-1].token.mean for r in results}, "last-layer tokens", "anisotropic",
                    measure),
            compare({shown(r): r.layers[-1].sentence.mean for r in results}, "last-layer sentence vectors",
                    "anisotropic", measure)]


def _isoscore(results: Sequence[IsoScore]) -> list[str]:
    measure = "IsoScore: 1 isotropic, 0 one direction"
    return [compare({shown(r): r.layers[-1].token.isoscore for r in results}, "last-layer tokens", "isotropic",
                    measure),
            compare({shown(r): r.layers[-1].sentence.isoscore for r in results}, "last-layer sentence vectors",
                    "isotropic", measure)]


def _intrinsic_dimension(results: Sequence[IntrinsicDimension]) -> list[str]:
    out = [compare({shown(r): r.layers[-1].token.twonn for r in results}, "last-layer token intrinsic dimension",
                   None, "TwoNN", ".1f")]
    for r in results[:4]:  # where each model's token dimension peaks (its profile over depth)
        ids = [x for row in r.layers if (x := row.token.twonn) is not None and _finite(x)]
        if len(ids) == len(r.layers):
            top = int(np.argmax(ids))
            out.append(f"{shown(r)}'s token intrinsic dimension peaks at layer {top} of {len(ids) - 1} "
                       f"({ids[top]:.1f}) and is {ids[-1]:.1f} at the last layer.")
    return out


def _transitions(results: Sequence[Transitions]) -> list[str]:
    return [compare({shown(r): r.middle_token_distance().point for r in results}, "layer-to-layer token change",
                    None, "mean L2 distance between consecutive layers' token vectors, intermediate layers")]


def _redundancy(results: Sequence[Redundancy]) -> list[str]:
    first = results[0].windows[0]
    n, p = first.window, first.thresholds[0].threshold
    ks = {shown(r): next((found[1].mean for w in r.windows if w.window == n and (found := w.at(p)) is not None),
                         float("nan")) for r in results}
    return [compare(ks, f"number of principal components for {100 * p:g}% of the variance", None,
                    f"mean over windows of {n} tokens; more components = less redundant", ".1f")]


def _similarity(results: Sequence[Similarity]) -> list[str]:
    out = []
    for r in results[:6]:
        m = "cka" if "cka" in r.measures else r.measures[0]
        ab = r.matrix(m, "ab")  # (L_A + 1, L_B + 1)
        if not np.isfinite(ab[-1]).any():
            continue
        best = int(np.nanargmax(ab[-1]))
        out.append(f"{r.model_a} vs {r.model_b} ({r.unit}s): {m.upper()} of the last layers {_value(ab[-1, -1])}; "
                   f"{r.model_a}'s last layer is closest to {r.model_b}'s layer {best} of {ab.shape[1] - 1} "
                   f"({ab[-1, best]:.3f}).")
    if len(results) > 6:
        out.append(f"... and {len(results) - 6} more pairs (the table below).")
    return out


def _probing(results: Sequence[Probing]) -> list[str]:
    out = []
    for r in results:
        parts = []
        for t in r.tasks:
            best = max(t.layers, key=lambda row: row.accuracy)
            parts.append(f"{t.task} at layer {best.layer} ({best.accuracy:.3f} against a majority "
                         f"baseline of {best.majority:.3f})")
        if parts:
            out.append(f"{shown(r)} is probed best for " + "; ".join(parts) + ".")
    return out


def _perplexity(results: Sequence[Perplexity]) -> list[str]:
    out = []
    settings = sorted({row.setting for r in results for row in r.rows})
    for t, o in settings[:4]:
        ppl = {shown(r): next((row.token_perplexity for row in r.rows if row.setting == (t, o)), float("nan"))
               for r in results}
        out.append(compare(ppl, f"token perplexity at T={t}, o={o}", None, "lower predicts better", ".2f"))
    return out


def _topics(results: Sequence[Topics]) -> list[str]:
    out = []
    for r in results:
        s = r.statistics
        out.append(f"{r.model_a.name}'s continuations are closer to their context's topics than "
                   f"{r.model_b.name}'s in {100 * s.share_a_less:.1f}% of {len(r.jsd_a)} contexts (mean JSD "
                   f"{s.mean_jsd_a:.4f} vs {s.mean_jsd_b:.4f}; lower = closer).")
    return out


def _causal_probing(results: Sequence[CausalProbing]) -> list[str]:
    """Per task, the layers of each model where erasing the property (LEACE) costs more of the model's own loss than
    random erasures of the same share of variance, by the pooled test and in every seed's run
    (causal_probing.used_layers)."""
    from analyses.causal_probing import used_layers

    out = []
    tasks = list(dict.fromkeys(t.task for r in results for t in r.tasks))
    for task in tasks:
        parts = []
        for r in results:
            layers = used_layers(r, task)
            if layers is not None:
                parts.append(f"{shown(r)}: {', '.join(map(str, layers)) if layers else 'none'}")
        if parts:
            out.append(f"Erasing {task} (LEACE) costs the model more of its own loss than random erasures of the "
                       "same share of variance (pooled over seeds and in every seed, Holm over layers) at layers: "
                       + "; ".join(parts) + ".")
    return out


def _headlines(results: Sequence[AnalysisResult]) -> list[str]:
    """Any analysis: each Result's headline numbers, one sentence per model."""
    out = []
    for r in results[:8]:
        head = r.headline()
        if head:
            out.append(f"{shown(r)}: " + "; ".join(f"{k} {v}" for k, v in head.items()) + ".")
    if len(results) > 8:
        out.append(f"... and {len(results) - 8} more results (the tables below).")
    return out


SAY: dict[str, Callable[[list], list[str]]] = {  # analysis -> its sentences
    "anisotropy": _anisotropy, "isoscore": _isoscore, "intrinsic_dimension": _intrinsic_dimension,
    "transitions": _transitions, "redundancy": _redundancy, "similarity": _similarity, "probing": _probing,
    "perplexity": _perplexity, "topics": _topics, "causal_probing": _causal_probing,
}


def sentences(analysis: str, results: list) -> list[str]:
    """What the typed ``results`` of ``analysis`` show, in words (none when they cannot be read)."""
    if not results:
        return []
    try:
        return [s for s in SAY.get(analysis, _headlines)(results) if s]
    except PHRASING_ERRORS:
        try:
            return [s for s in _headlines(results) if s]
        except PHRASING_ERRORS:
            return []


# ----------------------------------------------------------------------------- compact tables


def _value(x: float, fmt: str = ".3f") -> str:
    """A similarity as the report writes it: n/a where it is undefined (null: a layer without variance)."""
    return format(x, fmt) if np.isfinite(x) else "n/a"


def _similarity_table(results: Sequence[Similarity]) -> dict:
    """Per pair and measure: the last layers' value, the diagonal (A's layer l against B's layer at the same
    relative depth) and, for each of A's layers, B's best-matching layer."""
    rows = []
    for r in results:
        for m in r.measures:
            ab = r.matrix(m, "ab")  # (L_A + 1, L_B + 1)
            la, lb = ab.shape[0] - 1, ab.shape[1] - 1
            same = [round(i * lb / la) if la else 0 for i in range(la + 1)]
            diag = ", ".join(_value(ab[i, j], ".2f") for i, j in enumerate(same))
            best = ", ".join("-" if not np.isfinite(row).any() else str(int(np.nanargmax(row))) for row in ab)
            rows.append([f"{r.model_a} vs {r.model_b}", r.unit, m.upper(), _value(ab[-1, -1]), diag, best])
    return {"title": "similarity: one row per pair and measure (the full matrices are in the CSV files)",
            "header": ["pair (A vs B)", "unit", "measure", "last x last", "A's layer 0..L against B's layer at the "
                       "same relative depth", "B's best-matching layer for A's layer 0..L"],
            "rows": rows}


TABLES: dict[str, Callable[[list], dict]] = {"similarity": _similarity_table}


def compact_tables(analysis: str, results: list) -> list[dict]:
    """The short tables the report shows for ``analysis`` in place of its long CSVs: [{title, header, rows}]."""
    if analysis not in TABLES or not results:
        return []
    try:
        return [TABLES[analysis](results)]
    except PHRASING_ERRORS:
        return []
