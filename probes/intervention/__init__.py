"""Interventions: edit a layer's states during the forward pass of any model the suite loads.

An :class:`Intervention` is a layer and an :class:`~probes.intervention.edits.Edit` (project out a subspace, an
affine erasure, add a vector, patch in the states of other inputs, or any function). Layer l is what the capture
records as ``hidden[l]`` (0 = embeddings), so the edit is read back exactly in the states recorded for layer l,
and every later layer and the model's head compute from the edited states (:mod:`probes.intervention.sites`).

Three ways to use one::

    import probes
    from probes.intervention import AddVector, Intervention, ProjectOut, hooked, intervening

    iv = Intervention(2, ProjectOut(directions))           # (r, d) rows to remove from layer 2's states
    acts = probes.extract("tiny-bert", texts, intervention=iv)    # one extraction
    r = anisotropy.run("tiny-bert", texts, intervention=iv)        # any analysis (every forward pass it runs)
    with intervening(iv):                                 # every forward pass the suite runs inside the block:
        r = perplexity.run("tiny-gpt2", texts)            # extractions, LM scoring, generation, the lens
    with hooked(my_model, iv):                            # plain hooks on a model, for one's own forward passes
        logits = my_model(**batch).logits

The activation cache key holds each intervention's identity (layer, kind, settings and a sha256 of its arrays),
and the activations' meta and every result's ``activations`` and ``model`` records say which intervention made
them. A :class:`~probes.intervention.edits.Function` (or an Edit subclass that does not declare what it reads)
cannot be keyed: an extraction under it runs without the cache (one warning), and the tuned lens trains its
translators afresh in a temporary folder. Several interventions apply in the order given (at one layer, one after
the other).

    $ python -c "from probes.intervention import Intervention, AddVector; print(Intervention(1, AddVector([1.0, 0.0])))"
"""

from __future__ import annotations

import contextlib
import operator
from dataclasses import dataclass

import numpy as np

from probes.errors import ProbeError
from probes.intervention.edits import AddVector, Batch, Edit, Erase, Function, ProjectOut
from probes.intervention.patch import Patch
from probes.intervention.sites import Sites, find_sites
from probes.intervention.sites import hooked as _hooked
from probes.models.forward import current, editing

__all__ = ["AddVector", "Batch", "Edit", "Erase", "Function", "Intervention", "Patch", "ProjectOut", "Sites",
           "active", "as_interventions", "describe", "find_sites", "hooked", "intervening", "key_identity"]


@dataclass(frozen=True)
class Intervention:
    """Edit ``edit`` applied to the states of layer ``layer`` (0 = embeddings, l = layer l, -1 = the last)."""

    layer: int
    edit: Edit

    def __post_init__(self):
        try:  # a Python or numpy integer (what np.argmax or a layer array gives); not a bool, not a float
            layer = None if isinstance(self.layer, (bool, np.bool_)) else operator.index(self.layer)  # numpy < 2.3:
            # np.bool_ has an __index__
        except TypeError:
            layer = None
        if layer is None:
            raise ProbeError(f"an intervention's layer is a whole number (0 = embeddings, -1 = last), not "
                             f"{self.layer!r}")
        object.__setattr__(self, "layer", int(layer))
        if not isinstance(self.edit, Edit):
            raise ProbeError(f"an intervention's edit is a probes.intervention Edit (ProjectOut, Erase, AddVector, "
                             f"Patch, Function), not {type(self.edit).__name__}")

    def layer_index(self, num_layers: int) -> int:
        """The layer as an index in 0..L; ProbeError when the model has no such layer."""
        index = self.layer + num_layers + 1 if self.layer < 0 else self.layer
        if not 0 <= index <= num_layers:
            raise ProbeError(f"intervention at layer {self.layer}: the model has layers 0..{num_layers} (or -1)")
        return index

    def identity(self) -> dict | None:
        """The layer and the edit's identity (None when no key can see the edit: a Function, an Edit subclass that
        does not declare what it reads)."""
        edit = self.edit.identity()
        return None if edit is None else {"layer": self.layer, **edit}

    def describe(self) -> dict:
        """What results record: the identity, or for an edit no key can see its name (a Function's) or class."""
        return {"layer": self.layer, **self.edit.describe()}


def as_interventions(x) -> tuple[Intervention, ...]:
    """An Intervention, a sequence of them or None as a tuple; one ProbeError line for anything else."""
    if x is None:
        return ()
    if isinstance(x, Intervention):
        return (x,)
    if isinstance(x, (list, tuple)) and all(isinstance(i, Intervention) for i in x):
        return tuple(x)
    raise ProbeError(f"intervention= takes a probes.intervention.Intervention or a list of them, not "
                     f"{type(x).__name__}")


@dataclass(frozen=True)
class Active:
    """The interventions of the enclosing :func:`intervening` blocks, outermost first, as the models' forward
    contexts apply and record them (:mod:`probes.models.forward`: the models never import this layer)."""

    interventions: tuple[Intervention, ...]

    def hooked(self, model) -> contextlib.AbstractContextManager[None]:
        return _hooked(model, self.interventions)

    def describe(self) -> list[dict]:
        return describe(self.interventions)


def active() -> tuple[Intervention, ...]:
    """The interventions of the enclosing :func:`intervening` blocks, outermost first."""
    edits = current()
    return edits.interventions if isinstance(edits, Active) else ()


@contextlib.contextmanager
def intervening(interventions):
    """Inside: every forward pass the suite runs (extractions, LM scoring and generation, the lens) applies
    ``interventions`` (an Intervention or a list), after those of any enclosing block."""
    with editing(Active(active() + as_interventions(interventions))):
        yield


def hooked(model, interventions):
    """Inside: ``interventions`` edit every forward pass of ``model`` (a transformers model, the suite's S-LSTM or
    MoG, or an Encoder or LM of the suite), one's own included; see :func:`probes.intervention.sites.hooked`."""
    return _hooked(model, as_interventions(interventions))


def key_identity(interventions) -> list[dict] | None:
    """The identities the cache key holds ([] without interventions; None when one cannot be keyed)."""
    idents = [iv.identity() for iv in as_interventions(interventions)]
    return [i for i in idents if i is not None] if all(i is not None for i in idents) else None


def describe(interventions) -> list[dict]:
    """What a result records of ``interventions``."""
    return [iv.describe() for iv in as_interventions(interventions)]
