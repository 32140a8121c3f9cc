"""The checkpoint registry: names in ``checkpoints.yaml`` -> :class:`CheckpointSpec`.

Only ``yaml.safe_load`` reads the file, and nothing it names is imported or run: a ``package``
source is located through the installed distribution's file list (the folder holding a
``config.json`` beside weight files), never by importing the module. Names must be safe path
components (they name cache and result folders); relative ``path`` sources resolve against the
folder of the registry file that names them. A spec's :meth:`CheckpointSpec.fingerprint`
identifies the weights cheaply (package version, file hashes, hub revision or random-init config),
so the activation cache can be looked up without loading the model.

The registry is the repository's checkpoints.yaml plus the user's own files: ``PROBES_CHECKPOINTS=FILE``
(several joined by ``os.pathsep``) or ``--registry FILE`` on any CLI add their entries, so naming a model
never means editing a tracked file. A user name that is also a built-in name (with other contents) is an
error naming both files. ``PROBES_BUILTIN_CHECKPOINTS`` replaces checkpoints.yaml itself (the tests' own
registries).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from probes.errors import CheckpointError

REGISTRY_PATH = Path(__file__).resolve().parents[2] / "checkpoints.yaml"
SENTENCE_VECTORS = ("cls", "mean", "last", "g")
KINDS = ("encoder", "causal")
SOURCES = ("package", "path", "hub", "random")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a model name is one safe path component
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a package source names a top-level module


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
    root: Path = field(default=REGISTRY_PATH.parent, compare=False, repr=False)  # relative paths start here

    @property
    def source_type(self) -> str:
        return next(k for k in SOURCES if k in self.source)

    def local_path(self) -> Path | None:
        """The folder holding the weights, for package and path sources (None otherwise)."""
        if "package" in self.source:
            return package_model_dir(self.name, str(self.source["package"]))
        if "path" in self.source:
            path = Path(self.source["path"])
            path = path if path.is_absolute() else self.root / path
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
            own = {"path": str(self.source["path"]), "weights_sha256": _weights_sha(self.local_path())}
            for key in ("prefix", "weights"):  # a task prefix before every text (nomic-embed: other inputs, other
                if key in self.extra:          # states); a caveat on the weights (me5-small's dequantised Q4_0)
                    own[key] = str(self.extra[key])
            if "base" in self.extra:  # a module-only entry (probes.models.lm): its base's weights count too
                base = str(self.extra["base"])
                specs = read_registry()
                if base not in specs:
                    raise CheckpointError(f"model '{self.name}': its base '{base}' is not a registry entry")
                return {**own, "base": base, "base_fingerprint": specs[base].fingerprint()}
            return own
        if kind == "hub":
            return {"hub": self.source["hub"], "revision": self.revision or "main"}
        return {"random": self.source["random"], "seed": self.source.get("seed", 0),
                "tokenizer": self.source.get("tokenizer")}


@functools.cache
def package_model_dir(name: str, module: str) -> Path:
    """The model folder shipped by the installed distribution that provides ``module``: the one
    folder under ``module/`` whose files include ``config.json`` and a weight file. Found from the
    distribution's file list (RECORD); the module is never imported."""
    if not MODULE_NAME.fullmatch(module):
        raise CheckpointError(f"model '{name}': source package {module!r} is not a top-level module name")
    missing = CheckpointError(f"model '{name}' needs the Python package '{module}', which no installed "
                              f"distribution provides (install it with pip)")
    try:
        dists = [importlib.metadata.distribution(module)]  # the usual case: distribution named like the module
    except importlib.metadata.PackageNotFoundError:
        dists = []
    if not any(_ships(d, module) for d in dists):
        found = importlib.metadata.packages_distributions().get(module, [])
        dists = [importlib.metadata.distribution(d) for d in dict.fromkeys(found)]
    files = [(d, f) for d in dists if _ships(d, module) for f in d.files]
    if not files:
        raise missing
    by_folder: dict[tuple, set] = {}
    for d, f in files:
        if f.parts and f.parts[0] == module:
            by_folder.setdefault((d.metadata["Name"], f.parent.as_posix()), set()).add(f.name)
    folders = [(dist, folder) for (dist, folder), names in by_folder.items()
               if "config.json" in names and any(n.endswith(WEIGHT_SUFFIXES) for n in names)]
    if len(folders) != 1:
        what = "no folder" if not folders else f"{len(folders)} folders ({', '.join(f for _, f in folders)})"
        raise CheckpointError(f"model '{name}': package '{module}' ships {what} with config.json and weight "
                              f"files ({', '.join(WEIGHT_SUFFIXES)}); expected exactly one")
    dist = next(d for d in dists if d.metadata["Name"] == folders[0][0])
    path = Path(dist.locate_file(folders[0][1])).resolve()
    if not path.is_dir():
        raise CheckpointError(f"model '{name}': package '{module}' lists the model folder {path}, which is missing "
                              f"(reinstall the package)")
    return path


def _ships(dist: importlib.metadata.Distribution, module: str) -> bool:
    """Whether the distribution's file list holds files of the top-level package ``module``."""
    return any(f.parts and f.parts[0] == module for f in dist.files or [])


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
    """The built-in registry: the repository's checkpoints.yaml (``PROBES_BUILTIN_CHECKPOINTS`` replaces it,
    for tests that need a registry of their own)."""
    return Path(os.environ.get("PROBES_BUILTIN_CHECKPOINTS", REGISTRY_PATH))


def user_registry_paths() -> list[Path]:
    """The user's registry files, added to the built-in one: ``PROBES_CHECKPOINTS`` (several joined by
    ``os.pathsep``), which every CLI's ``--registry FILE`` extends (probes.config.use_registries)."""
    return [Path(p) for p in os.environ.get("PROBES_CHECKPOINTS", "").split(os.pathsep) if p.strip()]


def _same_entry(a: CheckpointSpec, b: CheckpointSpec) -> bool:
    """Whether two entries describe the same model (a user file may repeat a built-in entry as it is)."""
    from dataclasses import replace

    def where(s: CheckpointSpec) -> Path | None:
        return (s.root / Path(s.source["path"]).expanduser()).resolve() if s.source_type == "path" else None

    return replace(a, description="") == replace(b, description="") and where(a) == where(b)


def merged_registry() -> tuple[dict[str, CheckpointSpec], dict[str, Path]]:
    """(specs, the file each name comes from): the built-in registry plus the user's files. A user name
    that shadows another file's entry (with other contents) is an error naming both files."""
    builtin = _registry_path()
    specs = read_registry(builtin)
    origin = dict.fromkeys(specs, builtin)
    for user in user_registry_paths():
        for name, spec in read_registry(user).items():
            if name in specs and not _same_entry(specs[name], spec):
                raise CheckpointError(f"model '{name}' in {user} shadows the entry '{name}' of {origin[name]}: "
                                      f"give it another name in {user}")
            specs.setdefault(name, spec)
            origin.setdefault(name, user)
    return specs, origin


# (path, mtime_ns, size) -> parsed specs: the file is parsed once while it does not change
_PARSED: dict[tuple[str, int, int], dict[str, CheckpointSpec]] = {}


def read_registry(path: str | os.PathLike | None = None) -> dict[str, CheckpointSpec]:
    """Parse a registry file into specs, validating every field; without ``path``, the built-in
    registry plus the user's files (:func:`merged_registry`). Memoised on the file's (path,
    mtime_ns, size); each call returns its own copy of the dict (the specs are frozen)."""
    if path is None:  # the built-in registry and the user's files
        return merged_registry()[0]
    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        st = None  # _parse_registry says why in one line
    memo = (str(path.resolve()), st.st_mtime_ns, st.st_size) if st is not None else None
    if memo is not None and memo in _PARSED:
        return dict(_PARSED[memo])
    specs = _parse_registry(path)
    if memo is not None:
        if len(_PARSED) >= 8:  # a few files (tests switch PROBES_CHECKPOINTS) are enough
            _PARSED.clear()
        _PARSED[memo] = specs
    return dict(specs)


def _parse_registry(path: Path) -> dict[str, CheckpointSpec]:
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
        name = str(name)
        if not SAFE_NAME.fullmatch(name) or ".." in name:
            raise CheckpointError(f"checkpoint registry {path}: model name {name!r} is not allowed: names become "
                                  f"folder names, so use letters, digits, '.', '_' and '-' only (no '..', "
                                  f"not starting with '.' or '-')")
        specs[name] = _parse_entry(name, entry, path)
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
        description=str(entry.pop("description", "")), extra=entry, root=path.resolve().parent,
    )
