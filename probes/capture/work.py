"""An activation cache entry while it is written: its arrays, filled chunk by chunk, and the record of finished chunks.

The big arrays (``hidden``, ``sentence``, ``map.<name>``) of an entry being extracted live in ``<entry>.partial/``
as ``.npy`` files (:class:`WorkArrays`); without a cache, in memory. A chunk's part of each array (the chunk axis:
axis 1 of ``hidden`` (L+1, N, d) and ``sentence`` (L+1, T, d), axis 0 of a flat map) is written with plain
positioned writes (``os.pwrite``): ``hidden``, the bulk of an entry, one text's run of token rows per layer at a
time, straight from the batch (:meth:`ChunkOut.runs`); the small arrays are filled in a staging buffer
(:class:`ChunkOut`) and written when the chunk is done, one contiguous run per layer. Nothing is ever written
through a writable memory map, so a disk that fills up (even by another process) is an ``OSError``, never a
``SIGBUS``: the files' space is reserved when they are created (``os.posix_fallocate``, where the file system has
it), and :func:`cache_write_errors` turns any ``OSError`` of a cache write into one
:class:`~probes.errors.ProbeError` line, with the work folder left to resume.

``done.json`` records the finished chunks (:func:`save_done`) with their checksums (:func:`chunk_digest` of the
chunk's part of the files), the count of states that hold NaN or inf, if any, and the :class:`StoreState` (the
storage dtype, and why float32 when float16 was asked for); an interrupted extraction reopens it
(:func:`open_work`).
"""

from __future__ import annotations

import contextlib
import errno
import io as _io
import json
import math
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import xxhash

from probes.capture import distributed
from probes.errors import ProbeError
from probes.io import atomic_text, loads_json

SPACE_MARGIN = 8 * 2**20  # bytes kept free beyond an entry's arrays: meta.json, the small arrays, the file system
# the errors of a damaged or foreign done.json / .npy header in a work folder (then it is started afresh)
UNREADABLE = (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, SyntaxError)


@dataclass
class StoreState:
    """How an entry's big arrays are stored: ``dtype`` ("float16" or "float32") and, when float32 although
    float16 was asked for, ``fallback``: why (a state float16 cannot hold, or no cache)."""

    dtype: str
    fallback: str | None = None

    def to_float32(self, why: str) -> None:
        self.dtype, self.fallback = "float32", why


Spans = dict[str, tuple[int, int]]  # array name -> (start, stop) of one chunk along its chunk axis


def chunk_axis(shape: tuple) -> int:
    """The axis chunks cut: the token / text axis 1 of (layers, rows, d) arrays, axis 0 of a flat map."""
    return 1 if len(shape) > 1 else 0


class WorkArrays:
    """The big output arrays of one capture, as ``{name: shape}`` in one dtype: in memory (``folder`` None) or
    ``<folder>/<name>.npy`` files. :meth:`chunk` gives what one chunk is written through (:class:`ChunkOut`),
    :meth:`read` the chunk's bytes as they are in the files (to check a finished chunk of an interrupted run),
    :meth:`result` the whole arrays (in memory: themselves; on disk: read-only memory maps)."""

    def __init__(self, shapes: dict[str, tuple], dtype: str, folder: Path | None = None):
        self.shapes, self.dtype, self.folder = {k: tuple(s) for k, s in shapes.items()}, np.dtype(dtype), folder
        self.memory = {k: np.empty(s, self.dtype) for k, s in self.shapes.items()} if folder is None else None
        self.fds: dict[str, int] = {}
        self.header: dict[str, int] = {}  # bytes of each file's .npy header: where its data starts
        self.buffers: dict[str, np.ndarray] = {}  # staging of a chunk (files only), reused from chunk to chunk
        self.heads: dict[str, bytes] = {}  # the .npy header of each file this process created
        self.whole: dict[str, np.ndarray] = {}  # arrays the last commit wrote whole (a capture of one chunk)

    # ------------------------------------------------------------------ opening

    @classmethod
    def create(cls, folder: Path, shapes: dict, dtype: str) -> WorkArrays:
        """New ``.npy`` files in ``folder`` (which exists) with their space reserved."""
        work = cls(shapes, dtype, folder)
        for name, shape in work.shapes.items():
            head = _io.BytesIO()
            np.lib.format.write_array_header_1_0(head, {"descr": np.lib.format.dtype_to_descr(work.dtype),
                                                        "fortran_order": False, "shape": shape})
            fd = work._open(name, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
            _write_all(fd, memoryview(head.getvalue()), 0)
            work.header[name], work.heads[name] = head.tell(), head.getvalue()
            reserve(fd, work.header[name], work.nbytes(name))
        return work

    @classmethod
    def reopen(cls, folder: Path, shapes: dict, dtype: str) -> WorkArrays:
        """The files an earlier (or another) process created in ``folder``; ValueError unless each has the
        header and the size that ``shapes`` and ``dtype`` make (then nothing is ever read past its end)."""
        work = cls(shapes, dtype, folder)
        try:
            for name, shape in work.shapes.items():
                path = folder / f"{name}.npy"
                with open(path, "rb") as f:
                    version = np.lib.format.read_magic(f)
                    if version not in ((1, 0), (2, 0)):
                        raise ValueError(f"{path.name} has .npy format {version}, not one this suite writes")
                    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                        np.lib.format.read_array_header_2_0
                    got, fortran, got_dtype = read(f)
                    start = f.tell()
                if tuple(got) != shape or fortran or np.dtype(got_dtype) != work.dtype:
                    raise ValueError(f"{path.name} holds {got_dtype} {tuple(got)}, not {work.dtype} {shape}")
                if path.stat().st_size != start + work.nbytes(name):
                    raise ValueError(f"{path.name} has {path.stat().st_size} bytes, not {start + work.nbytes(name)}")
                work.header[name] = start
                reserve(work._open(name, os.O_RDWR), start, work.nbytes(name))  # blocks a sparse file may still lack
        except BaseException:
            work.close()
            raise
        return work

    def _file(self, name: str) -> Path:
        """``<folder>/<name>.npy`` (arrays on disk only)."""
        if self.folder is None:
            raise ValueError("work arrays in memory have no files")
        return self.folder / f"{name}.npy"

    def _open(self, name: str, flags: int) -> int:
        fd = os.open(self._file(name), flags | getattr(os, "O_BINARY", 0), 0o666)
        self.fds[name] = fd
        return fd

    def nbytes(self, name: str) -> int:
        return math.prod(self.shapes[name]) * self.dtype.itemsize

    # ------------------------------------------------------------------ chunks

    def chunk(self, spans: Spans) -> ChunkOut:
        """Where the chunk with ``spans`` is written (see :class:`ChunkOut`)."""
        if self.memory is not None:
            return ChunkOut(self, spans, {k: a[:, slice(*spans[k])] if a.ndim > 1 else a[slice(*spans[k])]
                                          for k, a in self.memory.items()})
        parts, direct = {}, self.direct(spans)
        for name, shape in self.shapes.items():
            if name in direct:
                continue
            part = list(shape)
            part[chunk_axis(shape)] = spans[name][1] - spans[name][0]
            size = math.prod(part)
            if name not in self.buffers or self.buffers[name].size < size:
                self.buffers[name] = np.empty(size, self.dtype)
            parts[name] = self.buffers[name][:size].reshape(part)
        return ChunkOut(self, spans, parts, direct)

    def direct(self, spans: Spans) -> frozenset[str]:
        """The arrays of :data:`DIRECT` that the chunk with ``spans`` writes straight into their files: those
        whose runs (one text's rows of one layer) hold DIRECT_RUN_BYTES or more on average. Shorter runs (single
        words, say) are staged: a system call per short run costs more than the copy it saves."""
        texts = spans["sentence"][1] - spans["sentence"][0]
        return frozenset(name for name in DIRECT if name in self.shapes and texts > 0 and
                         (spans[name][1] - spans[name][0]) * math.prod(self.shapes[name][2:]) * self.dtype.itemsize
                         >= DIRECT_RUN_BYTES * texts)

    def write(self, name: str, at: int, data: np.ndarray) -> None:
        """``data`` into the file of ``name`` from element ``at`` on (counted in the flat array); an OSError
        (a full disk, ...) is one line (:func:`cache_write_errors`)."""
        with cache_write_errors(self._file(name).parent):
            _write_all(self.fds[name], np.ascontiguousarray(data).data.cast("B"),
                       self.header[name] + at * self.dtype.itemsize)

    def contents(self) -> dict[str, list]:
        """{file name: [its .npy header, its data]} of the files whose every byte this process wrote from the
        buffers it still holds (a capture of one chunk): they are checksummed from memory, not read back."""
        return {f"{k}.npy": [self.heads[k], a] for k, a in self.whole.items() if k in self.heads}

    def read(self, spans: Spans) -> dict[str, np.ndarray]:
        """The chunk's parts of the arrays as they are now (read-only views of the files)."""
        whole = self.result()
        return {k: a[:, slice(*spans[k])] if a.ndim > 1 else a[slice(*spans[k])] for k, a in whole.items()}

    def sync(self) -> None:
        """Flush the written chunks to the disk (before a chunk is recorded as done)."""
        for fd in self.fds.values():
            os.fsync(fd)

    def result(self) -> dict[str, np.ndarray]:
        """The whole arrays: in memory, or read-only memory maps of the files (sizes checked when opened)."""
        if self.memory is not None:
            return self.memory
        return {k: np.memmap(self._file(k), self.dtype, "r", self.header[k], s) if math.prod(s)
                else np.zeros(s, self.dtype) for k, s in self.shapes.items()}

    def close(self) -> None:
        """Close the files (the staging buffers go too)."""
        for fd in self.fds.values():
            os.close(fd)
        self.fds, self.buffers, self.whole = {}, {}, {}


class ChunkOut:
    """One chunk's part of each output array, ``parts``: {name: (lead, rows of the chunk, ...) or (elements of
    the chunk,)}, rows counted from the chunk's start. In memory they are views of the arrays themselves; on
    disk, ``hidden`` goes straight to its file (:meth:`runs`) and the other arrays are staging buffers (reused
    from chunk to chunk) that :meth:`commit` writes with one positioned write per contiguous run (a layer of
    ``sentence``, a whole map). A staged chunk holds at most the chunk budget (``PROBES_CHUNK_BYTES``, counted in
    float32: half of it in float16), so the memory of a capture stops growing with the number of texts once a chunk
    is full."""

    def __init__(self, arrays: WorkArrays, spans: Spans, parts: dict[str, np.ndarray],
                 direct: frozenset[str] = frozenset()):
        self.arrays, self.spans, self.parts, self.direct = arrays, spans, parts, direct  # direct: not staged

    @property
    def sentence(self) -> np.ndarray:
        """(L+1, T_chunk, d) the chunk's sentence vectors, filled in place."""
        return self.parts["sentence"]

    def runs(self, name: str, lead: int, src: np.ndarray, runs: list[tuple[int, int, int]]) -> None:
        """Rows ``src[s:s + k]`` (``src``: (rows, ...), C-contiguous) into rows ``o:o + k`` of the chunk's part of
        ``name[lead]``, for each ``(s, o, k)`` of ``runs``: one text's real tokens at a time, a contiguous run on
        both sides. In memory (or into a staged array), a plain copy; on disk, for an array the chunk writes
        directly (:meth:`WorkArrays.direct`), one positioned write of the run from ``src`` straight into the file,
        with no staging buffer in between."""
        a = self.arrays
        if name not in self.direct:  # a view of the array, or its staging buffer
            part = self.parts[name][lead]
            for s, o, k in runs:
                part[o:o + k] = src[s:s + k]
            return
        data = np.ascontiguousarray(src).data.cast("B")
        row = data.nbytes // len(src) if len(src) else 0  # bytes per row
        shape = a.shapes[name]
        base = a.header[name] + (lead * shape[1] + self.spans[name][0]) * row  # where the chunk's rows start
        fd = a.fds[name]
        with cache_write_errors(a._file(name).parent):
            for s, o, k in runs:
                _write_all(fd, data[s * row:(s + k) * row], base + o * row)

    def run(self, name: str, start: int, values: np.ndarray) -> None:
        """``values`` (flat) into the flat array ``name`` from element ``start`` of the chunk on."""
        self.parts[name][start:start + values.size] = values.reshape(-1)

    def commit(self) -> None:
        """Write the staged chunk into the files (in memory it is in place already)."""
        a = self.arrays
        if a.memory is not None:
            return
        a.whole = {}  # the arrays this commit writes whole from memory (a capture of one chunk, staged)
        for name, part in self.parts.items():
            shape, first = a.shapes[name], self.spans[name][0]
            if part.shape == shape:
                a.whole[name] = part
            if part.size == 0:
                continue
            if len(shape) == 1:
                a.write(name, first, part)
                continue
            row = math.prod(shape[2:])
            for lead in range(shape[0]):
                a.write(name, (lead * shape[1] + first) * row, part[lead])


# arrays written run by run straight into their files (ChunkOut.runs) when their runs are long enough
# (WorkArrays.direct): a staging buffer of the chunk is memory touched for the first time on every extraction, and
# where fresh memory is dear (a virtual machine that reports freed pages to its host, which takes them back) it cost
# more than the rest of the capture's work around the forward; a positioned write per text and layer costs a system
# call each. Here (a 2-core Firecracker microVM with free-page reporting, where system calls and page faults are
# dear too) the two broke even at runs of about 5 KiB: 30-token sentences of MiniLM-L6 (23 KiB runs) took 96 ms of
# own work written directly against 165-195 ms staged, single words (2.8 KiB runs) 154 ms against 110
DIRECT = ("hidden",)
DIRECT_RUN_BYTES = 8 * 2**10


def _write_all(fd: int, data: memoryview, offset: int) -> None:
    """``os.pwrite`` until every byte is written (a write may take fewer bytes than given)."""
    while len(data):
        n = os.pwrite(fd, data, offset)
        data, offset = data[n:], offset + n


def reserve(fd: int, offset: int, length: int) -> None:
    """Take the disk space of ``length`` bytes at ``offset`` now (``os.posix_fallocate``: ENOSPC here, before
    anything is computed, rather than later); where the file system cannot, the file is only extended."""
    if length <= 0:
        return
    try:
        os.posix_fallocate(fd, offset, length)
        return
    except AttributeError:  # no posix_fallocate on this platform (macOS, Windows)
        pass
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP),
                           getattr(errno, "ENOSYS", -1)):
            raise
    if os.fstat(fd).st_size < offset + length:
        os.ftruncate(fd, offset + length)


# ----------------------------------------------------------------------------- the work folder


def open_work(work: Path | None, key: str, shapes: dict, state: StoreState) -> tuple[WorkArrays, dict]:
    """The output arrays in ``state.dtype``: in memory without a cache; else files in ``work``, reused (with
    their records of finished chunks: {chunk: {texts, tokens, batch_size, xxh3_64}}) when an earlier run with
    the same key was interrupted; ``state`` then takes that run's dtype (float32 after a fallback) and
    reason. A damaged or foreign work folder is started afresh."""
    if work is None:
        return WorkArrays(shapes, state.dtype), {}
    with cache_write_errors(work):
        resumed = _resume(work, key, shapes)
        if resumed is not None:
            arrays, done, got = resumed
            state.dtype, state.fallback = got.dtype, got.fallback
            return arrays, done
        shutil.rmtree(work, ignore_errors=True)
        check_space(work, shapes, state.dtype)  # one clear line before anything is created
        work.mkdir(parents=True)
        mark_cache(work.parent.parent)
        arrays = WorkArrays.create(work, shapes, state.dtype)
        try:
            atomic_text(work / "done.json", json.dumps({"key": key, **asdict(state), "chunks": {}}))
        except BaseException:
            arrays.close()
            raise
        return arrays, {}


def _resume(work: Path, key: str, shapes: dict) -> tuple[WorkArrays, dict, StoreState] | None:
    """(arrays, finished chunks, state) of an interrupted run with ``key`` in ``work``; None if there is none."""
    path = work / "done.json"
    if not path.exists():
        return None
    try:
        doc = loads_json(path.read_text())
        got = StoreState(np.dtype(doc.get("dtype", "float32")).name, doc.get("fallback"))
        done = {int(c): dict(r) for c, r in doc["chunks"].items()}
        if doc["key"] != key or not done:
            return None
        check_space(work, shapes, got.dtype)
        return WorkArrays.reopen(work, shapes, got.dtype), done, got
    except UNREADABLE:
        return None


def open_shared_work(work: Path, key: str, shapes: dict, state: StoreState) -> tuple[WorkArrays, dict]:
    """:func:`open_work` for several processes: rank 0 creates (or resumes) the work folder; every rank then
    gets rank 0's state and finished chunks, and opens the same files."""
    arrays, done = open_work(work, key, shapes, state) if distributed.is_main() else (None, {})
    got, done = distributed.broadcast((asdict(state), done))
    state.dtype, state.fallback = got["dtype"], got["fallback"]
    if arrays is None:
        with cache_write_errors(work):
            arrays = WorkArrays.reopen(work, shapes, state.dtype)
    return arrays, done


def save_done(work: Path, key: str, state: StoreState, done: dict, c: int, lock=None) -> None:
    """Record the finished chunk ``c`` in ``work/done.json``; with ``lock`` (several writers), merged into the
    records the other processes wrote there."""
    with cache_write_errors(work):
        if lock is None:
            chunks = {str(k): v for k, v in sorted(done.items())}
            atomic_text(work / "done.json", json.dumps({"key": key, **asdict(state), "chunks": chunks}))
            return
        with lock:
            doc = loads_json((work / "done.json").read_text())
            doc["chunks"][str(c)] = done[c]
            atomic_text(work / "done.json", json.dumps(doc))


def chunk_digest(dest: dict) -> str:
    """XXH3-64 (hex) over one chunk's parts of the output arrays (each contiguous per leading index), in name order:
    the check, on resuming, that a finished chunk's bytes are still the ones written (see probes.capture.store)."""
    h = xxhash.xxh3_64()
    for name in sorted(dest):
        arr = dest[name]
        for part in (arr if arr.ndim > 1 else [arr]):  # hidden[l, a:b], sentence[l, a:b]: contiguous rows
            h.update(np.ascontiguousarray(part).data)
    return h.hexdigest()


CACHE_TAG = "CACHEDIR.TAG"  # the cache root's marker (https://bford.info/cachedir/): probes.capture.cache removes
CACHE_TAG_TEXT = ("Signature: 8a477f597d28d172789f06886806bc55\n"  # entries only below a folder that has it
                  "# an activation cache of the probes suite (python -m probes.capture.cache list --cache <folder>)\n")


def mark_cache(root: Path) -> None:
    """Write the cache marker ``<root>/CACHEDIR.TAG`` once (backup tools skip the folder too)."""
    tag = root / CACHE_TAG
    if not tag.exists():
        atomic_text(tag, CACHE_TAG_TEXT)


# ----------------------------------------------------------------------------- space and write errors


def check_space(work: Path, shapes: dict, dtype: str) -> None:
    """One line, before any array is written, unless the file system of ``work`` has room for the entry's arrays
    (``shapes`` in ``dtype``; the bytes an interrupted run already wrote there count as written)."""
    need = sum(math.prod(s) for s in shapes.values()) * np.dtype(dtype).itemsize
    if work.is_dir():  # resuming: the finished chunks' pages are on disk already
        need -= sum(p.stat().st_blocks * 512 for p in work.glob("*.npy"))
    where = _existing(work)
    free = shutil.disk_usage(where).free
    if free < max(need, 0) + SPACE_MARGIN:
        raise ProbeError(f"no space left on {where} for the activation cache entry {work.name} "
                         f"(needs {_mb(max(need, 0) + SPACE_MARGIN)} MB, {_mb(free)} MB free): free space or put "
                         f"--out / PROBES_CACHE elsewhere; the same command then resumes")


def _existing(path: Path) -> Path:
    return next(p for p in (path, *path.parents) if p.exists())


def _mb(n: float) -> str:
    return f"{n / 2**20:.1f}"


@contextlib.contextmanager
def cache_write_errors(work: Path):
    """Any ``OSError`` while writing the cache entry ``work`` (a full disk, a quota, a read-only or vanished
    folder, an I/O error) becomes one line naming it; the work folder is left as it is, so the same command
    resumes once the cause is gone."""
    try:
        yield
    except OSError as e:
        if e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            try:
                free = f" ({_mb(shutil.disk_usage(_existing(work)).free)} MB free)"
            except OSError:
                free = ""
            raise ProbeError(f"no space left on {work.parent} while writing the activation cache entry "
                             f"{work.name}{free}: free space and run the same command again to resume") from None
        raise ProbeError(f"cannot write the activation cache entry {work} ({e.strerror or e}"
                         f"{f': {e.filename}' if e.filename else ''}): fix that and run the same command again "
                         f"to resume, or put --out / PROBES_CACHE elsewhere") from None
