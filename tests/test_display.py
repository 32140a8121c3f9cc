"""Display objects in the scikit-learn manner, for every analysis in analyses.ANALYSES:

* ``Result.plot(ax=None)`` draws the headline panel on the one Axes it is given (or a new one) and
  returns that Axes; two analyses share ``plt.subplots(1, 2)`` side by side;
* every figure its declaration lists (``Analysis.figures``) takes ``fig=`` (a Figure or a SubFigure) and draws
  only there, and every module-level ``plot*`` figure function is one of them (so each is drawn and tested);
* no plot call changes matplotlib's global rcParams (the theme is a context manager).

Results are read from small saved documents (the on-disk layout every version must read back), so no
model runs here; an analysis without such a document (a new one) is drawn from its declaration's tiny run.
"""

from __future__ import annotations

import functools
import inspect
import tempfile

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import analyses  # noqa: E402

L, BINS = 3, 20


def _identity(name: str, **config) -> dict:
    return {"model_name": name, "config": {"seed": 0, "corpus": "default", **config},
            "model": {"name": name, "sentence_vector": "mean"}, "activations": {"key": "k"}, "corpus": None}


def _summary(mean: float) -> dict:
    counts = np.exp(-((np.linspace(-1, 1, BINS) - mean) ** 2) / 0.05)
    return {"mean": mean, "std": 0.1, "frac_negative": 0.05, "quantiles": {"0.5": mean},
            "counts": np.round(counts * 100).astype(int).tolist()}


def anisotropy(name="m-a"):
    layers = [{"layer": lyr, "token": _summary(0.1 * lyr), "sentence": _summary(0.2 + 0.1 * lyr),
               "baseline_cosine": 0.1 * lyr, "self_similarity": 0.5, "intra_sentence_similarity": 0.4, "mev": 0.2}
              for lyr in range(L + 1)]
    return {**_identity(name), "headline_layer": L, "definitions": {}, "layers": layers}


def transitions(name="m-b"):
    side = {"distance_mean": 1.0, "distance_std": 0.1, "cosine_mean": 0.9, "cosine_std": 0.05}
    return {**_identity(name), "n_layers": L, "n_texts_used": 10, "definitions": {},
            "layers": [{"layer": lyr, "token": dict(side), "sentence": dict(side)} for lyr in range(1, L + 1)]}


def redundancy(name="m-c"):
    ths = [0.9, 0.95]
    windows = [{"window": n, "n_windows": 4, "hidden_size": 8, "max_components": 7,
                "thresholds": [{"threshold": p, "mean": 3.0 + p, "std": 0.5, "median": 3, "min": 2, "max": 4,
                                "count": 4} for p in ths],
                "mean_cumulative_variance": np.linspace(0.3, 1.0, 7).tolist(), "k": [[3, 4]] * 4}
               for n in (8, 16)]
    doc = _identity(name)
    doc["activations"] = [{"key": "k"}]
    return {**doc, "layer": L, "thresholds": ths, "definitions": {"centring": "centred"}, "windows": windows}


def similarity(name="m-a__m-b__sentence"):
    M = lambda a, b: (np.eye(a + 1, b + 1) * 0.5 + 0.3).tolist()  # noqa: E731
    mats = {"aa": M(L, L), "ab": M(L, 2), "bb": M(2, 2)}
    doc = _identity(name)
    doc["models"] = doc.pop("model")
    return {**doc, "model": doc["models"], "model_a": "m-a", "model_b": "m-b", "unit": "sentence",
            "measures": ["cka", "rsa"], "n_layers_a": L, "n_layers_b": 2, "n_units": 20, "n_rsa_units": 20,
            "matrices": {"cka": mats, "rsa": mats}, "svcca_dims": {}, "constant_columns": {}, "alignment": {},
            "definitions": {}}


def probing(name="m-d"):
    row = lambda lyr: {"layer": lyr, "accuracy": 0.5 + 0.1 * lyr, "ci_low": 0.4, "ci_high": 0.9,  # noqa: E731
                       "majority": 0.3, "control_accuracy": 0.4, "selectivity": 0.2, "selectivity_ci_low": 0.1,
                       "selectivity_ci_high": 0.3}
    tasks = [{"task": "sentence_length", "level": "sentence", "n_items": 100, "n_train": 80, "n_test": 20,
              "n_classes": 3, "layers": [row(lyr) for lyr in range(L + 1)]},
             {"task": "position", "level": "token", "n_items": 400, "n_train": 300, "n_test": 100,
              "n_classes": 4, "layers": [row(lyr) for lyr in range(L + 1)]}]
    return {**_identity(name), "scikit_learn": "1", "definitions": {}, "tasks": tasks}


def maps(name="m-e"):
    n, K = 4, 2
    att = {"token_axes": 2, "heads": K, "layers": L, "offsets": [-1, 0, 1], "offset_profile_overall": [0.3, 0.4, 0.3],
           "offset_profile": [[0.3, 0.4, 0.3]] * L, "local_share": [[0.6, 0.7]] * L, "local_share_uniform": 0.5,
           "example_means": [np.full((n, n), 1 / n).tolist()],
           "grid": np.full((L, K, n, n), 1 / n).tolist()}
    gates = {"token_axes": 1, "kind": "per-token component values", "components": ["i", "f"],
             "component_mean": [[0.4, 0.6]] * L, "example_maps": [np.full((L, K, n), 0.5).tolist()]}
    doc = _identity(name, keep_special=False, local_radius=2)
    return {**doc, "definitions": {}, "maps_captured": ["attention", "gates"],
            "examples": [{"text_index": 0, "text": "a b c d", "tokens": ["a", "b", "c", "d"]}],
            "maps": {"attention": att, "gates": gates}}


def mog(name="m-f"):
    from analyses.mog import ORDERS

    n = 3
    return {**_identity(name), "fusion": "weight_gate", "n_layers": L, "bucket_labels": ["<8", ">=8"],
            "bucket_counts": [5, 6], "w_by_bucket": [[0.2, 0.3, 0.4], [0.3, 0.4, None]], "w_layer_mean": [0.3] * L,
            "spearman_length": None, "claims": {}, "slot_weights": None,
            "entropy": {m: [1.0] * L for m in ORDERS}, "entropy_normalised": {m: [0.5, 0.6, 0.7] for m in ORDERS},
            "example": {"text": "a b c", "tokens": ["a", "b", "c"], "layer": 1,
                        **{m: np.full((n, n), 1 / n).tolist() for m in ORDERS}},
            "definitions": {}}


def mog_lens(name="m-g"):
    terms = ["rp_rp", "rp_ri", "ri_rp", "ri_ri", "bias", "bias_row"]
    share = [[[0.4, 0.2, 0.1, 0.2, 0.1, 0.0]] * L]
    return {**_identity(name), "n_layers": L, "n_heads": 2, "terms": terms, "bucket_labels": ["all"],
            "bucket_counts": [5], "share": share, "variance_ratio": share, "definitions": {}}


def perplexity(name="m-h"):
    rows = [{"model": name, "recurrent": False, "window": 64, "overlap": o, "token_perplexity": 30.0 - o / 8,
             "word_perplexity": 50.0 - o / 8, "nll_per_token": 3.0, "scored_tokens": 100, "words": 70,
             "windows": 3, "tokens_processed": 200, "flops_per_token": 1e6 * (1 + o / 32)} for o in (0, 16, 32)]
    return {**_identity(name), "corpus": {}, "non_embedding_parameters": 10, "overlap_matches_training": None,
            "definitions": {}, "rows": rows}


def topics(name="a-vs-b"):
    rng = np.random.default_rng(0)
    doc = _identity(name)
    doc.pop("model")
    return {**doc, "model_a": {"name": "a"}, "model_b": {"name": "b"}, "corpus": {}, "definitions": {},
            "statistics": {"mean_jsd_a": 0.3, "mean_jsd_b": 0.4, "share_a_less": 0.6, "sign_test_p": 0.01},
            "topics_top_words": [["w"]], "jsd_a": rng.uniform(0, 1, 12).tolist(),
            "jsd_b": rng.uniform(0, 1, 12).tolist(), "jsd_reference": rng.uniform(0, 1, 12).tolist()}


def speed(name="m-i"):
    rows = [{"length": n, "median_s": 1e-4 * n, "min_s": 1e-4 * n, "max_s": 1e-4 * n, "samples_s": [1e-4 * n],
             "loops_per_sample": 1, "tokens_per_s": 1e4, "speedup_vs_reference": 1.0} for n in (16, 32, 64)]
    return {**_identity(name, fit_min_length=16), "reference": name, "reference_median_s": {}, "definitions": {},
            "fit_lengths": [16, 32, 64], "slope": 1.0, "intercept": -9.2, "local_slopes": [1.0, 1.0],
            "crossover": None, "rows": rows, "machine": {}}


# a saved document of each analysis (the layout every version must read back)
BUILDERS = {f.__name__: f for f in (anisotropy, transitions, redundancy, similarity, probing, maps, mog, mog_lens,
                                    perplexity, topics, speed)}
NAMES = list(analyses.ANALYSES)


def _module(name: str):
    return __import__(analyses.ANALYSES[name], fromlist=["_"])


@functools.cache
def _result(name: str):
    """A result of ``name``: its saved document above, else its declaration's tiny run (``Analysis.example``)."""
    decl = analyses.get(name)
    if name in BUILDERS:
        return decl.Result.from_json(BUILDERS[name]())
    from probes.config import parse_config

    cfg = parse_config(decl.Config, [*decl.example, "--out", tempfile.mkdtemp(prefix=f"display-{name}-")])
    unit = decl.inputs.units(cfg)[0]
    return decl.inputs.results(decl.compute(cfg, **decl.inputs.load(tuple(map(decl.inputs.resolve, unit)), cfg)))[0]


def _axes(fig) -> list:
    """The Axes of a Figure or SubFigure, those of its nested subfigures included."""
    return [*fig.axes, *(ax for sub in fig.subfigs for ax in _axes(sub))]


def _drawn(ax) -> int:
    return len(ax.lines) + len(ax.collections) + len(ax.images) + len(ax.patches) + len(ax.texts)


def test_every_analysis_is_covered():
    assert set(BUILDERS) <= set(NAMES)
    for name in NAMES:
        mod = _module(name)
        own = sorted(n for n, f in vars(mod).items()  # panel helpers (first argument: an Axes) aside
                     if n.startswith("plot") and callable(f) and getattr(f, "__module__", "").startswith(mod.__name__)
                     and n != "plot_result" and next(iter(inspect.signature(f).parameters)) != "ax")
        declared = sorted({f.draw.__name__ for f in analyses.get(name).figures})
        assert own == declared, f"{name}: figure functions {own}, declared {declared} (declare each in ANALYSIS)"


@pytest.mark.parametrize("name", NAMES)
def test_plots_leave_rcparams_unchanged(name):
    result = _result(name)
    before = dict(matplotlib.rcParams)
    ax = result.plot()
    assert dict(matplotlib.rcParams) == before, f"{name}: Result.plot changed rcParams"
    assert _drawn(ax) > 0
    plt.close(ax.figure)
    for figure in analyses.get(name).figures:
        fig = figure.render([result])
        assert dict(matplotlib.rcParams) == before, f"{name}: {figure.name} changed rcParams"
        plt.close(fig)


@pytest.mark.parametrize("name", NAMES)
def test_result_plot_draws_on_the_given_axes_only(name):
    fig, (left, right) = plt.subplots(1, 2)
    assert _result(name).plot(ax=right) is right
    assert _drawn(right) > 0 and _drawn(left) == 0
    plt.close(fig)


def test_two_analyses_side_by_side():
    """The newcomer's figure: anisotropy's and similarity's headline panels on plt.subplots(1, 2)."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8, 3))
    grid_before = ax1.xaxis._major_tick_kw.get("gridOn")
    assert _result("anisotropy").plot(ax=ax1) is ax1
    assert _result("similarity").plot(ax=ax2, colorbar=False) is ax2
    assert fig.axes == [ax1, ax2]
    assert ax1.get_title().startswith("m-a") and ax2.images
    assert ax1.xaxis._major_tick_kw.get("gridOn") == grid_before  # the user's axes keep their own style
    plt.close(fig)


@pytest.mark.parametrize("name", NAMES)
def test_figures_draw_into_a_given_subfigure(name):
    result = _result(name)
    for figure in analyses.get(name).figures:
        fig = plt.figure(figsize=(12, 4))
        left, right = fig.subfigures(1, 2)
        assert figure.render([result], fig=right) is right
        assert _axes(right) and not _axes(left)
        with pytest.raises(TypeError, match="fig= takes"):
            figure.render([result], fig=_axes(right)[0])
        plt.close(fig)


def test_seed_variants_share_their_models_colour_and_differ_by_line_style(tmp_path, monkeypatch):
    """A model's seeds (``<model>-seedN``) are drawn in its colour, seed 0 solid and the others
    dashed / dotted, with one std band (seed 0's); Fig. 6's histograms keep one column per model."""
    from analyses import anisotropy as an
    from analyses import style
    from analyses import transitions as tr

    assert style.model_color("bert-small-seed2") == style.model_color("bert-small")
    assert [style.seed_style(f"m{s}")["linestyle"] for s in ("", "-seed1", "-seed2")] == ["-", "--", ":"]
    docs = [tr.Result.from_json(d) for d in (transitions("m-b"), transitions("m-b-seed1"), transitions("m-b-seed2"))]
    fig = tr.plot(docs)
    ax = fig.axes[0]
    lines = [ln for ln in ax.get_lines() if ln.get_label().startswith("m-b")]
    assert [ln.get_linestyle() for ln in lines] == ["-", "--", ":"]
    assert len({ln.get_color() for ln in lines}) == 1
    assert len(ax.collections) == 1  # the std band of seed 0 only (no bootstrap bars in these documents)
    plt.close(fig)
    results = [an.Result.from_json(anisotropy(n)) for n in ("m-a", "m-a-seed1", "m-c")]
    drawn = {stem: [r.model_name for r in group] for stem, (_, group) in an.ANALYSIS.figure_files(results).items()}
    assert drawn == {"anisotropy": ["m-a", "m-c"], "anisotropy-layers": ["m-a", "m-a-seed1", "m-c"]}
    plt.close("all")
