"""One analysis contract, checked once for every entry of ``analyses.ANALYSES`` (in the spirit of
scikit-learn's common estimator checks), on tiny random models from checkpoints.yaml:

* ``Config`` composes the shared option groups, and every CLI accepts the same shared flags; a
  shared flag an analysis cannot apply is refused (one ``error:`` line, exit status 2) when given a
  non-default value, and never recorded;
* ``compute(cfg, **load_inputs(model, cfg))`` gives a Result that round-trips through JSON and carries
  one identity block (model, settings used, corpus);
* the CLI writes what the Python API computes (to 1e-9), and computing twice gives the same result.

Plus the layer rule (issue 23 item 5): activations made with ``extract(layers=[0, 2])`` are read
layer by layer with ``layer_hidden``: an analysis that needs layer 1 refuses with one line naming it.

    $ python -m pytest -q tests/test_contract.py
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

import analyses
from analyses.common import AnalysisConfig, AnalysisResult, Identity, write_result
from probes.config import ModelsConfig, RunConfig, SampleConfig, parse_config, run_main
from probes.errors import ProbeError

# per analysis: the CLI arguments of a tiny run (models from checkpoints.yaml), fast settings
RUNS = {
    "anisotropy": ["--model", "tiny-bert", "--n-sentences", "12", "--n-tokens", "40"],
    "transitions": ["--model", "tiny-bert", "--n-sentences", "12"],
    "redundancy": ["--model", "tiny-bert", "--window-length", "8", "--n-windows", "3"],
    "similarity": ["--model", "tiny-bert", "--model", "tiny-albert", "--n-sentences", "12", "--rsa-units", "8"],
    "probing": ["--model", "tiny-bert", "--n-sentences", "40", "--max-items", "40", "--n-boot", "10",
                "--task", "sent_len", "--task", "position", "--cv-folds", "2", "--cs", "1.0", "--sent-len-bins", "2",
                "--position-bins", "2", "--min-per-class", "3"],
    "maps": ["--model", "tiny-bert", "--n-sentences", "8", "--examples", "1"],
    "mog": ["--model", "tiny-mog", "--n-sentences", "12"],
    "mog_lens": ["--model", "tiny-bert-lens", "--n-sentences", "12"],
    "perplexity": ["--model", "tiny-gpt2", "--n-documents", "2", "--max-tokens", "80", "--overlap", "0"],
    "topics": ["--model-a", "tiny-gpt2-recurrent", "--model-b", "tiny-gpt2", "--n-contexts", "4",
               "--continuation-tokens", "3", "--topics", "3", "--lda-passes", "1", "--lda-iterations", "5"],
    "speed": ["--model", "slstm", "--model", "bert", "--width", "16", "--layers", "1", "--heads", "2",
              "--intermediate", "32", "--vocab-size", "64", "--lengths", "8", "--lengths", "16",
              "--repeats", "1", "--warmup", "0", "--min-time", "0"],
}
SLOW = {"probing", "topics"}  # a few seconds more than the others (probe fits, LDA)
TIMED = {"speed"}  # wall-clock timings: neither deterministic nor equal between two runs
SHARED = [f.name for g in (ModelsConfig, RunConfig, SampleConfig) for f in dataclasses.fields(g)]
# a valid non-default value of every shared flag
NON_DEFAULT = {"model": ["--model", "tiny-gpt2"], "corpus": ["--corpus", "data/corpus"], "seed": ["--seed", "1"],
               "batch_size": ["--batch-size", "3"], "device": ["--device", "auto"], "out": ["--out", "elsewhere"],
               "dtype": ["--dtype", "bfloat16"], "cache_dtype": ["--cache-dtype", "float32"],
               "device_map": ["--device-map", "auto"], "min_words": ["--min-words", "4"],
               "max_words": ["--max-words", "50"]}
TOL = 1e-9


def params(names=analyses.ANALYSES):
    return [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in names]


def config(name: str, out) -> AnalysisConfig:
    return parse_config(analyses.get(name).Config, [*RUNS[name], "--out", str(out)])


def unit(mod, cfg):
    """The first model (or pair) the CLI would compute."""
    units = mod.pairs(cfg) if hasattr(mod, "pairs") else [(m,) for m in cfg.model]
    return units[0][0] if len(units[0]) == 1 else units[0]


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


@pytest.fixture(scope="module")
def computed(tmp_path_factory):
    """name -> (cfg, result): one compute per analysis, shared by the checks below."""
    cache, root = {}, tmp_path_factory.mktemp("contract")

    def get(name):
        if name not in cache:
            mod = analyses.get(name)
            cfg = config(name, root / name)
            cache[name] = cfg, mod.compute(cfg, **mod.load_inputs(unit(mod, cfg), cfg))
        return cache[name]

    return get


# ----------------------------------------------------------------------------- configuration


@pytest.mark.parametrize("name", analyses.ANALYSES)
def test_listed_module_keeps_the_contract_names(name):
    mod = analyses.get(name)
    for attr in ("Config", "Result", "load_inputs", "compute", "table_rows", "figures", "main"):
        assert hasattr(mod, attr), f"analyses.{name} has no {attr}"
    assert issubclass(mod.Result, AnalysisResult)
    assert [p for p in mod.compute.__code__.co_varnames[:1]] == ["cfg"]


@pytest.mark.parametrize("name", analyses.ANALYSES)
def test_config_composes_the_shared_groups(name):
    cfg_cls = analyses.get(name).Config
    assert issubclass(cfg_cls, AnalysisConfig)
    assert set(SHARED) <= {f.name for f in dataclasses.fields(cfg_cls)}
    assert set(cfg_cls.NOT_APPLICABLE) <= set(SHARED)


@pytest.mark.parametrize("name", analyses.ANALYSES)
def test_every_cli_accepts_every_shared_flag(name):
    argv = [x for flags in NON_DEFAULT.values() for x in flags]
    cfg = parse_config(analyses.get(name).Config, argv)
    assert (cfg.seed, cfg.batch_size, cfg.dtype, cfg.min_words) == (1, 3, "bfloat16", 4)
    assert cfg.extract_kwargs()["device_map"] == "auto"


@pytest.mark.parametrize("name", analyses.ANALYSES)
def test_a_shared_flag_that_cannot_apply_is_refused_in_one_line(name, tmp_path, capsys):
    mod = analyses.get(name)
    for field in mod.Config.NOT_APPLICABLE:
        with pytest.raises(SystemExit) as e:
            run_main(mod.main, [*RUNS[name], *NON_DEFAULT[field], "--out", str(tmp_path)])
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.startswith("error: --") and err.count("\n") == 1, err
        assert f"does not apply to analyses.{name}" in err
    assert not (tmp_path / "results").exists()


# ----------------------------------------------------------------------------- results


@pytest.mark.parametrize("name", params())
def test_result_round_trips_through_json_with_one_identity(name, computed, tmp_path):
    mod = analyses.get(name)
    cfg, result = computed(name)
    # speed times its models together: one Result per model
    for res in result.values() if name in TIMED else [result]:
        assert isinstance(res, mod.Result) and isinstance(res.identity, Identity)
        assert mod.Result.from_json(res.to_json()) == res
        doc = res.to_json()
        for key in ("model_name", "config"):
            assert key in doc
        assert not {"out", "figures"} & set(res.config) and not set(mod.Config.NOT_APPLICABLE) & set(res.config)
        # through the file: read back, the same document again
        path, _ = write_result(tmp_path, name, res.model_name, res, mod.table_rows(res))
        back = mod.Result.from_json(json.loads(path.read_text()))
        again, _ = write_result(tmp_path / "again", name, back.model_name, back, mod.table_rows(back))
        assert again.read_bytes() == path.read_bytes()


@pytest.mark.parametrize("name", params(n for n in analyses.ANALYSES if n not in TIMED))
def test_cli_writes_what_the_python_api_computes(name, computed, tmp_path):
    mod = analyses.get(name)
    cfg, res = computed(name)
    out = tmp_path / "cli"
    run_main(mod.main, [*RUNS[name], "--out", str(out)])
    api, _ = write_result(tmp_path / "api", name, res.model_name, res, mod.table_rows(res))
    doc = {k: v for k, v in json.loads(api.read_text()).items() if k != "provenance"}
    assert_same(saved(out, name, res.model_name), doc)


def test_no_figures_writes_the_same_results_and_draws_nothing(computed, tmp_path):
    mod = analyses.get("transitions")
    _, res = computed("transitions")
    run_main(mod.main, [*RUNS["transitions"], "--no-figures", "--out", str(tmp_path)])
    assert not (tmp_path / "figures").exists()
    api, _ = write_result(tmp_path / "api", "transitions", res.model_name, res, mod.table_rows(res))
    assert_same(saved(tmp_path, "transitions", res.model_name),
                {k: v for k, v in json.loads(api.read_text()).items() if k != "provenance"})


@pytest.mark.parametrize("name", params(n for n in analyses.ANALYSES if n not in TIMED))
def test_compute_is_deterministic(name, computed):
    mod = analyses.get(name)
    cfg, res = computed(name)
    again = mod.compute(cfg, **mod.load_inputs(unit(mod, cfg), cfg))
    assert_same(json.loads(json.dumps(again.to_json(), default=lambda x: np.asarray(x).tolist())),
                json.loads(json.dumps(res.to_json(), default=lambda x: np.asarray(x).tolist())))


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
