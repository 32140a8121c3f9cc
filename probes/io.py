"""Files that are either complete or absent: one atomic write, one folder replace, strict JSON.

* :func:`atomic_write` writes bytes to a temporary sibling and renames it into place (:func:`atomic_text`:
  text as UTF-8); :func:`atomic_path` does the same for a writer that takes a file name (``torch.save``).
* :func:`write_folder` fills a temporary sibling folder, then :func:`replace_folder` renames it
  over the destination (the old folder is removed only after the new one is in place); its files get the
  umask's default mode (:func:`default_modes`), whatever mode their writers gave them.
* :class:`JsonConfig` is the to_dict / from_dict of a model config saved as ``config.json``.
* :func:`strict_json` serialises with ``allow_nan=False``: results never hold a bare NaN
  (a caller writes ``null`` and a reason instead; :func:`finite_or_none` helps). :func:`loads_json` and
  :func:`read_json` read JSON so that any bad document, one nested too deeply too, is a ValueError or one
  error line naming the file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import math
import os
import shutil
import stat
from pathlib import Path
from typing import Any, ClassVar

from probes.errors import ProbeError


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as e:  # nothing half-written stays behind, and the line names the file
        tmp.unlink(missing_ok=True)
        if e.errno == errno.ENOSPC:
            raise ProbeError(f"no space left on {path.parent} to write {path.name} "
                             f"(needs {len(data) / 2**20:.2f} MB)") from None
        raise


@contextlib.contextmanager
def atomic_path(path: Path):
    """A temporary path beside ``path`` for a writer that takes a file name (``torch.save``, ``save_file``);
    renamed into place when the block ends, removed if it raises. Yields the temporary path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def default_modes(folder: Path) -> None:
    """Give every file under ``folder`` the mode a new file gets under the umask (0644 under umask 022): some
    writers (safetensors' ``save_file``) create theirs through a private temporary file of mode 0600."""
    mode = Path(folder).stat().st_mode & 0o666  # the folder was made with 0777 & ~umask
    for p in Path(folder).rglob("*"):
        if p.is_file() and not p.is_symlink():
            os.chmod(p, mode)


def atomic_text(path: Path, text: str) -> None:
    """:func:`atomic_write` of ``text`` encoded as UTF-8."""
    atomic_write(path, text.encode("utf-8"))


def replace_folder(src: Path, dest: Path) -> None:
    """Replace ``dest`` by the finished folder ``src`` (a sibling on the same file system) by renames."""
    src, dest = Path(src), Path(dest)
    old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
    if dest.exists():
        os.replace(dest, old)
    os.replace(src, dest)
    shutil.rmtree(old, ignore_errors=True)


def write_folder(out: Path, write) -> None:
    """Call ``write(tmp)`` to fill a temporary sibling folder, then put it in place of ``out``.
    If ``write`` fails, the temporary folder is removed and ``out`` is left as it was."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        write(tmp)
        default_modes(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    replace_folder(tmp, out)


def finite_or_none(x: float | None) -> float | None:
    """``x`` if it is a finite number, else None (JSON null): pair it with a reason field."""
    return None if x is None or not math.isfinite(x) else x


class TooDeep(ValueError):
    """JSON nested deeper than Python's reader goes (it raises RecursionError, which is not a ValueError)."""


def loads_json(text: str | bytes, **kwargs):
    """``json.loads`` whose every failure on bad text is a ValueError: a document nested deeper than Python's
    recursion limit (``"[" * 100000``) raises :class:`TooDeep` instead of RecursionError, so a reader that turns
    ValueError into one error line naming its file does so for a crafted file too. Every JSON file the suite
    reads (model folders' configs, pooling files, cache records, results, saved translators) goes through it."""
    try:
        return json.loads(text, **kwargs)
    except RecursionError:
        raise TooDeep("nested too deeply to read (arrays or objects deeper than Python's recursion limit)") from None


FILE_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
              (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def read_regular(path: str | os.PathLike) -> bytes:
    """The bytes of ``path`` when it is a regular file (or a link to one); an OSError that says what it is
    otherwise. Opened without blocking and checked on the open file, so a FIFO never hangs the reader and a device
    such as /dev/zero is never read into memory, whatever the path named when it was checked before."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((word for test, word in FILE_KINDS if test(mode)), "not a regular file")
            raise OSError(errno.EINVAL, f"{kind}, not a regular file", os.fspath(path))
        with os.fdopen(fd, "rb") as f:
            fd = -1  # closed with f
            return f.read()
    finally:
        if fd >= 0:
            os.close(fd)


def read_json(path: str | os.PathLike, what: str = "file"):
    """The JSON document in ``path``; one ProbeError line that names the file when it cannot be read, is not
    UTF-8 or not JSON, or is nested too deeply."""
    try:
        return loads_json(read_regular(path).decode("utf-8"))
    except OSError as e:
        raise ProbeError(f"cannot read the {what} {path}: {e.strerror or e}") from None
    except ValueError as e:  # json.JSONDecodeError, TooDeep, UnicodeDecodeError
        raise ProbeError(f"the {what} {path} is not valid JSON ({e})") from None


def strict_json(doc, indent: int | None = 1) -> str:
    """``json.dumps`` that refuses NaN/Infinity (ValueError: a bug to fix where the number is made)."""
    return json.dumps(doc, indent=indent, sort_keys=False, allow_nan=False)


class JsonConfig:
    """Mixin for a dataclass saved as ``config.json``: :meth:`to_dict`, and :meth:`from_dict`, which
    ignores keys the class does not know (notes written beside the numbers, older fields)."""

    # what @dataclass gives every subclass (an annotation only: the mixin itself has no fields)
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    @classmethod
    def from_dict(cls, d: dict):
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def provenance() -> dict:
    """Python and the versions of every package that can change a number: the one record of them, written into
    every result (analyses.common.write_result) and every trained model (recipes.loop adds the machine)."""
    import importlib.metadata as md
    import platform

    versions = {}
    for pkg in ("probes-suite", "torch", "transformers", "tokenizers", "safetensors", "numpy", "scipy"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return {"python": platform.python_version(), "packages": versions}
