"""The rows of a similarity result, read by attribute: a measure's three heatmaps (:class:`Blocks`), every measure's
(:class:`Matrices`), a number per layer of each model (:class:`Sides`) and how the units were matched
(:class:`Alignment`). Written and read by the one codec (:mod:`analyses.records`); the saved keys are the fields'
names, as the files have always had them.

    >>> b = Blocks(aa=[[1.0]], ab=[[0.5, None]], bb=[[1.0, 0.2], [0.2, 1.0]])
    >>> Matrices(cka=b).of("cka").of("ab")
    [[0.5, None]]
"""

from __future__ import annotations

from dataclasses import dataclass

from analyses.records import omitted
from probes.errors import ProbeError

__all__ = ["Alignment", "Blocks", "Chance", "Matrices", "Sides"]


@dataclass
class Blocks:
    """One measure between the layers of A and B: ``ab`` (L_A+1, L_B+1), ``aa`` (L_A+1, L_A+1), ``bb`` (L_B+1,
    L_B+1) as nested lists; None (null) where the measure is undefined."""

    aa: list[list[float | None]]
    ab: list[list[float | None]]
    bb: list[list[float | None]]

    def of(self, block: str) -> list[list[float | None]]:
        """The block named "aa", "ab" or "bb"."""
        if block not in ("aa", "ab", "bb"):
            raise ProbeError(f"a similarity block is aa, ab or bb, not {block!r}")
        return {"aa": self.aa, "ab": self.ab, "bb": self.bb}[block]


@dataclass
class Matrices:
    """Each computed measure's :class:`Blocks` (a measure not computed: absent from the file)."""

    cka: Blocks | None = omitted()
    svcca: Blocks | None = omitted()
    rsa: Blocks | None = omitted()

    def of(self, measure: str) -> Blocks:
        """The blocks of ``measure`` ("cka", "svcca" or "rsa"); a measure not computed is a ProbeError."""
        got = {"cka": self.cka, "svcca": self.svcca, "rsa": self.rsa}.get(measure)
        if got is None:
            raise ProbeError(f"this result has no {measure!r} matrices")
        return got


@dataclass
class Chance:
    """SVCCA's chance level per block (:func:`analyses.similarity.svcca_chance`); empty without SVCCA."""

    aa: list[list[float]] | None = omitted()
    ab: list[list[float]] | None = omitted()
    bb: list[list[float]] | None = omitted()


@dataclass
class Sides:
    """A number per layer of model A and of model B (``a``: L_A+1 values, ``b``: L_B+1); both absent where the
    measure that counts them was not computed (RSA's zero vectors without RSA)."""

    a: list[int] | None = omitted()
    b: list[int] | None = omitted()


@dataclass
class Alignment:
    """The units' texts: ``n_texts``; with token units also the texts kept and dropped (their word segmentation
    differs between the models), the words aligned and used, and each model's segmentation scheme."""

    n_texts: int
    n_texts_kept: int | None = omitted()
    n_texts_dropped: int | None = omitted()
    n_words_aligned: int | None = omitted()
    n_words_used: int | None = omitted()
    schemes: list[str] | None = omitted()
