"""Ratchets on untyped data at the seams, held as the 500-line bound is held (``tests/test_layering.py``): the number
of Result fields that are dicts (``dict``, ``list[dict]``, ``dict | None``, ``Dict``, ``List[Dict]``) and of
string-keyed reads (``x["key"]``, ``x.get("key")``) in ``analyses/summary/`` and in ``analyses/`` as a whole may not
rise above the ceilings written here. A typed row (a small dataclass read by attribute) is a checked seam; a dict read
by a string key is a spelling the type checker cannot see. Lower a ceiling when a change types a field or a read.

The counts are made with ``ast`` on the source files (no import):

* a Result field is an annotated name in the body of a class whose bases include ``AnalysisResult`` (the ``identity``
  field and ``ClassVar`` annotations are not fields); it is a dict when its annotation names ``dict`` or ``Dict``;
* a string-keyed read is a subscript in load context whose index is a string constant, or a call of ``.get``
  whose first argument is a string constant. Writes (``x["key"] = ...``) are not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ANALYSES = REPO / "analyses"

# Ceilings: the counts today. Lower them as fields and reads are typed; never raise them.
DICT_RESULT_FIELDS = 0
STRING_READS_SUMMARY = 4
STRING_READS_ANALYSES = 254


def _sources(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _base_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def _names(annotation: ast.expr) -> set[str]:
    """Every name an annotation mentions (``list[dict] | None`` -> list, dict, None); a string annotation is parsed."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    return {_base_name(n) for n in ast.walk(annotation) if isinstance(n, (ast.Name, ast.Attribute))}


def result_fields(tree: ast.Module) -> list[tuple[int, str, bool]]:
    """(line, ``Class.field``, whether it is a dict) of every field of the Result classes in ``tree``."""
    out = []
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef) or "AnalysisResult" not in {_base_name(b) for b in cls.bases}:
            continue
        for stmt in cls.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            names = _names(stmt.annotation)
            if "ClassVar" in names or stmt.target.id == "identity":
                continue
            out.append((stmt.lineno, f"{cls.name}.{stmt.target.id}", bool(names & {"dict", "Dict"})))
    return out


def string_reads(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, source) of every string-keyed read in ``tree``: ``x["key"]`` in load context and ``x.get("key", ...)``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                out.append((node.lineno, ast.unparse(node)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.lineno, ast.unparse(node)))
    return out


def dict_fields_in(paths: list[Path]) -> list[str]:
    return [f"{p.relative_to(REPO)}:{line} {name}" for p in paths for line, name, is_dict in result_fields(_tree(p))
            if is_dict]


def reads_in(paths: list[Path]) -> dict[str, int]:
    """file -> its number of string-keyed reads (files with none left out)."""
    counts = {str(p.relative_to(REPO)): len(string_reads(_tree(p))) for p in paths}
    return {k: v for k, v in counts.items() if v}


def _over(what: str, found: int, ceiling: int, detail: str) -> str:
    return (f"{what}: {found}, above the ceiling of {ceiling} in tests/test_ratchet.py. Type the new data (a small "
            f"frozen dataclass read by attribute; docs/adding-an-analysis.md) instead of raising the ceiling.\n"
            f"{detail}")


def _by_file(counts: dict[str, int]) -> str:
    return "\n".join(f"{n:5d}  {f}" for f, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def test_dict_result_fields_do_not_rise():
    found = dict_fields_in(_sources(ANALYSES))
    assert len(found) <= DICT_RESULT_FIELDS, _over("Result fields that are dicts", len(found), DICT_RESULT_FIELDS,
                                                   "\n".join(found))


@pytest.mark.parametrize("folder, ceiling", [("analyses/summary", STRING_READS_SUMMARY),
                                             ("analyses", STRING_READS_ANALYSES)])
def test_string_keyed_reads_do_not_rise(folder, ceiling):
    counts = reads_in(_sources(REPO / folder))
    total = sum(counts.values())
    assert total <= ceiling, _over(f"string-keyed reads in {folder}/", total, ceiling, _by_file(counts))


def test_the_counters_count_what_they_say():
    tree = ast.parse('''
from dataclasses import dataclass
from typing import ClassVar, Dict, List
@dataclass
class Result(common.AnalysisResult):
    identity: Identity
    KEYS: ClassVar[dict] = {}
    rows: list[dict]
    legacy: List[Dict]
    boot: "dict | None"
    means: list[float]
    row: LayerRow
class Other:
    table: dict
def f(r, d):
    d["written"] = r.rows[0]["mean"]
    return d.get("a", 1), r["b"], r[0], r.get(0), {"c": 1}["c"]
''')
    assert [(name, is_dict) for _, name, is_dict in result_fields(tree)] == [
        ("Result.rows", True), ("Result.legacy", True), ("Result.boot", True), ("Result.means", False),
        ("Result.row", False)]
    assert sorted(text for _, text in string_reads(tree)) == ["d.get('a', 1)", "r.rows[0]['mean']", "r['b']",
                                                            "{'c': 1}['c']"]
