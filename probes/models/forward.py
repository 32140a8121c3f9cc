"""The edits the suite's own forward passes of a causal LM run under, handed down by the layer that defines them.

:mod:`probes.intervention` defines the edits and finds where each family makes a layer's states, so it imports the
models; an LM's own forward context (:meth:`probes.models.lm.LM.running`) and its record
(:meth:`probes.models.lm.LM.describe`) apply and record the edits of the enclosing
:func:`probes.intervention.intervening` blocks through this seam instead of importing that layer back:
``intervening`` sets the current :class:`ForwardEdits` (:func:`editing`), an LM reads it (:func:`current`; None
outside every block).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Protocol


class ForwardEdits(Protocol):
    """The edits of the enclosing blocks, as a model's forward context uses them."""

    def hooked(self, model) -> AbstractContextManager[object]:
        """Inside: the edits change every forward pass of ``model``; nothing once it is left."""
        ...

    def describe(self) -> list[dict]:
        """What a result records of the edits ([]: none)."""
        ...


_CURRENT: ContextVar[ForwardEdits | None] = ContextVar("probes_interventions", default=None)


def current() -> ForwardEdits | None:
    """The edits of the enclosing blocks (None outside every block)."""
    return _CURRENT.get()


@contextlib.contextmanager
def editing(edits: ForwardEdits) -> Iterator[None]:
    """Inside: :func:`current` is ``edits`` (which include those of any enclosing block)."""
    token = _CURRENT.set(edits)
    try:
        yield
    finally:
        _CURRENT.reset(token)
