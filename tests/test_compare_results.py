"""scripts/compare_results.py: the golden comparison finds every changed number and nothing else."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def cr():
    spec = importlib.util.spec_from_file_location("compare_results", REPO / "scripts" / "compare_results.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["compare_results"] = mod
    spec.loader.exec_module(mod)
    return mod


def tree(root: Path, doc: dict, csv_text: str = "a,b\n1,2.5\n") -> Path:
    (root / "anisotropy").mkdir(parents=True)
    (root / "anisotropy" / "m.json").write_text(json.dumps(doc))
    (root / "anisotropy" / "m.csv").write_text(csv_text)
    return root


OLD = {"config": {"seed": 0}, "definitions": {"headline_layer": 2, "note": "prose"}, "layers": [{"x": 0.125}],
       "provenance": {"torch": "1"}}


def test_equal_numbers_moved_fields_new_fields_and_changed_text_pass(cr, tmp_path, capsys):
    new = {"config": {"seed": 0}, "headline_layer": 2, "definitions": {"note": "other prose"},
           "layers": [{"x": 0.125 + 1e-12, "extra": 3}], "provenance": {"torch": "2"}}
    reports, missing = cr.compare_trees(tree(tmp_path / "a", OLD), tree(tmp_path / "b", new))
    assert not missing and all(not r.failures for r in reports.values())
    assert reports["anisotropy/m.json"].compared == 3  # seed, headline_layer, x (provenance skipped)
    assert reports["anisotropy/m.json"].text == ["/definitions/note: 'prose' -> 'other prose'"]


def test_a_changed_number_a_lost_field_and_a_missing_file_fail(cr, tmp_path, capsys):
    new = {"config": {}, "headline_layer": 2, "layers": [{"x": 0.125 + 1e-7}]}
    b = tree(tmp_path / "b", new, "a,b\n1,2.6\n")
    (tmp_path / "a" / "speed").mkdir(parents=True)
    tree(tmp_path / "a", OLD)
    (tmp_path / "a" / "speed" / "s.json").write_text("{}")
    with pytest.raises(SystemExit) as exc:
        cr.main([str(tmp_path / "a"), str(b)])
    out = capsys.readouterr().out
    assert exc.value.code == 1
    assert "/config/seed: missing in NEW" in out and "/layers/0/x: 0.125 -> 0.1250001" in out
    assert "/0/b: 2.5 -> 2.6" in out and "speed/s.json: MISSING" in out
