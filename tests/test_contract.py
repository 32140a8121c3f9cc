"""One analysis contract, checked once for every declaration in ``analyses.ANALYSES`` (in the spirit of
scikit-learn's common estimator checks), on the tiny models of checkpoints.yaml, with each declaration's own
tiny run (``Analysis.example``):

* the declaration is complete: its Config derives from its kind of input's Config base, its Result is an
  AnalysisResult, ``compute``'s first parameter is ``cfg``, every figure has a caption;
* every CLI accepts the flags of its kind of input, and offers none of the shared flags its inputs cannot use;
* ``compute(cfg, **inputs)`` gives a Result that round-trips through JSON, carries one identity block (model,
  settings used, corpus) and shows as a few lines (not its every number);
* the CLI writes what the Python API computes (to 1e-9; the CLI computes again from its own extraction, so
  this is also the check that computing twice gives the same result, timings aside), and
  ``<analysis>.run(model, corpus)`` from Python gives the same.

The checks are functions of an analysis's name (:func:`contract_checks` runs them all), so a new declaration is
checked with no edit here (tests/test_declaration.py adds a toy analysis and runs them on it).

Plus the layer rule: activations made with ``extract(layers=[0, 2])`` are read layer by layer with
``layer_index``: an analysis that needs layer 1 refuses with one line naming it.

    $ python -m pytest -q tests/test_contract.py
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math

import numpy as np
import pytest

import analyses
from analyses.analysis import Analysis, Figure
from analyses.common import AnalysisResult, Identity, write_result
from analyses.inputs import CALLER_TEXTS
from probes.config import CaptureConfig, CorpusConfig, ModelsConfig, SampleConfig, parse_config
from probes.errors import ProbeError

SLOW = {"probing", "topics"}  # a few seconds more than the others (probe fits, LDA)
# the shared flags (the groups the kinds of input compose) and a valid non-default value of each
SHARED = [f.name for g in (ModelsConfig, CorpusConfig, CaptureConfig, SampleConfig) for f in dataclasses.fields(g)]
NON_DEFAULT = {  # field -> (flags, the value parsed)
    "model": (["--model", "tiny-gpt2"], ["tiny-gpt2"]), "corpus": (["--corpus", "data/corpus"], "data/corpus"),
    "seed": (["--seed", "1"], 1), "batch_size": (["--batch-size", "3"], 3), "device": (["--device", "auto"], "auto"),
    "out": (["--out", "elsewhere"], "elsewhere"), "figures": (["--no-figures"], False),
    "dtype": (["--dtype", "bfloat16"], "bfloat16"), "cache_dtype": (["--cache-dtype", "float32"], "float32"),
    "device_map": (["--device-map", "auto"], "auto"), "min_words": (["--min-words", "4"], 4),
    "max_words": (["--max-words", "50"], 50), "n_sentences": (["--n-sentences", "7"], 7),
    "model_a": (["--model-a", "tiny-gpt2"], "tiny-gpt2"), "model_b": (["--model-b", "tiny-llama"], "tiny-llama")}
TOL = 1e-9


def params(names=None):
    names = list(analyses.ANALYSES) if names is None else list(names)
    return [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in names]


def config(name: str, out):
    decl = analyses.get(name)
    return parse_config(decl.Config, [*decl.example, "--out", str(out)])


def first_unit(decl: Analysis, cfg) -> tuple:
    """The first unit of models (names) the CLI would compute."""
    return decl.inputs.units(cfg)[0]


def load(decl: Analysis, cfg) -> dict:
    """The inputs of the CLI's first compute (every model resolved as the CLI resolves it)."""
    return decl.inputs.load(tuple(decl.inputs.resolve(m) for m in first_unit(decl, cfg)), cfg)


def assert_same(a, b, where=""):
    """Equal documents: numbers within TOL (relative to max(1, |a|, |b|)), everything else exactly."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{where}: keys {sorted(set(a) ^ set(b))}"
        for k in a:
            assert_same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"{where}: length"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}/{i}")
    elif isinstance(a, (float, int)) and not isinstance(a, bool) and isinstance(b, (float, int)):
        assert math.isclose(a, b, rel_tol=0, abs_tol=TOL * max(1, abs(a), abs(b))), f"{where}: {a} != {b}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def saved(out, name: str, model_name: str) -> dict:
    doc = json.loads((out / "results" / name / f"{model_name}.json").read_text())
    return {k: v for k, v in doc.items() if k != "provenance"}


def document(tmp_path, name: str, res) -> dict:
    """``res`` as written to a result file (without provenance)."""
    decl = analyses.get(name)
    path, _ = write_result(tmp_path, name, res.model_name, res, decl.table_rows(res))
    return {k: v for k, v in json.loads(path.read_text()).items() if k != "provenance"}


def as_json(res) -> dict:
    return json.loads(json.dumps(res.to_json(), default=lambda x: np.asarray(x).tolist()))


# ----------------------------------------------------------------------------- the checks of one analysis


def check_declaration(name: str) -> None:
    decl = analyses.get(name)
    assert isinstance(decl, Analysis) and decl.name == name
    assert issubclass(decl.Config, decl.inputs.Config) and issubclass(decl.Result, AnalysisResult)
    assert list(decl.compute.__code__.co_varnames[:1]) == ["cfg"]
    assert decl.purpose and decl.example and decl.figures
    assert all(isinstance(f, Figure) and f.caption for f in decl.figures)
    module = __import__(decl.compute.__module__, fromlist=["_"])
    assert module.run == decl.run and module.main == decl.main  # the Python call and the command line


def check_flags(name: str, capsys) -> None:
    """The kind's flags are all accepted; the shared flags it cannot use are not offered (argparse refuses them)."""
    decl = analyses.get(name)
    own = {f.name for f in dataclasses.fields(decl.inputs.Config)}
    assert own <= set(NON_DEFAULT), f"{name}: a flag of its inputs without a test value: {own - set(NON_DEFAULT)}"
    cfg = parse_config(decl.Config, [x for field in own for x in NON_DEFAULT[field][0]])
    assert {f: getattr(cfg, f) for f in own} == {f: NON_DEFAULT[f][1] for f in own}
    for field in set(SHARED) - own:
        with pytest.raises(SystemExit) as e:
            parse_config(decl.Config, NON_DEFAULT[field][0])
        err = capsys.readouterr().err
        flag = NON_DEFAULT[field][0][0]
        assert e.value.code == 2 and err.startswith("error: ") and flag in err and err.count("\n") == 1, err


def check_round_trip(name: str, cfg, result, tmp_path) -> None:
    decl = analyses.get(name)
    for res in decl.inputs.results(result):
        assert isinstance(res, decl.Result) and isinstance(res.identity, Identity)
        assert decl.Result.from_json(res.to_json()) == res
        doc = res.to_json()
        assert {"model_name", "config"} <= set(doc) and not {"out", "figures"} & set(res.config)
        text = repr(res)  # a notebook cell shows a few lines, not every number
        assert type(res).__repr__ is AnalysisResult.__repr__ and len(text) < 1500 and name in text, text[:200]
        # the layers it has numbers for: from the embeddings, or from layer 1 for maps (the layers compute them)
        layers = res.summary().get("layers")
        assert layers is None or layers.startswith(f"{type(res).FIRST_LAYER}.."), layers
        assert res.model_name in res._repr_html_()
        # through the file: read back, the same document again
        path, _ = write_result(tmp_path, name, res.model_name, res, decl.table_rows(res))
        back = decl.Result.from_json(json.loads(path.read_text()))
        again, _ = write_result(tmp_path / "again", name, back.model_name, back, decl.table_rows(back))
        assert again.read_bytes() == path.read_bytes()


@contextlib.contextmanager
def figures_drawn():
    """name -> Figure of every figure a command draws meanwhile, recorded instead of encoded as PNG and PDF
    (encoding is matplotlib's work, and a third of a tiny run's time: test_every_figure_is_saved_as_png_and_pdf
    encodes each analysis's figures once, in the slow tier)."""
    from analyses import common

    drawn: dict = {}
    save = common.save_figure

    def record(fig, out, stem):
        drawn[stem] = fig
        return []

    common.save_figure = record
    try:
        yield drawn
    finally:
        common.save_figure = save


def assert_draws_something(stem: str, fig) -> None:
    """At least one panel of ``fig`` shows data: lines, patches, collections or images."""
    assert fig.axes and any(ax.lines or ax.patches or ax.collections or ax.images for ax in fig.axes), stem


def check_cli_writes_what_python_computes(name: str, result, tmp_path) -> None:
    """The CLI's result files equal the Python API's result to 1e-9, and it draws every figure its declaration
    lists for those results."""
    decl = analyses.get(name)
    out = tmp_path / "cli"
    with figures_drawn() as drawn:
        decl.main([*decl.example, "--out", str(out)])
    results = list(decl.inputs.results(result))
    for res in results:
        assert_same(saved(out, name, res.model_name), document(tmp_path / "api", name, res))
    assert set(drawn) == set(decl.figure_files(results))
    for stem, fig in drawn.items():
        assert_draws_something(stem, fig)


def check_run_from_python(name: str, cfg, result, tmp_path) -> None:
    """``<analysis>.run(model(s), corpus, config=cfg)``: the inputs the CLI builds, the same result."""
    decl = analyses.get(name)
    unit = first_unit(decl, cfg)
    model = unit[0] if decl.inputs.kind in ("sentences", "windows", "lm", "training record") else unit
    texts = getattr(cfg, "corpus", None)  # timing and training records read no corpus
    res = decl.run(model, texts, config=cfg, cache_dir=tmp_path / "cache")
    for a, b in zip(decl.inputs.results(res), decl.inputs.results(result)):
        assert_same(document(tmp_path / "run", name, a), document(tmp_path / "compute", name, b))


def contract_checks(name: str, tmp_path, capsys) -> None:
    """Every check of this file on analysis ``name``."""
    check_declaration(name)
    check_flags(name, capsys)
    cfg = config(name, tmp_path / "out")
    decl = analyses.get(name)
    result = decl.compute(cfg, **load(decl, cfg))
    check_round_trip(name, cfg, result, tmp_path / "round")
    if decl.deterministic:
        check_cli_writes_what_python_computes(name, result, tmp_path / "cli")
        check_run_from_python(name, cfg, result, tmp_path / "run")
        assert_same(as_json(decl.compute(cfg, **load(decl, cfg))), as_json(result))


# ----------------------------------------------------------------------------- every registered analysis


@pytest.fixture(scope="module")
def computed(tmp_path_factory):
    """name -> (cfg, result): one compute per analysis, shared by the checks below."""
    cache, root = {}, tmp_path_factory.mktemp("contract")

    def get(name):
        if name not in cache:
            decl = analyses.get(name)
            cfg = config(name, root / name)
            cache[name] = cfg, decl.compute(cfg, **load(decl, cfg))
        return cache[name]

    return get


@pytest.mark.parametrize("name", analyses.ANALYSES)
def test_the_declaration_is_complete(name):
    check_declaration(name)


@pytest.mark.parametrize("name", analyses.ANALYSES)
def test_every_cli_takes_the_flags_of_its_inputs_and_no_other_shared_flag(name, capsys):
    check_flags(name, capsys)


@pytest.mark.parametrize("name", params())
def test_result_round_trips_through_json_with_one_identity_and_a_short_repr(name, computed, tmp_path):
    cfg, result = computed(name)
    check_round_trip(name, cfg, result, tmp_path)


@pytest.mark.parametrize("name", params(n for n in analyses.ANALYSES if analyses.get(n).deterministic))
def test_cli_writes_what_the_python_api_computes(name, computed, tmp_path):
    """The CLI computes again from its own fresh extraction: equal to 1e-9 also says the compute is
    deterministic (the same inputs give the same result)."""
    _, result = computed(name)
    check_cli_writes_what_python_computes(name, result, tmp_path)


@pytest.mark.parametrize("name", params(n for n in analyses.ANALYSES if analyses.get(n).deterministic))
def test_run_from_python_builds_the_inputs_the_cli_builds(name, computed, tmp_path):
    cfg, result = computed(name)
    check_run_from_python(name, cfg, result, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", analyses.ANALYSES)
def test_every_figure_is_saved_as_png_and_pdf(name, computed, tmp_path):
    """Each figure of the tiny run's results, saved as the command line saves it: a PNG that decodes to the
    figure's size at 200 dpi and a PDF."""
    import matplotlib.image as mpimg

    decl = analyses.get(name)
    _, result = computed(name)
    results = list(decl.inputs.results(result))
    with figures_drawn() as drawn:  # the figures as drawn, to know their sizes
        decl.save_figures(results, tmp_path / "drawn")
    paths = decl.save_figures(results, tmp_path)
    assert {p.name for p in paths if p.parent.name == "figures"} == {f"{s}.{e}" for s in drawn for e in ("png", "pdf")}
    for stem in drawn:
        assert (tmp_path / "figures" / f"{stem}.pdf").read_bytes().startswith(b"%PDF-")
        image = mpimg.imread(tmp_path / "figures" / f"{stem}.png")
        assert image.ndim == 3 and min(image.shape[:2]) > 100, (stem, image.shape)  # saved with a tight bbox


def test_no_figures_writes_the_same_results_and_draws_nothing(computed, tmp_path):
    decl = analyses.get("transitions")
    _, res = computed("transitions")
    decl.main([*decl.example, "--no-figures", "--out", str(tmp_path)])
    assert not (tmp_path / "figures").exists()
    assert_same(saved(tmp_path, "transitions", res.model_name), document(tmp_path / "api", "transitions", res))


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
