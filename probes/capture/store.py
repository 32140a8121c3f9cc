"""The activation cache on disk: one entry per (model, inputs, settings), written once, checked when read.

An entry is ``<cache>/<model>/<key>/``: ``meta.json`` (capture settings, texts, tokens, checksums) and one
``.npy`` per array (``hidden``, ``sentence``, ``offsets``, ``token_ids``, ``special``, ``map.<name>`` and its
offsets). :func:`cache_key` hashes model identity + inputs + settings: equal keys mean equal activations.
The Python API's cache is a per-user folder (:func:`user_cache_dir`: ``PROBES_CACHE``, else
``$XDG_CACHE_HOME/probes``, else ``~/.cache/probes``); the analyses' command lines use ``<out>/cache``.

* Writing (:mod:`probes.capture.work`): the arrays are filled in ``<entry>.partial/``; each finished chunk is
  recorded in ``done.json`` with its checksum, so an interrupted extraction resumes where it stopped and a
  finished chunk whose bytes changed since is run again; a full disk is one error line, never a SIGBUS.
  :func:`finalise_entry` writes the small arrays and meta.json and renames the folder into place in one step,
  so a reader never sees half an entry; :func:`check_complete` refuses to finalise unless every chunk, text and
  token asked for was written.
* Locking: one process at a time writes an entry (:func:`entry_lock`, ``<cache>/.locks/<model>.<key>.lock``,
  filelock); a second process waits, then reads the finished entry.
* Checking: every file is checksummed (XXH3-64 per 16 MiB block, and meta.json's content by sha256) when written and
  checked by :func:`read_entry`; a damaged entry is removed with a warning and extracted again
  (:func:`open_entry`). ``PROBES_CACHE_VERIFY=quick`` checks sizes, headers, files up to 8 blocks entirely and
  every 8th block of bigger ones instead of every byte; the activations then say so
  (``meta["cache_verify"]``, which a result records with its activations).
* Float16 storage (probes.precision): read back, a float16 array is a read-only
  :class:`~probes.precision.Float32View` whose every read is float32.

    $ python -m probes.capture.cache list --cache out/cache
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import mmap
import os
import shutil
import sys
import warnings
import zlib
from pathlib import Path

import numpy as np
import xxhash
from filelock import FileLock

from probes.capture.activations import Activations
from probes.capture.work import CACHE_TAG, CACHE_TAG_TEXT, cache_write_errors, mark_cache
from probes.checkpoints.registry import CheckpointSpec
from probes.errors import ProbeError
from probes.io import atomic_text, loads_json
from probes.precision import float32_face

CACHE_FORMAT = 5  # bump when the layout on disk or the key changes: older entries are re-extracted (3: checksums;
# 4: float16; 5: keys over every input of the states: config and tokenizer files, settings, forward code versions)
CHECK_BLOCK = 16 * 2**20  # bytes per checksummed block of an entry's files
# the block checksums detect accidental damage (a torn or lost write, a flipped bit, a zeroed block; a 64-bit hash
# misses random damage to a block with probability 2**-64) at the speed of memory: XXH3-64 hashes 47 MB in 2.2 ms of
# CPU here, zlib's CRC-32 in 12 ms and sha256 in 29 ms, and every cold extraction and every cache hit pays it; none
# of them was ever a defence against someone who can write the cache (they could rewrite meta.json). New entries
# record xxh3_64; entries written with crc32 or sha256 blocks are still read.
CHECKSUMS = {"xxh3_64": lambda parts: f"{_xxh3_64(parts):016x}",
             "crc32": lambda parts: f"{_crc32(parts):08x}",
             "sha256": lambda parts: _sha256(parts).hexdigest()[:32]}
CHECKSUM = "xxh3_64"
QUICK_STRIDE = 8  # PROBES_CACHE_VERIFY=quick checks every QUICK_STRIDE-th block (+ first, last) of big files
# what a damaged entry raises when read (EOFError: an emptied .npy; SyntaxError: a garbled .npy header)
CORRUPT = (OSError, ValueError, KeyError, TypeError, EOFError, SyntaxError)
__all__ = ["CACHE_TAG", "CACHE_TAG_TEXT", "mark_cache"]  # re-exported from probes.capture.work


class UserCache:
    """The default ``cache_dir`` of :func:`probes.extract`: the folder :func:`user_cache_dir` names when called."""

    def __repr__(self) -> str:
        return "<the user cache: PROBES_CACHE, else $XDG_CACHE_HOME/probes, else ~/.cache/probes>"


USER_CACHE = UserCache()


def user_cache_dir() -> Path:
    """The Python API's cache folder, read when called: ``PROBES_CACHE`` if set, else ``$XDG_CACHE_HOME/probes``
    (an absolute XDG_CACHE_HOME only, as the XDG spec says), else ``~/.cache/probes``; never the current folder
    (a relative PROBES_CACHE is made absolute at once; a blank one counts as unset, as PROBES_HOME's does)."""
    return user_cache_source()[0]


def cache_subfolder(cache_dir, name: str) -> Path | None:
    """``<cache>/<name>``: a folder kept inside the activation cache ``cache_dir`` (a folder, or ``USER_CACHE``:
    :func:`user_cache_dir`, read now) for what is not a cache entry (the tuned lens's translators, fitted LDAs; a
    name with a leading dot is not listed by ``probes cache``); None for ``cache_dir=None`` (no cache)."""
    if cache_dir is None:
        return None
    return (user_cache_dir() if isinstance(cache_dir, UserCache) else Path(cache_dir).absolute()) / name


def user_cache_source() -> tuple[Path, str]:
    """(:func:`user_cache_dir`, what set it in words: ``PROBES_CACHE=...``, ``XDG_CACHE_HOME=...`` or the home
    folder), for an error line that names the setting to change."""
    if (given := os.environ.get("PROBES_CACHE", "").strip()):
        return Path(given).expanduser().absolute(), f"PROBES_CACHE={given}"
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "probes", f"XDG_CACHE_HOME={xdg}"
    return Path.home() / ".cache" / "probes", "the home folder's .cache (PROBES_CACHE and XDG_CACHE_HOME unset)"


def usable_cache(root: Path, source: str) -> Path:
    """``root`` once it is a folder this process can write its locks and entries into (made if missing); else one
    ProbeError line that says which setting named it (``source``: ``PROBES_CACHE=...``, ``cache_dir=``, ...) and
    why (a file, a path below a file, a link loop, a read-only file system), instead of an OSError later."""
    try:
        (root / ".locks").mkdir(parents=True, exist_ok=True)
        if not os.access(root / ".locks", os.W_OK) or not os.access(root, os.W_OK):
            raise PermissionError(errno.EACCES, "not writable")
    except OSError as e:
        raise ProbeError(f"the activation cache {root} ({source}) cannot be used: {e.strerror or e}; set it to a "
                         "writable folder, or pass cache_dir=None for no cache") from None
    return root


def entry_lock(entry: Path | None, progress: bool, wait: bool = True):
    """An exclusive lock on one cache entry (``<cache>/.locks/<model>.<key>.lock``, a file that stays:
    removing lock files races): the process that holds it is the only one that extracts, resumes,
    repairs, replaces or removes that entry. ``wait=False``: TimeoutError at once if it is held."""
    if entry is None:
        return contextlib.nullcontext()
    lock = FileLock(lock_path(entry))

    @contextlib.contextmanager
    def held():
        try:
            lock.acquire(timeout=0)
        except TimeoutError:  # filelock.Timeout subclasses TimeoutError
            if not wait:
                raise
            if progress:
                print(f"waiting for another process that is extracting {entry} ...", file=sys.stderr, flush=True)
            lock.acquire()
        try:
            yield
        finally:
            lock.release()

    return held()


def open_entry(entry: Path, repair: bool) -> Activations | None:
    """The verified entry, or None when it is absent or damaged. With ``repair`` (only under the
    entry's lock) a damaged entry is removed with a warning, so that it is extracted again."""
    if not (entry / "meta.json").exists():
        return None
    try:
        return read_entry(entry)
    except CORRUPT as e:
        if repair:
            warnings.warn(f"activation cache {entry} is unreadable or damaged ({e}); removed, extracting again",
                          stacklevel=3)
            shutil.rmtree(entry, ignore_errors=True)
        return None


def cache_key(spec: CheckpointSpec, inputs: list[str] | list[list[int]], settings: dict) -> str:
    """Hash of model identity + inputs + capture settings: equal keys mean equal activations."""
    h = hashlib.sha256()
    for t in inputs:
        h.update(t.encode("utf-8") + b"\0" if isinstance(t, str) else b"ids:" + np.asarray(t, "<i8").tobytes() + b"\0")
    blob = {"format": CACHE_FORMAT, "model": spec.name, "fingerprint": spec.fingerprint(),
            "sentence": spec.sentence, "special_tokens": spec.special_tokens,
            "texts_sha256": h.hexdigest(), **settings}
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:24]


def finalise_entry(work: Path, entry: Path, acts: Activations, progress: bool,
                   contents: dict[str, list] | None = None) -> None:
    """Write the small arrays and meta.json (with the checksums of every file) into ``work``, then rename it
    to ``entry``: the entry appears complete, in one step. ``acts`` holds the work folder's big arrays;
    ``contents``: {file name: its bytes, as buffers this process holds} for files checksummed from memory."""
    small = {"offsets": acts.offsets, "token_ids": acts.token_ids, "special": acts.special,
             **{f"map.{m}.offsets": o for m, o in acts.map_offsets.items()}}
    with cache_write_errors(work):
        for name, arr in small.items():
            np.save(work / f"{name}.npy", arr, allow_pickle=False)
        doc = {"meta": acts.meta, "texts": acts.texts, "tokens": acts.tokens}
        doc["checksums"] = {"algorithm": CHECKSUM, "block_bytes": CHECK_BLOCK, "doc": doc_digest(doc),
                            "files": {p.name: file_blocks(p, (contents or {}).get(p.name))
                                      for p in sorted(work.glob("*.npy"))}}
        atomic_text(work / "meta.json", json.dumps(doc, ensure_ascii=False))
        (work / "done.json").unlink()
        shutil.rmtree(entry, ignore_errors=True)
        os.replace(work, entry)  # the entry appears complete, in one step
    if progress:
        stored = acts.meta["cache_dtype"]
        itemsize, d = np.dtype(stored).itemsize, acts.sentence.shape[-1]
        print(f"cache entry {entry}: {human_bytes(entry_bytes(entry))} ({stored}; "
              f"{itemsize * d} bytes per token per layer = {itemsize} x d)", flush=True)


def is_cache_root(root: Path) -> bool:
    """Whether ``root`` is a folder this suite made as an activation cache: it has the marker, or (a cache
    written before the marker) the ``.locks`` folder every extraction creates there."""
    tag = root / CACHE_TAG
    try:
        marked = tag.is_file() and tag.read_text(encoding="utf-8") == CACHE_TAG_TEXT
    except (OSError, ValueError):
        marked = False
    return marked or ((root / ".locks").is_dir() and not (root / ".locks").is_symlink())


def lock_path(entry: Path, suffix: str = "") -> Path:
    locks = entry.parent.parent / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    return locks / f"{entry.parent.name}.{entry.name}{suffix}.lock"


def entry_bytes(entry: Path) -> int:
    """Bytes on disk of the files of one cache entry."""
    return sum(p.stat().st_size for p in Path(entry).iterdir() if p.is_file())


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def check_complete(done: dict, n_chunks: int, n_texts: int, n_tokens: int) -> None:
    """Refuse to finalise unless every chunk is done and the chunks hold exactly the texts and
    tokens asked for (a zero-filled entry must never look valid)."""
    texts, tokens = sum(r["texts"] for r in done.values()), sum(r["tokens"] for r in done.values())
    if sorted(done) != list(range(n_chunks)) or texts != n_texts or tokens != n_tokens:
        raise RuntimeError(f"extraction incomplete: {len(done)} of {n_chunks} chunks, {texts} of {n_texts} texts, "
                           f"{tokens} of {n_tokens} tokens written; the cache entry is not finalised")


def file_blocks(path: Path, contents: list | None = None) -> dict:
    """{"bytes": size, "blocks": [checksum of each CHECK_BLOCK bytes of the file, header included]}; ``contents``:
    the file's bytes as buffers in memory (checksummed instead of reading the file back, if their size is its)."""
    size, digest = path.stat().st_size, CHECKSUMS[CHECKSUM]
    if contents is not None and sum(memoryview(c).nbytes for c in contents) == size:
        return {"bytes": size, "blocks": [digest(run) for run in _blocks(contents, CHECK_BLOCK)]}
    if size == 0:
        return {"bytes": 0, "blocks": []}
    # hashed where the file's pages are (a read-only map of the file this process has just written): no copy
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        view = memoryview(m)
        try:
            blocks = [digest([view[i:i + CHECK_BLOCK]]) for i in range(0, size, CHECK_BLOCK)]
        finally:
            view.release()
    return {"bytes": size, "blocks": blocks}


def _blocks(contents: list, block: int):
    """The concatenation of ``contents`` (buffers) cut into runs of ``block`` bytes, each a list of views."""
    run: list[memoryview] = []
    room = block
    for c in contents:
        view = memoryview(c)
        view = view.cast("B") if view.nbytes else memoryview(b"")  # (a cast of an empty array's view fails)
        while len(view):
            run.append(view[:room])
            view, room = view[room:], room - len(run[-1])
            if room == 0:
                yield run
                run, room = [], block
    if run:
        yield run


def _xxh3_64(parts) -> int:
    h = xxhash.xxh3_64()
    for p in parts:
        h.update(p)
    return h.intdigest()


def _crc32(parts) -> int:
    value = 0
    for p in parts:
        value = zlib.crc32(p, value)
    return value


def _sha256(parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
    return h


def doc_digest(doc: dict) -> str:
    """sha256 of meta.json's content other than the checksums themselves."""
    body = {k: doc[k] for k in ("meta", "texts", "tokens")}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


# meta["cache_verify"] of activations read under quick verification (a full check or a fresh entry adds nothing)
QUICK_VERIFIED = (f"quick (PROBES_CACHE_VERIFY=quick): sizes, headers, small files and every {QUICK_STRIDE}th "
                  f"{CHECK_BLOCK // 2**20} MiB block of big files matched their checksums; a damaged block that was "
                  "not sampled would pass")


def verify_mode() -> str:
    """How much of an entry is checked when it is opened: ``PROBES_CACHE_VERIFY`` = full (default,
    every byte) or quick (sizes, headers, small arrays, and every QUICK_STRIDE-th block of big ones)."""
    mode = os.environ.get("PROBES_CACHE_VERIFY", "full").strip().lower() or "full"
    if mode not in ("full", "quick"):
        raise ProbeError(f"PROBES_CACHE_VERIFY must be 'full' or 'quick', not {mode!r}")
    return mode


def verify_entry(entry: Path, doc: dict, full: bool) -> None:
    """ValueError unless the entry's files match the checksums recorded when it was written."""
    sums = doc.get("checksums")
    if not isinstance(sums, dict) or sums.get("algorithm") not in CHECKSUMS:
        raise ValueError("the entry has no checksums")
    if sums.get("doc") != doc_digest(doc):
        raise ValueError("meta.json does not match its checksum")
    block, files, digest = int(sums["block_bytes"]), sums["files"], CHECKSUMS[sums["algorithm"]]
    expected = {"offsets", "token_ids", "special", "hidden", "sentence",
                *(f"map.{m}{x}" for m in doc["meta"].get("maps", {}) for x in ("", ".offsets"))}
    if set(files) != {f"{n}.npy" for n in expected}:
        raise ValueError("the checksummed files are not the entry's arrays")
    buf = bytearray(block)
    for name, rec in files.items():
        path, blocks = entry / name, rec["blocks"]
        if not path.exists():
            raise ValueError(f"{name} is missing")
        if path.stat().st_size != rec["bytes"]:
            raise ValueError(f"{name} has {path.stat().st_size} bytes, not {rec['bytes']}")
        pick: range | list[int] = range(len(blocks))
        if not full and len(blocks) > QUICK_STRIDE:
            pick = sorted({*range(0, len(blocks), QUICK_STRIDE), len(blocks) - 1})
        with open(path, "rb") as f:
            for i in pick:
                f.seek(i * block)
                n = f.readinto(buf)
                if digest([memoryview(buf)[:n]]) != blocks[i]:
                    raise ValueError(f"{name} does not match its checksum (bytes {i * block}..{i * block + n})")


def read_entry(entry: Path, full: bool | None = None, verify: bool = True) -> Activations:
    """Load a finished cache entry (big arrays memory-mapped) after checking it against the checksums
    written with it; ValueError if anything is off. ``full``: check every byte (None: as
    PROBES_CACHE_VERIFY says; False: the quick check). ``verify=False``: no checksum is read back (only
    for the entry this process has just written and checksummed: :func:`finalise_entry`); the shapes,
    dtypes and format are still checked."""
    doc = loads_json((entry / "meta.json").read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not isinstance(doc.get("meta"), dict):
        raise ValueError("meta.json does not describe a cache entry")
    meta = doc["meta"]
    if meta.get("format") != CACHE_FORMAT:
        raise ValueError(f"cache format {meta.get('format')} != {CACHE_FORMAT}")
    if verify:
        full = verify_mode() == "full" if full is None else full
        verify_entry(entry, doc, full=full)
        if not full:  # the activations (and a result computed from them) say how little was checked
            meta["cache_verify"] = QUICK_VERIFIED

    def load(name: str, mmap: bool = False) -> np.ndarray:
        path = entry / f"{name}.npy"
        if not path.exists():
            raise ValueError(f"{name}.npy is missing")
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)

    maps = meta.get("maps", {})
    stored = np.dtype(meta.get("cache_dtype", "float32"))
    big = {"hidden": load("hidden", mmap=True), "sentence": load("sentence", mmap=stored != np.float32),
           **{f"map.{m}": load(f"map.{m}", mmap=True) for m in maps}}
    if any(a.dtype != stored for a in big.values()):
        raise ValueError(f"the arrays are not {stored}, as meta.json says")
    big = {k: float32_face(a) for k, a in big.items()}  # float16 storage: read-only float32 views
    acts = Activations(meta=meta, texts=doc["texts"], tokens=doc["tokens"], offsets=load("offsets"),
                       token_ids=load("token_ids"), special=load("special"), hidden=big["hidden"],
                       sentence=big["sentence"], maps={m: big[f"map.{m}"] for m in maps},
                       map_offsets={m: load(f"map.{m}.offsets") for m in maps},
                       hidden_layers=meta.get("hidden_layers"))
    if acts.hidden.shape[1] != len(acts.token_ids) or len(acts.offsets) != len(acts.texts) + 1:
        raise ValueError("array shapes do not agree")
    if any(len(acts.maps[m]) != acts.map_offsets[m][-1] for m in maps):
        raise ValueError("map sizes do not agree")
    return acts
