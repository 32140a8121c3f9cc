"""Sentence vectors in words, and the pooling a sentence-transformers model declares.

The suite's sentence vectors (``sentence:`` of a registry entry, ``?sentence=`` on a name; computed by
:class:`probes.capture.batch.Pooling`):

    cls       the first token's state ([CLS], <s>)
    mean      the mean over the real tokens other than special tokens ([CLS]/[SEP], <s>/</s>, an entry's prefix);
              over all real tokens of a text that has only special tokens
    mean_all  the mean over every real token, special tokens included, padding excluded: what sentence-transformers'
              Pooling computes with pooling_mode_mean_tokens
    last      the last real token's state
    g         the S-LSTM's sentence node

A sentence-transformers model lists its modules in ``modules.json``; its ``Pooling`` module's folder (``1_Pooling``)
holds a ``config.json`` of ``pooling_mode_*`` flags. :func:`declared_pooling` reads them: mean_tokens is ``mean_all``,
cls_token ``cls``, lasttoken ``last``; max, mean_sqrt_len and weightedmean pooling (or several modes, concatenated)
are none of the suite's vectors. A model folder or hub id without a registry entry takes the declared vector
(:mod:`probes.checkpoints.names`); :func:`pooling_words` says in words which vector a model's results use and why
(``Encoder.describe()["sentence_pooling"]``, recorded with every result).

    $ python -c "import probes; print(probes.load('minilm-l6').describe()['sentence_pooling'])"
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from probes.checkpoints.registry import REGISTRY_PATH, CheckpointSpec, hub_cached_file
from probes.errors import CheckpointError
from probes.io import loads_json

VECTOR_WORDS = {
    "cls": "the first token's state ([CLS], <s>)",
    "mean": "mean over the real tokens other than special tokens ([CLS]/[SEP], <s>/</s>, a prefix), padding "
            "excluded",
    "mean_all": "mean over all tokens incl. [CLS]/[SEP], padding excluded",
    "last": "the last real token's state",
    "g": "the S-LSTM's sentence node g",
}
# sentence-transformers' Pooling flags -> (the suite's vector or None, the pooling in words)
POOLING_MODES = {
    "pooling_mode_mean_tokens": ("mean_all", "the mean over all tokens incl. [CLS]/[SEP]"),
    "pooling_mode_cls_token": ("cls", "the first token ([CLS])"),
    "pooling_mode_lasttoken": ("last", "the last token"),
    "pooling_mode_max_tokens": (None, "the maximum over tokens"),
    "pooling_mode_mean_sqrt_len_tokens": (None, "the sum over tokens divided by the square root of their number"),
    "pooling_mode_weightedmean_tokens": (None, "a mean over tokens weighted by position"),
}
MODULES = "modules.json"


@dataclass(frozen=True)
class Declared:
    """The pooling a sentence-transformers model declares: ``vector`` (the suite's vector that computes it, None
    when none does), ``words`` (the pooling, e.g. "the mean over all tokens incl. [CLS]/[SEP]"), ``where`` (the
    file, e.g. "1_Pooling/config.json") and ``modes`` (the flags set)."""

    vector: str | None
    words: str
    where: str
    modes: tuple[str, ...]
    after: tuple[str, ...] = ()  # the modules modules.json lists after the Pooling one (Dense, Normalize, ...)
    note: str = ""  # flags that are not JSON booleans, and how they are read


def declared_pooling(name: str, modules: Path | None, locate: Callable[[str], Path | None]) -> Declared | None:
    """The pooling that ``modules`` (a model's modules.json, None when it has none) declares through its Pooling
    module; None when it lists no Pooling module. ``locate(relative path)`` finds a file of the model (its
    folder, or the hub's files); one-line CheckpointError when the files are not what sentence-transformers
    writes."""
    if modules is None or not modules.is_file():
        return None
    listed = _json(name, modules)
    if not isinstance(listed, list) or not all(isinstance(m, dict) for m in listed):
        raise CheckpointError(f"model '{name}': {modules} is not a list of modules (sentence-transformers' "
                              f"modules.json)")
    pooling = [m for m in listed if str(m.get("type", "")).rsplit(".", 1)[-1] == "Pooling"]
    if not pooling:
        return None
    rel = pooling[0].get("path")
    parts = PurePosixPath(rel).parts if isinstance(rel, str) else ()
    if not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
        raise CheckpointError(f"model '{name}': {modules} names the Pooling module's folder {rel!r}, not a folder "
                              f"inside the model's")
    where = f"{PurePosixPath(*parts)}/config.json"
    path = locate(where)
    if path is None or not path.is_file():
        raise CheckpointError(f"model '{name}': {modules} lists a Pooling module, but its {where} is missing")
    cfg = _json(name, path)
    if not isinstance(cfg, dict):
        raise CheckpointError(f"model '{name}': {path} is not a JSON object")
    # sentence-transformers' Pooling(**config) reads each flag by its truth value: "true", 1 (and "false") are on
    modes = tuple(k for k in POOLING_MODES if cfg.get(k))
    odd = [f"{k} = {cfg[k]!r}" for k in POOLING_MODES if k in cfg and not isinstance(cfg[k], bool)]
    after = tuple(str(m.get("type", "?")).rsplit(".", 1)[-1] for m in listed[listed.index(pooling[0]) + 1:])
    if len(modes) == 1:
        vector, words = POOLING_MODES[modes[0]]
    elif not modes:
        vector, words = None, "no pooling mode"
    else:
        vector, words = None, "the concatenation of " + " and ".join(POOLING_MODES[m][1] for m in modes)
    note = (f"its {', '.join(odd)}: not JSON booleans, read by their truth value as sentence-transformers does"
            if odd else "")
    return Declared(vector, words, where, modes, after, note)


def folder_pooling(name: str, folder: Path) -> Declared | None:
    """:func:`declared_pooling` of a model folder."""
    return declared_pooling(name, folder / MODULES, lambda rel: folder / rel)


def spec_pooling(spec: CheckpointSpec) -> Declared | None:
    """The pooling the model of ``spec`` declares, read from its folder or the local Hugging Face cache (never
    the network); None for a model that declares none, or whose files are not at hand."""
    if "path" in spec.source or "package" in spec.source:
        if "base" in spec.extra:  # a module-only entry: its folder holds no model
            return None
        return folder_pooling(spec.name, spec.folder())
    if "hub" in spec.source:
        hub_id = str(spec.source["hub"])
        return declared_pooling(spec.name, hub_cached_file(hub_id, MODULES, spec.revision),
                                lambda rel: hub_cached_file(hub_id, rel, spec.revision))
    return None


def pooling_words(spec: CheckpointSpec) -> str:
    """Which sentence vector ``spec``'s results use, in words, and why when the model declares another pooling
    (recorded with every result, so a reader knows)."""
    words = VECTOR_WORDS.get(spec.sentence, spec.sentence)
    try:
        declared = spec_pooling(spec)
    except (CheckpointError, OSError):
        declared = None
    if declared is None:
        return words
    after = ""
    if declared.after:  # the model's own embedding is computed from the pooled vector by more modules
        after = (f"; the model's modules.json then applies {', '.join(declared.after)} to it, which the suite does "
                 "not: this vector is the pooled one, before them, not the model's own sentence embedding")
    return _declared_words(spec, declared, words) + after


def _declared_words(spec: CheckpointSpec, declared: Declared, words: str) -> str:
    said = f"the model's {declared.where.split('/')[0]} declares {declared.words}"
    if declared.modes:
        said += f" ({', '.join(declared.modes)})"
    said += f" ({declared.note})" if declared.note else ""
    if declared.vector == spec.sentence:
        return f"{words}, as the model's {declared.where.split('/')[0]} declares" + (
            f" ({declared.note})" if declared.note else "")
    requested = str(spec.extra.get("requested", ""))
    if "?sentence=" in requested:
        return f"{words}, as asked ({requested}); {said}"
    if declared.vector is None:
        return f"{words}: {said}, which is none of the suite's sentence vectors"
    builtin = spec.root == REGISTRY_PATH.parent and not requested
    why = (f"the registry entry's sentence: {spec.sentence}"
           + (", kept so that the suite's published numbers stay comparable" if builtin else ""))
    return f"{words} ({why}); {said}: name the model '{requested or spec.name}?sentence={declared.vector}' for it"


def _json(name: str, path: Path):
    try:
        return loads_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CheckpointError(f"model '{name}': cannot read {path}: {e}") from None
