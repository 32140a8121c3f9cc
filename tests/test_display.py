"""Display objects in the scikit-learn manner, for every analysis in analyses.ANALYSES:

* ``Result.plot(ax=None, **kwargs)`` draws the headline panel on the one Axes it is given (or a new one) and
  returns that Axes; two analyses share ``plt.subplots(1, 2)`` side by side;
* on the caller's Axes the caller's rcParams rule: tick labels, axis labels, titles and legend texts have the
  rc sizes, the lines take the Axes' colour cycle, nothing is coloured or gridded by the suite; ``color=``,
  ``label=`` and ``linewidth=`` reach the drawn artists, whose data are the Result's numbers; two results of
  one analysis overlay with a legend entry each (a heatmap refuses a second result);
* every figure its declaration lists (``Analysis.figures``) takes ``fig=`` (a Figure or a SubFigure) and draws
  only there, every module-level ``plot*`` figure function is one of them (so each is drawn and tested), and
  every text it writes scales with the rcParams (no fixed font size); the suite's saved figures draw under
  its theme, and its multi-model figures never give two models one colour;
* no plot call changes matplotlib's global rcParams (the theme is a context manager).

Results are read from small saved documents (the on-disk layout every version must read back), so no
model runs here; an analysis without such a document (a new one) is drawn from its declaration's tiny run.
What each check expects comes from the declaration: the numbers ``Result.plotted_values()`` says ``plot`` draws
first, and ``Result.HEATMAP`` for a plot of one image (``cmap=``, ``colorbar=``; it refuses a second result). The
checks of one analysis are :data:`PER_ANALYSIS` (:func:`display_checks` runs them on any registered name).
"""

from __future__ import annotations

import dataclasses
import inspect
import tempfile

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from cycler import cycler  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.font_manager import FontProperties  # noqa: E402

import analyses  # noqa: E402
from analyses import style  # noqa: E402
from probes.errors import ProbeError  # noqa: E402

L, BINS = 3, 20


def _identity(name: str, **config) -> dict:
    return {"model_name": name, "config": {"seed": 0, "corpus": "default", **config},
            "model": {"name": name, "sentence_vector": "mean"}, "activations": {"key": "k"}, "corpus": None}


def _summary(mean: float) -> dict:
    counts = np.round(np.exp(-((np.linspace(-1, 1, BINS) - mean) ** 2) / 0.05) * 100).astype(int)
    return {"n_vectors": 20, "n_pairs": int(counts.sum()), "mean": mean, "std": 0.1, "frac_negative": 0.05,
            "quantiles": {"0.5": mean}, "quantile_method": "exact", "counts": counts.tolist()}


def anisotropy(name="m-a"):
    layers = [{"layer": lyr, "token": _summary(0.1 * lyr), "sentence": _summary(0.2 + 0.1 * lyr),
               "baseline_cosine": 0.1 * lyr, "self_similarity": 0.5, "intra_sentence_similarity": 0.4,
               "intra_sentence_adjusted": 0.4 - 0.1 * lyr, "mev": 0.2} for lyr in range(L + 1)]
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
            "matrices": {"cka": mats, "rsa": mats}, "svcca_dims": {"a": [4] * (L + 1), "b": [2] * 3},
            "constant_columns": {"a": [0] * (L + 1), "b": [0] * 3}, "alignment": {"n_texts": 20},
            "definitions": {}}


def probing(name="m-d"):
    row = lambda lyr: {"layer": lyr, "accuracy": 0.5 + 0.1 * lyr, "ci_low": 0.4, "ci_high": 0.9,  # noqa: E731
                       "majority": 0.3, "C": 1.0, "n_params": 9, "control_accuracy": 0.4, "selectivity": 0.2,
                       "selectivity_ci_low": 0.1,
                       "selectivity_ci_high": 0.3}
    tasks = [{"task": "sentence_length", "level": "sentence", "n_items": 100, "n_train": 80, "n_test": 20,
              "n_classes": 3, "layers": [row(lyr) for lyr in range(L + 1)]},
             {"task": "position", "level": "token", "n_items": 400, "n_train": 300, "n_test": 100,
              "n_classes": 4, "layers": [row(lyr) for lyr in range(L + 1)]}]
    return {**_identity(name), "scikit_learn": "1", "definitions": {}, "tasks": tasks}


def maps(name="m-e"):
    n, K = 4, 2
    att = {"token_axes": 2, "heads": K, "layers": L, "n_texts": 4, "n_queries": 16,
           "captured_row_sums": {"min": 1.0, "max": 1.0, "mean": 1.0}, "offsets": [-1, 0, 1],
           "offset_profile_overall": [0.3, 0.4, 0.3], "offset_profile": [[0.3, 0.4, 0.3]] * L,
           "mass_beyond_max_offset": [0.0] * L, "local_share": [[0.6, 0.7]] * L, "local_share_by_layer": [0.65] * L,
           "local_share_overall": 0.65, "local_share_uniform": 0.5, "example_means": [np.full((n, n), 1 / n).tolist()],
           "grid": np.full((L, K, n, n), 1 / n).tolist()}
    gates = {"token_axes": 1, "layers": L, "kind": "per-token component values", "components": ["i", "f"],
             "n_texts": 4, "n_tokens": 16, "captured_sums": {"over": "components", "min": 1.0, "max": 1.0, "mean": 1.0},
             "position_bin_edges": [0.0, 0.5, 1.0], "position_tokens": [8, 8],
             "position_profile": [[[0.4, 0.4], [0.6, 0.6]]] * L, "component_mean": [[0.4, 0.6]] * L,
             "component_mean_overall": [0.4, 0.6], "example_maps": [np.full((L, K, n), 0.5).tolist()]}
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
            "statistics": {"n_contexts": 12, "mean_jsd_a": 0.3, "mean_jsd_b": 0.4, "median_difference": -0.1,
                           "n_a_less": 7, "n_a_greater": 5, "n_ties": 0, "share_a_less": 0.6, "sign_test_p": 0.01,
                           "sign_test_p_a_less": 0.005, "wilcoxon_p": 0.02, "wilcoxon_p_a_less": 0.01},
            "topics_top_words": [["w"]], "jsd_a": rng.uniform(0, 1, 12).tolist(),
            "jsd_b": rng.uniform(0, 1, 12).tolist(), "jsd_reference": rng.uniform(0, 1, 12).tolist()}


def speed(name="m-i"):
    rows = [{"length": n, "median_s": 1e-4 * n, "min_s": 1e-4 * n, "max_s": 1e-4 * n, "samples_s": [1e-4 * n],
             "loops_per_sample": 1, "tokens_per_s": 1e4, "speedup_vs_reference": 1.0} for n in (16, 32, 64)]
    return {**_identity(name, fit_min_length=16), "reference": name, "reference_median_s": {}, "definitions": {},
            "fit_lengths": [16, 32, 64], "slope": 1.0, "intercept": -9.2, "local_slopes": [1.0, 1.0],
            "crossover": None, "rows": rows, "machine": {}}


def causal_probing(name="m-j"):
    def method(lyr):
        return {"rank": 2, "accuracy": 0.3, "accuracy_ci": [0.25, 0.35], "random_accuracy": 0.6,
                "random_accuracy_ci": [0.5, 0.7], "delta_loss": 0.1 * lyr, "delta_loss_ci": [0.0, 0.2 * lyr + 0.1],
                "random_delta_loss": 0.01, "random_delta_loss_ci": [0.0, 0.02], "excess_loss": 0.1 * lyr - 0.01,
                "excess_loss_ci": [0.1 * lyr - 0.05, 0.1 * lyr + 0.03]}

    rows = [{"layer": lyr, "majority": 0.3, "accuracy": 0.6 + 0.05 * lyr, "accuracy_ci": [0.5, 0.8],
             "leace": method(lyr), "inlp": {**method(lyr), "iterations": 2, "dev_accuracy": [0.6, 0.3],
                                            "dev_majority": 0.3}} for lyr in range(L + 1)]
    return {**_identity(name), "scikit_learn": "1", "definitions": {},
            "objective": {"objective": "masked-LM", "loss": 5.0, "loss_ci": [4.9, 5.1]},
            "tasks": [{"task": "position", "n_items": 100, "n_train": 75, "n_test": 25, "n_classes": 3,
                       "classes": ["a", "b", "c"], "notes": {}, "layers": rows}]}


# a saved document of each analysis (the layout every version must read back)
BUILDERS = {f.__name__: f for f in (anisotropy, transitions, redundancy, similarity, probing, maps, mog, mog_lens,
                                    perplexity, topics, speed, causal_probing)}
NAMES = list(analyses.ANALYSES)


def _module(name: str):
    return __import__(analyses.ANALYSES[name], fromlist=["_"])


_RESULTS: dict[int, tuple] = {}  # id of a declaration -> (the declaration, its result): computed once
_OUT = tempfile.TemporaryDirectory(prefix="display-")  # the tiny runs' outputs; removed when the process ends


def _result(name: str):
    """A result of ``name``: its saved document above, else its declaration's tiny run (``Analysis.example``),
    made once per declaration (a test's own analysis registered under a name another test used is made anew)."""
    decl = analyses.get(name)
    if id(decl) in _RESULTS:
        return _RESULTS[id(decl)][1]
    if name in BUILDERS:
        result = decl.Result.from_json(BUILDERS[name]())
    else:
        from probes.config import parse_config

        cfg = parse_config(decl.Config, [*decl.example, "--out", tempfile.mkdtemp(prefix=f"{name}-", dir=_OUT.name)])
        unit = decl.inputs.units(cfg)[0]
        inputs = decl.inputs.load(tuple(map(decl.inputs.resolve, unit)), cfg)
        result = decl.inputs.results(decl.compute(cfg, **inputs))[0]
    _RESULTS[id(decl)] = (decl, result)
    return result


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
    """Result.plot leaves rcParams as they were (the declared figures: test_figure_texts_scale_with_the_rcparams,
    which draws each of them anyway)."""
    result = _result(name)
    before = dict(matplotlib.rcParams)
    ax = result.plot()
    assert dict(matplotlib.rcParams) == before, f"{name}: Result.plot changed rcParams"
    assert _drawn(ax) > 0
    plt.close(ax.figure)


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
    assert _legend_texts(ax1)[0].startswith("m-a, layer 3") and ax2.images
    assert ax1.get_title() == ""  # the model is named in the legend: the caller's title stays free
    assert ax1.xaxis._major_tick_kw.get("gridOn") == grid_before  # the user's axes keep their own style
    plt.close(fig)


@pytest.mark.parametrize("name", NAMES)
def test_no_title_on_a_callers_axes_unless_asked(name):
    """Like scikit-learn's Displays, ``Result.plot`` sets no title on the caller's Axes: the caller's own title and
    panel letter stay as they were (a title of the suite's would collide with them); ``title=`` sets one."""
    result = _result(name)
    fig, (ax, asked) = plt.subplots(1, 2)
    ax.set_title("my title")
    ax.set_title("(a)", loc="left")
    options = {"colorbar": False} if result.HEATMAP else {}
    result.plot(ax=ax, **options)
    assert [ax.get_title(loc=loc) for loc in ("left", "center", "right")] == ["(a)", "my title", ""], name
    result.plot(ax=asked, title="asked for", **options)
    assert [asked.get_title(loc=loc) for loc in ("left", "center", "right")] == ["", "asked for", ""], name
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


# ----------------------------------------------------------------------------- the caller's style

CYCLE = ["#117733", "#882255", "#44aa99", "#ddcc77"]  # a user's colour cycle, none of the suite's colours
USER_RC = {"font.size": 13, "axes.prop_cycle": cycler(color=CYCLE)}
LINE_PLOTS = [n for n in NAMES if not analyses.get(n).Result.HEATMAP]  # a heatmap: no lines, no overlay


def _size(key: str) -> float:
    """The size in points that rcParams[key] gives now (a relative size such as "large" resolved)."""
    return FontProperties(size=matplotlib.rcParams[key]).get_size_in_points()


def _legend_texts(ax) -> list[str]:
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def _named(ax, label: str) -> list:
    """The artists the legend names ``label`` or ``label: <series>`` / ``label (<series>)``."""
    return [a for a, text in zip(*ax.get_legend_handles_labels())
            if text == label or text.startswith((f"{label}: ", f"{label} (", f"{label}, "))]


def _artist(a):
    from matplotlib.container import ErrorbarContainer

    return a.lines[0] if isinstance(a, ErrorbarContainer) else a


def _colour(a) -> str:
    from matplotlib.lines import Line2D

    a = _artist(a)
    if isinstance(a, Line2D):
        return to_hex(a.get_color())
    face = a.get_facecolor()
    return to_hex(face[0] if np.ndim(face) == 2 else face)


def _width(a) -> float:
    return float(np.ravel(_artist(a).get_linewidth())[0])


def _data(a) -> np.ndarray:
    """The numbers an artist shows: a line's y (an error bar's x: its point is drawn along x), a histogram's
    heights, a scatter's (x, y) offsets."""
    from matplotlib.container import ErrorbarContainer
    from matplotlib.lines import Line2D
    from matplotlib.patches import StepPatch

    if isinstance(a, ErrorbarContainer):
        return np.asarray(a.lines[0].get_xdata(), float)
    if isinstance(a, Line2D):
        return np.asarray(a.get_ydata(), float)
    if isinstance(a, StepPatch):
        return np.asarray(a.get_data().values, float)
    return np.asarray(a.get_offsets(), float)


def _nan(values) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], float)


def _renamed(result, name: str):
    return dataclasses.replace(result, identity=dataclasses.replace(result.identity, model_name=name))


@pytest.mark.parametrize("name", NAMES)
def test_result_plot_follows_the_callers_rcparams(name):
    """Under the caller's rc context: every tick label, axis label, title and legend text of the panel (its
    colour bar's included) has the rc size and colour, the result takes the cycle's first colour, the grid is
    the caller's, and rcParams are unchanged."""
    result = _result(name)
    with plt.rc_context(USER_RC):
        before = dict(matplotlib.rcParams)
        fig, ax = plt.subplots()
        result.plot(ax=ax)
        fig.draw_without_rendering()  # every tick made, as shown (the whole draw but the rasterizing)
        text_colour = to_hex(matplotlib.rcParams["text.color"])
        for a in fig.axes:
            for tick in (*a.get_xticklabels(), *a.get_yticklabels()):
                assert tick.get_size() == _size("xtick.labelsize") == 13, f"{name}: tick {tick.get_text()!r}"
            for label in (a.xaxis.label, a.yaxis.label):
                assert label.get_size() == _size("axes.labelsize") == 13, f"{name}: {label.get_text()!r}"
                assert to_hex(label.get_color()) == text_colour, f"{name}: {label.get_text()!r} coloured"
            for title in (a.title, a._left_title, a._right_title):
                assert title.get_size() == _size("axes.titlesize"), f"{name}: title {title.get_text()!r}"
                assert to_hex(title.get_color()) == text_colour, f"{name}: title {title.get_text()!r} coloured"
            assert not any(g.get_visible() for g in (*a.get_xgridlines(), *a.get_ygridlines())), f"{name}: grid"
        if not result.HEATMAP:
            legend = ax.get_legend()
            assert legend is not None and [t.get_size() for t in legend.get_texts()] == [13] * len(legend.texts)
            assert legend.get_title().get_size() == 13
            drawn = _named(ax, style.display_name(result.model_name))
            assert drawn and {_colour(a) for a in drawn} == {CYCLE[0]}, f"{name}: not the cycle's first colour"
        assert dict(matplotlib.rcParams) == before, f"{name}: Result.plot changed rcParams"
    plt.close(fig)


@pytest.mark.parametrize("name", NAMES)
def test_drawn_data_are_the_results_numbers(name):
    result = _result(name)
    fig, ax = plt.subplots()
    result.plot(ax=ax)
    if result.HEATMAP:
        np.testing.assert_allclose(ax.images[0].get_array(), result.plotted_values())
    else:
        first = _named(ax, style.display_name(result.model_name))[0]
        np.testing.assert_allclose(_data(first), result.plotted_values(), equal_nan=True)
    plt.close(fig)


@pytest.mark.parametrize("name", NAMES)
def test_keywords_reach_the_artists(name):
    """``color=``, ``label=`` and ``linewidth=`` go to the result's main artists (``cmap=`` to a heatmap)."""
    result = _result(name)
    fig, ax = plt.subplots()
    if result.HEATMAP:
        result.plot(ax=ax, cmap="viridis", colorbar=False)
        assert ax.images[0].get_cmap().name == "viridis"
    else:
        result.plot(ax=ax, color="red", label="x", linewidth=3.5)
        drawn = _named(ax, "x")
        assert drawn, f"{name}: no legend entry 'x' in {_legend_texts(ax)}"
        assert any(t == "x" or t.startswith(("x: ", "x (")) for t in _legend_texts(ax))
        assert {_colour(a) for a in drawn} == {"#ff0000"} and {_width(a) for a in drawn} == {3.5}
        assert not _named(ax, style.display_name(result.model_name))  # the label replaced the model's name
    plt.close(fig)


@pytest.mark.parametrize("name", NAMES)
def test_two_results_overlay_on_one_axes(name):
    """Two results of one analysis on one Axes: a legend entry each, the cycle's first and second colours,
    both results' numbers drawn; a heatmap refuses the second result with one clear error."""
    first, second = _result(name), _renamed(_result(name), "other-model")
    with plt.rc_context(USER_RC):
        fig, ax = plt.subplots()
        first.plot(ax=ax)
        if first.HEATMAP:
            with pytest.raises(ProbeError, match="does not overlay"):
                second.plot(ax=ax)
            plt.close(fig)
            return
        second.plot(ax=ax)
        mine, theirs = _named(ax, style.display_name(first.model_name)), _named(ax, "other-model")
        assert mine and theirs, f"{name}: legend {_legend_texts(ax)}"
        assert {_colour(a) for a in mine} == {CYCLE[0]} and {_colour(a) for a in theirs} == {CYCLE[1]}
        texts = _legend_texts(ax)
        assert any(t.startswith(style.display_name(first.model_name)) for t in texts)
        assert any(t.startswith("other-model") for t in texts)
        np.testing.assert_allclose(_data(theirs[0]), second.plotted_values(), equal_nan=True)
    plt.close(fig)


def _text_sizes(fig) -> set[float]:
    """The sizes of every text of ``fig`` as drawn: the whole draw (tick labels made) without rasterizing, and
    without the layout engine (it places texts, never sizes them: the same sizes in 60% of the time)."""
    from matplotlib.text import Text

    fig.set_layout_engine("none")
    fig.draw_without_rendering()
    return {round(t.get_size(), 3) for t in fig.findobj(Text)}


@pytest.mark.parametrize("name", NAMES)
def test_figure_texts_scale_with_the_rcparams(name):
    """Every text of every figure (titles, labels, ticks, legends, notes, token labels) takes its size from
    the rcParams: with every rc size doubled, every size in the figure doubles (a fixed size would not). Drawing a
    figure leaves the rcParams as they were."""
    result = _result(name)
    for figure in analyses.get(name).figures:
        sizes = []
        for scale in (1, 2):
            with plt.rc_context({k: v * scale for k, v in style.SIZES.items()}):
                before = dict(matplotlib.rcParams)
                fig = figure.render([result])
                sizes.append(_text_sizes(fig))
                assert dict(matplotlib.rcParams) == before, f"{name}: {figure.name} changed rcParams"
                plt.close(fig)
        assert {round(2 * s, 3) for s in sizes[0]} == sizes[1], f"{name}: {figure.name} has fixed sizes"


# the checks of one analysis, each a function of its registered name
PER_ANALYSIS = (test_plots_leave_rcparams_unchanged, test_result_plot_draws_on_the_given_axes_only,
                test_no_title_on_a_callers_axes_unless_asked, test_figures_draw_into_a_given_subfigure,
                test_result_plot_follows_the_callers_rcparams, test_drawn_data_are_the_results_numbers,
                test_keywords_reach_the_artists, test_two_results_overlay_on_one_axes,
                test_figure_texts_scale_with_the_rcparams)


def display_checks(name: str) -> None:
    """Every display check of this file on analysis ``name`` (tests/test_declaration.py runs them on a new one)."""
    for check in PER_ANALYSIS:
        check(name)


def test_saved_figures_take_the_suite_theme(tmp_path, monkeypatch):
    """The suite's own figures (the command line, probes figures, the report) draw under style.theme: the
    paper's sizes; the caller's rcParams are back afterwards."""
    from analyses import common

    drawn = {}

    def capture(fig, out, stem):
        ax = fig.axes[0]
        fig.canvas.draw()
        drawn[stem] = (ax.get_xticklabels()[0].get_size(), ax.xaxis.label.get_size(), ax.title.get_size())
        return []

    monkeypatch.setattr(common, "save_figure", capture)
    before = dict(matplotlib.rcParams)
    analyses.get("transitions").save_figures([_result("transitions")], tmp_path)
    want = tuple(style.SIZES[k] for k in ("xtick.labelsize", "axes.labelsize", "axes.titlesize"))
    assert drawn == {"transitions": want, "transitions-cosines": want}
    assert dict(matplotlib.rcParams) == before


def test_a_users_model_never_shares_a_colour_with_the_suites_models():
    """'my-bert' hashes to bert-small's palette slot: in one figure it takes a colour no other model has, and the
    suite's models keep their fixed colours (two suite models of one slot are told apart too)."""
    from analyses import transitions as tr

    assert style.model_color("my-bert") == style.model_color("bert-small")  # the slot they would share
    colors = style.figure_colors(["my-bert", "bert-small", "bert-small-seed1"])
    assert colors["bert-small"] == colors["bert-small-seed1"] == style.model_color("bert-small")
    assert colors["my-bert"] != colors["bert-small"] and colors["my-bert"] in style.palette()
    pair = style.figure_colors(["gpt2-small-base", "bert-small"])
    assert len(set(pair.values())) == 2 and pair["gpt2-small-base"] == style.model_color("gpt2-small-base")
    fig = tr.plot([tr.Result.from_json(transitions("my-bert")), tr.Result.from_json(transitions("bert-small"))])
    lines = {ln.get_label(): to_hex(ln.get_color()) for ln in fig.axes[0].get_lines()}
    assert lines["bert-small"] == style.model_color("bert-small") and lines["my-bert"] != lines["bert-small"]
    plt.close(fig)


def _with_pooling(doc: dict, kind: str) -> dict:
    return {**doc, "model": {**doc["model"], "sentence_vector": kind}}


def test_sentence_vectors_made_differently_are_marked():
    """Models whose sentence vectors are made differently (a mean over tokens, the [CLS] state, the S-LSTM's node
    g) are told apart in the figures that show sentence vectors, and only where the figure mixes them."""
    Result = analyses.get("transitions").Result
    mixed = [Result.from_json(_with_pooling(transitions(n), k))
             for n, k in (("m-mean", "mean"), ("m-cls", "cls"), ("m-g", "g"))]
    fig = analyses.get("transitions").figures[0].render(mixed)
    labels = [t.get_text() for leg in [*fig.legends, *(ax.get_legend() for ax in fig.axes)] if leg
              for t in leg.get_texts()]
    assert {"m-mean (mean)", "m-cls ([CLS])", "m-g (sentence node)"} <= set(labels), labels
    plt.close(fig)
    alike = [Result.from_json(transitions(n)) for n in ("m-a", "m-b")]  # both "mean": plain names
    assert [d.label for d in style.in_figure(alike, pooling=True)] == ["m-a", "m-b"]
    assert [d.label for d in style.in_figure(mixed)] == ["m-mean", "m-cls", "m-g"]  # a token-only figure: no marks
    Aniso = analyses.get("anisotropy").Result
    fig = analyses.get("anisotropy").figures[0].render(
        [Aniso.from_json(_with_pooling(anisotropy(n), k)) for n, k in (("m-a", "mean"), ("m-b", "cls"))])
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == [f"m-a (layer {L}, mean)", f"m-b (layer {L}, [CLS])"]
    plt.close(fig)


def test_probing_marks_pooling_where_it_probes_sentence_vectors():
    """The accuracy figure probes sentence vectors (sent_len) as well as tokens: its legend says how each model
    makes them; the selectivity figure (token tasks only) keeps plain names."""
    Result = analyses.get("probing").Result

    def doc(name, kind):
        d = _with_pooling(probing(name), kind)
        return {**d, "tasks": [{**d["tasks"][0], "task": "sent_len"}, d["tasks"][1]]}

    results = [Result.from_json(doc(n, k)) for n, k in (("m-mean", "mean"), ("m-cls", "cls"))]
    figures = {f.name: f for f in analyses.get("probing").figures}
    for name, want in (("probing", ["m-mean (mean)", "m-cls ([CLS])"]), ("probing-selectivity", ["m-mean", "m-cls"])):
        fig = figures[name].render(results)
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        assert [t.get_text() for t in legends[0].get_texts()] == want, name
        plt.close(fig)
    unknown = dict(_with_pooling(transitions("m-b"), "cls"))
    unknown["model"] = {k: v for k, v in unknown["model"].items() if k != "sentence_vector"}
    said = analyses.get("transitions").Result.from_json(unknown)
    assert style.pooling_tags([analyses.get("transitions").Result.from_json(transitions("m-a")), said]) == ["", ""]


def test_similarity_heatmaps_mark_pooling_of_sentence_units():
    Result = analyses.get("similarity").Result
    doc = similarity()
    doc["models"] = doc["model"] = {"a": {"name": "m-a", "sentence_vector": "mean"},
                                    "b": {"name": "m-b", "sentence_vector": "cls"}}
    sentence, words = Result.from_json(doc), Result.from_json({**doc, "unit": "token"})
    fig = analyses.get("similarity").figures[0].render([sentence])
    assert "CKA: m-a (mean) x m-b ([CLS])" in [ax.get_title() for ax in fig.axes]
    plt.close(fig)
    ax = sentence.plot()  # on one Axes: no title (the axes name the models, the colour bar the measure)
    assert (ax.get_title(), ax.get_ylabel()) == ("", f"m-a (mean) (depth l/{L})")
    assert ax.get_xlabel().startswith("m-b ([CLS])")
    plt.close(ax.figure)
    assert words.sides() == (("m-a", L), ("m-b", 2))  # token units (words): no sentence vectors, no marks
