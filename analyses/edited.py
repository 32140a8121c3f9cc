"""Which edit of the model's states a result was computed under, read from what the result records, and the name
that run goes by: an edited run is never the model's own.

A result computed under an intervention (:mod:`probes.intervention`) records it where its states or scores were
made: ``activations["intervention"]`` (each entry's, each side's of a pair) or ``model["intervention"]`` (a
language model's forward passes). :func:`recorded_edits` collects those records (once each, in order), and
:func:`edit_label` makes of them a short, stable, filesystem-safe label::

    +<kind>@<layer>[+<kind>@<layer>...]_<8 hex digits>         e.g. +erase@15_3f2a9c1b, +add@-1+patch@2_0c41d2e7

one ``+kind@layer`` per edit in the order they applied (kind as the edit's identity names it: ``erase`` for an
Erase or a ProjectOut, ``add``, ``patch``, ``function``, a subclass's own), then the first 8 hex digits of the
sha256 of the whole record, so two different edits of one kind at one layer (two AddVectors at layer 1) never
share a label. The record is hashed as result files hold it (rounded as :func:`analyses.files.jsonable` writes
numbers), so a result and the same result read back from its file have one label. Two Functions of one name are one
record (no key can see what a function does) and so one label.

The edited run's name is the model's name with the label (``smollm2-135m+erase@15_3f2a9c1b``): what the result's
``model_name`` says, what its files are named (:func:`analyses.files.write_result`), what its display and the
report show. A model's own name never holds ``+`` (registry names and the safe names of folders and ``hf:`` ids are
``[A-Za-z0-9._-]``), so a name with ``+`` is an edited run's and is never labelled twice.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from analyses.jsonable import jsonable

MARK = "+"  # where an edited run's name leaves the model's name
_KIND = re.compile(r"[^A-Za-z0-9]+")
LABEL = re.compile(r"(\+[A-Za-z0-9]+@-?\d+)+_[0-9a-f]{8}")  # what edit_label makes


def _records(x: Any) -> Iterable[Mapping]:
    """The edit records held by one activations entry or model description, a pair of them ({"a", "b"}) or a
    list of them."""
    if isinstance(x, list):
        for item in x:
            yield from _records(item)
    elif isinstance(x, Mapping):
        found = x.get("intervention")
        if isinstance(found, list):
            yield from (e for e in found if isinstance(e, Mapping))
        for side in ("a", "b"):
            if isinstance(x.get(side), (Mapping, list)):
                yield from _records(x[side])


def recorded_edits(activations: Any, model: Any) -> list[dict]:
    """Every edit the identity parts ``activations`` and ``model`` record (each once, in order): [] for a run of
    the model as it is."""
    out: list[dict] = []
    seen: set[str] = set()
    for record in (*_records(activations), *_records(model)):
        record = jsonable(dict(record))
        text = json.dumps(record, sort_keys=True)
        if text not in seen:
            seen.add(text)
            out.append(record)
    return out


def edit_label(edits: list[dict]) -> str:
    """The label of the run under ``edits`` (see the module docstring); "" for none."""
    if not edits:
        return ""
    parts = []
    for e in edits:
        kind = _KIND.sub("", str(e.get("edit") or "custom")) or "custom"
        layer = e.get("layer")
        parts.append(f"{MARK}{kind}@{layer if isinstance(layer, int) and not isinstance(layer, bool) else 0}")
    held = jsonable(list(edits))  # as a result file holds the record: one label before and after a round trip
    digest = hashlib.sha256(json.dumps(held, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:8]
    return "".join(parts) + "_" + digest


def edited_name(name: str, label: str) -> str:
    """``name`` of a run under the edit labelled ``label``: the model's name with the label (a name that has one
    already, or a run without an edit, as it is)."""
    return name if not label or MARK in name else name + label


def split_name(name: str) -> tuple[str, str]:
    """(the model's name, the edit's label) of a run's name; the label "" for a model's own name."""
    base, mark, rest = name.partition(MARK)
    return (base, mark + rest) if mark and LABEL.fullmatch(mark + rest) else (name, "")


def in_words(edits: list[dict]) -> str:
    """The edits in a few words: ``add at layer -1 (scale 30.0); erase at layer 2 (rank 1)``."""
    said = []
    for e in edits:
        settings = ", ".join(f"{k} {v}" for k, v in e.items()
                             if k not in ("edit", "layer", "sha256", "class") and not isinstance(v, (list, dict)))
        said.append(f"{e.get('edit') or 'custom'} at layer {e.get('layer')}" + (f" ({settings})" if settings else ""))
    return "; ".join(said)
