"""The checkpoint registry: names in ``checkpoints.yaml`` -> :class:`CheckpointSpec`.

Only ``yaml.safe_load`` reads the file, and nothing it names is imported or run: a ``package``
source is located through the installed distribution's file list (the folder holding a
``config.json`` beside weight files), never by importing the module. Names must be safe path
components (they name cache and result folders); relative ``path`` sources resolve against the
folder of the registry file that names them. A spec's :meth:`CheckpointSpec.fingerprint`
identifies everything its states depend on, cheaply (the folder's weight files and every other file a loader
reads, the hub revision, or the random-init config and its tokenizer entry's files; the entry's settings; the
version of the suite's own forward code: :mod:`probes.checkpoints.identity`), so the activation cache can be
looked up without loading the model. The file is read by :mod:`probes.checkpoints.registry_yaml` (safe, no
aliases, no repeated keys) and every field is checked before anything runs (strict booleans, a random source's
sizes and tokenizer entry, a base that is not itself, names of at most MAX_NAME characters).

The registry is the repository's checkpoints.yaml plus the user's own files: ``PROBES_CHECKPOINTS=FILE``
(several joined by ``os.pathsep``) or ``--registry FILE`` on any CLI add their entries, so naming a model
never means editing a tracked file. A user name that is also a built-in name (with other contents) is an
error naming both files. ``PROBES_BUILTIN_CHECKPOINTS`` replaces checkpoints.yaml itself (the tests' own
registries).
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

import probes.resources as resources
from probes.checkpoints import registry_yaml
from probes.checkpoints.identity import WEIGHT_SUFFIXES, code_versions, file_version, files_sha, plain, weights_sha
from probes.errors import CheckpointError
from probes.io import loads_json, read_regular

REGISTRY_PATH = resources.builtin_registry()  # checkpoints.yaml, shipped inside the package (probes/_data)
SENTENCE_VECTORS = ("cls", "mean", "mean_all", "last", "g")  # in words: probes.checkpoints.pooling
KINDS = ("encoder", "causal")
SOURCES = ("package", "path", "hub", "random")
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # one safe path component (a model name, a pair's name)
MAX_NAME = 100  # characters (ASCII: bytes) of a model name: it names folders and files, pairs of names too
NOT_SETTINGS = ("fetch", "requested", "prefix", "weights", "base")  # extra fields that are no state setting
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
            if not path.is_absolute():  # the built-in registry's folders may live elsewhere in a library install
                tried = [self.root / path]
                if self.root == REGISTRY_PATH.parent:
                    tried += resources.model_folder_candidates(path)
                path = next((p for p in tried if p.exists()), tried[0])
                if not path.exists() and self.root == REGISTRY_PATH.parent and not resources.in_clone():
                    raise CheckpointError(f"model '{self.name}' is not installed ({self.source['path']} is not "
                                          f"beside the registry): {resources.how_to_install(self.source['path'])}")
            if not path.exists():
                if "fetch" in self.extra:  # the entry names the command that installs the folder
                    raise CheckpointError(f"model '{self.name}' is not installed: run `{self.extra['fetch']}` "
                                          f"(folder {self.source['path']} does not exist)")
                raise CheckpointError(f"model '{self.name}': folder {path} does not exist")
            return path
        return None

    def folder(self) -> Path:
        """:meth:`local_path` of an entry that has one (a package or path source)."""
        path = self.local_path()
        if path is None:
            raise CheckpointError(f"model '{self.name}' has no folder of its own (its source is {self.source_type})")
        return path

    def fingerprint(self) -> dict:
        """What identifies the states of this entry, without loading it (goes into cache keys and results):
        the files of its folder (weights and everything else a loader reads, :mod:`.identity`), the hub revision,
        or the random-init config with its tokenizer entry's files; the entry's settings that change states; the
        version of the suite's own forward code for its family."""
        kind = self.source_type
        if kind == "package":
            module = self.source["package"]
            dist = module.replace("_", "-")
            try:
                version = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                version = "unknown"
            own = {"package": dist, "version": version, **folder_identity(self.folder())}
        elif kind == "path":
            own = {"path": str(self.source["path"]), **folder_identity(self.folder())}
            for key in ("prefix", "weights"):  # a task prefix before every text (nomic-embed: other inputs, other
                if key in self.extra:          # states); a caveat on the weights (me5-small's dequantised Q4_0)
                    own[key] = str(self.extra[key])
            if "base" in self.extra:  # a module-only entry (probes.models.lm): its base's weights count too
                base = self.base_spec()
                own = {**own, "base": base.name, "base_fingerprint": base.fingerprint()}
        elif kind == "hub":
            own = {"hub": self.source["hub"], "revision": self.revision or "main"}
            if (commit := hub_commit(self.source["hub"], self.revision)) is not None:
                own["commit"] = commit  # the snapshot in the local cache: "main" moves, a commit does not
        else:
            own = {"random": plain(self.source["random"]), "seed": self.source.get("seed", 0),
                   "tokenizer": self.source.get("tokenizer"), "tokenizer_files": self.tokenizer_spec().files()}
        settings = {k: v for k, v in sorted(self.extra.items()) if k not in NOT_SETTINGS}
        if settings:  # family fields that change states (pooler, recurrence, checkpoint, num_layers, ...)
            own["settings"] = plain(settings)
        if code := code_versions(self.family, self.model_type()):
            own["code"] = code
        return own

    def files(self) -> dict:
        """The identity of this entry's tokenizer and config files only (a random entry's tokenizer)."""
        if self.source_type in ("package", "path"):
            return {"source": plain(self.source), "files_sha256": files_sha(self.folder())}
        if self.source_type == "hub":
            return {k: v for k, v in self.fingerprint().items() if k in ("hub", "revision", "commit")}
        raise CheckpointError(f"model '{self.name}' is a random-init entry: it has no tokenizer files of its own")

    def tokenizer_spec(self) -> CheckpointSpec:
        """The registry entry whose tokenizer a random-init entry uses: one with tokenizer files (package, path,
        hub); the entry itself for any other source."""
        name = self.source.get("tokenizer")
        if self.source_type != "random":
            return self
        if not isinstance(name, str) or not name:
            raise CheckpointError(f"model '{self.name}': a random source needs tokenizer: <an entry with tokenizer "
                                  f"files>, not {name!r}")
        specs = read_registry()
        if name not in specs:
            raise CheckpointError(f"model '{self.name}': its tokenizer '{name}' is not a registry entry (tokenizer: "
                                  f"names an entry with tokenizer files, e.g. minilm-l6)")
        tok = specs[name]
        if tok.source_type == "random":
            what = "itself" if tok.name == self.name else f"'{name}', another random-init entry"
            raise CheckpointError(f"model '{self.name}': its tokenizer entry is {what}, which has no tokenizer "
                                  f"files: name an entry with a package, path or hub source (e.g. minilm-l6)")
        return tok

    def base_spec(self) -> CheckpointSpec:
        """The entry named by ``base:`` (a module-only recurrent entry): a plain entry, not itself one with a base."""
        base = str(self.extra["base"])
        specs = read_registry()
        if base == self.name:
            raise CheckpointError(f"model '{self.name}': its base is itself; base: names the entry whose weights "
                                  f"and tokenizer it uses")
        if base not in specs:
            raise CheckpointError(f"model '{self.name}': its base '{base}' is not a registry entry")
        if "base" in specs[base].extra:
            raise CheckpointError(f"model '{self.name}': its base '{base}' has a base of its own; base: must name a "
                                  f"plain entry (a chain of bases is not supported)")
        return specs[base]

    def model_type(self) -> str | None:
        """The Hugging Face model_type of the weights, where it can be read without loading (None otherwise)."""
        if self.source_type == "random":
            return str(self.source["random"].get("model_type")) if isinstance(self.source["random"], dict) else None
        cfg = None
        if self.source_type in ("package", "path"):
            cfg = self.folder() / "config.json"
        elif self.source_type == "hub":
            cfg = hub_cached_file(self.source["hub"], "config.json", self.revision)
        try:
            doc = loads_json(cfg.read_text(encoding="utf-8")) if cfg is not None and cfg.is_file() else {}
        except (OSError, ValueError):
            return None
        return str(doc.get("model_type")) if isinstance(doc, dict) and doc.get("model_type") else None


def folder_identity(folder: Path) -> dict:
    """{"weights_sha256": every weight file, "files_sha256": every other file a loader reads} of a model folder."""
    return {"weights_sha256": weights_sha(folder), "files_sha256": files_sha(folder)}


def hub_cached_file(hub_id: str, filename: str, revision: str | None) -> Path | None:
    """``filename`` of the hub model in the local Hugging Face cache, if it is there (no network)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(hub_id, filename, revision=revision)
    except (ImportError, ValueError, OSError):
        return None
    return Path(found) if isinstance(found, str) else None


def hub_commit(hub_id: str, revision: str | None) -> str | None:
    """The commit of the hub model's snapshot in the local cache (``snapshots/<commit>/config.json``)."""
    cached = hub_cached_file(hub_id, "config.json", revision)
    return cached.parent.name if cached is not None else None


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
    files = [(d, f) for d in dists if _ships(d, module) for f in d.files or []]
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
    path = Path(str(dist.locate_file(folders[0][1]))).resolve()
    if not path.is_dir():
        raise CheckpointError(f"model '{name}': package '{module}' lists the model folder {path}, which is missing "
                              f"(reinstall the package)")
    return path


def _ships(dist: importlib.metadata.Distribution, module: str) -> bool:
    """Whether the distribution's file list holds files of the top-level package ``module``."""
    return any(f.parts and f.parts[0] == module for f in dist.files or [])


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


# (path, *file_version) -> parsed specs: the file is parsed once while it does not change
_PARSED: dict[tuple, dict[str, CheckpointSpec]] = {}


def read_registry(path: str | os.PathLike | None = None) -> dict[str, CheckpointSpec]:
    """Parse a registry file into specs, validating every field; without ``path``, the built-in
    registry plus the user's files (:func:`merged_registry`). Memoised on the file's path and
    :func:`~probes.checkpoints.identity.file_version`; each call returns its own copy of the dict (the specs are
    frozen)."""
    if path is None:  # the built-in registry and the user's files
        return merged_registry()[0]
    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        st = None  # _parse_registry says why in one line
    memo = (str(path.resolve()), *file_version(st)) if st is not None else None
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
        raw = registry_yaml.load(read_regular(path).decode("utf-8")) or {}  # a FIFO or a device: one line
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        reason = (e.strerror if isinstance(e, OSError) and e.strerror  # what the path is, without its name again
                  else " ".join(str(e).split()).replace('in "<unicode string>",', "at"))  # YAML's span lines
        raise CheckpointError(f"cannot read the checkpoint registry {path}: {reason}") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"checkpoint registry {path} must be a mapping of names to entries, "
                              f"not a {type(raw).__name__}")
    specs, root = {}, path.resolve().parent
    for name, entry in raw.items():
        name = str(name)
        if (problem := name_problem(name)) is not None:
            raise CheckpointError(f"checkpoint registry {path}: {problem}")
        specs[name] = _parse_entry(name, entry, path, root)
    return specs


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a model (it names cache and result folders and files), or None."""
    safe = bool(SAFE_NAME.fullmatch(name)) and ".." not in name
    if safe and len(name) <= MAX_NAME:
        return None
    shown = repr(name) if len(name) <= 60 else f"{name[:40]!r}... ({len(name)} characters)"
    if safe:
        return f"model name {shown} is too long: names become folder and file names, at most {MAX_NAME} characters"
    return (f"model name {shown} is not allowed: names become folder names, so use letters, digits, '.', '_' and "
            f"'-' only (no '..', not starting with '.' or '-', at most {MAX_NAME} characters)")


def _flag(where: str, field_name: str, value) -> bool:
    """A yes/no field: true or false only (the string 'false' would be truthy)."""
    if not isinstance(value, bool):
        raise CheckpointError(f"{where}: {field_name} must be true or false (unquoted), not {value!r}")
    return value


def _check_source(name: str, where: str, source: dict) -> None:
    """A random source: a mapping of config fields with sane sizes, a tokenizer entry that is not itself,
    an integer seed."""
    from probes.checkpoints.folder import check_config

    if "random" not in source:
        return
    cfg, tokenizer, seed = source["random"], source.get("tokenizer"), source.get("seed", 0)
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{where}: random: must be a mapping of config fields, not {cfg!r}")
    if not isinstance(tokenizer, str) or not tokenizer:
        raise CheckpointError(f"{where}: a random source needs tokenizer: <an entry with tokenizer files, e.g. "
                              f"minilm-l6>, not {tokenizer!r}")
    if tokenizer == name:
        raise CheckpointError(f"{where}: its tokenizer entry is itself; name an entry with tokenizer files (a "
                              f"package, path or hub source, e.g. minilm-l6)")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise CheckpointError(f"{where}: seed must be a whole number, not {seed!r}")
    check_config(name, f"{where}: random", cfg)


def _parse_entry(name: str, entry: dict, path: Path, root: Path) -> CheckpointSpec:
    where = f"{path}: entry '{name}'"
    if not isinstance(entry, dict):
        raise CheckpointError(f"{where} is not a mapping")
    entry = dict(entry)
    try:
        family, kind, source, sentence = (entry.pop(k) for k in ("family", "kind", "source", "sentence"))
    except KeyError as e:
        raise CheckpointError(f"{where} lacks the field {e}") from None
    if not isinstance(family, str):
        raise CheckpointError(f"{where}: family must be a name, not {family!r}")
    if kind not in KINDS:
        raise CheckpointError(f"{where}: kind must be one of {KINDS}, not {kind!r}")
    if sentence not in SENTENCE_VECTORS:
        raise CheckpointError(f"{where}: sentence must be one of {SENTENCE_VECTORS}, not {sentence!r}")
    if not isinstance(source, dict) or sum(k in source for k in SOURCES) != 1:
        raise CheckpointError(f"{where}: source must name exactly one of {SOURCES}")
    _check_source(name, where, source)
    revision, description = entry.pop("revision", None), entry.pop("description", "")
    if revision is not None and not isinstance(revision, str):
        raise CheckpointError(f"{where}: revision must be a branch, tag or commit in quotes, not {revision!r}")
    if not isinstance(description, (str, int, float)):
        raise CheckpointError(f"{where}: description must be one line of text, not a {type(description).__name__}")
    if "pooler" in entry:
        _flag(where, "pooler", entry["pooler"])
    if str(entry.get("base", "")) == name:
        raise CheckpointError(f"{where}: its base is itself; base: names the entry whose weights and tokenizer "
                              f"it uses")
    return CheckpointSpec(
        name=name, family=family, kind=kind, source=source, sentence=sentence,
        special_tokens=_flag(where, "special_tokens", entry.pop("special_tokens", True)), revision=revision,
        description=str(description), extra=entry, root=root,
    )
