"""Every notebook runs top to bottom on a tiny random model, and is committed without outputs."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))

# per notebook: assertions on what it computed, run in its kernel after its last cell
CHECKS = {
    "anisotropy": """
assert len(result.layers) == acts.n_layers + 1
line = anisotropy.plot_layers([result]).axes[0].get_lines()[0]
assert np.allclose(line.get_ydata(), [r.baseline_cosine for r in result.layers])
assert all(sum(r.token.counts) > 0 and -1 <= r.token.mean <= 1 for r in result.layers)
""",
    "maps": """
assert result.maps_captured == sorted(acts.maps, key=lambda n: n != "attention")
shares = [v for row in maps.table_rows(result) for k, v in row.items() if k.startswith("local_share") and v is not None]
assert shares and all(0 <= v <= 1 + 1e-6 for v in shares)
""",
    "probing": """
rows = probing.table_rows(result)
assert {r["layer"] for r in rows} == set(range(result.definitions["n_layers"] + 1))
assert rows and all(0 <= r["accuracy"] <= 1 and 0 <= r["majority"] <= 1 for r in rows)
""",
    "similarity": """
m = sentence.matrix("cka")  # NaN where CKA is undefined: a layer without variance (a constant [CLS] state)
defined = ~np.isnan(m)
assert m.shape == (sentence.n_layers_a + 1, sentence.n_layers_b + 1) and defined.any() and np.isfinite(m[defined]).all()
aa = np.diag(token.matrix("cka", "aa"))
assert np.allclose(aa, 1)  # every layer is identical to itself (token states are never constant)
""",
    "perplexity": """
import math
for res in results:
    for row in res.rows:
        assert row.scored_tokens > 0 and row.token_perplexity > 1
        assert math.isclose(row.token_perplexity, math.exp(row.nll_per_token), rel_tol=1e-9)
""",
    "redundancy": """
for w in result.windows:
    means = [t.mean for t in w.thresholds]
    assert all(1 <= m <= w.max_components for m in means) and means == sorted(means)
""",
    "speed": """
for res in results.values():
    assert [r.length for r in res.rows] == LENGTHS and all(r.median_s > 0 for r in res.timed_rows())
""",
    "topics": """
jsd = np.concatenate([result.jsd_a, result.jsd_b])
assert result.statistics.n_contexts == len(records) == N and ((0 <= jsd) & (jsd <= 1)).all()
assert np.isclose(result.statistics.mean_jsd_a, np.mean(result.jsd_a))
""",
    "own-model": """
assert aniso.model_name == trans.model_name == "my-model" and len(aniso.layers) == acts.n_layers + 1
assert acts.meta["model"]["fingerprint"]["object"].endswith("BertModel") and len(fig.axes) == 4
""",
    "isoscore": """
assert len(result.layers) == acts.n_layers + 1
rows = isoscore.table_rows(result)
assert all(r[k] is None or 0 <= r[k] <= 1 for r in rows for k in ("token_isoscore", "sentence_isoscore"))
assert 0 < rows[-1]["token_isoscore"] <= 1
""",
    "intrinsic_dimension": """
assert len(result.layers) == acts.n_layers + 1
rows = intrinsic_dimension.table_rows(result)
assert rows[-1]["token_twonn"] > 0 and rows[-1]["sentence_mle"] > 0 and all(r["token_duplicates"] >= 0 for r in rows)
""",
    "lens": """
for res in results:
    assert res.layers[-1].final and res.layers[-1].logit.kl == 0 and res.layers[-1].logit.top1 == 1
    assert all(0 <= row["top1"] <= 1 and row["kl"] >= -1e-9 for row in lens.table_rows(res))
""",
    "causal_probing": """
assert result.seeds == [0, 1, 2] and [t.task for t in result.tasks] == ["position", "animal"]
for task in ("position", "animal"):
    found = causal_probing.verdicts(result, task)
    assert sorted(found) == list(range(result.model.num_layers + 1))
    assert set(found.values()) <= {"used", "not used", "inconclusive"}
assert all(abs(c - s.removed_variance) <= 0.011 * s.removed_variance for t in result.tasks for r in t.layers
           for s in r.leace.seeds for c in s.random_removed_variance)
assert len(result.to_frame()) == 2 * (result.model.num_layers + 1) and len(result.headline_numbers()) == 2
""",
    "interventions": """
assert result.model_name == MODEL + label and label.startswith("+erase@1_")
assert set(result.to_frame()["edit"]) == {label} and e.edit.startswith("+add@1_") and e.n_units == len(TEXTS)
assert e.difference.covers(e.edited.value - e.clean.value) and e.control is not None
assert [r.model_name for r in e.runs] == [MODEL, MODEL + e.edit, MODEL + e.control_edit]
""",
    "sae": """
assert [runs[k].saes[0].k for k in (4, 16)] == [4, 16] and runs[4].saes[0].l0 <= 4 + 1e-9
pts = frontier.curves()[0][2]
assert [p.k for p in pts] == [4, 16]
assert np.allclose(fig.axes[0].get_lines()[0].get_ydata(), [p.explained_variance for p in pts])
assert gap < 1e-5 and 0 < result.saes[0].explained_variance <= 1 and 0 <= probing.table_rows(probe)[0]["accuracy"] <= 1
""",
    "series": """
(line,) = result.lines
assert [p.step for p in line.points] == [p.step for p in points] and len(points) >= 5
assert len({round(p.value, 6) for p in line.points}) > 1
assert all(p.interval[0] <= p.value <= p.interval[1] for p in line.points)
drawn = result.plot().get_lines()[0]
assert np.allclose(drawn.get_xdata(), [p.step for p in line.points])
assert np.allclose(drawn.get_ydata(), [p.value for p in line.points])
assert sentence.statistic == "sentence cosine, last layer" and len(sentence.lines[0].points) == len(points)
""",
    "transitions": """
assert len(result.layers) == acts.n_layers == result.n_layers
assert all(r.token.distance_mean >= 0 and r.sentence.distance_mean >= 0 for r in result.layers)
""",
}


# PROBES_NB_N (sentences, or contexts for topics) where 120 is more than the checks need: topics generates a
# continuation per context with both LMs
SIZES = {"topics": "40", "series": "40"}


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(path):
    nb = json.loads(path.read_text())
    assert all(not c.get("outputs") and not c.get("execution_count") for c in nb["cells"] if c["cell_type"] == "code")


@pytest.mark.slow
@pytest.mark.integration  # a kernel per notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_on_a_tiny_model(path, tmp_path, monkeypatch):
    monkeypatch.setenv("PROBES_NB_MODEL", "tiny-bert")
    monkeypatch.setenv("PROBES_NB_N", SIZES.get(path.stem, "120"))
    monkeypatch.setenv("PROBES_NB_OUT", str(tmp_path / "out"))
    nb = nbformat.read(path, as_version=4)
    check = nbformat.v4.new_code_cell("import numpy as np\n" + CHECKS[path.stem])
    nb.cells.append(check)  # assertions on what the notebook computed, run in its kernel after its last cell
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent.parent)}}).execute()  # raises on an error
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= 2  # the figures were drawn
