"""The README's five lines on "your model and texts", run as written on a tiny model folder and a text file, from a
folder of their own: the figure lands where the code saves it, the activation cache in the per-user cache folder
(``PROBES_CACHE``) and nothing else in the working folder; the result covers every layer and the caller's texts,
a second run reads the cache, and the folder named by its path gives the same numbers as the loaded object."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
REPO = Path(__file__).resolve().parent.parent
HEADING = "## Your model in five lines"

SENTENCES = """The cat sat on the mat and looked out of the window for a while.
It was a bright cold day in April, and the clocks were striking thirteen.
She walked to the market to buy bread and a little cheese for supper.

The ship sailed out of the harbour long before the storm arrived.
He read the letter twice and then put it back in the drawer of his desk.
Nobody in the village had ever seen such a strange animal before.
A quiet evening passed without any news from the city or the coast.
The children ran across the field towards the old oak tree by the river.
"""


def readme_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index(HEADING):]
    code = section[section.index("```python") + len("```python"):]
    return code[:code.index("```")]


@pytest.fixture()
def user_folder(tmp_path, monkeypatch):
    """A folder holding ``my-model`` (a tiny random BERT saved with the committed MiniLM tokenizer) and
    ``my_sentences.txt``, as the working directory; the per-user cache moved to ``tmp_path / "cache"``."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    import probes

    work = tmp_path / "work"
    work.mkdir()
    tok = AutoTokenizer.from_pretrained(probes.get_spec("minilm-l6").local_path())
    model = BertModel(BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                 vocab_size=len(tok)))
    model.save_pretrained(work / "my-model")
    tok.save_pretrained(work / "my-model")
    (work / "my_sentences.txt").write_text(SENTENCES, encoding="utf-8")
    monkeypatch.setenv("PROBES_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(work)
    return work


def test_the_example_is_short_and_reads_my_model_and_my_sentences():
    code = readme_example()
    lines = [ln for ln in code.splitlines() if ln.strip()]
    assert len(lines) <= 6 and len([ln for ln in lines if ln.startswith(("from ", "import "))]) <= 2, code
    assert '"my-model"' in code and '"my_sentences.txt"' in code


def test_the_five_lines_run_and_write_only_the_figure_where_they_run(user_folder, tmp_path, monkeypatch):
    from matplotlib.figure import Figure
    from matplotlib.patches import StepPatch

    saved, save = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: saved.append(fig) or save(fig, *a, **k))
    code = compile(readme_example(), "README.md", "exec")
    scope: dict = {}
    exec(code, scope)  # noqa: S102 -- our own README, as a user runs it
    result = scope["result"]

    assert sorted(p.name for p in user_folder.iterdir()) == ["anisotropy.png", "my-model", "my_sentences.txt"]
    # the saved figure draws the result: the density of the last layer's token cosines
    (patch,) = [p for p in saved[0].axes[0].patches if isinstance(p, StepPatch)]
    counts = np.asarray(result.layers[result.headline_layer].token.counts, float)
    np.testing.assert_allclose(patch.get_data().values, counts / counts.sum() / (2 / len(counts)))
    entries = sorted((tmp_path / "cache" / "my-model").iterdir())
    assert len(entries) == 1, entries

    n_texts = sum(1 for line in SENTENCES.splitlines() if line.strip())
    assert result.model_name == "my-model"
    assert [layer.layer for layer in result.layers] == [0, 1, 2]     # embeddings and both layers
    assert result.corpus["source"] == "texts given by the caller" and result.corpus["n_texts"] == n_texts
    for layer in result.layers:
        assert -1.0 <= layer.token.mean <= 1.0 and layer.token.n_vectors == result.config["n_tokens"]

    again: dict = {}
    exec(code, again)  # noqa: S102 -- a second run reads the cache entry the first one wrote
    assert sorted((tmp_path / "cache" / "my-model").iterdir()) == entries
    assert [la.token.mean for la in again["result"].layers] == [la.token.mean for la in result.layers]

    from analyses import anisotropy

    by_path = anisotropy.run(str(user_folder / "my-model"), scope["texts"])
    for a, b in zip(result.layers, by_path.layers, strict=True):
        assert a.token.mean == pytest.approx(b.token.mean, abs=1e-6)
        assert a.sentence.mean == pytest.approx(b.sentence.mean, abs=1e-6)
