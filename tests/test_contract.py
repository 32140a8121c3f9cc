"""One analysis contract, checked once for every declaration in ``analyses.ANALYSES`` (in the spirit of
scikit-learn's common estimator checks), on the tiny models of checkpoints.yaml, with each declaration's own
tiny run (``Analysis.example``). The checks are the public ones of :mod:`analyses.checks` (``check_analysis``
runs them all on anyone's analysis; tests/test_declaration.py runs it on a new one):

* the declaration is complete: its Config derives from its kind of input's Config base, its Result is an
  AnalysisResult, ``compute``'s first parameter is ``cfg``, every figure has a caption;
* every CLI accepts the flags of its kind of input, and offers none of the shared flags its inputs cannot use;
* ``compute(cfg, **inputs)`` gives a Result that round-trips through JSON, carries one identity block (model,
  settings used, corpus) and shows as a few lines (not its every number);
* the CLI writes what the Python API computes (to 1e-9; the CLI computes again from its own extraction, so
  this is also the check that computing twice gives the same result, timings aside), and
  ``<analysis>.run(model, corpus)`` from Python gives the same.

Plus the layer rule: activations made with ``extract(layers=[0, 2])`` are read layer by layer with
``layer_index``: an analysis that needs layer 1 refuses with one line naming it.

    $ python -m pytest -q tests/test_contract.py
"""

from __future__ import annotations

import numpy as np
import pytest

import analyses
from analyses import checks
from analyses.checks import assert_same, document, example_config, example_inputs, saved_document
from analyses.inputs import CALLER_TEXTS
from probes.errors import ProbeError

SLOW = {"probing", "topics"}  # a few seconds more than the others (probe fits, LDA)


def params(names=None):
    names = list(analyses.ANALYSES) if names is None else list(names)
    return [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in names]


# ----------------------------------------------------------------------------- every registered analysis


@pytest.fixture(scope="module")
def computed(tmp_path_factory):
    """name -> (cfg, result): one compute per analysis, shared by the checks below."""
    cache, root = {}, tmp_path_factory.mktemp("contract")

    def get(name):
        if name not in cache:
            decl = analyses.get(name)
            cfg = example_config(decl, root / name)
            cache[name] = cfg, decl.compute(cfg, **example_inputs(decl, cfg))
        return cache[name]

    return get


@pytest.mark.parametrize("name", analyses.ANALYSES)
def test_the_declaration_is_complete(name):
    checks.check_declaration(analyses.get(name))


@pytest.mark.parametrize("name", analyses.ANALYSES)
def test_every_cli_takes_the_flags_of_its_inputs_and_no_other_shared_flag(name):
    checks.check_flags(analyses.get(name))


@pytest.mark.parametrize("name", params())
def test_result_round_trips_through_json_with_one_identity_and_a_short_repr(name, computed, tmp_path):
    cfg, result = computed(name)
    checks.check_round_trip(analyses.get(name), cfg, result, tmp_path)


@pytest.mark.parametrize("name", params())
def test_the_results_table_is_a_data_frame_of_its_csv_rows(name, computed):
    import pandas as pd

    _, result = computed(name)
    for one in analyses.get(name).inputs.results(result):
        frame = one.to_frame()
        assert isinstance(frame, pd.DataFrame) and len(frame) > 0
        pd.testing.assert_frame_equal(frame, pd.DataFrame(analyses.get(name).table_rows(one)))


@pytest.mark.parametrize("name", params(n for n in analyses.ANALYSES if analyses.get(n).deterministic))
def test_cli_writes_what_the_python_api_computes(name, computed, tmp_path):
    """The CLI computes again from its own fresh extraction: equal to 1e-9 also says the compute is
    deterministic (the same inputs give the same result)."""
    _, result = computed(name)
    checks.check_cli_writes_what_python_computes(analyses.get(name), result, tmp_path)


@pytest.mark.parametrize("name", params(n for n in analyses.ANALYSES if analyses.get(n).deterministic))
def test_run_from_python_builds_the_inputs_the_cli_builds(name, computed, tmp_path):
    cfg, result = computed(name)
    checks.check_run_from_python(analyses.get(name), cfg, result, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", analyses.ANALYSES)
def test_every_figure_is_saved_as_png_and_pdf(name, computed, tmp_path):
    """Each figure of the tiny run's results, saved as the command line saves it: a PNG that decodes to the
    figure's size at 200 dpi and a PDF."""
    import matplotlib.image as mpimg

    decl = analyses.get(name)
    _, result = computed(name)
    results = list(decl.inputs.results(result))
    stems = decl.figure_files(results)  # the files save_figures draws
    paths = decl.save_figures(results, tmp_path)
    assert stems and {p.name for p in paths if p.parent.name == "figures"} == {f"{s}.{e}" for s in stems
                                                                              for e in ("png", "pdf")}
    for stem in stems:
        assert (tmp_path / "figures" / f"{stem}.pdf").read_bytes().startswith(b"%PDF-")
        image = mpimg.imread(tmp_path / "figures" / f"{stem}.png")
        assert image.ndim == 3 and min(image.shape[:2]) > 100, (stem, image.shape)  # saved with a tight bbox


def test_no_figures_writes_the_same_results_and_draws_nothing(computed, tmp_path):
    decl = analyses.get("transitions")
    _, res = computed("transitions")
    decl.main([*decl.example, "--no-figures", "--out", str(tmp_path)])
    assert not (tmp_path / "figures").exists()
    assert_same(saved_document(tmp_path, "transitions", res.model_name), document(decl, res, tmp_path / "api"))


def test_caller_texts_are_recorded_as_such_not_as_the_default_sample(tmp_path):
    """compute on the caller's own texts records their count and sha256, and no sample setting that
    did not apply (corpus 'default', n_sentences 5000)."""
    import probes
    from analyses import anisotropy, similarity

    texts = [f"the sentence number {i} has a few words in it" for i in range(9)]
    acts = probes.extract("tiny-bert", texts, cache_dir=None, progress=False)
    res = anisotropy.compute(anisotropy.Config(n_tokens=30), acts=acts)
    assert res.corpus["source"] == "texts given by the caller" and res.corpus["n_texts"] == 9
    assert not {"corpus", "n_sentences", "min_words", "max_words"} & set(res.config)
    assert res.model_name == "tiny-bert" and res.config["model"] == ["tiny-bert"]
    pair = similarity.compute(similarity.Config(rsa_units=8), acts_a=acts, acts_b=acts)
    assert pair.config["model"] == ["tiny-bert", "tiny-bert"] and pair.model_name == "tiny-bert__tiny-bert__sentence"


def test_every_shape_of_the_callers_texts_leaves_the_sample_settings_out():
    """A result computed on the caller's texts records no corpus or sample size the texts did not come from,
    whichever way its inputs record them: as the caller's texts (sentences, LM documents) or as a corpus made of
    them (windows, LM pairs)."""
    from analyses.common import caller_texts, settings_used
    from probes.corpus import Corpus, Document

    made = Corpus.from_documents(CALLER_TEXTS, [Document("text-0", "a b c d")]).identity()
    for name in ("anisotropy", "redundancy", "perplexity", "topics", "causal_probing"):
        for block in (caller_texts(["a b", "c d"]), {**made, "unit": "token window of running text"}):
            used = settings_used(analyses.get(name).Config(), corpus=block)
            assert not {"corpus", "n_sentences", "min_words", "max_words"} & set(used), (name, block)


# ----------------------------------------------------------------------------- the layer rule


@pytest.fixture(scope="module")
def partial(tmp_path_factory):
    """(full, partial): tiny-bert (2 layers) on the same texts, every layer and layers [0, 2] only."""
    import probes

    texts = [f"a short sentence number {i} about cats and dogs and birds" for i in range(16)]
    cache = tmp_path_factory.mktemp("layers")
    full = probes.extract("tiny-bert", texts, cache_dir=cache, progress=False)
    part = probes.extract("tiny-bert", texts, cache_dir=cache, progress=False, layers=[0, 2])
    return full, part


def test_partial_activations_are_read_at_the_layers_they_keep(partial):
    from analyses import redundancy
    from analyses.similarity.words import align_words, word_states

    full, part = partial
    for lyr in (0, 2, -1):
        np.testing.assert_array_equal(np.asarray(part.layer_hidden(lyr)), np.asarray(full.layer_hidden(lyr)))
    rows = np.arange(3, 11)
    np.testing.assert_array_equal(part.layer_hidden(2, rows), np.asarray(full.layer_hidden(2))[rows])
    # redundancy reads only its --layer: the kept layer 2 gives what the full activations give
    n_full, mats_full = redundancy.window_matrices(full, 2)
    n_part, mats_part = redundancy.window_matrices(part, 2)
    assert n_full == n_part and all(np.array_equal(a, b) for a, b in zip(mats_full, mats_part))
    words = align_words(full, full)
    with pytest.raises(ProbeError, match=r"layers \[0, 2\] only, not 1"):
        word_states(part, words.tokens_a, words.starts_a)


@pytest.mark.parametrize("name, kwargs", [
    ("anisotropy", {"n_tokens": 30}),
    ("transitions", {}),
    ("probing", {"task": ["position"], "max_items": 40, "n_boot": 10, "cv_folds": 2, "cs": [1.0], "position_bins": 2,
                 "min_per_class": 3}),
    ("similarity", {"unit": "token", "rsa_units": 8}),
])
def test_analyses_that_need_every_layer_refuse_partial_activations_naming_the_layer(name, kwargs, partial):
    mod = analyses.get(name)
    _, part = partial
    inputs = {"acts_a": part, "acts_b": part} if name == "similarity" else {"acts": part}
    with pytest.raises(ProbeError, match=r"layers \[0, 2\] only, not 1") as e:
        mod.compute(mod.Config(**kwargs), **inputs)
    assert "\n" not in str(e.value)


# ----------------------------------------------------------------------------- resolve once


def test_the_registry_is_parsed_once_while_it_does_not_change(tmp_path, monkeypatch):
    from probes.checkpoints import registry
    from probes.checkpoints.names import get_spec

    reg = tmp_path / "checkpoints.yaml"
    reg.write_text("a-model:\n  family: hf\n  kind: encoder\n  source: {hub: org/a}\n  sentence: cls\n")
    first, second = registry.read_registry(reg), registry.read_registry(reg)
    assert first == second and first is not second and first["a-model"] is second["a-model"]  # a copy each
    first.clear()
    assert "a-model" in registry.read_registry(reg)
    reg.write_text("b-model:\n  family: hf\n  kind: encoder\n  source: {hub: org/b}\n  sentence: mean\n")
    assert set(registry.read_registry(reg)) == {"b-model"}  # changed (size, mtime): parsed again
    spec = get_spec("tiny-bert")
    assert get_spec(spec) is spec  # a resolved spec passes through
