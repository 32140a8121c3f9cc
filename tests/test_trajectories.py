"""The claims' "over training" column and the trajectory file it reads (analyses.summary.trajectory_doc,
analyses.summary.course_use).

* The committed docs/claims-over-training.json, beside redundancy results of the seed-3 models it ends at (computed
  here with the demo's settings), gives the claims table its over-training words; the same file beside results of
  another corpus or size, or edited (differences negated or null, sides swapped, a seed the table lacks), is not
  used for that seed, and the cell says why.
* A file of any structure trajectories.py does not write is one error line naming the file (exit 2 from the CLI).
* A pair's result is placed on the training point of the two names its identity records, exactly.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from analyses.summary import claims
from analyses.summary.course import NONE, over_training
from analyses.summary.trajectory_doc import CoursePoint, CourseSeed, Trajectories
from probes.corpus import DEFAULT_CORPUS_DIR
from probes.errors import ProbeError

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "docs" / "claims-over-training.json"
SEED3 = ["slstm-small-seed3", "albert-small-seed3", "bert-small-seed3"]
K90 = "S-LSTM needs the most principal components for 90% of the variance (n = 100 token windows): less feature " \
      "redundancy"
K98 = "... and for 98% of the variance (n = 100)"
# what the committed file gives the claims table for these results (the words before the file recorded its corpus
# and settings, too)
WORDS = {(K90, "slstm-small vs albert-small"): "still moving (seed 3)",
         (K90, "slstm-small vs bert-small"): "stable (seed 3; size -2% over the last half)",
         (K98, "slstm-small vs albert-small"): "stable (seed 3; size -7% over the last half)",
         (K98, "slstm-small vs bert-small"): "stable (seed 3; size -47% over the last half)"}


def _redundancy(out: Path, *extra: str, models=SEED3) -> Path:
    from analyses import redundancy

    redundancy.ANALYSIS.main([*(a for m in models for a in ("--model", m)), "--window-length", "100", *extra,
                              "--out", str(out), "--no-figures"])
    return out


@pytest.fixture(scope="module")
def seed3(tmp_path_factory):
    """Redundancy results of the seed-3 models with the demo's settings (Makefile: --window-length 100)."""
    return _redundancy(tmp_path_factory.mktemp("seed3"))


def _words(results: Path, doc: dict, tmp_path: Path) -> dict:
    out = tmp_path / "out"
    if not out.exists():
        (out / "trajectories").mkdir(parents=True)
        (out / "results").symlink_to(results / "results")
    (out / "trajectories" / "claims-over-training.json").write_text(json.dumps(doc))
    return {(f.claim, k): v for f in claims.evaluate(out) if f.claim in (K90, K98) for k, v in f.over_training.items()}


def _committed() -> dict:
    return json.loads(COMMITTED.read_text())


def _seed(doc: dict, claim: str = K90, against: str = "slstm-small vs albert-small") -> dict:
    (c,) = [c for c in doc["claims"] if c["claim"] == claim]
    (comp,) = [x for x in c["comparisons"] if x["against"] == against]
    return comp["seeds"][0]


@pytest.mark.slow
def test_the_committed_file_gives_the_demo_table_its_words(seed3, tmp_path):
    assert _words(seed3, _committed(), tmp_path) == WORDS


@pytest.mark.slow
def test_results_of_another_size_or_corpus_get_no_course(seed3, tmp_path):
    pair = SEED3[:2]
    fewer = _redundancy(tmp_path / "fewer", "--n-windows", "80", models=pair)
    words = _words(fewer, _committed(), tmp_path / "a")[(K98, "slstm-small vs albert-small")]
    assert words == "no trajectory of these results (seed 3: made with other settings (n_windows: 100, the " \
                    "table's 80))"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("austen-emma.txt", "melville-moby-dick.txt"):
        (corpus / name).write_text((DEFAULT_CORPUS_DIR / name).read_text(encoding="utf-8")[:200_000])
    other = _redundancy(tmp_path / "other", "--corpus", str(corpus), models=pair)
    words = _words(other, _committed(), tmp_path / "b")[(K98, "slstm-small vs albert-small")]
    assert words.startswith("no trajectory of these results (seed 3: made with another corpus (sha256: d3544bab")


def _negate(s):
    for p in s["points"]:
        p["difference"] = -p["difference"]


def _null(s):
    for p in s["points"]:
        p["difference"] = None


def _swap(s):
    s["a"], s["b"] = s["b"], s["a"]
    s["final_sha256"] = {"a": s["final_sha256"]["b"], "b": s["final_sha256"]["a"]}


def _unrecorded(s):
    s.pop("corpus")
    s.pop("settings")


@pytest.mark.slow
@pytest.mark.parametrize("edit,expected", [
    (_negate, "no trajectory of these results (seed 3: it ends at +0.75, the table's difference is -0.75)"),
    (_null, "no trajectory of these results (seed 3: it has no number at the end of training)"),
    (_swap, "no trajectory of these results (seed 3: its sides are albert-small-seed3 vs slstm-small-seed3, not "
            "slstm-small-seed3 vs albert-small-seed3)"),
    (_unrecorded, "no trajectory of these results (seed 3: it does not record its corpus and settings (written "
                  "before they were: make trajectories again))")])
def test_an_edited_trajectory_is_not_used_and_the_cell_says_why(seed3, tmp_path, edit, expected):
    doc = _committed()
    edit(_seed(doc))
    words = _words(seed3, doc, tmp_path)
    assert words[(K90, "slstm-small vs albert-small")] == expected
    assert words[(K90, "slstm-small vs bert-small")] == WORDS[(K90, "slstm-small vs bert-small")]  # untouched


@pytest.mark.slow
def test_a_seed_the_table_lacks_is_not_used(seed3, tmp_path):
    doc = _committed()
    (c,) = [c for c in doc["claims"] if c["claim"] == K98]
    comp = c["comparisons"][0]
    invented = copy.deepcopy(comp["seeds"][0])
    invented["seed"] = 4
    for k, p in enumerate(invented["points"]):
        p["difference"] = 5.0 * (-1) ** k
    comp["seeds"].append(invented)
    assert _words(seed3, doc, tmp_path)[(K98, "slstm-small vs albert-small")] == \
        "stable (seed 3; size -7% over the last half); seed 4 not used: not one of the table's seeds (3)"


def test_a_seed_without_a_number_in_the_last_half_has_no_course():
    points = [CoursePoint(f, None, None, d, None) for f, d in ((0.25, 1.0), (0.5, None), (1.0, None))]
    assert over_training([CourseSeed(3, "a", "b", {"a": None, "b": None}, points)]) == NONE


def test_the_committed_file_reads_and_writes_back_unchanged():
    doc = _committed()
    typed = Trajectories.from_json(doc)
    assert typed.to_json() == doc
    assert all(s.corpus and s.settings for c in typed.claims for comp in c.comparisons for s in comp.seeds)


def _set(path: list, value=None, drop: bool = False):
    def edit(doc):
        x = doc
        for k in path[:-1]:
            x = x[k]
        if drop:
            del x[path[-1]]
        else:
            x[path[-1]] = value
    return edit


SEED0 = ["claims", 0, "comparisons", 0, "seeds", 0]
SHAPES = {
    "claims-null": _set(["claims"], None),
    "no-claims": _set(["claims"], drop=True),
    "no-final-sha": _set([*SEED0, "final_sha256"], drop=True),
    "sha-null": _set([*SEED0, "final_sha256"], None),
    "sha-side-number": _set([*SEED0, "final_sha256", "a"], 3),
    "no-points": _set([*SEED0, "points"], drop=True),
    "diff-str": _set([*SEED0, "points", -1, "difference"], "big"),
    "frac-str": _set([*SEED0, "points", -1, "fraction"], "end"),
    "frac-order": _set([*SEED0, "points", 0, "fraction"], 1.0),
    "no-paper": _set(["claims", 0, "paper"], drop=True),
    "comps-dict": _set(["claims", 0, "comparisons"], {"x": 1}),
    "seed-str": _set([*SEED0, "seed"], "3"),
    "interval-short": _set([*SEED0, "points", 0, "interval"], [1.0]),
    "extra-key": _set([*SEED0, "note"], "x"),
    "check-points-null": _set(["claims", 8, "check", "points"], None),
    "corpus-list": _set([*SEED0, "corpus"], [1]),
    "list": lambda doc: None,
}


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_a_file_of_another_shape_is_one_line_naming_it(tmp_path, case):
    doc = _committed()
    SHAPES[case](doc)
    path = tmp_path / "t.json"
    path.write_text("[1, 2]" if case == "list" else json.dumps(doc))
    with pytest.raises(ProbeError) as e:
        claims.evaluate(tmp_path / "none", trajectories=path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.integration
def test_the_command_line_says_it_in_one_line_with_exit_2(tmp_path):
    (tmp_path / "results" / "redundancy").mkdir(parents=True)
    (tmp_path / "results" / "redundancy" / "x.json").write_text("{}")
    doc = _committed()
    _seed(doc)["points"][-1]["difference"] = "big"
    (tmp_path / "trajectories").mkdir()
    (tmp_path / "trajectories" / "claims-over-training.json").write_text(json.dumps(doc))
    run = subprocess.run([sys.executable, "-m", "analyses.summary.claims", "--out", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("error: ") and "claims-over-training.json" in line and "difference" in line


def test_a_pair_result_is_placed_by_its_two_names_exactly():
    from analyses.summary.trajectories import point_of

    where = {"bert.step-0000200": 0.5, "albert.step-0000200": 1.0, "x.step-0000200": 1.0}
    pair = SimpleNamespace(model_name="albert.step-0000200-vs-x.step-0000200", identity=SimpleNamespace(
        model={"a": {"name": "albert.step-0000200"}, "b": {"name": "x.step-0000200"}}))
    assert point_of(pair, where) == 1.0
    one = SimpleNamespace(model_name="albert.step-0000200", identity=SimpleNamespace(model={"name": "x"}))
    assert point_of(one, where) == 1.0
