"""A result computed under an edit of the model's states (probes.intervention) is an edited run with a name of its
own: its model name, its file, its display and frame, and its own section of the report; the claims never read it
as the model's own (one line names the file left out). A clean result's file stays as it was."""

from __future__ import annotations

import json
import warnings

import claims_docs as docs
import numpy as np
import pytest

from analyses import anisotropy
from analyses.common import read_result, read_results, result_name, write_result
from analyses.edited import edit_label, recorded_edits, split_name
from analyses.files import jsonable
from analyses.summary import claims, report
from probes.intervention import AddVector, Erase, Intervention, ProjectOut

TEXTS = [f"Sentence number {i} says something about the {w} today." for i, w in
         enumerate(["weather", "sea", "cat", "market", "river", "city", "garden", "train", "book", "song", "road",
                    "house"])]
SETTINGS = {"n_tokens": 40, "cache_dir": None}


def _edit(layer: int, kind: str = "add", **settings) -> dict:
    return {"layer": layer, "edit": kind, **settings}


# ----------------------------------------------------------------------------- the label


def test_the_label_names_each_edit_and_tells_two_of_one_kind_apart():
    a = Intervention(1, AddVector(np.ones(4))).identity()
    b = Intervention(1, AddVector(2 * np.ones(4))).identity()
    la, lb = edit_label([a]), edit_label([b])
    assert la.startswith("+add@1_") and lb.startswith("+add@1_") and la != lb
    assert edit_label([]) == ""
    both = edit_label([_edit(-1, "erase", rank=1), _edit(2, "patch")])
    assert both.startswith("+erase@-1+patch@2_") and split_name("tiny-bert" + both) == ("tiny-bert", both)
    assert split_name("tiny-bert") == ("tiny-bert", "")
    # the label of a record and of that record as a result file holds it (numbers rounded) are one
    odd = [_edit(0, scale=0.1234567891234)]
    assert edit_label(odd) == edit_label(json.loads(json.dumps(jsonable(odd))))
    assert result_name("tiny-bert" + la) == "tiny-bert" + la


def test_records_are_found_in_each_place_a_result_keeps_them():
    e = _edit(1)
    assert recorded_edits({"key": "k", "intervention": [e]}, {"name": "m"}) == [e]
    assert recorded_edits({"a": {"intervention": [e]}, "b": {}}, {}) == [e]  # a pair's side
    assert recorded_edits([{"window": 8, "intervention": [e]}, {"window": 16, "intervention": [e]}], {}) == [e]
    assert recorded_edits(None, {"name": "lm", "intervention": [e]}) == [e]  # an LM's forward passes
    assert recorded_edits({"key": "k"}, {"name": "m"}) == []


# ----------------------------------------------------------------------------- saved and read back


def test_clean_and_edited_results_of_one_model_are_files_of_their_own(tmp_path):
    clean = anisotropy.run("tiny-bert", TEXTS, **SETTINGS)
    d = clean.model.hidden_size
    rng = np.random.default_rng(0)
    u = rng.normal(size=(d, 1))
    u /= np.linalg.norm(u)
    edits = {"leace": Intervention(1, Erase(u, u.T, rng.normal(size=d))),
             "projectout": Intervention(1, ProjectOut(rng.normal(size=(2, d)))),
             "random": Intervention(1, ProjectOut(rng.normal(size=(2, d)))),
             "add": Intervention(1, AddVector(rng.normal(size=d) * 5))}
    written = {"clean": write_result(tmp_path, "anisotropy", "tiny-bert", clean, anisotropy.table_rows(clean))}
    clean_bytes = written["clean"][0].read_bytes()
    results = {}
    for name, iv in edits.items():
        r = results[name] = anisotropy.run("tiny-bert", TEXTS, intervention=iv, **SETTINGS)
        assert r.model_name == "tiny-bert" + r.edit and r.model.name == "tiny-bert"
        written[name] = write_result(tmp_path, "anisotropy", "tiny-bert", r, anisotropy.table_rows(r))
    stems = {name: paths[0].stem for name, paths in written.items()}
    assert len(set(stems.values())) == 5 and stems["clean"] == "tiny-bert"
    assert stems["leace"].startswith("tiny-bert+erase@1_") and stems["add"].startswith("tiny-bert+add@1_")
    assert stems["projectout"] != stems["random"]  # two projections at one layer: two files
    assert written["clean"][0].read_bytes() == clean_bytes  # the clean file was left as it was written
    doc = read_result(written["clean"][0])
    assert doc["model_name"] == "tiny-bert" and "intervention" not in json.dumps(doc["activations"])
    back = {r.model_name: r for r in read_results(tmp_path, "anisotropy")}
    assert set(back) == set(stems.values())
    for name, r in results.items():
        again = back[stems[name]]
        assert again.edit == r.edit and jsonable(again.layers) == jsonable(r.layers)
        # the name passed to write_result may be the run's own: the same file
        assert write_result(tmp_path, "anisotropy", r.model_name, r, anisotropy.table_rows(r)) == written[name]
    assert back["tiny-bert"].edit == "" and jsonable(back["tiny-bert"].layers) == jsonable(clean.layers)
    assert [r.model_name for r in read_results(tmp_path, "anisotropy", [stems["add"]])] == [stems["add"]]
    # the display and the frame say which run it is; a clean frame is the CSV's rows as they were
    add = results["add"]
    assert repr(add).startswith(f"<anisotropy result: {add.model_name};") and "edit add at layer 1" in repr(add)
    assert "edit" not in repr(clean) and "edit" in add._repr_html_()
    assert list(clean.to_frame().columns) == list(anisotropy.table_rows(clean)[0])
    assert list(add.to_frame().columns) == ["edit", *anisotropy.table_rows(add)[0]]
    assert set(add.to_frame()["edit"]) == {add.edit}


# ----------------------------------------------------------------------------- the claims and the report


def _seeded(name: str, seed: int) -> str:
    return name if seed == 0 else f"{name}-seed{seed}"


def _results(out, slstm_token: float, edit: dict | None = None) -> list[dict]:
    """Three seeds of slstm-small (last-layer token cosine ``slstm_token``) and of albert-small; the slstm-small
    ones computed under ``edit`` when given."""
    found = []
    for seed in range(3):
        s = docs.anisotropy(_seeded("slstm-small", seed), "slstm", slstm_token + 0.01 * seed, 0.46, seed=seed)
        if edit is not None:
            s["activations"] = {"key": f"k{seed}", "intervention": [edit]}
        found += [s, docs.anisotropy(_seeded("albert-small", seed), "albert", 0.28 + 0.01 * seed, 0.74,
                                     seed=10 + seed)]
    return found


def _tokens(found) -> claims.Finding:
    return next(f for f in found if f.analysis == "anisotropy" and "token outputs" in f.claim)


EDIT = _edit(-1, scale=30.0, sha256="ab" * 32)


def test_an_edited_result_in_place_of_the_models_is_left_out_not_read(tmp_path):
    """Edited results saved under the model's own file names (as files written before edited runs had names of
    their own): the claim has no result of the model (not testable), never the edited run's verdict."""
    clean = tmp_path / "clean"
    docs.write(clean, "anisotropy", _results(clean, 0.20))
    assert _tokens(claims.evaluate(clean)).verdict == claims.HOLDS
    edited = tmp_path / "edited"
    docs.write(edited, "anisotropy", _results(edited, 0.90, EDIT))  # would fail the claim if it were read
    with pytest.warns(UserWarning) as said:
        f = _tokens(claims.evaluate(edited))
    assert f.verdict == claims.UNTESTED and claims.FAILS not in {c.verdict for c in f.comparisons}
    lines = [str(w.message) for w in said if "left out of the claims" in str(w.message)]
    assert len(lines) == 3 and any(str(edited / "results" / "anisotropy" / "slstm-small.json") in ln for ln in lines)
    assert all("add at layer -1" in ln for ln in lines)


def test_edited_results_beside_the_models_leave_the_verdict_to_the_clean_ones(tmp_path):
    docs.write(tmp_path, "anisotropy", _results(tmp_path, 0.20))
    for d in _results(tmp_path, 0.90, EDIT)[::2]:  # the slstm-small seeds, edited, saved as the docs say
        write_result(tmp_path, "anisotropy", d["model_name"], d, [])
    files = sorted(p.name for p in (tmp_path / "results" / "anisotropy").glob("slstm-small*.json"))
    assert len(files) == 6 and sum("+add@-1_" in name for name in files) == 3
    with pytest.warns(UserWarning) as said:
        f = _tokens(claims.evaluate(tmp_path))
    assert f.verdict == claims.HOLDS  # the clean results' verdict, as without the edited ones
    left = [str(w.message) for w in said if "left out of the claims" in str(w.message)]
    assert len(left) == 3 and all("+add@-1_" in ln for ln in left)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        secs = report.sections(tmp_path)
    own = next(s for s in secs if s["analysis"] == "anisotropy" and "id" not in s)
    edited = next(s for s in secs if s.get("id") == "anisotropy-edited")
    assert not any("+" in r["name"] for r in own["results"]) and len(own["results"]) == 6
    assert len(edited["results"]) == 3 and all("+add@-1_" in r["name"] for r in edited["results"])
    assert edited["edited"] and all("+add@-1_" in s for s in edited["findings"] if "slstm" in s)
    assert not any("+add" in s for s in own["findings"])
