"""Typed records at the seams, and the one codec that writes them to JSON and reads them back.

A record is a dataclass read by attribute: a result's rows, its bootstrap block, a document one module writes and
another reads. The type checker sees a misspelt attribute; nobody sees a misspelt string key. :func:`to_json` and
:func:`from_json` are the codec of every record type, driven by the fields' annotations:

* a field annotated with a record type (``Row``, ``list[Row]``, ``tuple[Row, ...]``, ``dict[str, Row]``,
  ``Row | None``) is written as a JSON object (a list, a mapping, or null) and read back as that type;
* any other field (numbers, strings, lists of numbers, ``dict[str, list[float]]`` of replicates) is written as it
  is and read back as JSON gave it;
* a field made with :func:`omitted` (default None) is left out of the JSON while it is None, so that a key a file
  never had stays absent (the saved schema does not grow a ``null`` for every optional key);
* a class may write its own codec (a ``to_json(self)`` method and a ``from_json(cls, doc, where)`` classmethod,
  e.g. :class:`Definitions`, saved as a ``{term: meaning}`` mapping): the codec calls it.

Reading is strict where being lenient would hide a mistake: a required key missing, or an object where a record
should be something else, is one :class:`Malformed` naming the place (``layers[3].mean``); a key the record does not
know is dropped with one :class:`DroppedKeys` warning naming it (a file written by a later version still reads).

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Row:
    ...     layer: int
    ...     mean: float
    ...     note: str | None = omitted()
    >>> to_json([Row(0, 0.5), Row(1, 0.25, "small")])
    [{'layer': 0, 'mean': 0.5}, {'layer': 1, 'mean': 0.25, 'note': 'small'}]
    >>> from_json(list[Row], [{"layer": 0, "mean": 0.5}])
    [Row(layer=0, mean=0.5, note=None)]
    >>> from_json(Row, {"layer": 0}, "layers[0]")
    Traceback (most recent call last):
    ...
    analyses.records.Malformed: layers[0]: lacks 'mean'
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
import typing
import warnings
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar, Union

from analyses.stacklevel import outside_stacklevel

__all__ = ["Definitions", "DroppedKeys", "Malformed", "from_json", "is_record_type", "omitted", "to_json"]

T = TypeVar("T")
V = TypeVar("V")
OMIT = "records.omit_when_none"  # field metadata: left out of the JSON while None


class Malformed(ValueError):
    """A document is not the record it should be: the message names the place and what is wrong."""


class DroppedKeys(UserWarning):
    """A document held keys its record does not know; they were dropped (the message names them)."""


def omitted(default: Any = None) -> Any:
    """A field left out of the JSON while it is None (a key older files never had stays absent)."""
    return dataclasses.field(default=default, metadata={OMIT: True})


class Named(Mapping[str, V]):
    """A read-only mapping of names to records, in the order given, that a result saves as ``{name: value}``
    (:class:`Definitions`, ``analyses.maps.rows.Maps``). Equal to another of its kind (a subclass included) with
    the same items."""

    def __init__(self, entries: Mapping[str, V] | Iterable[tuple[str, V]] = ()):
        self.entries: dict[str, V] = dict(entries)

    def __getitem__(self, name: str) -> V:
        return self.entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __eq__(self, other: object) -> bool:
        kin = isinstance(other, type(self)) or isinstance(self, type(other))
        return kin and isinstance(other, Named) and self.entries == other.entries


class Definitions(Named[str]):
    """What a result's terms mean, in words: prose only, nothing reads a number from it. Saved as ``{term:
    meaning}``; ``d["term"]`` reads one meaning (for people and tests, never for a number)."""

    def __repr__(self) -> str:
        return f"Definitions({len(self.entries)} terms: {', '.join(self.entries)})"

    def to_json(self) -> dict[str, Any]:
        return dict(self.entries)

    @classmethod
    def from_json(cls, doc: Any, where: str = "definitions") -> Definitions:
        if not isinstance(doc, Mapping):
            raise Malformed(f"{where}: a mapping of term to meaning, not {type(doc).__name__}")
        return cls(doc)


# ----------------------------------------------------------------------------- writing


def _own(cls: type, name: str) -> bool:
    """Whether record class ``cls`` (or a base of it) writes its own codec method ``name``."""
    return any(name in vars(k) for k in cls.__mro__ if k is not object)


def to_json(x: Any) -> Any:
    """``x`` as JSON holds it: records as objects (their own ``to_json`` where they write one; :func:`omitted`
    fields left out while None), lists and tuples as lists, mappings with their values written; anything else as
    it is (the writer, :func:`analyses.jsonable.jsonable`, rounds numbers afterwards)."""
    if not isinstance(x, type) and _own(type(x), "to_json"):
        return x.to_json()
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: to_json(getattr(x, f.name)) for f in dataclasses.fields(x)
                if not (f.metadata.get(OMIT) and getattr(x, f.name) is None)}
    if isinstance(x, (list, tuple)):
        return [to_json(v) for v in x]
    if isinstance(x, dict):
        return {k: to_json(v) for k, v in x.items()}
    return x


# ----------------------------------------------------------------------------- reading


def field_types(cls: type) -> dict[str, Any]:
    """The resolved annotation of each field of dataclass ``cls`` (a name the module cannot resolve: Any)."""
    return _field_types(cls)


@functools.cache
def _field_types(cls: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except (NameError, TypeError, AttributeError):
        pass
    out: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        space = vars(sys.modules.get(klass.__module__, types.ModuleType("_")))
        for name, ann in vars(klass).get("__annotations__", {}).items():
            try:
                out[name] = eval(ann, space) if isinstance(ann, str) else ann  # noqa: S307 (our own annotations)
            except Exception:  # noqa: BLE001 (a TYPE_CHECKING-only name: read as JSON gave it)
                out[name] = Any
    return out


def is_record_type(tp: Any) -> bool:
    """Whether ``tp`` is a record class the codec decodes (a dataclass, or a class with its own ``from_json``)."""
    return isinstance(tp, type) and (dataclasses.is_dataclass(tp) or _own(tp, "from_json"))


def _mentions_record(tp: Any) -> bool:
    if is_record_type(tp):
        return True
    return any(_mentions_record(a) for a in typing.get_args(tp))


def from_json(tp: type[T] | Any, doc: Any, where: str = "") -> T:
    """``doc`` (from JSON) read as type ``tp``: records built field by field (see the module docstring); an
    instance of ``tp`` already passes through."""
    if tp is Any or not _mentions_record(tp):
        return doc
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if doc is None and type(None) in args:
            return None  # type: ignore[return-value]
        kinds = [a for a in args if a is not type(None)]
        records = [a for a in kinds if _mentions_record(a)]
        if len(kinds) == 1 or (records and isinstance(doc, dict if is_record_type(records[0]) else (list, dict))):
            return from_json(records[0] if records else kinds[0], doc, where)
        return doc
    if origin in (list, tuple) or origin is Iterable:
        if not isinstance(doc, (list, tuple)):
            raise Malformed(f"{where or 'document'}: a list, not {type(doc).__name__}")
        item = args[0] if args else Any
        out = [from_json(item, v, f"{where}[{i}]") for i, v in enumerate(doc)]
        return tuple(out) if origin is tuple else out  # type: ignore[return-value]
    if origin in (dict, Mapping):
        if not isinstance(doc, dict):
            raise Malformed(f"{where or 'document'}: a mapping, not {type(doc).__name__}")
        value = args[1] if len(args) == 2 else Any
        return {k: from_json(value, v, f"{where}.{k}" if where else str(k)) for k, v in doc.items()}  # type: ignore
    if isinstance(doc, tp):
        return doc
    if _own(tp, "from_json"):
        return tp.from_json(doc, where)  # type: ignore[union-attr]
    return _record(tp, doc, where)


def _record(cls: type[T], doc: Any, where: str) -> T:
    place = where or cls.__name__
    if not isinstance(doc, dict):
        raise Malformed(f"{place}: an object ({cls.__name__}), not {type(doc).__name__}")
    fields = [f for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
    names = {f.name for f in fields}
    lacking = [f.name for f in fields if f.name not in doc and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if lacking:
        raise Malformed(f"{place}: lacks {', '.join(repr(k) for k in lacking)}")
    dropped = [k for k in doc if k not in names]
    if dropped:
        warnings.warn(f"{place}: {cls.__name__} does not know {', '.join(repr(k) for k in dropped)}; dropped",
                      DroppedKeys, stacklevel=outside_stacklevel())
    hints = field_types(cls)
    sep = "." if where else ""
    return cls(**{k: from_json(hints.get(k, Any), v, f"{where}{sep}{k}") for k, v in doc.items() if k in names})
