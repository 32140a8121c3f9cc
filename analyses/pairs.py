"""A pair of models, as a result computed from two models records it, and the one naming rule for its result.

A pairwise analysis (similarity, topics) computes one result from model A and model B; its identity's ``model``
holds each side's description (``{"a": {"name": ..., ...}, "b": {...}}``). :class:`PairInfo` is that pair, read
from the identity (:meth:`PairInfo.of`), never from a result's name: a name is made from a pair
(:meth:`PairInfo.name`), not the other way round, because names do not parse back (``x-vs-y-vs-z`` is both
``x`` vs ``y-vs-z`` and ``x-vs-y`` vs ``z``) and one model's name may hold another's (``bert-small-seed3`` in
``albert-small-seed3``). Which pair a result is of, and whether a model is one of its sides, is decided by the
sides' exact names as the result records them.

How a pair's result is named is declared by its Result class (:attr:`analyses.common.AnalysisResult.PAIR_JOIN`,
``PAIR_UNIT``) and made here: ``<A>__<B>`` (the default), ``<A>__<B>__<unit>`` (similarity), ``<A>-vs-<B>``
(topics).

>>> PairInfo("minilm-l6", "bert-small", unit="token").name()
'minilm-l6__bert-small__token'
>>> PairInfo("gpt2-small-recurrent", "gpt2-small-base", join=VS).name()
'gpt2-small-recurrent-vs-gpt2-small-base'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from analyses.model_info import ModelPair, model_of

JOIN = "__"  # the default: <A>__<B> (a unit, where the analysis names one, after another JOIN)
VS = "-vs-"  # <A>-vs-<B> (topics)
SIDES = ("a", "b")  # the identity's keys of a pair's two models, A then B


@dataclass(frozen=True)
class PairInfo:
    """Model A's and model B's names (as the result records them) and how the pair's result is named: the two
    names joined by ``join``, then the ``unit`` (where the analysis's result is one per unit)."""

    a: str
    b: str
    join: str = JOIN
    unit: str | None = None

    def name(self) -> str:
        """The pair's result name (its file's stem)."""
        return self.join.join([self.a, self.b, *([self.unit] if self.unit is not None else [])])

    @property
    def names(self) -> tuple[str, str]:
        """(A's name, B's name)."""
        return self.a, self.b

    def has(self, model: str) -> bool:
        """Whether ``model`` is one of the two sides, by its exact name."""
        return model in self.names

    def renamed(self, names: Mapping[str, str]) -> PairInfo:
        """The same pair with each side renamed by ``names`` (exact name -> new name; a side not in it keeps its
        name), named by the same rule."""
        return replace(self, a=names.get(self.a, self.a), b=names.get(self.b, self.b))

    @classmethod
    def of(cls, result: Any) -> PairInfo | None:
        """The pair ``result`` (an AnalysisResult) was computed from, as its identity records it, named by the rule
        its Result class declares; None when the identity records no pair (one model's result, or a side without
        a name, or a record that is no result: a damaged file's stand-in)."""
        sides = sides_of(getattr(getattr(result, "identity", None), "model", None))
        if sides is None:
            return None
        kind = type(result)
        unit = getattr(result, "unit", None) if getattr(kind, "PAIR_UNIT", False) else None
        return cls(sides[0], sides[1], join=getattr(kind, "PAIR_JOIN", JOIN),
                   unit=unit if isinstance(unit, str) else None)


def sides_of(model: object) -> tuple[str, str] | None:
    """(A's name, B's name) of an identity's ``model`` that records a pair (a :class:`analyses.model_info.ModelPair`,
    or as saved: ``{"a": {"name": ...}, "b": ...}``), else None."""
    if isinstance(model, Mapping) and set(model) == set(SIDES):  # as saved (a document not read by its Result)
        model = model_of(model)
    if not isinstance(model, ModelPair):
        return None
    a, b = (side.name if isinstance(side.name, str) and side.name else None for side in model.sides)
    return (a, b) if a is not None and b is not None else None
