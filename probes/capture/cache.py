"""List and remove activation cache entries (``<cache>/<model>/<key>/``, see probes.capture.activations).

``list`` prints one line per entry: model, key, storage dtype, texts, size on disk and age (from
meta.json's modification time); an interrupted extraction (``<key>.partial``) shows as ``partial``,
an entry of an older cache format (never read again) as ``stale``. ``remove`` deletes the entries
of one model (``--model``), those older than ``--older-than`` DAYS, the stale ones (``--stale``),
or those matching all the filters given; each under the entry's lock, so an extraction in progress is never cut:
an entry another process holds is skipped with a note.

Without ``--cache`` or ``--out`` it works on the Python API's per-user cache (``PROBES_CACHE``, else
``$XDG_CACHE_HOME/probes``, else ``~/.cache/probes``); the analyses' command lines cache under ``<out>/cache``.
Only what the suite made is ever deleted: ``--cache`` must be a cache root (its ``CACHEDIR.TAG`` marker, written
with the first entry; a cache from before the marker is known by its ``.locks`` folder), else nothing is touched
and the command exits 2 (``--cache out`` names the output root, not ``out/cache``). Below it, a folder is an entry
only if its name is a cache key and its ``meta.json`` (a partial entry: ``done.json`` naming that key) is the
cache's own; any other folder (listed as ``foreign``; an entry with a damaged ``meta.json`` as ``unreadable``) is
skipped by ``remove`` with a note, and left for a person to delete.

    $ python -m probes.capture.cache list                  # the Python API's per-user cache
    $ python -m probes.capture.cache list --out out        # the analyses' cache: the same as --cache out/cache
    $ python -m probes.capture.cache remove --model minilm-l6 --older-than 30
    $ python -m probes.capture.cache remove --stale
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import sys
import time
from pathlib import Path

from probes.capture.store import (
    CACHE_FORMAT,
    CACHE_TAG,
    entry_bytes,
    entry_lock,
    human_bytes,
    is_cache_root,
    user_cache_source,
)
from probes.config import arg, parse_config, run_main
from probes.errors import ProbeError
from probes.io import loads_json

DAY = 86400.0
KEY = re.compile(r"[0-9a-f]{16,64}")  # an entry's folder name: its cache key (store.cache_key: 24 hex digits)
REMOVABLE = ("ok", "partial", "stale")  # a folder of another status is never deleted


@dataclasses.dataclass
class Config:
    """List or remove activation cache entries."""

    command: str = arg("list", "list the entries, or remove those matching --model / --older-than",
                       choices=["list", "remove"], positional=True)
    cache: str = arg("", "the cache folder (default: the Python API's per-user cache, PROBES_CACHE or "
                         "$XDG_CACHE_HOME/probes or ~/.cache/probes; the analyses' is <out>/cache)")
    out: str = arg("", "output root, as every analysis takes it: the cache is <out>/cache (instead of --cache)")
    model: str = arg("", "only the entries of this model (the folder name below the cache)")
    older_than: float = arg(-1.0, "only entries older than this many days (-1: any age)", min=-1.0)
    stale: bool = arg(False, "only entries of an older cache format (they are never read again)")


@dataclasses.dataclass
class Entry:
    """One folder of the cache."""

    path: Path
    model: str  # folder name below the cache (the model's safe name)
    key: str  # the cache key (a partial entry: its key + ".partial")
    dtype: str  # storage dtype of the states ("?" when meta.json cannot be read)
    n_texts: int | None
    bytes: int
    age_days: float
    status: str  # "ok", "partial" (an interrupted extraction), "stale" (an older format), "unreadable" (a damaged
    # meta.json) or "foreign" (not made by the cache: another name, or no meta.json / done.json of its own)


def entries(cache: str | Path) -> list[Entry]:
    """Every entry below ``cache``, by model then key. Reads only meta.json (no checksums)."""
    cache, now, out = Path(cache), time.time(), []
    for model in sorted(p for p in cache.iterdir() if p.is_dir() and not p.name.startswith(".")
                        and not p.is_symlink()):  # a link may lead out of the cache
        for path in sorted(p for p in model.iterdir() if p.is_dir()):
            partial = path.name.endswith(".partial")
            key = path.name.removesuffix(".partial")
            meta_file = path / ("done.json" if partial else "meta.json")
            dtype, n_texts, status = "?", None, "partial" if partial else "ok"
            try:
                doc = loads_json(meta_file.read_text(encoding="utf-8"))
                meta = doc if partial else doc["meta"]
                if partial and meta["key"] != key:
                    raise ValueError("done.json names another key")
                dtype = meta.get("cache_dtype", meta.get("dtype", "float32"))
                n_texts = None if partial else int(meta["n_texts"])
                if not partial and meta.get("format") != CACHE_FORMAT:
                    status = "stale"
            except FileNotFoundError:
                status = "foreign"
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                status = "foreign" if partial else "unreadable"
            if not KEY.fullmatch(key) or path.is_symlink():
                status = "foreign"
            stamp = meta_file if meta_file.exists() else path
            out.append(Entry(path, model.name, path.name, dtype, n_texts, entry_bytes(path),
                             (now - stamp.stat().st_mtime) / DAY, status))
    return out


def select(found: list[Entry], model: str = "", older_than: float = -1.0, stale: bool = False) -> list[Entry]:
    """The entries of ``model`` (any if empty) older than ``older_than`` days (any if < 0), only
    the stale ones if ``stale``."""
    return [e for e in found if (not model or e.model == model) and (older_than < 0 or e.age_days > older_than)
            and (not stale or e.status == "stale")]


def remove(found: list[Entry]) -> tuple[list[Entry], list[Entry]]:
    """Delete each entry under its lock (a partial one under its finished entry's lock);
    (removed, skipped because another process holds the lock)."""
    removed, skipped = [], []
    for e in found:
        if e.status not in REMOVABLE:  # not the cache's own folder: never deleted
            continue
        target = e.path.with_name(e.key.removesuffix(".partial"))
        try:
            with entry_lock(target, progress=False, wait=False):
                shutil.rmtree(e.path)
            removed.append(e)
        except TimeoutError:
            skipped.append(e)
    return removed, skipped


def _age(days: float) -> str:
    return f"{days * 24:.1f} h" if days < 1 else f"{days:.1f} d"


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv)
    if cfg.out:
        cache, named = Path(cfg.out) / "cache", f"--out {cfg.out}: its cache"
    elif cfg.cache:
        cache, named = Path(cfg.cache), "--cache"
    else:
        cache, source = user_cache_source()
        named = f"the per-user cache ({source})"
    try:
        is_dir = cache.is_dir()
    except OSError as e:  # a link loop
        raise ProbeError(f"{named} {cache} cannot be read: {e.strerror or e}") from None
    if not is_dir:
        raise ProbeError(f"{named} {cache} is not a folder")
    if cfg.command == "remove" and not cfg.model and cfg.older_than < 0 and not cfg.stale:
        raise ProbeError("remove needs --model NAME, --older-than DAYS and/or --stale (nothing is removed by default)")
    if not is_cache_root(cache):
        hint = f" (the analyses' cache is {cache / 'cache'})" if is_cache_root(cache / "cache") else ""
        raise ProbeError(f"{named} {cache} is not an activation cache: it has no {CACHE_TAG} of this suite and no "
                         f".locks folder{hint}; nothing {'removed' if cfg.command == 'remove' else 'listed'}")
    found = select(entries(cache), cfg.model, cfg.older_than, cfg.stale)
    if cfg.command == "list":
        w = max([24, *(len(e.model) for e in found)])  # the model column as wide as its longest name
        print(f"{'model':<{w}} {'key':<32} {'dtype':<8} {'texts':>7} {'size':>10} {'age':>8}  status")
        for entry in found:
            print(f"{entry.model:<{w}} {entry.key:<32} {entry.dtype:<8} "
                  f"{entry.n_texts if entry.n_texts is not None else '-':>7} {human_bytes(entry.bytes):>10} "
                  f"{_age(entry.age_days):>8}  {entry.status}")
        print(f"{len(found)} entries, {human_bytes(sum(e.bytes for e in found))}")
        return
    removed, skipped = remove(found)
    for entry in found:
        if entry.status not in REMOVABLE:
            print(f"skipped {entry.path}: not a cache entry ({entry.status}: no meta.json/done.json of the cache for "
                  f"that name); delete it by hand if it should go", file=sys.stderr)
    for entry in skipped:
        print(f"skipped {entry.path}: another process is extracting it", file=sys.stderr)
    print(f"removed {len(removed)} entries, {human_bytes(sum(e.bytes for e in removed))}")


if __name__ == "__main__":
    run_main(main)
