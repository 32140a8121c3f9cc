"""Bootstrap intervals over units, intervals over seeds, and the one verdict rule. Pure numpy/scipy, no I/O.

Every interval over units is a seeded percentile bootstrap over the unit a number averages (sentences,
windows, documents, held-out blocks, contexts). A resample is a row of multinomial counts
``W[b, u]`` (how often unit u is drawn in resample b), so B resamples of a mean of per-unit values
cost one matrix product ``W @ values / n``. The counts depend only on (n, resamples, seed): two
models whose results list the same units in the same order and use the same seed are resampled
alike, so the difference of their replicates is the PAIRED bootstrap of the difference
(:func:`difference_replicates`); with other units the replicates are decoupled by a seeded shuffle
(an unpaired bootstrap).

Such an interval is conditional on one trained model's weights. A claim about an architecture also
needs the spread between models trained with other seeds: :func:`seed_interval` is the t interval of
the mean of the per-seed differences, and :func:`decide` is the one rule that turns per-seed intervals
and the across-seed interval into a :class:`Verdict`.

    >>> x = np.arange(10.0); W = resample_weights(len(x), 1000, seed=0)   # W: (resamples, units) draw counts
    >>> lo, hi = interval(W @ x / len(x)); bool(lo < x.mean() < hi)   # 95% percentile interval of the mean of x
    True
"""

from __future__ import annotations

import enum
import functools
import hashlib
import math
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

# the bootstrap block's record, which the analyses read as stats.Bootstrap and stats.Replicated
from analyses.bootstrap_record import Bootstrap as Bootstrap
from analyses.bootstrap_record import Replicated as Replicated
from analyses.stacklevel import outside_stacklevel

RESAMPLES = 1000  # default number of bootstrap resamples
LEVEL = 0.95  # default two-sided interval level
SEED = 0  # default bootstrap seed
WEIGHT_BLOCK_ELEMENTS = 2**20  # resample_weight_blocks: float64 weights per block (8 MiB)
KEPT_WEIGHT_ELEMENTS = 2**22  # resample_weight_blocks keeps the last two draws up to this size (32 MiB each)

# A verdict needs at least this many units behind every interval it reads. The percentile interval of a
# mean is about mean +- 1.96 x the plug-in standard error, which is sqrt((n - 1) / n) of the unbiased one,
# and the normal quantile stands in for Student's t with n - 1 degrees of freedom. Together a nominal 95%
# interval covers the true mean about 93% of the time at 20 units (normal data), 90% at 10, 85% at 5 and
# 60% at 2 (there, half the resamples draw one unit twice). From 20 units on, the shortfall is small
# beside the intervals' other approximations; below it an interval would claim a precision it does not have.
MIN_UNITS = 20


class Verdict(str, enum.Enum):
    """What the results say of a claim. A str that prints, formats and compares as its text (what
    enum.StrEnum does, which Python 3.10 lacks)."""

    HOLDS = "holds"  # every seed's interval and the interval over seeds lie on the claimed side of zero
    FAILS = "does not hold"  # ... all lie on the opposite side
    INCONCLUSIVE = "inconclusive"  # an interval crosses zero, the seeds disagree, or one seed cannot speak for all
    UNTESTED = "not testable"  # the results needed are missing, unlike, too small or not numbers: the reason says

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


HOLDS, FAILS, INCONCLUSIVE, UNTESTED = Verdict.HOLDS, Verdict.FAILS, Verdict.INCONCLUSIVE, Verdict.UNTESTED

# the reasons of an inconclusive verdict
SEEDS_DISAGREE = "seeds disagree"
CROSSES_ZERO = "the interval crosses zero"
ONE_SEED = "one seed: its weights are one draw of the architecture (the interval over seeds needs 2 or more)"
ACROSS_CROSSES = "the interval over seeds crosses zero"

# A model trained again with another seed is registered as ``<model>-seed1``, ``<model>-seed2``; seed 0
# keeps the plain name.
SEED_SUFFIX = re.compile(r"^(?P<base>.+)-seed(?P<seed>\d+)$")


def seed_of(name: str) -> tuple[str, int]:
    """(model, seed): ``bert-small-seed2`` -> ("bert-small", 2); a plain name is seed 0."""
    m = SEED_SUFFIX.match(str(name))
    return (m["base"], int(m["seed"])) if m else (str(name), 0)


def resample_weights(n: int, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """(resamples, n) float64 multinomial counts: row b says how often each of n units is drawn in
    resample b (each row sums to n). Depends only on (n, resamples, seed)."""
    if n < 1:
        raise ValueError(f"a bootstrap needs at least one unit, got {n}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    rng = np.random.default_rng([int(seed), int(n)])
    return rng.multinomial(n, np.full(n, 1.0 / n), size=int(resamples)).astype(np.float64)


def resample_weight_blocks(n: int, resamples: int = RESAMPLES, seed: int = SEED,
                           block_elements: int = WEIGHT_BLOCK_ELEMENTS) -> Iterator[np.ndarray]:
    """The rows of :func:`resample_weights` ``(n, resamples, seed)`` in consecutive (b, n) float64 blocks of
    at most ``block_elements`` entries (at least one row each), drawn from the same seeded generator one
    block after the other: concatenated, they are its matrix exactly. Memory O(block_elements), whatever n."""
    if n < 1:
        raise ValueError(f"a bootstrap needs at least one unit, got {n}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if int(n) * int(resamples) <= KEPT_WEIGHT_ELEMENTS:  # small enough to keep: drawn once for every layer
        yield from _kept_weight_blocks(int(n), int(resamples), int(seed), int(block_elements))
    else:
        yield from _draw_weight_blocks(int(n), int(resamples), int(seed), int(block_elements))


def _draw_weight_blocks(n: int, resamples: int, seed: int, block_elements: int) -> Iterator[np.ndarray]:
    rng = np.random.default_rng([seed, n])
    p = np.full(n, 1.0 / n)
    rows = max(1, block_elements // n)
    for start in range(0, resamples, rows):
        yield rng.multinomial(n, p, size=min(rows, resamples - start)).astype(np.float64)


@functools.lru_cache(maxsize=2)
def _kept_weight_blocks(n: int, resamples: int, seed: int, block_elements: int) -> tuple[np.ndarray, ...]:
    """:func:`_draw_weight_blocks`, kept (read-only) for the next call with the same arguments: an analysis
    resamples the same sentences at every layer."""
    blocks = tuple(_draw_weight_blocks(n, resamples, seed, block_elements))
    for b in blocks:
        b.flags.writeable = False
    return blocks


def blockwise_replicates(statistic: Callable[[np.ndarray], np.ndarray], n: int, resamples: int = RESAMPLES,
                         seed: int = SEED, block_elements: int = WEIGHT_BLOCK_ELEMENTS) -> np.ndarray:
    """``statistic(W)`` of the weights of :func:`resample_weights` ``(n, resamples, seed)``, applied to blocks of
    resamples (:func:`resample_weight_blocks`) and concatenated along axis 0: the same replicates as
    ``statistic(resample_weights(n, resamples, seed))`` for a statistic computed row by row (each replicate
    from its own resample), without the (resamples, n) matrix. (resamples, ...)"""
    return np.concatenate([np.asarray(statistic(W)) for W in resample_weight_blocks(n, resamples, seed,
                                                                                   block_elements)])


# A block bootstrap (analyses.blocks) saves ``interval_level`` (the level its intervals are read at) and, where it
# resamples runs of saved units, ``runs`` in its bootstrap block; the two functions below read them.


def interval_level(block: Bootstrap) -> float:
    """The level at which a saved ``bootstrap`` block's replicates are read: its ``interval_level`` (a block
    bootstrap's expanded level) or else its ``level``."""
    return block.read_level


def grouped(values, block: Bootstrap | None) -> np.ndarray:
    """Per-unit values summed over the runs a saved ``bootstrap`` block resamples (its ``runs``: the first unit of
    each run) or, without ``runs``, as they are. (n_runs, ...)"""
    v = np.asarray(values, dtype=np.float64)
    runs = None if block is None else block.runs
    return v if runs is None else np.add.reduceat(v, np.asarray(runs, dtype=np.int64), axis=0)


def interval(replicates, level: float = LEVEL) -> np.ndarray:
    """Percentile interval of bootstrap replicates along axis 0: (2,) for (B,), (2, k) for (B, k).

    A non-finite replicate is a resample where the statistic does not exist (e.g. a mean cosine over
    pairs of distinct sentences when every draw is the same sentence). Leaving such resamples out
    conditions the interval on the statistic existing; once they are more than one tail's share,
    (1 - level) / 2, of all resamples, the ends of the interval are unknown and it is NaN (no
    interval: a result file writes null) rather than the interval of the few resamples left, which
    with two units is zero wide and may not even hold the point estimate."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    r = np.asarray(replicates, dtype=np.float64)
    a = (1 - level) / 2
    flat = r.ndim == 1
    r = r.reshape(r.shape[0], int(np.prod(r.shape[1:])))  # (B, k)
    finite = np.isfinite(r)
    defined = finite.mean(axis=0) >= 1 - a if len(r) else np.zeros(r.shape[1], bool)  # (k,)
    out = np.full((2, r.shape[1]), np.nan)
    if defined.any():
        out[:, defined] = np.nanquantile(np.where(finite, r, np.nan)[:, defined], [a, 1 - a], axis=0)
    return out[:, 0] if flat else out


def mean_replicates(values, weights: np.ndarray) -> np.ndarray:
    """Bootstrap replicates of the mean of per-unit ``values`` ((n,) or (n, k)) under ``weights`` (B, n)."""
    v = np.asarray(values, dtype=np.float64)
    return weights @ v / weights.sum(axis=1).reshape((-1,) + (1,) * (v.ndim - 1))


def ratio_replicates(numerators, denominators, weights: np.ndarray) -> np.ndarray:
    """Replicates of sum(num) / sum(den) over resampled units (e.g. NLL sums / token counts per document)."""
    num = weights @ np.asarray(numerators, dtype=np.float64)
    den = weights @ np.asarray(denominators, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return num / den


def pairwise_cosine_replicates(unit_sums, unit_sq, unit_counts, weights: np.ndarray) -> np.ndarray:
    """Replicates of the mean cosine over all pairs i != j of vectors grouped in units (sentences),
    resampling units. ``unit_sums`` (n, d): per unit the sum of its unit-normalised vectors;
    ``unit_sq`` (n,): the sum of their squared norms (1 each); ``unit_counts`` (n,): how many vectors
    (zero vectors, whose cosine is undefined, are left out of all three). With weight w_u per unit, the
    mean over ordered pairs of distinct (copy, vector) is
    (|sum_u w_u S_u|^2 - sum_u w_u^2 q_u) / ((sum_u w_u c_u)^2 - sum_u w_u^2 c_u); all ones gives exactly
    the mean of the C(N, 2) pairwise cosines. (B,)"""
    S = np.asarray(unit_sums, dtype=np.float64)
    V = weights @ S  # (B, d)
    W2 = weights * weights
    num = np.einsum("bd,bd->b", V, V) - W2 @ np.asarray(unit_sq, dtype=np.float64)
    c = np.asarray(unit_counts, dtype=np.float64)
    den = (weights @ c) ** 2 - W2 @ c
    with np.errstate(divide="ignore", invalid="ignore"):
        return num / den


def grouped_unit_sums(X: np.ndarray, unit_of: np.ndarray, n_units: int,
                      chunk_elements: int = WEIGHT_BLOCK_ELEMENTS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sums (n_units, d), squared norms (n_units,), counts (n_units,)) of the unit-normalised rows of X
    grouped by ``unit_of`` (each row's unit index). A zero row (norm 0) has no direction, so its cosine with
    anything is undefined: it is left out (it adds to no sum and no count). Rows are read in chunks of whole
    units (about ``chunk_elements`` floats) when ``unit_of`` is sorted, so X may be memory-mapped and no
    float64 copy of it is made."""
    unit_of = np.asarray(unit_of, dtype=np.int64)
    n, d = len(unit_of), X.shape[1]
    sums = np.zeros((n_units, d))
    sq = np.zeros(n_units)
    counts = np.zeros(n_units, np.int64)
    if n == 0:
        return sums, sq, counts.astype(float)
    if np.any(unit_of[1:] < unit_of[:-1]):  # not in unit order: X's rows sorted by unit first (a copy)
        order = np.argsort(unit_of, kind="stable")
        X, unit_of = np.asarray(X)[order], unit_of[order]
    step = max(1, int(chunk_elements) // max(d, 1))
    start = 0
    while start < n:
        stop = min(n, start + step)
        if stop < n:  # end the chunk at a unit boundary (one unit larger than a chunk stays whole)
            stop = int(np.searchsorted(unit_of, unit_of[stop], side="left"))
            if stop <= start:
                stop = int(np.searchsorted(unit_of, unit_of[start], side="right"))
        Xc = np.asarray(X[start:stop], dtype=np.float64)  # (b, d)
        norms = np.linalg.norm(Xc, axis=1, keepdims=True)
        nonzero = norms[:, 0] > 0
        U = Xc[nonzero] / norms[nonzero]
        units = unit_of[start:stop][nonzero]
        if len(units):
            heads = np.concatenate([[0], np.flatnonzero(units[1:] != units[:-1]) + 1])  # first row of each unit
            sums[units[heads]] = np.add.reduceat(U, heads, axis=0)
            c = np.bincount(units - units[0], minlength=int(units[-1] - units[0]) + 1)
            counts[units[0]:units[-1] + 1] += c
            sq[units[0]:units[-1] + 1] += c
        start = stop
    return sums, sq, counts.astype(float)


def cosine_replicates(X, unit_of, n_units: int, weights: np.ndarray) -> np.ndarray:
    """Replicates of the mean pairwise cosine of the rows of X (N, d), row i in unit ``unit_of[i]``,
    resampling units with ``weights`` (B, n_units). (B,)"""
    return pairwise_cosine_replicates(*grouped_unit_sums(X, unit_of, n_units), weights)


def aligned_replicates(rep_a, rep_b, paired: bool, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """Replicates of two sides lined up so that replicate b of each is one draw of the pair. ``paired``:
    both were drawn with the same weights over the same units (same order, same seed), so they line up
    as they are; else b's replicates are shuffled (seeded) so the two sides are resampled independently
    (and both are cut to the shorter length)."""
    a, b = np.asarray(rep_a, dtype=np.float64), np.asarray(rep_b, dtype=np.float64)
    if paired:
        if a.shape != b.shape:
            raise ValueError(f"paired replicates differ in shape: {a.shape} vs {b.shape}")
        return a, b
    n = min(len(a), len(b))
    return a[:n], b[:n][np.random.default_rng([int(seed), 1]).permutation(n)]


def difference_replicates(rep_a, rep_b, paired: bool, seed: int = SEED) -> np.ndarray:
    """Replicates of a - b from each side's replicates (:func:`aligned_replicates`)."""
    a, b = aligned_replicates(rep_a, rep_b, paired, seed)
    return a - b


def bootstrap_block(unit: str, n_units: int, resamples: int = RESAMPLES, level: float = LEVEL,
                    seed: int = SEED, units_id: str | None = None) -> Bootstrap:
    """The ``bootstrap`` block a result saves beside its intervals. With fewer than :data:`MIN_UNITS` units it
    says (``note``) and warns that the intervals cover less than their level (claims then read none of them)."""
    block = Bootstrap(resamples=int(resamples), level=float(level), unit=unit, n_units=int(n_units), seed=int(seed),
                      units_id=units_id)
    if n_units < MIN_UNITS:
        block.note = (f"{n_units} {unit}s: an interval over fewer than {MIN_UNITS} covers less than its "
                      f"nominal {level:.0%} (about 60% at 2 units); read it as a rough range")
        warnings.warn(f"bootstrap intervals over {n_units} {unit}s (fewer than {MIN_UNITS}) cover less than "
                      f"{level:.0%}: recorded in the result's bootstrap note", stacklevel=outside_stacklevel())
    return block


def units_id(units) -> str:
    """A short fingerprint of the ordered unit identities (texts, names, ids): equal fingerprints mean
    the same units in the same order, so two results can be paired."""
    h = hashlib.sha256()
    for u in units:
        h.update(repr(u).encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return "sha256:" + h.hexdigest()[:16]  # a prefix: never text that reads as a number


def rounded(x, digits: int = 6) -> list:
    """Replicates as JSON-ready lists, rounded to ``digits`` significant digits (keeps result files small)."""
    a = np.asarray(x, dtype=np.float64)
    out = np.array([float(f"{v:.{digits}g}") if np.isfinite(v) else np.nan for v in a.ravel()]).reshape(a.shape)
    return out.tolist()


# ----------------------------------------------------------------------------- what a claim compares


def pairing(block: Bootstrap | None) -> tuple | None:
    """The pairing key of a saved bootstrap block, (units_id, seed, resamples); None when it names no units."""
    if block is None or not block.units_id:
        return None
    return block.units_id, block.seed, block.resamples


@dataclass(frozen=True, eq=False)
class Sample:
    """One model's statistic as a claim reads it: the point value and, where the result keeps per-unit
    values, its bootstrap replicates over those units (the analyses' Results hand these out)."""

    point: float | None  # None: the result holds null here
    replicates: np.ndarray | None = None  # (B,); None: the result keeps no per-unit values (a point value)
    n_units: int | None = None  # how many units the replicates resample
    unit: str = ""  # what a unit is: sentence, window, document, block, context
    pairing: tuple | None = None  # (units_id, seed, resamples): equal for two results resampled alike
    level: float = LEVEL  # the level its percentile interval is read at (a block bootstrap: the expanded level)

    @classmethod
    def saved(cls, point, replicates, block: Bootstrap | None) -> Sample:
        """The point and the replicates a result saved beside its ``bootstrap`` block."""
        if replicates is None or block is None:
            return cls(point)
        return cls(point, np.asarray(replicates, dtype=np.float64), int(block.n_units), block.unit, pairing(block),
                   block.read_level)

    @classmethod
    def of_mean(cls, point, values, block: Bootstrap) -> Sample:
        """The mean of per-unit ``values`` resampled as ``block`` says (the weights the analysis drew)."""
        v = np.asarray(values, dtype=np.float64)
        W = resample_weights(len(v), int(block.resamples), int(block.seed))
        return cls(point, mean_replicates(v, W), len(v), block.unit, pairing(block), block.read_level)

    @classmethod
    def of_ratio(cls, point, numerators, denominators, block: Bootstrap, transform=None) -> Sample:
        """sum(num) / sum(den) over units resampled as ``block`` says (in its ``runs`` where it has them:
        :func:`grouped`), then ``transform`` (e.g. np.exp)."""
        num, den = grouped(numerators, block), grouped(denominators, block)
        W = resample_weights(len(num), int(block.resamples), int(block.seed))
        rep = ratio_replicates(num, den, W)
        return cls(point, rep if transform is None else transform(rep), len(num), block.unit, pairing(block),
                   block.read_level)

    def interval(self) -> list[float] | None:
        """Its percentile interval; None without replicates or when :func:`interval` finds none."""
        if self.replicates is None:
            return None
        iv = interval(self.replicates, self.level)
        return iv.tolist() if np.isfinite(iv).all() else None


@dataclass(frozen=True, eq=False)
class Difference:
    """``contrast(A, B)`` of two Samples, or a difference a result saved itself: the point, its replicates
    (None: point values only) and whether they were paired over the same units."""

    point: float
    replicates: np.ndarray | None
    paired: bool
    level: float = LEVEL

    def interval(self) -> list[float] | None:
        if self.replicates is None:
            return None
        iv = interval(self.replicates, self.level)
        return iv.tolist() if np.isfinite(iv).all() else None


def difference(a: Sample, b: Sample, contrast=np.subtract) -> Difference:
    """``contrast(a, b)`` (default a - b) with its replicates: paired when both Samples were resampled
    alike (equal ``pairing``), else the sides are decoupled (:func:`aligned_replicates`)."""
    point = float(contrast(a.point, b.point))
    if a.replicates is None or b.replicates is None:
        return Difference(point, None, False, a.level)
    paired = a.pairing is not None and a.pairing == b.pairing
    ra, rb = aligned_replicates(a.replicates, b.replicates, paired)
    return Difference(point, contrast(ra, rb), paired, a.level)


# ----------------------------------------------------------------------------- verdicts


def seed_interval(differences, level: float = LEVEL) -> tuple[float, float] | None:
    """The interval over seeds: mean +- t_{n-1} s / sqrt(n) of the per-seed differences (a Student t
    interval, n - 1 degrees of freedom); None with fewer than two seeds.

    Why a t interval and not a bootstrap over seeds (and units): with three seeds a bootstrap can draw
    only ten distinct sets of seeds, and its percentile interval lies inside [min, max] of the seeds'
    values, so it excludes zero whenever the seeds share a sign -- with no effect at all that happens
    one time in four (two seeds: one in two), the very event this interval is there to rule out. The t
    interval pays for estimating the spread from n values (t_2 = 4.30 instead of 1.96 with three
    seeds). Each seed's difference already carries its own sampling noise over units, so the spread of
    the seeds' differences holds both sources (the two-stage summary-statistics approach); nothing
    more is added for the units."""
    d = np.asarray(differences, dtype=np.float64)
    if len(d) < 2 or not np.isfinite(d).all():
        return None
    from scipy.stats import t

    half = float(t.ppf((1 + level) / 2, len(d) - 1)) * float(d.std(ddof=1)) / math.sqrt(len(d))
    mean = float(d.mean())
    return mean - half, mean + half


class Decision(NamedTuple):
    """The verdict of one comparison over its seeds."""

    verdict: Verdict
    reason: str
    mean: float  # the mean of the per-seed differences
    across: tuple[float, float] | None  # the interval over seeds (None: one seed)


def _side(lo: float, hi: float) -> int:
    return 1 if lo > 0 else -1 if hi < 0 else 0  # +1 above zero, -1 below, 0 crosses


def decide(differences, intervals, claimed_sign: int, level: float = LEVEL) -> Decision:
    """The one verdict rule. ``differences``: one point difference per seed; ``intervals``: per seed its
    (lo, hi) bootstrap interval, or all None where the results keep no per-unit values (then each
    seed's point difference stands in for its interval and the reason says so); ``claimed_sign``: +1
    (the claim says the difference is > 0) or -1 (< 0).

    HOLDS when every seed's interval AND the interval over seeds (:func:`seed_interval`) lie strictly on
    the claimed side of zero; FAILS when all lie on the opposite side; else INCONCLUSIVE with the reason:
    one seed (an interval over seeds needs two), the interval over seeds crosses zero, the seeds
    disagree (some seed's evidence points the other way from another's), or the interval crosses zero."""
    if claimed_sign not in (1, -1):
        raise ValueError(f"claimed_sign must be +1 or -1, got {claimed_sign}")
    pts = [float(p) for p in differences]
    ivs = list(intervals)
    if not pts or len(ivs) != len(pts):
        raise ValueError("need one point difference and one interval (or None) per seed")
    point_only = all(iv is None for iv in ivs)
    if not point_only and any(iv is None for iv in ivs):
        raise ValueError("either every seed has an interval or none has")
    ivs = [(p, p) if point_only else tuple(map(float, iv)) for p, iv in zip(pts, ivs)]
    mean = float(np.mean(pts))
    if not all(math.isfinite(x) for iv in ivs for x in iv) or not all(math.isfinite(p) for p in pts):
        return Decision(INCONCLUSIVE, "an interval or difference is not a finite number", mean, None)
    n = len(pts)
    side = [_side(lo, hi) for lo, hi in ivs]
    across = seed_interval(pts, level)
    what = "point difference (point values: no per-unit values)" if point_only else "interval"
    for want, verdict, direction in ((claimed_sign, HOLDS, "the opposite direction"),
                                     (-claimed_sign, FAILS, "the claimed direction")):
        if all(s == want for s in side):
            if across is None:
                head = f"its {what} excludes {direction}, but " if n == 1 else ""
                return Decision(INCONCLUSIVE, head + ONE_SEED, mean, None)
            if _side(*across) != want:
                return Decision(INCONCLUSIVE, f"every seed's {what} excludes {direction}, but {ACROSS_CROSSES}",
                                mean, across)
            return Decision(verdict, f"every seed's {what} and the interval over {n} seeds exclude {direction}",
                            mean, across)
    claimed = [s == claimed_sign for s in side]
    opposite = [s == -claimed_sign for s in side]
    if any(claimed) and any(opposite) or len({int(np.sign(p)) for p in pts} - {0}) > 1:
        return Decision(INCONCLUSIVE, SEEDS_DISAGREE, mean, across)
    k = sum(s == 0 for s in side)
    return Decision(INCONCLUSIVE, CROSSES_ZERO + (f" in {k} of {n} seeds" if n > 1 else ""), mean, across)


def combine(verdicts: list[Verdict]) -> tuple[Verdict, int]:
    """A claim over several comparisons (each compared model, window or overlap): it does not hold when
    any comparison does not hold; else it is not testable when any is not testable; it holds when every
    comparison holds; else it is inconclusive. Returns the verdict and the index of the deciding
    comparison: the first with the claim's verdict."""
    if not verdicts:
        raise ValueError("a claim needs at least one comparison")
    if FAILS in verdicts:
        found = FAILS
    elif UNTESTED in verdicts:
        found = UNTESTED
    elif all(v == HOLDS for v in verdicts):
        found = HOLDS
    else:
        found = INCONCLUSIVE
    return found, verdicts.index(found)
