"""Golden comparison: is every number of the OLD results still in the NEW results, unchanged?

Walks every ``*.json``, ``*.jsonl`` and ``*.csv`` under OLD (e.g. a saved ``out/results``), finds the
same file under NEW and compares every number (and boolean and null) at every place: equal when
``|a - b| <= tol * max(1, |a|, |b|)``. New fields and new files in NEW are allowed; a number that
moved or was renamed is mapped explicitly by :data:`RENAMES`. Text (prose, package versions, hashes)
is not compared: ``--show-text`` lists the places where it differs. Exit status 0 when every number
matches, 1 when one does not (each listed), 2 on a usage error.

    $ cp -r out/results /tmp/results-before   # before a change; after it, the same commands again, then
    $ python scripts/compare_results.py /tmp/results-before out/results [--tol 1e-9] [--show-text]
"""

from __future__ import annotations

import csv
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probes.config import arg, parse_config, run_main  # noqa: E402
from probes.errors import ProbeError  # noqa: E402

# (analysis folder, old path in the JSON) -> new path: fields renamed or moved by the restructuring
RENAMES = {
    ("maps", "/config/window"): "/config/local_radius",
    ("redundancy", "/config/window"): "/config/window_length",
    # numbers moved out of the prose "definitions" blocks
    ("anisotropy", "/definitions/headline_layer"): "/headline_layer",
    ("redundancy", "/definitions/layer"): "/layer",
    ("redundancy", "/definitions/thresholds"): "/thresholds",
    ("transitions", "/definitions/n_layers"): "/n_layers",
    ("transitions", "/definitions/n_texts_used"): "/n_texts_used",
    ("perplexity", "/definitions/non_embedding_parameters"): "/non_embedding_parameters",
    ("perplexity", "/definitions/overlap_matches_training"): "/overlap_matches_training",
    ("speed", "/definitions/fit_lengths"): "/fit_lengths",
}
_MISSING = object()
SKIP = ("/provenance",)  # package versions: not results


def _at(doc, path: str):
    """The value at ``path`` ("/a/0/b") in ``doc``, or _MISSING."""
    for part in path.strip("/").split("/"):
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            return _MISSING
    return doc


@dataclass
class Config:
    """Compare every number of two result trees."""

    old: str = arg("", "the reference results folder (e.g. a copy of out/results made before a change)",
                   positional=True)
    new: str = arg("", "the results folder to check (e.g. out/results)", positional=True)
    tol: float = arg(1e-9, "tolerance, relative to max(1, |a|, |b|)", min=0.0)
    show_text: bool = arg(False, "also list the places where text differs")


@dataclass
class Report:
    compared: int = 0
    failures: list = None
    text: list = None

    def __post_init__(self):
        self.failures, self.text = [], []


def _is_number(x) -> bool:
    return x is None or isinstance(x, (bool, int, float))


def compare(old, new, where: str, rep: Report, tol: float, renames: dict, new_root=None) -> None:
    """Compare ``old`` against ``new`` recursively, recording into ``rep``; a renamed path is looked
    up at its new place in ``new_root``."""
    new_root = new if new_root is None else new_root
    if where.startswith(SKIP):
        return
    if isinstance(old, dict):
        if not isinstance(new, dict):
            rep.failures.append(f"{where}: was an object, now {type(new).__name__}")
            return
        for k, v in old.items():
            path = f"{where}/{k}"
            value = _at(new_root, renames[path]) if path in renames else new.get(k, _MISSING)
            if value is _MISSING:
                rep.failures.append(f"{path}: missing in NEW")
                continue
            compare(v, value, path, rep, tol, renames, new_root)
    elif isinstance(old, list):
        if not isinstance(new, list) or len(new) != len(old):
            rep.failures.append(f"{where}: list of {len(old)} became {len(new) if isinstance(new, list) else new!r}")
            return
        for i, (a, b) in enumerate(zip(old, new)):
            compare(a, b, f"{where}/{i}", rep, tol, renames, new_root)
    elif _is_number(old):
        rep.compared += 1
        if not _is_number(new) or not _close(old, new, tol):
            rep.failures.append(f"{where}: {old!r} -> {new!r}")
    elif old != new:
        rep.text.append(f"{where}: {str(old)[:60]!r} -> {str(new)[:60]!r}")


def _close(a, b, tol: float) -> bool:
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return a is b or a == b and type(a) is type(b)
    if not (math.isfinite(a) and math.isfinite(b)):
        return a == b or (math.isnan(a) and math.isnan(b))
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def _cell(text: str):
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return {"True": True, "False": False, "": None}.get(text, text)


def _load(path: Path):
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    with open(path, newline="", encoding="utf-8") as f:
        return [{k: _cell(v) for k, v in row.items()} for row in csv.DictReader(f)]


def compare_trees(old: Path, new: Path, tol: float = 1e-9) -> tuple[dict[str, Report], list[str]]:
    """{relative file: Report} for every result file under ``old``, and the files NEW lacks."""
    reports, missing = {}, []
    for p in sorted(old.rglob("*")):
        if p.suffix not in (".json", ".jsonl", ".csv") or not p.is_file():
            continue
        rel = p.relative_to(old)
        q = new / rel
        if not q.exists():
            missing.append(str(rel))
            continue
        renames = {o: n for (folder, o), n in RENAMES.items() if rel.parts[0] == folder}
        if p.suffix == ".csv":  # CSV columns carry the config's names only through the JSON: no renames
            renames = {}
        rep = Report()
        compare(_load(p), _load(q), "", rep, tol, renames)
        reports[str(rel)] = rep
    return reports, missing


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__.split("\n\n")[0])
    old, new = Path(cfg.old), Path(cfg.new)
    for p in (old, new):
        if not p.is_dir():
            raise ProbeError(f"{p} is not a folder of results")
    reports, missing = compare_trees(old, new, cfg.tol)
    if not reports and not missing:
        raise ProbeError(f"no result files under {old}")
    n_fail = sum(len(r.failures) for r in reports.values()) + len(missing)
    for rel, rep in reports.items():
        status = "ok" if not rep.failures else f"{len(rep.failures)} DIFFER"
        print(f"{rel}: {rep.compared} numbers compared, {status}, {len(rep.text)} text fields changed")
        for f in rep.failures[:20]:
            print(f"    {f}")
        if cfg.show_text:
            for t in rep.text:
                print(f"    text {t}")
    for rel in missing:
        print(f"{rel}: MISSING in {new}")
    total = sum(r.compared for r in reports.values())
    print(f"{len(reports)} files, {total} numbers compared at tolerance {cfg.tol:g}: "
          + ("all unchanged" if n_fail == 0 else f"{n_fail} differences"))
    sys.exit(1 if n_fail else 0)


if __name__ == "__main__":
    run_main(main)
