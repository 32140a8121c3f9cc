"""Build the wheels a library user installs: the suite, its small trained models, and their further seeds, each
under the size a package index takes per file.

* ``dist/probes_suite-<version>-py3-none-any.whl``: the packages ``probes`` and ``analyses``, with the built-in
  registry and the default corpus as package data;
* ``dist/probes_checkpoints-<version>-py3-none-any.whl``: the seed-0 model folders of ``checkpoints/`` (every
  folder without a ``-seed<N>`` suffix: the S-LSTM, BERT-/ALBERT-style, Graph-Transformer and GPT-2 models trained
  here, the shared tokenizer, the recurrence module of SmolLM2) and the READMEs, as the data package
  ``probes_checkpoints``: every name the README's examples use;
* ``dist/probes_checkpoints_seed<N>-<version>-py3-none-any.whl``, one per seed N >= 1: the ``<model>-seed<N>``
  folders, as the data package ``probes_checkpoints_seed<N>``. One wheel per seed holds at most one folder per
  seed-0 model, so no wheel grows as seeds are added: a new seed is a new wheel.

The registry's ``checkpoints/<name>`` entries find the folders in whichever of these packages is installed, by
the same rule that splits them here (:func:`probes.resources.checkpoints_package`). The data packages hold data
only; nothing in them is imported or run. A wheel over :data:`MAX_WHEEL_BYTES` is never written: the build
stops with one ``error:`` line (exit status 2) before building anything when a wheel's files add up to more,
and a built wheel over it is deleted with the same line.

    $ python scripts/build_dist.py            # or: make dist
    $ pip install torch==2.13.0 dist/probes_suite-*.whl dist/probes_checkpoints-*.whl   # + _seed<N> wheels
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# PyPI refuses a file over 100 MiB unless a project is granted more; 100 MB (10^6) is the stricter reading of both
MAX_WHEEL_BYTES = 100_000_000
# what a zip archive and the wheel's RECORD add per member beyond its bytes (headers, the name three times, a hash)
ZIP_BYTES_PER_FILE = 512


def _resources():
    """probes/resources.py on its own (it needs only the standard library): the rule that says which data package
    carries a folder, without importing the suite (torch) into the small build environment of ``make dist``."""
    spec = importlib.util.spec_from_file_location("_probes_resources", REPO / "probes" / "resources.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RESOURCES = _resources()

CHECKPOINTS_PYPROJECT = """\
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "{distribution}"
version = "{version}"
description = "{description}"
requires-python = ">=3.10"
license = "MIT"

[tool.setuptools]
packages = ["{package}"]
include-package-data = false

[tool.setuptools.package-data]
{package} = ["**/*"]
"""


class DistError(Exception):
    """A wheel that cannot be built as asked (over the size limit), said in one line."""


@dataclass(frozen=True)
class DataWheel:
    """One data wheel of model folders: the package it installs and what goes into it."""

    package: str  # probes_checkpoints or probes_checkpoints_seed<N>
    folders: tuple[Path, ...]  # folders of checkpoints/, each copied whole under the package
    files: tuple[Path, ...]  # single files beside them (the READMEs)

    @property
    def description(self) -> str:
        seed = re.search(r"_seed(\d+)$", self.package)
        if seed:
            return f"The seed-{seed[1]} retrainings of the small models trained by probes-suite, as data"
        return ("The small models trained by probes-suite (S-LSTM, BERT-/ALBERT-style, Graph-Transformer, GPT-2), "
                "seed 0, as data")

    def sizes(self) -> list[int]:
        """The bytes of every file the wheel will carry."""
        return [p.stat().st_size for p in self.files] + [
            p.stat().st_size for folder in self.folders for p in sorted(folder.rglob("*")) if p.is_file()]


def model_folders(root: Path) -> list[Path]:
    """The committed folders of checkpoints/ (models, recurrence modules, tokenizers); never the recipes' hidden
    work folders (.name.state, .name.partial-pid)."""
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def plan(root: Path, only: list[str] | None = None) -> list[DataWheel]:
    """The data wheels of the folders of ``root`` (or of those named in ``only``), main package first, then the
    seeds in order; a seed with no folder has no wheel. The READMEs go with the main package."""
    groups: dict[str, list[Path]] = {RESOURCES.CHECKPOINTS_PACKAGE: []}
    for folder in model_folders(root):
        if only is None or folder.name in only:
            groups.setdefault(RESOURCES.checkpoints_package(folder.name), []).append(folder)

    def order(package: str) -> tuple[int, int]:
        seed = re.search(r"_seed(\d+)$", package)
        return (1, int(seed[1])) if seed else (0, 0)

    readmes = tuple(sorted(root.glob("README*.md")))
    return [DataWheel(package, tuple(folders), readmes if package == RESOURCES.CHECKPOINTS_PACKAGE else ())
            for package, folders in sorted(groups.items(), key=lambda kv: order(kv[0]))
            if folders or package == RESOURCES.CHECKPOINTS_PACKAGE]


def check_size(name: str, sizes: Iterable[int]) -> int:
    """The bytes a wheel of files of these sizes may take (their bytes, uncompressed, and the zip's per-file
    overhead: an upper bound, since the float16 weights hardly compress); :class:`DistError` over the limit."""
    sizes = list(sizes)
    total = sum(sizes) + ZIP_BYTES_PER_FILE * (len(sizes) + 8)  # + the wheel's METADATA, WHEEL, RECORD, ...
    if total > MAX_WHEEL_BYTES:
        raise DistError(f"the wheel {name} would take {total / 1e6:.1f} MB ({len(sizes)} files), over the "
                        f"{MAX_WHEEL_BYTES / 1e6:.0f} MB a package index takes per file; it was not written")
    return total


def _build_one(wheel_cmd: list[str], project: Path, name: str, out: Path) -> Path:
    """Build one wheel into a scratch folder and move it to ``out`` if it is under the limit."""
    with tempfile.TemporaryDirectory() as house:
        subprocess.run([*wheel_cmd, "-w", house, str(project)], check=True)
        (built,) = Path(house).glob("*.whl")
        size = built.stat().st_size
        if size > MAX_WHEEL_BYTES:
            raise DistError(f"the wheel {name} is {size / 1e6:.1f} MB, over the {MAX_WHEEL_BYTES / 1e6:.0f} MB a "
                            f"package index takes per file; it was not written")
        target = out / built.name
        shutil.move(built, target)
        return target


def build(out: Path, only: list[str] | None = None, root: Path | None = None) -> list[Path]:
    """Build the suite's wheel and the data wheels of ``root`` (default: checkpoints/) into ``out``; every data
    wheel is checked against the size limit on its file list before anything is built."""
    root = REPO / "checkpoints" if root is None else root
    found = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert found is not None, "pyproject.toml has no version"
    version = found[1]
    wheels = plan(root, only)
    for data in wheels:
        check_size(data.package, data.sizes())
    out.mkdir(parents=True, exist_ok=True)
    # the build uses this environment's setuptools (no isolated build environment to download): works offline
    wheel_cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    written = [_build_one(wheel_cmd, REPO, "probes_suite", out)]
    for data in wheels:
        with tempfile.TemporaryDirectory() as tmp:
            project = Path(tmp)
            (project / "pyproject.toml").write_text(CHECKPOINTS_PYPROJECT.format(
                distribution=data.package.replace("_", "-"), package=data.package, version=version,
                description=data.description), encoding="utf-8")
            package = project / data.package
            package.mkdir()
            (package / "__init__.py").write_text(f'"""{data.description} (model folders of probes-suite)."""\n',
                                                 encoding="utf-8")
            for folder in data.folders:
                shutil.copytree(folder, package / folder.name)
            for file in data.files:
                shutil.copy2(file, package / file.name)
            written.append(_build_one(wheel_cmd, project, data.package, out))
    return written


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "dist", help="where the wheels go (default: dist/)")
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="put only this folder of checkpoints/ into the data wheels (repeatable; the tests)")
    ap.add_argument("--checkpoints", type=Path, default=REPO / "checkpoints", metavar="DIR",
                    help="the folder of model folders to package (default: checkpoints/)")
    args = ap.parse_args(argv)
    try:
        written = build(args.out, args.only, args.checkpoints)
    except DistError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    for wheel in written:
        print(f"{wheel} ({wheel.stat().st_size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
