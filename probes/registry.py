"""The checkpoint registry: names in ``checkpoints.yaml`` -> :class:`CheckpointSpec`.

Only ``yaml.safe_load`` reads the file. A spec's :meth:`CheckpointSpec.fingerprint` identifies
the weights cheaply (package version, file hashes, hub revision or random-init config), so the
activation cache can be looked up without loading the model.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from probes.errors import CheckpointError

REGISTRY_PATH = Path(__file__).resolve().parent.parent / "checkpoints.yaml"
SENTENCE_VECTORS = ("cls", "mean", "last", "g")
KINDS = ("encoder", "causal")
SOURCES = ("package", "path", "hub", "random")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


@dataclass(frozen=True)
class CheckpointSpec:
    """One entry of checkpoints.yaml."""

    name: str  # the registry name, e.g. "minilm-l6"
    family: str  # loader family: "hf" (Hugging Face Auto classes) or a custom architecture
    kind: str  # "encoder" or "causal"
    source: dict  # {"package": mod} | {"path": dir} | {"hub": id} | {"random": cfg, "tokenizer": name}
    sentence: str  # sentence vector: cls | mean | last | g
    special_tokens: bool = True  # add the tokenizer's special tokens when encoding
    revision: str | None = None  # hub revision; None elsewhere
    description: str = ""
    extra: dict = field(default_factory=dict)  # family-specific fields, passed to the loader

    @property
    def source_type(self) -> str:
        return next(k for k in SOURCES if k in self.source)

    def local_path(self) -> Path | None:
        """The folder holding the weights, for package and path sources (None otherwise)."""
        if "package" in self.source:
            module = self.source["package"]
            try:
                mod = importlib.import_module(module)
            except ImportError:
                raise CheckpointError(
                    f"model '{self.name}' needs the Python package '{module}', which is not installed"
                ) from None
            return Path(mod.get_model_path())
        if "path" in self.source:
            path = Path(self.source["path"])
            path = path if path.is_absolute() else REGISTRY_PATH.parent / path
            if not path.exists():
                if "fetch" in self.extra:  # the entry names the command that installs the folder
                    raise CheckpointError(f"model '{self.name}' is not installed: run `{self.extra['fetch']}` "
                                          f"(folder {self.source['path']} does not exist)")
                raise CheckpointError(f"model '{self.name}': folder {path} does not exist")
            return path
        return None

    def fingerprint(self) -> dict:
        """What identifies these weights, without loading them (goes into cache keys and results)."""
        kind = self.source_type
        if kind == "package":
            module = self.source["package"]
            dist = module.replace("_", "-")
            try:
                version = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                version = "unknown"
            return {"package": dist, "version": version, "weights_sha256": _weights_sha(self.local_path())}
        if kind == "path":
            return {"path": str(self.source["path"]), "weights_sha256": _weights_sha(self.local_path())}
        if kind == "hub":
            return {"hub": self.source["hub"], "revision": self.revision or "main"}
        return {"random": self.source["random"], "seed": self.source.get("seed", 0),
                "tokenizer": self.source.get("tokenizer")}


_SHA_MEMO: dict[tuple, str] = {}


def _weights_sha(folder: Path) -> str:
    """sha256 over the weight files in a folder (memoised on path, size and mtime)."""
    files = sorted(p for p in folder.rglob("*") if p.suffix in WEIGHT_SUFFIXES and p.is_file())
    if not files:
        raise CheckpointError(f"no weight files ({', '.join(WEIGHT_SUFFIXES)}) under {folder}")
    h = hashlib.sha256()
    for p in files:
        st = p.stat()
        memo_key = (str(p), st.st_size, st.st_mtime_ns)
        if memo_key not in _SHA_MEMO:
            fh = hashlib.sha256()
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    fh.update(block)
            _SHA_MEMO[memo_key] = fh.hexdigest()
        h.update(p.relative_to(folder).as_posix().encode() + b"\0" + _SHA_MEMO[memo_key].encode())
    return h.hexdigest()


def _registry_path() -> Path:
    return Path(os.environ.get("PROBES_CHECKPOINTS", REGISTRY_PATH))


def read_registry(path: str | os.PathLike | None = None) -> dict[str, CheckpointSpec]:
    """Parse checkpoints.yaml into specs, validating every field."""
    path = Path(path) if path is not None else _registry_path()
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        reason = " ".join(str(e).split())  # YAML errors span several lines; ours are one line
        raise CheckpointError(f"cannot read the checkpoint registry {path}: {reason}") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"checkpoint registry {path} must be a mapping of names to entries, "
                              f"not a {type(raw).__name__}")
    specs = {}
    for name, entry in raw.items():
        specs[name] = _parse_entry(str(name), entry, path)
    return specs


def _parse_entry(name: str, entry: dict, path: Path) -> CheckpointSpec:
    where = f"{path}: entry '{name}'"
    if not isinstance(entry, dict):
        raise CheckpointError(f"{where} is not a mapping")
    entry = dict(entry)
    try:
        family, kind, source, sentence = (entry.pop(k) for k in ("family", "kind", "source", "sentence"))
    except KeyError as e:
        raise CheckpointError(f"{where} lacks the field {e}") from None
    if kind not in KINDS:
        raise CheckpointError(f"{where}: kind must be one of {KINDS}, not {kind!r}")
    if sentence not in SENTENCE_VECTORS:
        raise CheckpointError(f"{where}: sentence must be one of {SENTENCE_VECTORS}, not {sentence!r}")
    if not isinstance(source, dict) or sum(k in source for k in SOURCES) != 1:
        raise CheckpointError(f"{where}: source must name exactly one of {SOURCES}")
    return CheckpointSpec(
        name=name, family=family, kind=kind, source=source, sentence=sentence,
        special_tokens=bool(entry.pop("special_tokens", True)), revision=entry.pop("revision", None),
        description=str(entry.pop("description", "")), extra=entry,
    )


def get_spec(name: str) -> CheckpointSpec:
    """The spec registered under ``name``; a clear error listing the known names otherwise."""
    specs = read_registry()
    if name not in specs:
        known = ", ".join(sorted(specs))
        raise CheckpointError(f"unknown model '{name}': checkpoints.yaml has {known}")
    return specs[name]


def fingerprint_id(spec: CheckpointSpec) -> str:
    """A short stable id of a spec's fingerprint."""
    blob = json.dumps({"name": spec.name, **spec.fingerprint()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
