"""Build the embedded default corpus (public-domain English prose) into ``data/corpus/``.

Sources are two Debian packages of R data sets, fetched with ``apt-get download`` (never
installed) and unpacked with ``dpkg-deb -x``:

* ``r-cran-janeaustenr``: Jane Austen's six novels, each a character vector of lines
  (objects ``sensesensibility``, ``prideprejudice``, ``mansfieldpark``, ``emma``,
  ``northangerabbey``, ``persuasion``);
* ``r-cran-tokenizers``: Moby-Dick, one string holding the whole Project Gutenberg file
  (object ``mobydick``).

Both packages keep their data in an R lazy-load database (``data/Rdata.rdx`` + ``Rdata.rdb``).
The ``.rdx`` index is an ordinary gzip RDS file mapping object names to ``(offset, length)``
in the ``.rdb``; each ``.rdb`` record is a 4-byte big-endian uncompressed length followed by a
compressed serialized R object, which ``rdata.parser.parse_data`` reads once decompressed.

Text cleaning: lines are re-joined into paragraphs (blank lines separate paragraphs, internal
whitespace collapsed to single spaces), ``_italic_`` markers are removed, Project Gutenberg
header, licence and transcriber's notes are dropped from Moby-Dick, and the modern editorial
"A NOTE ON THE TEXT" is dropped from Northanger Abbey. Each book is written as UTF-8 with one
paragraph per line and a blank line between paragraphs.

The script is deterministic: the same ``.deb`` files give the same output bytes.
``PROVENANCE.json`` records package versions, ``.deb`` hashes and output hashes.

Usage::

    .venv/bin/python scripts/build_corpus.py [--out data/corpus] [--deb-dir DIR]
"""

from __future__ import annotations

import bz2
import hashlib
import json
import lzma
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rdata

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from a checkout
from probes.config import arg, parse_config, run_main  # noqa: E402
from probes.errors import ProbeError  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "data" / "corpus"
REBUILD_COMMAND = ".venv/bin/python scripts/build_corpus.py"


@dataclass(frozen=True)
class Book:
    """One output file: which package and R object it comes from."""

    package: str  # Debian package name
    r_package: str  # R package directory under usr/lib/R/site-library
    r_object: str  # name of the data object in the lazy-load database
    filename: str  # output file name in data/corpus
    title: str


BOOKS: tuple[Book, ...] = (
    Book("r-cran-janeaustenr", "janeaustenr", "sensesensibility",
         "austen-sense-and-sensibility.txt", "Sense and Sensibility"),
    Book("r-cran-janeaustenr", "janeaustenr", "prideprejudice",
         "austen-pride-and-prejudice.txt", "Pride and Prejudice"),
    Book("r-cran-janeaustenr", "janeaustenr", "mansfieldpark",
         "austen-mansfield-park.txt", "Mansfield Park"),
    Book("r-cran-janeaustenr", "janeaustenr", "emma",
         "austen-emma.txt", "Emma"),
    Book("r-cran-janeaustenr", "janeaustenr", "northangerabbey",
         "austen-northanger-abbey.txt", "Northanger Abbey"),
    Book("r-cran-janeaustenr", "janeaustenr", "persuasion",
         "austen-persuasion.txt", "Persuasion"),
    Book("r-cran-tokenizers", "tokenizers", "mobydick",
         "melville-moby-dick.txt", "Moby-Dick; or, The Whale"),
)


# --------------------------------------------------------------------------- fetching


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    """Run a command and return its stdout; raise RuntimeError with its stderr on failure."""
    proc = subprocess.run(cmd, check=False, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
    return proc.stdout


def fetch_deb(package: str, workdir: Path, deb_dir: Path | None) -> Path:
    """Return the path of ``package``'s .deb: from ``deb_dir`` if given, else ``apt-get download``."""
    if deb_dir is not None:
        found = sorted(deb_dir.glob(f"{package}_*.deb"))
        if not found:
            raise RuntimeError(f"no {package}_*.deb in {deb_dir}")
        return found[-1]
    try:
        _run(["apt-get", "download", package], cwd=workdir)
    except RuntimeError:
        _run(["apt-get", "update"])
        _run(["apt-get", "download", package], cwd=workdir)
    found = sorted(workdir.glob(f"{package}_*.deb"))
    if not found:
        raise RuntimeError(f"apt-get download {package} produced no .deb")
    return found[-1]


def deb_field(deb: Path, field: str) -> str:
    """One control field (``Version``, ``Package``) of a .deb."""
    return _run(["dpkg-deb", "-f", str(deb), field]).strip()


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- R lazy-load DB


def _decompress_rdb_record(record: bytes, compressed: int) -> bytes:
    """Decompress one .rdb record (R's ``R_decompress1/2/3``) into serialized R bytes."""
    (n_out,) = struct.unpack(">I", record[:4])
    body = record[4:]
    if compressed in (2, 3):  # a type byte follows the length
        kind, body = body[:1], body[1:]
        if kind == b"0":
            out = body
        elif kind == b"2":
            out = bz2.decompress(body)
        elif kind == b"Z":
            out = lzma.decompress(body)
        else:
            out = zlib.decompress(body)
    else:
        out = zlib.decompress(body)
    if len(out) != n_out:
        raise RuntimeError(f"rdb record length mismatch: {len(out)} != {n_out}")
    return out


def read_lazyload_object(db_stem: Path, name: str) -> object:
    """Read object ``name`` from the R lazy-load database ``<db_stem>.rdx/.rdb``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rdata warns "Unknown file type: assumed RDS"
        index = rdata.read_rds(db_stem.with_suffix(".rdx"))
        offset, length = (int(v) for v in index["variables"][name])
        compressed = int(np.asarray(index["compressed"]).ravel()[0])
        with open(db_stem.with_suffix(".rdb"), "rb") as fh:
            fh.seek(offset)
            record = fh.read(length)
        raw = _decompress_rdb_record(record, compressed)
        return rdata.conversion.convert(rdata.parser.parse_data(raw))


# --------------------------------------------------------------------------- cleaning

_ITALIC = re.compile(r"_([^_]+)_")
_SPACES = re.compile(r"\s+")


def lines_to_paragraphs(lines: list[str]) -> list[str]:
    """Join runs of non-blank lines into paragraphs; collapse whitespace; drop italic marks."""
    paragraphs: list[str] = []
    current: list[str] = []
    for line in [*lines, ""]:
        if line.strip():
            current.append(line.strip())
        elif current:
            text = _SPACES.sub(" ", " ".join(current)).strip()
            text = _ITALIC.sub(r"\1", text)
            paragraphs.append(text)
            current = []
    return paragraphs


def _cut_between(lines: list[str], start_marker: str, end_marker: str | None) -> list[str]:
    """Lines strictly after the first line starting with ``start_marker`` and before the
    first later line starting with ``end_marker`` (to the end if None)."""
    starts = [i for i, line in enumerate(lines) if line.startswith(start_marker)]
    if not starts:
        raise RuntimeError(f"marker not found: {start_marker!r}")
    begin = starts[0] + 1
    end = len(lines)
    if end_marker is not None:
        ends = [i for i in range(begin, len(lines)) if lines[i].startswith(end_marker)]
        if not ends:
            raise RuntimeError(f"marker not found: {end_marker!r}")
        end = ends[0]
    return lines[begin:end]


def clean_austen(name: str, lines: list[str]) -> list[str]:
    """Austen lines -> paragraphs; janeaustenr already strips the Gutenberg boiler plate."""
    joined = "\n".join(lines).lower()
    if "gutenberg" in joined:
        raise RuntimeError(f"unexpected Project Gutenberg text in {name}")
    if name == "northangerabbey":  # modern editorial note (Signet Classic) at the end
        cut = [i for i, line in enumerate(lines) if line.strip() == "A NOTE ON THE TEXT"]
        if cut:
            lines = lines[: cut[0]]
    return lines_to_paragraphs(lines)


def clean_moby(text: str) -> list[str]:
    """Moby-Dick Gutenberg file -> paragraphs of the novel (title page to last chapter)."""
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    body = _cut_between(lines, "*** START OF THIS PROJECT GUTENBERG",
                        "End of Project Gutenberg's Moby Dick")
    # Drop the "Produced by" credit and the transcriber's notes before ETYMOLOGY.
    body = [line for line in body if not line.startswith("Produced by ")]
    notes = [i for i, line in enumerate(body) if line.startswith("Original Transcriber's Notes")]
    etym = [i for i, line in enumerate(body) if line.strip() == "ETYMOLOGY."]
    if notes and etym and notes[0] < etym[0]:
        body = body[: notes[0]] + body[etym[0]:]
    return lines_to_paragraphs(body)


# --------------------------------------------------------------------------- main


def build(out_dir: Path, deb_dir: Path | None) -> dict:
    """Fetch, unpack, clean and write every book plus PROVENANCE.json; return the provenance."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="build_corpus_") as tmp:
        tmp_path = Path(tmp)
        packages: dict[str, dict] = {}
        roots: dict[str, Path] = {}
        for pkg in sorted({b.package for b in BOOKS}):
            deb = fetch_deb(pkg, tmp_path, deb_dir)
            root = tmp_path / f"unpacked-{pkg}"
            _run(["dpkg-deb", "-x", str(deb), str(root)])
            roots[pkg] = root
            packages[pkg] = {
                "debian_package": deb_field(deb, "Package"),
                "version": deb_field(deb, "Version"),
                "deb_file": deb.name,
                "deb_sha256": sha256_file(deb),
                "data_file": "",
                "objects": [],
            }
        files: dict[str, dict] = {}
        for book in BOOKS:
            rel = Path("usr/lib/R/site-library") / book.r_package / "data" / "Rdata"
            obj = read_lazyload_object(roots[book.package] / rel, book.r_object)
            values = [str(v) for v in np.asarray(obj).ravel()]
            if book.r_object == "mobydick":
                paragraphs = clean_moby("".join(values))
            else:
                paragraphs = clean_austen(book.r_object, values)
            text = "\n\n".join(paragraphs) + "\n"
            data = text.encode("utf-8")
            (out_dir / book.filename).write_bytes(data)
            entry = packages[book.package]
            entry["data_file"] = f"/{rel}.rdx + /{rel}.rdb (R lazy-load database)"
            entry["objects"].append(book.r_object)
            files[book.filename] = {
                "title": book.title,
                "source_package": book.package,
                "r_object": book.r_object,
                "sha256": hashlib.sha256(data).hexdigest(),
                "n_bytes": len(data),
                "n_characters": len(text),
                "n_paragraphs": len(paragraphs),
            }
    provenance = {
        "description": "Embedded default corpus: public-domain English prose (Jane Austen's six "
                       "novels, Herman Melville's Moby-Dick), one paragraph per line, paragraphs "
                       "separated by a blank line, UTF-8.",
        "rebuild_command": REBUILD_COMMAND,
        "cleaning": [
            "lines re-joined into paragraphs; whitespace collapsed to single spaces",
            "_italic_ underscore markers removed",
            ("Moby-Dick: Project Gutenberg header, licence, 'Produced by' credit and "
             "transcriber's notes removed"),
            "Northanger Abbey: modern editorial 'A NOTE ON THE TEXT' removed",
        ],
        "packages": packages,
        "files": files,
    }
    (out_dir / "PROVENANCE.json").write_text(
        json.dumps(provenance, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
        encoding="utf-8")
    return provenance


@dataclass
class Config:
    """Rebuild data/corpus from the Debian packages of the public-domain books."""

    out: str = arg(str(DEFAULT_OUT), "output folder")
    deb_dir: str = arg("", "use .deb files already downloaded here instead of apt-get download")


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__.splitlines()[0])
    deb_dir = Path(cfg.deb_dir) if cfg.deb_dir else None
    for tool in ("dpkg-deb",) + (() if deb_dir else ("apt-get",)):
        if shutil.which(tool) is None:
            raise ProbeError(f"{tool} not found (Debian tooling required)")
    try:
        prov = build(Path(cfg.out), deb_dir)
    except RuntimeError as exc:
        raise ProbeError(str(exc)) from None
    for name, info in prov["files"].items():
        print(f"{name}: {info['n_characters']} chars, {info['n_paragraphs']} paragraphs")


if __name__ == "__main__":
    run_main(main)
