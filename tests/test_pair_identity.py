"""Results, pairs and series points are matched by the identities their files record, never by how names are spelt.

A pair's result is named by one rule (analyses.pairs.PairInfo); which pair a result is of is read from its
identity (model A's and model B's names), not parsed from its name, because one model's name may hold another's
(``bert-small-seed3`` inside ``albert-small-seed3``) and pair names do not parse back (``x-vs-y-vs-z``). Each
reader that placed, renamed or read a pair by a spelt name is checked on a planted case, and a scan of analyses/
keeps the spellings out.
"""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import claims_docs as docs
import numpy as np
import pytest

from analyses import similarity, topics
from analyses.common import Identity
from analyses.pairs import VS, PairInfo, sides_of
from probes.errors import ProbeError

ROOT = Path(__file__).resolve().parents[1]
NAME, INSIDE = "albert-small-seed3", "bert-small-seed3"  # the second is inside the first


def _similarity(a: str, b: str, unit: str = "token") -> similarity.Result:
    """A similarity result of A vs B on ``unit`` units (one layer each; the numbers do not matter here)."""
    ident = Identity(model_name=PairInfo(a, b, unit=unit).name(), config={},
                     model={"a": {"name": a, "family": "hf"}, "b": {"name": b, "family": "hf"}})
    one = similarity.Blocks(aa=[[1.0]], ab=[[0.5]], bb=[[1.0]])
    return similarity.Result(identity=ident, model_a=a, model_b=b, unit=unit, measures=["cka"], n_layers_a=0,
                             n_layers_b=0, n_units=4, n_rsa_units=4, matrices=similarity.Matrices(cka=one),
                             svcca_dims=similarity.Sides(a=[4], b=[4]), constant_columns=similarity.Sides(a=[0], b=[0]),
                             alignment=similarity.Alignment(n_texts=4))


def _topics(a: str, b: str) -> topics.Result:
    return topics.Result.from_json(docs.topics(a, b, [0.2, 0.3], [0.3, 0.4]))


# ----------------------------------------------------------------------------- the one naming rule


def test_a_pairs_result_is_named_by_its_analysis_rule_as_files_are_named_today():
    assert PairInfo("a", "b").name() == "a__b"  # common.pair_identity's default
    assert _similarity("minilm-l6", "albert-small").name == "minilm-l6__albert-small__token"
    assert _similarity("minilm-l6", "albert-small").model_name == "minilm-l6__albert-small__token"
    assert PairInfo.of(_similarity("minilm-l6", "albert-small")) == PairInfo("minilm-l6", "albert-small",
                                                                             unit="token")
    got = PairInfo.of(_topics("gpt2-small-recurrent", "gpt2-small-base"))
    assert got == PairInfo("gpt2-small-recurrent", "gpt2-small-base", join=VS)
    assert got is not None and got.name() == "gpt2-small-recurrent-vs-gpt2-small-base"


def test_the_pair_is_read_from_the_identity_never_from_the_name():
    # a name that parses two ways: "x-vs-y-vs-z" is x vs y-vs-z and x-vs-y vs z; the identity says which
    res = _topics("x-vs-y", "z")
    assert res.model_name == PairInfo("x", "y-vs-z", join=VS).name()
    pair = PairInfo.of(res)
    assert pair is not None and pair.names == ("x-vs-y", "z")
    assert pair.has("z") and not pair.has("y-vs-z") and not pair.has("x")
    one = SimpleNamespace(model_name=f"{INSIDE}-vs-{NAME}", identity=SimpleNamespace(model={"name": INSIDE}))
    assert PairInfo.of(one) is None  # one model's result, whatever its name says
    assert sides_of({"a": {"name": NAME}, "b": {}}) is None  # a side without a name: no pair
    assert PairInfo.of(SimpleNamespace(model_name="a__b")) is None  # a damaged file's stand-in: no identity


# ----------------------------------------------------------------------------- each reader, planted


def test_trajectories_rename_a_pair_by_its_own_rule_and_exact_names():
    """A pair's snapshot results are renamed after their models side by side, keeping the analysis's rule (a
    similarity pair is <A>__<B>__<unit>, not <A>-vs-<B>)."""
    from analyses.summary.trajectories import renamed_result

    names = {"albert.step-1": NAME, "bert.step-1": INSIDE}
    res = renamed_result(_similarity("albert.step-1", "bert.step-1"), names)
    assert res.model_name == f"{NAME}__{INSIDE}__token"
    assert res.models is not None and [m.name for m in res.models.sides] == [NAME, INSIDE]
    assert res.models.a.family == "hf"  # the rest of each side's description kept
    res = renamed_result(_topics("bert.step-1", "albert.step-1"), names)
    assert res.model_name == f"{INSIDE}-vs-{NAME}"
    assert res.model_a.name == INSIDE and res.model_b.name == NAME and res.model_a.window == 128


def test_trajectories_place_a_pair_by_its_two_recorded_names():
    from analyses.summary.trajectories import point_of

    where = {"albert.step-1": 0.5, "bert.step-1": 1.0, "x.step-1": 1.0}
    assert point_of(_similarity("bert.step-1", "x.step-1"), where) == 1.0
    assert point_of(_similarity("albert.step-1", "x.step-1"), where) is None  # sides at two fractions
    assert point_of(_topics("bert.step-1", "x.step-1"), where) == 1.0


def test_a_trajectory_speaks_for_the_results_of_its_sides_exactly():
    from analyses.summary.course_use import sides

    assert sides(_topics(NAME, "gpt2-small-base")) == {f"{NAME}-vs-gpt2-small-base", NAME, "gpt2-small-base"}
    assert INSIDE not in sides(_topics(NAME, "gpt2-small-base"))
    assert sides(SimpleNamespace(model_name=INSIDE, identity=Identity(model_name=INSIDE, config={},
                                                                      model={"name": INSIDE}))) == {INSIDE}


def _topic_table(tmp_path, recurrent: str, base: str) -> str:
    from analyses.summary.recurrence_claims import Config, topic_claims

    cfg = Config(out=str(tmp_path / "real"), base=base, recurrent=recurrent, window=[128],
                 gpt2_out=str(tmp_path / "none"), encoders=[])
    return "\n".join(topic_claims(cfg))


def test_recurrence_claims_read_the_pair_they_name(tmp_path):
    """The topics table reads the file its pair's rule names, and only when that file's identity is the pair."""
    rng = np.random.default_rng(0)
    ctx = rng.uniform(0.3, 0.8, 40)
    good = docs.topics(INSIDE, "b", ctx - 0.1, ctx)
    docs.write(tmp_path / "real" / "T128", "topics", [good, docs.topics(NAME, "b", ctx + 0.1, ctx)])
    assert f"| {INSIDE} vs b | 128 | 40 |" in _topic_table(tmp_path, INSIDE, "b")
    assert f"| {NAME} vs b |" not in _topic_table(tmp_path, INSIDE, "b")


def test_recurrence_claims_refuse_a_file_whose_identity_is_another_pair(tmp_path):
    """``x-vs-y-vs-z.json`` holding x-vs-y vs z is not x vs y-vs-z's result, and a file under the pair's name
    holding another pair (copied by hand) is not either: one error line naming both."""
    folder = tmp_path / "real" / "T128"
    docs.write(folder, "topics", [docs.topics("x-vs-y", "z", [0.2, 0.3], [0.3, 0.4])])
    with pytest.raises(ProbeError, match=r"records x-vs-y vs z, not x vs y-vs-z"):
        _topic_table(tmp_path, "x", "y-vs-z")
    assert "| x-vs-y vs z |" in _topic_table(tmp_path, "x-vs-y", "z")
    other = docs.topics(NAME, "b", [0.2, 0.3], [0.3, 0.4])
    (folder / "results" / "topics" / f"{INSIDE}-vs-b.json").write_text(json.dumps({"analysis": "topics", **other}))
    with pytest.raises(ProbeError, match=f"records {NAME} vs b, not {INSIDE} vs b"):
        _topic_table(tmp_path, INSIDE, "b")


def test_a_renamed_pair_keeps_its_rule_and_unit():
    pair = PairInfo(NAME, INSIDE, unit="sentence")
    assert pair.renamed({INSIDE: "c"}) == PairInfo(NAME, "c", unit="sentence")
    assert pair.renamed({"bert-small": "c"}) == pair  # a name inside another's renames nothing
    assert dataclasses.replace(pair, join=VS).name() == f"{NAME}-vs-{INSIDE}-vs-sentence"


# ----------------------------------------------------------------------------- no spelling comes back

# Where a result, pair or seed would be matched, made or parsed by how a name is spelt. Checked on the code
# (docstrings and comments may describe the names): a substring test on a result's model_name; a prefix/suffix test
# or split of one; a pair's name separator ("__", "-vs-") joined, split, partitioned or tested with ``in``; a pair's
# name written as an f-string; a pair recognised by its identity's keys ({"a", "b"}): analyses.pairs does that.
SEPARATORS = ("__", VS)
NAME_METHODS = {"startswith", "endswith", "find", "rfind", "index", "rindex", "split", "rsplit", "partition",
                "rpartition", "removeprefix", "removesuffix", "count"}
STRING_METHODS = {"join", "split", "rsplit", "partition", "rpartition"}
# (file, rule, code) -> why it is not a match by name
ALLOWED = {
    ("analyses/similarity/__init__.py", "separator tested with in", '"__" in m'):
        "check_config refuses a --model option holding '__' before any work (a CLI option, not a result)",
    ("analyses/effect_result.py", "a pair's name written as an f-string",
     'f"{self.model}{self.edit}__{re.sub(r\'[^A-Za-z0-9.=-]+\', \'-\', self.statistic).strip(\'-\')}"'):
        "an effect's file name (the edited run and its statistic) under out/effects/, which no reader of results "
        "or pairs lists",
}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _is_name(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "model_name") or \
        (isinstance(node, ast.Name) and node.id == "model_name")


def _is_separator(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in SEPARATORS


def spellings(source: str) -> list[tuple[str, str]]:
    """(rule, code) of every match by a name's spelling in ``source``."""
    tree = ast.parse(source)
    docs_ = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        rule = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs_ \
                and VS in node.value:
            rule = "a pair's -vs- spelt"
        elif isinstance(node, ast.JoinedStr):
            parts = [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
            if sum(isinstance(v, ast.FormattedValue) for v in node.values) >= 2 and any("__" in p for p in parts):
                rule = "a pair's name written as an f-string"
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            if any(_is_name(c) for c in node.comparators):
                rule = "substring of a model_name"
            elif _is_separator(node.left):
                rule = "separator tested with in"
        elif isinstance(node, ast.Compare) and any(
                isinstance(c, ast.Set) and {getattr(e, "value", None) for e in c.elts} == {"a", "b"}
                for c in [node.left, *node.comparators]):
            rule = "a pair recognised by its identity's keys"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if f.attr in NAME_METHODS and _is_name(f.value):
                rule = f"model_name.{f.attr}"
            elif f.attr in STRING_METHODS and (_is_separator(f.value) or any(_is_separator(a) for a in node.args)):
                rule = f"separator {f.attr}"
        if rule:
            found.append((rule, ast.get_source_segment(source, node) or ""))
    return found


def _offences(files) -> list[str]:
    out = []
    for path, source in files:
        if path == "analyses/pairs.py":  # where a pair's name is made
            continue
        out += [f"{path}: {rule}: {code}" for rule, code in spellings(source)
                if (path, rule, code) not in ALLOWED]
    return out


def test_no_result_pair_or_seed_is_matched_by_how_its_name_is_spelt():
    files = [(p.relative_to(ROOT).as_posix(), p.read_text()) for p in sorted((ROOT / "analyses").rglob("*.py"))]
    assert not _offences(files), "\n".join(_offences(files))
    used = {(path, rule, code) for path, source in files for rule, code in spellings(source)}
    assert set(ALLOWED) <= used, f"allowed but gone (drop it from ALLOWED): {set(ALLOWED) - used}"


@pytest.mark.parametrize("code, rule", [
    ('[r for r in rs if n in r.model_name]', "substring of a model_name"),
    ('f"{name}-vs-" in result.model_name', "substring of a model_name"),
    ('name = "-vs-".join(names)', "a pair's -vs- spelt"),
    ('name = "__".join(names)', "separator join"),
    ('a, b = result.model_name.split("__")[:2]', "model_name.split"),
    ('ok = result.model_name.endswith("-seed3")', "model_name.endswith"),
    ('stem = f"{a}__{b}__{unit}"', "a pair's name written as an f-string"),
    ('pair = set(model) == {"a", "b"}', "a pair recognised by its identity's keys"),
])
def test_the_scan_finds_each_spelling(code, rule):
    assert rule in [r for r, _ in spellings(code)]
