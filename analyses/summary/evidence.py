"""What a verdict rests on: typed results read strictly, like compared with like, and one comparison per
compared model with its per-seed differences, the interval over seeds and the verdict.

A model trained with other seeds is registered as ``<model>-seed1``, ``<model>-seed2`` (seed 0 is the
plain name); :func:`by_model` groups a model with its seed variants. A seed is a model trained again, so two
results that are one seed -- the same seed number, or the same weights (:func:`weights_id`) under two seed names --
are an error naming both (:func:`distinct_seeds`), as are two result files of one model in one analysis's folder
(:func:`load_all`): the claims never pick one silently. A result computed under an edit of the model's states
(:mod:`analyses.edited`: an intervention, e.g. an erasure or an added vector) is no evidence about the model: it is
left out, said in one line naming its file (:func:`left_out_edited`). A comparison (:class:`Matchup`) holds,
per seed both models have, the two :class:`analyses.stats.Sample` the claim's typed accessor read (or a
difference a result saved itself, paired: topics). :func:`compare` then

1. checks that every result it reads was computed like the others (:func:`unlike`: the same corpus and
   sample, the same settings that change the numbers) and rests on at least
   :data:`analyses.stats.MIN_UNITS` units; else the comparison is not testable, with the reason;
2. takes per seed the difference and its bootstrap interval (:func:`analyses.stats.difference`: paired
   when both results resampled the same units);
3. decides by the one rule, :func:`analyses.stats.decide` (every seed's interval and the interval over
   seeds); where a result keeps no per-unit values the per-seed evidence is the point difference, and
   the comparison says "point values".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from analyses import stats
from analyses.absent import Absent
from analyses.edited import in_words
from analyses.files import SavedFile, SavedResults
from analyses.model_info import ModelInfo
from analyses.stats import Verdict
from probes.errors import ProbeError

if TYPE_CHECKING:
    from analyses.common import AnalysisResult

RR = TypeVar("RR", bound="AnalysisResult")  # a Result of some analysis

seed_of = stats.seed_of

# Config keys that say where and how fast a result was computed, not what it measures: the run's models
# (a result names its own model), the device, the batch size, the forward and cache precision (float
# rounding: about 1e-3 relative with a float16 cache, far inside the intervals compared) and drawing.
RUN_KEYS = frozenset({"model", "model_a", "model_b", "device", "device_map", "batch_size", "dtype", "cache_dtype",
                      "figures", "out"})
# Corpus keys that say which texts were read: the corpus's content hash, the sample drawn from it (its
# hash and size), the split and documents scored, the caller's texts. Its name or path may differ.
CORPUS_KEYS = ("source", "sha256", "split", "sample_sha256", "n_sampled", "n_texts", "documents")


# ----------------------------------------------------------------------------- reading results


class Untestable(Exception):
    """A number a verdict needs is missing, null, non-finite or not a number: the claim is not testable."""


# What the data can lack, making a claim not testable (with the reason): a number null or not finite (Untestable), a
# number the run never computed (Absent, raised by the accessor that looks for it), an index past the saved layers, a
# value out of its domain. Not KeyError, TypeError or AttributeError: those say the claim's own code is wrong (a
# misspelt row key inside an accessor, a misspelt accessor, a wrong signature), and surface as errors.
INPUT_ERRORS = (Untestable, Absent, IndexError, ValueError)


def number(x: object, what: str = "a value") -> float:
    """``x`` as a float when it is a finite int or float (not a bool, not text); else :class:`Untestable`."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise Untestable(f"{what} is {'missing (null)' if x is None else f'not a number ({x!r})'}")
    if not np.isfinite(x):
        raise Untestable(f"{what} is not finite ({x})")
    return float(x)


def untestable_reason(e: Exception) -> str:
    """Why a claim's inputs cannot give a verdict, in words."""
    if isinstance(e, Untestable):
        return str(e)
    if isinstance(e, Absent):
        return f"a result lacks {e}"
    return f"a result is not of the expected shape ({type(e).__name__}: {e})"


def saved_model_name(doc: dict, default: object = None) -> object:
    """The model name a saved document records, as it holds it (``default`` when it records none): read where a
    document is not (or not yet) its analysis's Result, to name it."""
    return doc.get("model_name", default)


def one_per_model(analysis: str, files: list[SavedFile]) -> None:
    """One result per model: two files of one analysis whose results name the same model (a backup copy
    ``slstm-small.old.json`` beside ``slstm-small.json``, a renamed copy) are a ProbeError naming both files,
    since a claim could only pick one of them silently."""
    seen: dict[str, Path] = {}
    for f in files:
        name = saved_model_name(f.doc)
        if f.result is not None and f.result.identity.edit:  # an edited run: not the model's (left out, typed_saved)
            continue
        if isinstance(name, str):
            if name in seen:
                raise ProbeError(f"{seen[name]} and {f.path} are both {analysis} results of model {name}: a claim "
                                 "reads one result per model; move or delete the one that is not current")
            seen[name] = f.path


def load_all(out: str | Path, saved: SavedResults | None = None) -> dict[str, list[dict]]:
    """analysis name -> the saved result documents (JSON) under ``<out>/results/<analysis>/``, each read by
    :func:`~analyses.common.read_result` (one error line naming a damaged file; ``saved``: the files read
    already), one result per model (:func:`one_per_model`)."""
    saved = saved if saved is not None else SavedResults(out)
    for name, files in saved.folders.items():
        one_per_model(name, files)
    return saved.docs()


@dataclass
class Unreadable:
    """A saved document that is not a result of its analysis (a key its Result needs is missing)."""

    model_name: str
    reason: str


def _unreadable(name: str, doc: dict, e: Exception) -> Unreadable:
    what = f"lacks {e}" if isinstance(e, KeyError) else f"is not of its shape ({e})"
    model = saved_model_name(doc)
    return Unreadable(str(model), f"the {name} result of {model} {what}")


def left_out_edited(analysis: str, result: object, where: object) -> bool:
    """Whether ``result`` was computed under an edit of the model's states (:mod:`analyses.edited`): then it is
    no evidence about the model, and one warning line naming ``where`` (its file) says it is left out."""
    import warnings

    from analyses.stacklevel import outside_stacklevel

    identity = getattr(result, "identity", None)
    if identity is None or not identity.edit:
        return False
    warnings.warn(f"{where}: left out of the claims: this {analysis} result of {identity.model_name} was computed "
                  f"under an edit of the model's states ({in_words(identity.edits)}), so it is not the model's own",
                  stacklevel=outside_stacklevel())
    return True


def typed(docs: dict[str, list[dict]]) -> dict[str, list]:
    """The documents of each registered analysis as its Result objects (an :class:`Unreadable` where a
    document lacks a key its Result needs: the claims that read it are not testable, with that reason); a result
    computed under an edit of the model's states is left out, said in one line (:func:`left_out_edited`)."""
    import analyses

    out: dict[str, list] = {}
    for name, found in docs.items():
        if name not in analyses.ANALYSES:
            continue
        cls = analyses.get(name).Result
        out[name] = []
        for doc in found:
            try:
                result = cls.from_json(doc)
            except (KeyError, TypeError) as e:
                out[name].append(_unreadable(name, doc, e))
                continue
            if not left_out_edited(name, result, f"the {name} result {result.model_name}"):
                out[name].append(result)
    return out


def typed_saved(saved: SavedResults) -> dict[str, list]:
    """:func:`typed` of result files read already (one result per model, :func:`one_per_model`): each file's
    Result as it was made when the file was read, or an :class:`Unreadable`; a result computed under an edit of
    the model's states is left out, said in one line naming its file (:func:`left_out_edited`)."""
    import analyses

    out: dict[str, list] = {}
    for name, files in saved.folders.items():
        one_per_model(name, files)
        if name not in analyses.ANALYSES:
            continue
        out[name] = []
        for f in files:
            if f.result is not None:
                if not left_out_edited(name, f.result, f.path):
                    out[name].append(f.result)
            elif isinstance(f.error, (KeyError, TypeError)):
                out[name].append(_unreadable(name, f.doc, f.error))
            else:
                raise f.error or ValueError(f"{f.path}: no result")
    return out


def weights_id(model: ModelInfo | AnalysisResult) -> tuple | None:
    """What identifies trained weights: every ``*weights_sha256`` the ``model`` identity's fingerprint records (a
    module-only recurrent model: the base's and its module's), from the identity dict or a result's ``model``;
    None when it records none (then no two models can be told apart by their weights)."""
    info = model if isinstance(model, ModelInfo) else model.identity.model
    fp = info.fingerprint if isinstance(info, ModelInfo) else None  # a pair's result: no one model's weights
    if not isinstance(fp, dict):
        return None
    found = tuple(sorted((k, v) for k, v in fp.items() if str(k).endswith("weights_sha256") and isinstance(v, str)))
    return found or None


def distinct_seeds(model: str, seeds: list[tuple[int, str, tuple | None]]) -> None:
    """A ProbeError naming both when two of ``model``'s seed results, ``(seed, result's model name, weights_id)``,
    are one seed: the same seed number (``bert-small`` and ``bert-small-seed0``), or the same weights (one
    checkpoint registered under two seed names). A seed is a model trained again; counting one set of weights
    twice would make an interval over seeds of nothing but that one model."""
    by_seed: dict[int, str] = {}
    by_weights: dict[tuple, str] = {}
    for seed, name, key in sorted(seeds, key=lambda s: s[:2]):  # the lower seed named first
        if seed in by_seed:
            raise ProbeError(f"results of {by_seed[seed]} and {name} are both seed {seed} of model {model}: keep one")
        by_seed[seed] = name
        if key is not None:
            if key in by_weights:
                what = f"{key[0][0]} {key[0][1][:12]}..."
                raise ProbeError(f"{by_weights[key]} and {name} have the same weights ({what}): they are one trained "
                                 f"model, not two seeds of {model}; register each seed's own checkpoint")
            by_weights[key] = name


def by_model(results: Sequence[RR]) -> dict[str, dict[int, RR]]:
    """model -> seed -> its result; two results that are one seed are a ProbeError (:func:`distinct_seeds`)."""
    out: dict[str, dict[int, RR]] = {}
    for r in results:
        base, seed = seed_of(r.model_name)
        out.setdefault(base, {})[seed] = r
    for base in out:
        distinct_seeds(base, [(seed, r.model_name, weights_id(r)) for r in results
                              for b, seed in [seed_of(r.model_name)] if b == base])
    return out


def family(result: AnalysisResult) -> str:
    """The model's registry family as its result's identity records it ("" when it records none, or for a pair's
    result)."""
    model = result.identity.model
    return model.family if isinstance(model, ModelInfo) else ""


# ----------------------------------------------------------------------------- like with like


@dataclass(frozen=True)
class LikeKey:
    """What must be equal between two results for a comparison of their numbers to mean something: the texts
    (``corpus``: :data:`CORPUS_KEYS` of the corpus identity), every setting that changes the numbers (``settings``:
    the recorded config without :data:`RUN_KEYS`) and what a claim adds (``recipe``: a training recipe, from its
    ``like``)."""

    corpus: dict[str, Any]
    settings: dict[str, Any]
    recipe: dict[str, Any] = field(default_factory=dict)


def like_key(result: AnalysisResult) -> LikeKey:
    """The :class:`LikeKey` of ``result``: its corpus identity's :data:`CORPUS_KEYS` and its settings."""
    corpus = result.corpus if isinstance(result.corpus, dict) else {}
    config = result.config if isinstance(result.config, dict) else {}
    return LikeKey({k: corpus[k] for k in CORPUS_KEYS if k in corpus},
                   {k: v for k, v in config.items() if k not in RUN_KEYS})


def _short(x: object) -> str:
    text = "absent" if x is None else str(x)
    return text[:19] + "..." if len(text) > 22 else text


def unlike(a: str, key_a: LikeKey, b: str, key_b: LikeKey) -> str | None:
    """Why results ``a`` and ``b`` cannot be compared (the first difference of their :func:`like_key`, in
    words), or None when they are alike."""
    for what, x, y in (("corpus", key_a.corpus, key_b.corpus), ("settings", key_a.settings, key_b.settings),
                       ("training recipe", key_a.recipe, key_b.recipe)):
        for k in [*x, *(k for k in y if k not in x)]:
            if x.get(k) != y.get(k):
                return f"{a} and {b} were computed with a different {what} ({k}: {_short(x.get(k))} vs " \
                       f"{_short(y.get(k))})"
    return None


# ----------------------------------------------------------------------------- comparisons


@dataclass
class Pair:
    """One seed of a comparison: model A's and model B's numbers, or a difference a result saved itself."""

    seed: int
    a: str  # model A's result name
    b: str  # model B's
    results: tuple  # the results it reads (checked like with like)
    sample_a: stats.Sample | None = None
    sample_b: stats.Sample | None = None
    saved: stats.Sample | None = None  # A - B as one result saved it (paired over its units)


@dataclass
class Matchup:
    """What one line of the claim table compares: A against one compared model (at one window, overlap, ...)."""

    against: str  # the compared model (and where), e.g. "bert-small", "gpt2-small-base, T=128, o=30"
    pairs: list[Pair]  # one per seed both sides have
    seeds_note: str = ""  # why there is no pair (seeds in common), when ``pairs`` is empty
    key: tuple = ()  # where in the results, for a table: e.g. (T, o) or (T, recurrent o, base o)


VALUES = ("value_a", "interval_a", "value_b", "interval_b")  # a SeedRow's own numbers of A and B: absent together


@dataclass(kw_only=True)
class SeedRow:
    """One seed of a comparison: the sides' result names, the difference with its bootstrap interval (None: point
    values), its sign, whether it is paired, A's and B's own numbers with their intervals (None where one result
    saved the difference itself: topics) and the units it rests on. Written as a JSON object whose four keys of A's
    and B's numbers are left out together where there are none (a point value's interval is written as null)."""

    seed: int
    a: str  # model A's result name
    b: str  # model B's
    difference: float
    interval: list[float] | None
    sign: int
    paired: bool
    value_a: float | None = None
    interval_a: list[float] | None = None
    value_b: float | None = None
    interval_b: list[float] | None = None
    units: int | None  # how many units A's sample (or the saved difference) rests on
    unit: str | None

    @property
    def values(self) -> bool:
        """Whether the row holds A's and B's own numbers (not only a difference a result saved)."""
        return self.value_a is not None

    def excludes_zero(self) -> bool:
        """Whether this seed's own interval lies on one side of zero."""
        return self.interval is not None and (self.interval[0] > 0 or self.interval[1] < 0)

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if self.values or f.name not in VALUES}


@dataclass
class Comparison:
    """The verdict of one matchup, with what it rests on (JSON-ready)."""

    against: str
    verdict: Verdict
    reason: str
    claimed_sign: int
    difference: float | None = None  # the deciding difference: the mean over seeds (one seed: that seed's)
    interval: list | None = None  # its interval: over seeds (t), or the one seed's bootstrap interval
    across: list | None = None  # the interval over seeds (None: one seed)
    point_values: bool = False  # the results keep no per-unit values: per-seed evidence is the point difference
    seeds: list[SeedRow] = field(default_factory=list)  # one per seed both sides have
    key: tuple = ()  # the matchup's key

    def to_json(self) -> dict:
        return {**asdict(self), "verdict": str(self.verdict), "seeds": [s.to_json() for s in self.seeds]}


def _checked(sample: stats.Sample | None, name: str, quantity: str) -> stats.Sample:
    if sample is None:
        raise Untestable(f"{name}'s {quantity} is missing")
    number(sample.point, f"{name}'s {quantity}")
    if sample.replicates is not None and (sample.n_units or 0) < stats.MIN_UNITS:
        raise Untestable(f"too few units: {name}'s {quantity} rests on {sample.n_units} {sample.unit or 'unit'}s "
                         f"(a verdict needs at least {stats.MIN_UNITS} for its interval to mean something)")
    return sample


def compare(matchup: Matchup, quantity: str, claimed_sign: int, contrast: Callable = np.subtract,
            like: Callable[[Any], dict] | None = None) -> Comparison:
    """The verdict of one matchup (see the module docstring). ``quantity`` names the number in reasons;
    ``contrast(A, B)`` is what the claim gives the sign ``claimed_sign``; ``like(result) -> dict`` adds
    claim-specific settings that must agree (fields of :class:`LikeKey`, e.g. ``{"recipe": ...}``)."""
    untested = lambda why: Comparison(matchup.against, stats.UNTESTED, why, claimed_sign, key=matchup.key)  # noqa: E731
    if not matchup.pairs:
        return untested(matchup.seeds_note or "no seed in common")
    keys = {}
    for p in matchup.pairs:
        for r in p.results:
            keys[r.model_name] = dataclasses.replace(like_key(r), **(like(r) if like else {}))
    first = next(iter(keys))
    for name, key in keys.items():
        if (why := unlike(first, keys[first], name, key)) is not None:
            return untested(why)
    diffs = []
    checked: list[tuple[stats.Sample, stats.Sample | None]] = []  # (the saved difference or A, B) of each pair
    try:
        for p in matchup.pairs:
            if p.saved is not None:
                s = _checked(p.saved, p.a, quantity)
                diffs.append(stats.Difference(number(s.point), s.replicates, True, s.level))
                checked.append((s, None))
            else:
                a, b = _checked(p.sample_a, p.a, quantity), _checked(p.sample_b, p.b, quantity)
                diffs.append(stats.difference(a, b, contrast))
                checked.append((a, b))
    except INPUT_ERRORS as e:
        return untested(untestable_reason(e))
    point_values = any(d.replicates is None for d in diffs)
    intervals = [None if point_values else d.interval() for d in diffs]
    if not point_values and any(iv is None for iv in intervals):
        return untested(f"no interval: most resamples of {quantity} are undefined (too few or degenerate units)")
    decision = stats.decide([d.point for d in diffs], intervals, claimed_sign)
    rows: list[SeedRow] = []
    for p, d, iv, (units, other) in zip(matchup.pairs, diffs, intervals, checked):
        row = SeedRow(seed=p.seed, a=p.a, b=p.b, difference=d.point, interval=iv, sign=int(np.sign(d.point)),
                      paired=d.paired, units=units.n_units, unit=units.unit)
        if other is not None:  # A's and B's own numbers (units is A's sample, other B's)
            row.value_a, row.value_b = number(units.point), number(other.point)
            if not point_values:
                row.interval_a, row.interval_b = units.interval(), other.interval()
        rows.append(row)
    across = None if decision.across is None else list(decision.across)
    one = len(rows) == 1
    return Comparison(matchup.against, decision.verdict, decision.reason, claimed_sign,
                      rows[0].difference if one else decision.mean, rows[0].interval if one else across,
                      across, point_values, rows, matchup.key)


R = TypeVar("R")


def seed_pairs(a: dict[int, R], b: dict[int, R]) -> tuple[list[tuple[int, R, R]], str]:
    """[(seed, A's result, B's result)] for every seed both groups have, and, when there is none, why."""
    common = sorted(set(a) & set(b))
    note = "" if common else f"no seed in common (A has seeds {sorted(a)}, B has {sorted(b)})"
    return [(s, a[s], b[s]) for s in common], note
