"""Which seeds of a trajectory file speak for the claims table's results, and the table's "over training" words.

A seed's trajectory (:class:`~analyses.summary.trajectory_doc.CourseSeed`) says how the table's difference came to
be only when its last snapshot IS the table's result: it is used for a comparison of the table when

* its seed is one of the comparison's seeds and its sides (``a``, ``b``) are that seed's two models, in order;
* the sha256 of both sides' final weights are those the table's results were computed from;
* it records the corpus identity and the settings it was computed with (files written before they were recorded
  do not), and they are the table's results' (:func:`analyses.summary.evidence.like_key`: every corpus key it
  records, and every setting);
* its last point is the end of training and equals the table's difference for that seed (the same sign, and the
  same value within :data:`ROUNDING`).

Otherwise the cell says why in a few words ("no trajectory of these weights", "no trajectory of these results
(seed 3: made with other settings (n_sentences: 1500, the table's 100))"); a seed not used beside seeds that are
is named after the word. A claim checked on point values uses its trajectory when the weights, corpus and settings
of every model it read are the table's.
"""

from __future__ import annotations

import numpy as np

from analyses.pairs import PairInfo
from analyses.summary.claim import CHECK_LINE, Finding
from analyses.summary.course import NONE, describe
from analyses.summary.evidence import SeedRow, like_key
from analyses.summary.trajectory_doc import ClaimCourse, CourseCheck, CourseSeed, Trajectories

ROUNDING = 1e-3  # relative: what a float16 activation cache and another batch size move a number by (evidence.RUN_KEYS)
OTHER_WEIGHTS = "no trajectory of these weights"


def attach(found: list[Finding], results: dict[str, list], doc: Trajectories, shas: dict[str, str]) -> None:
    """Fill each finding's ``over_training`` (comparison -> words; "-" for a check) from ``doc``; ``shas``: model
    name -> the sha256 of the weights the table's results record."""
    claims: dict[tuple, ClaimCourse] = {c.key: c for c in doc.claims}
    for f in found:
        mine = claims.get((f.paper, f.where, f.claim))
        if mine is None:
            continue
        table = [r for r in results.get(f.analysis, []) if isinstance(getattr(r, "model_name", None), str)]
        if not f.comparisons and mine.check is not None:
            f.over_training[CHECK_LINE] = _check_words(mine.check, table, shas)
        by_against = {c.against: c for c in mine.comparisons}
        for c in f.comparisons:
            course = by_against.get(c.against)
            f.over_training[c.against] = NONE if course is None or not course.seeds else \
                _words(course.seeds, c.seeds, table, shas)


def _words(seeds: list[CourseSeed], rows: list[SeedRow], table: list, shas: dict[str, str]) -> str:
    usable: list[tuple[CourseSeed, str | None]] = []
    unused: list[tuple[CourseSeed, str | None]] = []
    for s in seeds:
        why = why_not(s, rows, table, shas)
        (unused if why else usable).append((s, why))
    if usable:
        words = describe([s for s, _ in usable])
        return words + "".join(f"; seed {s.seed} not used: {why}" for s, why in unused)
    if all(why == OTHER_WEIGHTS for _, why in unused):
        return OTHER_WEIGHTS
    return "no trajectory of these results (" + "; ".join(f"seed {s.seed}: {why}" for s, why in unused) + ")"


def why_not(s: CourseSeed, rows: list[SeedRow], table: list, shas: dict[str, str]) -> str | None:
    """Why seed trajectory ``s`` does not speak for the table's comparison with seed rows ``rows``
    (:attr:`analyses.summary.evidence.Comparison.seeds`) computed from results ``table``; None when it does."""
    row = next((r for r in rows if r.seed == s.seed), None)
    if row is None:
        have = ", ".join(str(r.seed) for r in rows) or "none"
        return f"not one of the table's seeds ({have})"
    if (s.a, s.b) != (row.a, row.b):
        return f"its sides are {s.a} vs {s.b}, not {row.a} vs {row.b}"
    if any(shas.get(m) is None or s.final_sha256.get(k) != shas[m] for k, m in (("a", s.a), ("b", s.b))):
        return OTHER_WEIGHTS
    made = _made_like(s.corpus, s.settings, [r for r in table if sides(r) & {s.a, s.b}])
    if made:
        return made
    last = s.last
    if last is None or last.fraction != 1.0 or last.difference is None:
        return "it has no number at the end of training"
    d, t = float(row.difference), last.difference
    if np.sign(d) != np.sign(t) or abs(d - t) > ROUNDING * max(abs(d), abs(t)) + 1e-12:
        return f"it ends at {t:+.4g}, the table's difference is {d:+.4g}"
    return None


def _check_words(check: CourseCheck, table: list, shas: dict[str, str]) -> str:
    if not check.models or any(shas.get(m) is None or check.final_sha256.get(m) != shas[m] for m in check.models):
        return OTHER_WEIGHTS
    made = _made_like(check.corpus, check.settings, [r for r in table if r.model_name in check.models])
    if made:
        return f"no trajectory of these results ({made})"
    return f"{check.over_training} ({', '.join(check.models)})"


def sides(result) -> set[str]:
    """The names a result is of: its own, and each side's of a pair (as its identity records them)."""
    pair = PairInfo.of(result)
    return {result.model_name, *(pair.names if pair is not None else ())}


def _made_like(corpus: dict | None, settings: dict | None, results: list) -> str | None:
    """Why a trajectory that records ``corpus`` and ``settings`` was not computed like ``results`` (None: it was):
    every corpus key it records and every setting must be theirs."""
    if not corpus or settings is None:
        return "it does not record its corpus and settings (written before they were: make trajectories again)"
    if not results:
        return "the table has no result of these models to compare it with"
    for r in results:
        key = like_key(r)
        for what, mine, theirs in (("another corpus", corpus, {k: v for k, v in key.corpus.items() if k in corpus}),
                                   ("other settings", settings, key.settings)):
            for k in [*mine, *(k for k in theirs if k not in mine)]:
                if mine.get(k) != theirs.get(k):
                    return f"made with {what} ({k}: {_short(mine.get(k))}, the table's {_short(theirs.get(k))})"
    return None


def _short(x: object) -> str:
    text = "absent" if x is None else str(x)
    return text[:19] + "..." if len(text) > 22 else text
