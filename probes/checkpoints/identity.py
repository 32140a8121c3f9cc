"""What a model's states depend on, hashed cheaply: the inputs of a cache key (:func:`probes.capture.store.cache_key`).

Equal keys must mean equal states, so a key covers every input of the forward pass, not only the weights:

* **Files** of a model folder (registry ``path:`` / ``package:`` sources, a folder named by its path,
  ``checkpoints/``): every weight file anywhere under the folder (``weights_sha256``, as before) and every file a
  loader may read besides them (``files_sha256``): the folder's top-level files ending in one of
  :data:`INPUT_SUFFIXES` (``config.json``, ``tokenizer.json``, ``tokenizer_config.json``, ``vocab.txt``,
  ``merges.txt``, ``vocab.json``, ``special_tokens_map.json``, ``added_tokens.json``, ``spiece.model`` and other
  SentencePiece files, ``generation_config.json``, processor configs, ``recurrence.json``, sentence-transformers'
  ``modules.json`` / ``sentence_bert_config.json`` / ``config_sentence_transformers.json``, and records such as
  ``train_config.json``, which the loaders do not read) plus the same files inside every sentence-transformers
  module folder that ``modules.json`` lists (``1_Pooling/config.json``). The rule is by suffix, not by a list of
  names, so a tokenizer file of a kind not named here still counts; a README or a training log (``.md``, ``.csv``)
  does not. Each file's sha256 is memoised on its path and :func:`file_version` (inode, size, mtime, ctime), so a
  process hashes a file once while it is unchanged.
* **Code**: the suite's own architectures put the version of their forward code in the key (:func:`code_versions`):
  a ``FORWARD_VERSION`` constant per family in the module that holds its forward (``probes.models.slstm`` for the
  S-LSTM, ``.mog`` for the Graph-Transformer, ``.mog_lens`` for the lens maps, ``.recurrent`` for the recurrence
  module, ``.convbert`` for ConvBERT's kernel maps, keyed by model_type since ConvBERT loads through the ``hf``
  family). A manual constant, not a hash of the source: a hash would change (and throw away every cached entry)
  on a comment or a refactor that keeps the numbers, and would miss a change in a helper module it does not
  cover. The constant is checked by ``tests/test_forward_versions.py``, which pins a few output numbers of a seeded
  tiny model of each family together with the version: a forward that changes its output without a new version
  fails there.

Hugging Face code (transformers, torch) is not in the key: the result files record their versions.
"""

from __future__ import annotations

import enum
import hashlib
import importlib
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from probes.errors import CheckpointError
from probes.io import loads_json

if TYPE_CHECKING:
    import torch

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
# a model folder's files that a loader may read besides weights (tokenizers of every kind, configs)
INPUT_SUFFIXES = (".json", ".txt", ".model", ".vocab", ".spm", ".bpe", ".tiktoken", ".codes")
# family -> the module whose FORWARD_VERSION versions its forward (imported only when a key is made)
FAMILY_CODE = {"slstm": "probes.models.slstm", "mog": "probes.models.mog", "mog-lens": "probes.models.mog_lens",
               "recurrent": "probes.models.recurrent"}
# hf model_type -> the module of the suite's own capture code for it (maps besides attention)
MODEL_TYPE_CODE = {"convbert": "probes.models.convbert"}

_SHA_MEMO: dict[tuple, str] = {}


def file_version(st) -> tuple[int, int, int, int]:
    """What changes in a file's ``os.stat_result`` whenever its content does: (inode, size, mtime_ns, ctime_ns). An
    edit that keeps the size and sets the old mtime back (``touch -r``, ``cp -p``) still moves ctime, which no user
    can set, and a file replaced by another has another inode: the key of the memos of file contents."""
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def file_sha(path: Path) -> str:
    """sha256 of one file, memoised on its path and :func:`file_version`."""
    memo_key = (str(path), *file_version(path.stat()))
    if memo_key not in _SHA_MEMO:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
        _SHA_MEMO[memo_key] = h.hexdigest()
    return _SHA_MEMO[memo_key]


def _digest(folder: Path, files: list[Path]) -> str:
    """sha256 over (relative name, file sha256) of ``files``, in name order."""
    h = hashlib.sha256()
    for p in sorted(files):
        h.update(p.relative_to(folder).as_posix().encode() + b"\0" + file_sha(p).encode())
    return h.hexdigest()


def weight_files(folder: Path) -> list[Path]:
    """The weight files anywhere under ``folder``."""
    return [p for p in folder.rglob("*") if p.suffix in WEIGHT_SUFFIXES and p.is_file()]


def weights_sha(folder: Path) -> str:
    """sha256 over the weight files anywhere under ``folder`` (one-line error when there are none)."""
    files = weight_files(folder)
    if not files:
        raise CheckpointError(f"no weight files ({', '.join(WEIGHT_SUFFIXES)}) under {folder}")
    return _digest(folder, files)


def source_versions(spec) -> tuple:
    """The :func:`file_version` of every file that ``spec.fingerprint()`` hashes (a folder's weights and input
    files, a ``base:`` entry's, a random entry's tokenizer entry's), by path; () for a hub entry (the local hub
    cache keeps each commit's files apart). Two equal values taken before a cache key is made and after the model
    is loaded mean that the key and the load saw the same bytes: replacing, editing or renaming a file moves its
    ctime, which no user can set back. A folder whose files are being written (a training job saving into it)
    gives two different values, and its states are not cached."""
    kind = spec.source_type
    found: list = []
    if kind in ("package", "path"):
        folder = spec.folder()
        try:
            found = [(str(p), file_version(p.stat())) for p in [*weight_files(folder), *input_files(folder)]]
        except OSError:  # a file removed between the listing and its stat: changing
            found = [("changing", time.monotonic_ns())]
    if "base" in spec.extra:
        found.append(("base", source_versions(spec.base_spec())))
    if kind == "random":
        found.append(("tokenizer", source_versions(spec.tokenizer_spec())))
    return tuple(sorted(found, key=lambda pv: pv[0]))


def input_files(folder: Path) -> list[Path]:
    """The files of ``folder`` besides weights that a loader may read (see the module docstring)."""
    files = [p for p in folder.iterdir() if p.suffix in INPUT_SUFFIXES and p.is_file()]
    modules = folder / "modules.json"
    if modules.is_file():  # sentence-transformers: each module's folder holds its own config
        try:
            listed = [str(m.get("path", "")) for m in loads_json(modules.read_text(encoding="utf-8"))]
        except (OSError, ValueError, TypeError, AttributeError):
            listed = []  # an unreadable modules.json is itself hashed
        for sub in listed:
            where = folder / sub
            if sub and where.is_dir() and folder.resolve() in where.resolve().parents:
                files += [p for p in where.iterdir() if p.suffix in INPUT_SUFFIXES and p.is_file()]
    return files


def files_sha(folder: Path) -> str:
    """sha256 over the input files of ``folder`` besides weights (config, tokenizer, ...)."""
    return _digest(folder, input_files(folder))


def code_versions(family: str, model_type: str | None = None) -> dict[str, int]:
    """{module: FORWARD_VERSION} of the suite's own code that computes this family's states (and maps);
    empty for a plain Hugging Face model."""
    modules = [FAMILY_CODE.get(family), MODEL_TYPE_CODE.get(str(model_type))]
    return {m.rsplit(".", 1)[1]: int(importlib.import_module(m).FORWARD_VERSION) for m in modules if m}


def plain(value):
    """``value`` as JSON would give it back (YAML dates and other scalars as strings): a stable key input."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


# ----------------------------------------------------------------------------- a module in memory

STATE_PIECE = 256 * 2**20  # bytes of an accelerator tensor copied to the host at a time by hash_tensors


def module_state(module: torch.nn.Module) -> str:
    """XXH3-64 (hex) of what a module's forward reads beside its inputs: its printed structure (every submodule's
    class and settings such as a LayerNorm's eps or a dropout's p), each submodule class's forward function, every
    submodule's plain attributes and the config it reads (:func:`module_structure`), and every parameter and
    buffer (name, dtype, shape and bytes; a tensor on an accelerator is read in pieces, a meta tensor by its shape
    alone). ``probes.load`` records it, so an Encoder changed in memory afterwards is never served its files'
    cached states; it costs one read of the weights (about 5 ms for MiniLM-L6's 90 MB)."""
    import xxhash

    h = xxhash.xxh3_64()
    h.update(module_structure(module).encode())
    hash_tensors(h, [*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)])
    return h.hexdigest()


def hash_tensors(h, tensors) -> None:
    """Feed each ``(name, tensor)`` of ``tensors`` into the hasher ``h`` (hashlib's or xxhash's): its name, dtype
    and shape, then its bytes, read where they are on the CPU; a tensor on an accelerator is copied to the host
    STATE_PIECE bytes at a time, a meta tensor (no data) counts by its name, dtype and shape alone."""
    import torch

    for name, t in tensors:
        h.update(f"{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        if t.device.type == "meta" or t.numel() == 0:
            continue
        flat = t.detach().contiguous().reshape(-1).view(torch.uint8)  # contiguous(): no copy when it already is
        if flat.device.type == "cpu":
            h.update(flat.numpy().data)
            continue
        for i in range(0, flat.numel(), STATE_PIECE):
            h.update(flat[i:i + STATE_PIECE].cpu().numpy().data)


def module_structure(module: torch.nn.Module) -> str:
    """What decides a module's forward besides its tensors, as text: its printed structure (each submodule's class
    and settings: a LayerNorm's eps, a dropout's p, an activation swapped for another), the forward function of
    each submodule class (named by the module its code runs in, which ``functools.wraps`` does not copy), and each
    submodule's plain attributes (:func:`module_attributes`: an attention's ``scaling``, an activation's function,
    the config a module reads)."""
    import torch

    forwards = {f"{type(m).__module__}.{type(m).__qualname__}:{_callable_name(type(m).forward)}"
                for m in module.modules()}
    return "\n".join([repr(module), *sorted(forwards), module_attributes(module, torch)])


# attributes of every torch module that say how it is run or hooked, not what it computes
MODULE_BOOKKEEPING = ("training",)
CONFIG_PLACE = ("_name_or_path", "transformers_version", "_commit_hash")  # where a config came from, not what it says


def module_attributes(module, torch) -> str:
    """Every submodule's plain attributes (``vars(m)`` without torch's own bookkeeping: the names that start with
    "_", parameters, buffers, submodules, hooks, ``training``), one line per submodule: numbers, strings and their
    containers as written, a function by the module its code runs in and its name, a config (an object with
    ``to_dict``) by the sha256 of its fields and attention implementation, a tensor kept as a plain attribute by
    its bytes, any other object by its class and (two levels deep) its own plain attributes. Never an object's
    default ``repr``, which holds its address: the text is the same in every process for the same model."""
    configs: dict[int, str] = {}
    lines = []
    for name, sub in module.named_modules(remove_duplicate=False):
        own = {k: v for k, v in vars(sub).items() if not k.startswith("_") and k not in MODULE_BOOKKEEPING}
        if own:
            lines.append(f"{name or '.'}: " + ", ".join(f"{k}={_describe(v, torch, configs, 0)}"
                                                          for k, v in sorted(own.items())))
    return "\n".join(lines)


def _describe(value, torch, configs: dict, depth: int) -> str:
    """One attribute's value as stable text (see :func:`module_attributes`)."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return repr(value)
    if isinstance(value, (torch.dtype, torch.device, enum.Enum)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__}[" + ", ".join(_describe(v, torch, configs, depth + 1) for v in value) + "]"
    if isinstance(value, (set, frozenset)):
        return "set[" + ", ".join(sorted(_describe(v, torch, configs, depth + 1) for v in value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_describe(k, torch, configs, depth + 1)}: {_describe(v, torch, configs, depth + 1)}"
                               for k, v in sorted(value.items(), key=lambda kv: repr(kv[0]))) + "}"
    if isinstance(value, torch.Tensor):
        import xxhash

        h = xxhash.xxh3_64()
        hash_tensors(h, [("", value)])
        return f"tensor:{h.hexdigest()}"
    if isinstance(value, torch.nn.Module):  # a module kept outside _modules: its class (its tensors are not read)
        return f"module:{type(value).__module__}.{type(value).__qualname__}"
    if callable(getattr(value, "to_dict", None)) and hasattr(value, "model_type"):  # a transformers config
        if id(value) not in configs:
            configs[id(value)] = config_digest(value)
        return f"config:{configs[id(value)]}"
    if callable(value):
        return f"function:{_callable_name(value)}"
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    inner = getattr(value, "__dict__", None)
    if depth >= 2 or not isinstance(inner, dict):
        return kind
    return kind + "(" + ", ".join(f"{k}={_describe(v, torch, configs, depth + 1)}"
                                  for k, v in sorted(inner.items()) if not k.startswith("_")) + ")"


def config_digest(config) -> str:
    """sha256 of a transformers config's fields (without where it was loaded from) and its attention
    implementation: what a model reads from its config during the forward pass (``is_decoder``, ...)."""
    doc = {k: v for k, v in config.to_dict().items() if k not in CONFIG_PLACE}
    doc["attention"] = getattr(config, "_attn_implementation", None)
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=repr).encode()).hexdigest()


def _callable_name(fn) -> str:
    """A function as ``module.qualname``, the module being the one its code runs in (``fn.__globals__``, which
    ``functools.wraps`` does not copy) and the name its code's (``co_qualname``); a builtin by its ``__module__``
    and ``__qualname__``; a partial by its function and arguments; a bound method by its function and its object's
    class; each function of a ``__wrapped__`` chain, outermost first."""
    import functools
    import types

    if isinstance(fn, functools.partial):
        args = [repr(a) if isinstance(a, (bool, int, float, str)) else type(a).__name__ for a in fn.args]
        return f"partial({_callable_name(fn.func)}, {', '.join(args)}, {sorted(fn.keywords)})"
    if isinstance(fn, types.MethodType):
        return f"{_callable_name(fn.__func__)} of {type(fn.__self__).__qualname__}"
    names = []
    for _ in range(16):
        code = getattr(fn, "__code__", None)
        g = getattr(fn, "__globals__", None)
        if code is not None and isinstance(g, dict):
            names.append(f"{g.get('__name__')}.{getattr(code, 'co_qualname', code.co_name)}")
        else:
            names.append(f"{getattr(fn, '__module__', None) or type(fn).__module__}."
                         f"{getattr(fn, '__qualname__', None) or type(fn).__qualname__}")
        fn = vars(fn).get("__wrapped__") if isinstance(getattr(fn, "__dict__", None), dict) else None
        if fn is None:
            break
    return " > ".join(names)
