"""Build the two wheels a library user installs: the suite and its small trained models.

* ``dist/probes_suite-<version>-py3-none-any.whl``: the packages ``probes`` and ``analyses``, with the built-in
  registry and the default corpus as package data;
* ``dist/probes_checkpoints-<version>-py3-none-any.whl``: every model folder of ``checkpoints/`` (the S-LSTM,
  BERT-/ALBERT-style, Graph-Transformer and GPT-2 models trained here, their seeds and tokenizers) as the data
  package ``probes_checkpoints``, where the registry's ``checkpoints/<name>`` entries find them
  (:mod:`probes.resources`). The package holds data only; nothing in it is imported or run.

    $ python scripts/build_dist.py            # or: make dist
    $ pip install torch==2.13.0 dist/probes_suite-*.whl dist/probes_checkpoints-*.whl
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHECKPOINTS_PYPROJECT = """\
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "probes-checkpoints"
version = "{version}"
description = "The small models trained by probes-suite (S-LSTM, BERT-/ALBERT-style, Graph-Transformer, GPT-2), as data"
requires-python = ">=3.10"
license = "MIT"

[tool.setuptools]
packages = ["probes_checkpoints"]
include-package-data = false

[tool.setuptools.package-data]
probes_checkpoints = ["**/*"]
"""


def model_folders(root: Path) -> list[Path]:
    """The committed folders of checkpoints/ (models, recurrence modules, tokenizers); never the recipes' hidden
    work folders (.name.state, .name.partial-pid)."""
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def build(out: Path, only: list[str] | None = None) -> list[Path]:
    version = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(encoding="utf-8"), re.M)[1]
    out.mkdir(parents=True, exist_ok=True)
    # the build uses this environment's setuptools (no isolated build environment to download): works offline
    wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out)]
    subprocess.run([*wheel, str(REPO)], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "pyproject.toml").write_text(CHECKPOINTS_PYPROJECT.format(version=version), encoding="utf-8")
        package = project / "probes_checkpoints"
        package.mkdir()
        (package / "__init__.py").write_text('"""Model folders of probes-suite\'s small models (data only)."""\n',
                                             encoding="utf-8")
        for folder in model_folders(REPO / "checkpoints"):
            if only is not None and folder.name not in only:
                continue
            shutil.copytree(folder, package / folder.name)
        for readme in (REPO / "checkpoints").glob("README*.md"):
            shutil.copy2(readme, package / readme.name)
        subprocess.run([*wheel, str(project)], check=True)
    return sorted(out.glob(f"*-{version}-*.whl"))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "dist", help="where the wheels go (default: dist/)")
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="put only this folder of checkpoints/ into the checkpoints wheel (repeatable; the tests)")
    args = ap.parse_args(argv)
    for wheel in build(args.out, args.only):
        print(f"{wheel} ({wheel.stat().st_size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
