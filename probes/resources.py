"""Where the suite's data lives, wherever the package is installed.

Nothing here depends on the current directory:

* the built-in registry (``checkpoints.yaml``) and the embedded default corpus travel inside the ``probes``
  package (``probes/_data/``, read with :mod:`importlib.resources`). In a clone, ``probes/_data/`` holds links
  to the repository's top-level ``checkpoints.yaml`` and ``data/corpus/``, the one copy people edit; a wheel
  carries copies of them;
* the registry's relative model folders (``checkpoints/<name>`` for the small models trained here,
  ``models/<name>`` for the ones ``make models`` fetches) resolve against the repository when the package runs
  from a clone, else against :data:`HOME_ENV` (a folder with ``checkpoints/`` and ``models/``: a clone works),
  else, for ``checkpoints/<name>``, against the installed data packages that ``make dist`` builds from
  ``checkpoints/``: ``probes_checkpoints`` carries the seed-0 models, tokenizers and modules, and
  ``probes_checkpoints_seed<N>`` the ``<model>-seed<N>`` folders (:func:`checkpoints_package`), so that each wheel
  stays under the size a package index takes per file and a new seed adds a wheel instead of growing one.

    $ python -c "import probes.resources as r; print(r.builtin_registry(), r.default_corpus_dir())"
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import os
import re
from pathlib import Path

HOME_ENV = "PROBES_HOME"  # a folder holding checkpoints/ and models/ (a clone of the repository works)
CHECKPOINTS_PACKAGE = "probes_checkpoints"  # the data package make dist builds from checkpoints/ (seed 0)
SEED_FOLDER = re.compile(r"-seed([1-9][0-9]*)$")  # <model>-seed<N>: the same recipe trained again with --seed N


def package_data(name: str) -> Path:
    """A file or folder of ``probes/_data`` as a real path (links resolved: in a clone, the repository's copy)."""
    return Path(str(importlib.resources.files("probes") / "_data" / name)).resolve()


def builtin_registry() -> Path:
    """The built-in checkpoints.yaml."""
    return package_data("checkpoints.yaml")


def default_corpus_dir() -> Path:
    """The embedded default corpus (Austen's six novels and Moby-Dick, one paragraph per line)."""
    return package_data("corpus")


def checkpoints_package(folder: str) -> str:
    """The data package that carries the folder ``checkpoints/<folder>``: ``probes_checkpoints_seed<N>`` for a
    seed's folder (``<model>-seed<N>``, N >= 1), ``probes_checkpoints`` for every other one (the seed-0 models
    that the README's examples name, the tokenizer, the recurrence modules). ``make dist`` splits the wheels by
    this rule and the names resolve by it."""
    seed = SEED_FOLDER.search(folder)
    return f"{CHECKPOINTS_PACKAGE}_seed{seed[1]}" if seed else CHECKPOINTS_PACKAGE


def installed_checkpoints(package: str = CHECKPOINTS_PACKAGE) -> Path | None:
    """The folder of an installed checkpoints data package (one sub-folder per small model), or None.
    Located without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def model_folder_candidates(relative: str | os.PathLike) -> list[Path]:
    """Where a relative model folder of the built-in registry (``checkpoints/x``, ``models/x``) may be, in the
    order they are tried after the registry's own folder: ``$PROBES_HOME/<relative>``, then the data package
    that carries ``checkpoints/x`` (:func:`checkpoints_package`), then for a seed's folder ``probes_checkpoints``
    too (a wheel built before the seeds had wheels of their own carried them all)."""
    rel = Path(relative)
    out = []
    home = os.environ.get(HOME_ENV, "").strip()
    if home:
        out.append(Path(home).expanduser() / rel)
    if rel.parts[:1] == ("checkpoints",) and len(rel.parts) > 1:
        for package in dict.fromkeys((checkpoints_package(rel.parts[1]), CHECKPOINTS_PACKAGE)):
            data = installed_checkpoints(package)
            if data is not None:
                out.append(data.joinpath(*rel.parts[1:]))
    return out


def how_to_install(relative: str | os.PathLike) -> str:
    """One sentence saying how to get a missing model folder of the built-in registry."""
    rel = Path(relative)
    if rel.parts[:1] == ("checkpoints",):
        package = checkpoints_package(rel.parts[1]) if len(rel.parts) > 1 else CHECKPOINTS_PACKAGE
        seed = SEED_FOLDER.search(rel.parts[1]) if len(rel.parts) > 1 else None
        what = f"the seed-{seed[1]} models" if seed else "the suite's small models"
        return (f"install the wheel {package}, which carries {what} (`make dist` in a clone builds "
                f"dist/{package}-*.whl; pip install it), or set {HOME_ENV} to a clone of the repository")
    return f"run `make models` in a clone of the repository and set {HOME_ENV} to that clone"


def in_clone() -> bool:
    """Whether the package runs from a clone of the repository (its registry is the clone's checkpoints.yaml)."""
    return (builtin_registry().parent / "pyproject.toml").is_file()
