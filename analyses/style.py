"""How the suite draws: a Display-like ``Result.plot`` on the caller's Axes and style, and one look for the
suite's own figures.

Two kinds of drawing, two rules:

* **On the caller's Axes** (``Result.plot(ax=None, **kwargs)``, like scikit-learn's Displays): fonts, sizes
  and colours come from the caller's rcParams. A result takes the next colour of the Axes' property cycle
  (:func:`on_axes`), so two results drawn on one Axes differ, as two ``ax.plot`` calls do; ``color=``,
  ``label=``, ``linestyle=``, ``linewidth=``, ``marker=``, ``alpha=`` ... go to its main artists. Each call
  labels its artists with the model's name (or the ``label=`` given) and draws the legend of every labelled
  artist on the Axes (:func:`finish`), so results of one analysis overlay. No title names a model and no
  plot sets a font size, a grid or a colour of the Axes.
* **The suite's own multi-model figures** (module-level ``plot(results, fig=None)`` and ``plot_*``): every
  model has a colour of its own in the figure (:func:`in_figure`, :func:`figure_colors`): the suite's models
  keep a fixed colour in every figure, a seed variant its model's colour with its own line style
  (:func:`seed_style`), and any other model a colour no other model of that figure has.

:func:`theme` is the suite's paper look (seaborn's ``ticks`` style, paper context, 7-9 pt text) as a
context manager; the suite draws its saved figures under it (:meth:`analyses.analysis.Analysis.save_figures`:
the command line, ``probes figures``, ``make demo``, the report). Anyone may use it::

    with style.theme():
        fig = anisotropy.plot(results)

Nothing here changes matplotlib's global rcParams. :func:`new_figure` / :func:`one_axes` honour a ``fig=``
(Figure or SubFigure) or ``ax=`` (one Axes) and make a new figure only when none is given (a panel's own
figure puts its legend below the panel and grows to hold it: :func:`finish`);
:func:`relative_depth` puts models of different depth on one axis (layer / L).

    $ python -c "from analyses.style import model_color; print(model_color('minilm-l6'))"
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar, cast

import numpy as np

from analyses.model_info import ModelInfo
from analyses.stats import seed_of

# Fixed slots (indices into the 10-colour palette) for the names the demo and README use.
FIXED = {  # colorblind palette: 0 blue, 1 orange, 2 green, 3 vermillion, 4 pink, 5 tan, 6 light pink, 7 grey,
    #          8 yellow, 9 sky blue; the demo's encoders get the six most distinct
    "minilm-l6": 0, "slstm-small": 1, "bert-small": 2, "albert-small": 4, "mpnet-base": 7, "mog-small": 9,
    "mog-small-sum": 5, "mog-small-selfgate": 8, "mog-small-wg": 3, "mog-small-6l": 6,
    "gpt2-small-base": 2, "gpt2-small-recurrent": 1, "smollm2-135m": 3, "gemma3-270m": 5,
    "minilm-l6-lens": 0, "bert-small-lens": 2,
    # the panel (make panel): its five encoders and two causal LMs get seven different colours
    "minilm-l3": 9, "me5-small": 2, "nomic-embed": 4, "minilm-l3-lens": 9, "me5-small-lens": 2,
    # the tests' tiny models: pairs drawn together get different colours
    "tiny-bert": 0, "tiny-slstm": 1, "tiny-albert": 4, "tiny-mog": 9, "tiny-gpt2": 2, "tiny-gpt2-recurrent": 1,
    "tiny-bert-lens": 0, "tiny-convbert": 3, "tiny-llama": 7, "tiny-gemma3": 5,
    # analyses.speed's random-init architectures, coloured like their trained counterparts
    "slstm": 1, "bert": 2, "albert": 4,
}


def palette() -> list[str]:
    """The 10 colour-blind-safe colours, as hex strings."""
    import seaborn as sns

    return sns.color_palette("colorblind", 10).as_hex()


def _slot(name: str) -> int:
    """The palette slot a model prefers: its fixed one, else one from a hash of its name."""
    if name in FIXED:
        return FIXED[name]
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") % len(palette())


def model_color(name: str) -> str:
    """The colour ``name`` prefers (a hex string), whatever else is drawn: a fixed one for the suite's models, a
    slot from a hash of the name for any other; a seed variant (``bert-small-seed1``) has its model's colour
    (:func:`seed_style` tells it apart). A figure of several models draws with :func:`figure_colors`, which
    gives a model this colour unless another model of the figure has it."""
    return palette()[_slot(seed_of(name)[0])]


def figure_colors(names: Sequence[str]) -> dict[str, str]:
    """name -> colour for the models of one figure, no two models the same (up to 10 models): the suite's
    models keep their fixed colour (the first of two names that share a fixed slot keeps it), a seed variant
    its model's, and any other model its :func:`model_color` when no model of the figure has it, else the
    first colour none has."""
    colors = palette()
    models = list(dict.fromkeys(seed_of(n)[0] for n in names))
    slots: dict[str, int] = {}
    for fixed_first in (True, False):
        for m in models:
            if m in slots or (m in FIXED) != fixed_first:
                continue
            used = set(slots.values())
            free = [s for s in range(len(colors)) if s not in used]
            slots[m] = _slot(m) if _slot(m) not in used or not free else free[0]
    return {n: colors[slots[seed_of(n)[0]]] for n in names}


def seed_style(name: str) -> dict:
    """Line keywords that tell a model's seed variants apart in one colour: seed 0 solid, seed 1 dashed,
    seed 2 dotted, later seeds dash-dotted."""
    return {"linestyle": ("-", "--", ":", "-.")[min(seed_of(name)[1], 3)]}


# ----------------------------------------------------------------------------- what a result is drawn with


def _normalized(kwargs: dict, artist=None) -> dict:
    """``kwargs`` with matplotlib's aliases spelled out (``c`` -> ``color``, ``lw`` -> ``linewidth`` ...) for
    ``artist`` (a class; default Line2D), None values dropped."""
    from matplotlib import cbook
    from matplotlib.lines import Line2D

    return {k: v for k, v in cbook.normalize_kwargs(dict(kwargs), artist or Line2D).items() if v is not None}


class Drawn(NamedTuple):
    """One result as a figure or ``Result.plot`` draws it: ``kw``, the keywords of its main artists (colour,
    label and the caller's keywords, aliases spelled out); ``band``: whether its interval band is drawn (a
    figure draws one band per model, its seed-0 run's)."""

    result: Any
    kw: dict
    band: bool = True

    @property
    def color(self):
        """The colour of the main artists: what the interval bands, bars and reference marks take."""
        return next((self.kw[k] for k in ("color", "c", "facecolor", "edgecolor") if k in self.kw), "C0")

    @property
    def label(self) -> str:
        return str(self.kw.get("label", ""))

    def line(self, artist=None, **defaults) -> dict:
        """The main artist's keywords: ``defaults`` (the suite's marker size, line width ...), then ``kw``."""
        return {**_normalized(defaults, artist), **self.kw}

    def series(self, k: int, name: str, **defaults) -> dict:
        """Keywords of the ``k``-th of several lines of one result (buckets, terms, map kinds): the result's
        colour and keywords, a marker and line style per series (unless the caller fixed them), the label
        ``"<label>: <name>"``."""
        kw = {**_normalized({"marker": MARKERS[k % len(MARKERS)], "linestyle": LINESTYLES[k % len(LINESTYLES)],
                             **defaults}), **self.kw}
        return {**kw, "label": f"{self.label}: {name}" if self.label else name}

    @property
    def quiet(self) -> dict:
        """Keywords of a secondary artist (a band's edge, a mean line): its colour, no legend entry."""
        return {"color": self.color, "label": "_nolegend_"}


MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", ":", "-.")


def in_figure(results: Sequence, names: Sequence[str] | None = None, pooling: bool = False) -> list[Drawn]:
    """The suite's multi-model figures: each result in its model's colour of this figure
    (:func:`figure_colors`; ``names``: the name that picks each result's colour, default its model's), its
    seed's line style, labelled with its model's name; the band drawn for seed-0 runs only. ``pooling``: the
    figure shows sentence vectors, so where its models make them differently each label says how
    (:func:`pooling_tags`: "minilm-l6 (mean)", "bert-small ([CLS])")."""
    names = [r.model_name for r in results] if names is None else list(names)
    colors = figure_colors(names)
    hows = pooling_tags(results) if pooling else [""] * len(results)
    return [Drawn(r, {"color": colors[n], "label": display_name(r.model_name) + (f" ({how})" if how else ""),
                      **seed_style(r.model_name)}, band=not seed_of(r.model_name)[1])
            for r, n, how in zip(results, names, hows)]


# a model's sentence vector (its registry `sentence:`, recorded in each result's model description) in a label
POOLING_TAGS = {"cls": "[CLS]", "mean": "mean", "mean_all": "mean incl. specials", "last": "last token",
                "g": "sentence node"}


def pooling_tags(results: Sequence) -> list[str]:
    """How each result's model makes its sentence vectors ("mean", "[CLS]", "sentence node") when the results
    make them in more than one way, else "" for each: side by side, such vectors differ by construction as well
    as by model, and a reader of the figure should see that."""
    models = [getattr(getattr(r, "identity", None), "model", None) for r in results]
    return pooling_words([m.sentence_vector if isinstance(m, ModelInfo) else None for m in models])


def pooling_words(kinds: Sequence[str | None]) -> list[str]:
    """:func:`pooling_tags` from the models' sentence-vector kinds (None: a result that does not say)."""
    if len(set(kinds) - {None}) < 2:  # one way, or only one result that says (none is marked then)
        return [""] * len(kinds)
    return [POOLING_TAGS.get(k, k) if k else "" for k in kinds]


def next_color(ax):
    """The next colour of ``ax``'s property cycle (and the cycle moves on, as a plot call without a colour
    moves it)."""
    lines: Any = getattr(ax, "_get_lines", None)
    if hasattr(lines, "get_next_color"):
        return lines.get_next_color()
    import matplotlib

    cycle = matplotlib.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])  # (not reached on matplotlib 3.x)
    return cycle[len(ax.get_legend_handles_labels()[0]) % len(cycle)]


def on_axes(ax, result, kwargs: dict, label: str | None = None, artist=None, colour_keys=("color",)) -> Drawn:
    """``Result.plot``: one result on the caller's Axes with the caller's ``kwargs`` (aliases spelled out for
    ``artist``, a matplotlib class, default Line2D); the label ``label`` (default: the model's name) unless
    the caller gives one; the next colour of the Axes' cycle unless the caller gives one of ``colour_keys``.
    ``title=`` among ``kwargs`` is the Axes' title, set here: like scikit-learn's Displays, a ``Result.plot``
    sets none unless asked, so a caller's own titles and panel letters stay as they are."""
    if kwargs.get("title") is not None:
        ax.set_title(kwargs["title"])
    kw = _normalized({k: v for k, v in kwargs.items() if k != "title"}, artist)
    kw.setdefault("label", display_name(result.model_name) if label is None else label)
    if not any(k in kw for k in colour_keys):
        kw["color"] = next_color(ax)
    return Drawn(result, kw)


def finish(ax, **legend):
    """End a ``Result.plot``: the legend of every labelled artist on ``ax`` (every result drawn there; sizes
    from rcParams; ``legend``: more keywords, such as ``title``). On the caller's Axes, the Axes' own legend.
    On the figure ``Result.plot`` made itself (no ``ax=``; :func:`one_axes`), a legend with a long model name
    would be wider than the small panel and cover it: there the legend goes below the Axes, outside it, and the
    figure grows by the legend's height (and to the legend's width), so the panel keeps its size
    (:func:`_legend_below`). Returns ``ax``."""
    handles, labels = ax.get_legend_handles_labels()
    if ax in _OWN_AXES:
        _legend_below(ax, handles, labels, legend)
    elif handles:
        ax.legend(**legend)
    return ax


# the Axes one_axes made for a Result.plot without ax= -> (their figure's size before a legend, a weak reference
# to the legend below; none of it refers back to the Axes, so the entry goes with the figure)
_OWN_AXES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
LEGEND_PAD = 0.08  # inches between the figure's edge and a legend below the panel


def _legend_below(ax, handles, labels, legend: dict) -> None:
    """The legend of an own figure (:func:`finish`): one figure legend below the Axes (constrained layout keeps
    it clear of the tick and axis labels), redrawn with every entry when another result is drawn on the same
    Axes; the figure's size is its size without a legend plus the legend's height (and at least the legend's
    width)."""
    fig = ax.figure
    size, ref = _OWN_AXES[ax]
    old = ref() if ref is not None else None
    if old is not None and old in fig.legends:
        old.remove()
    if not handles:
        _OWN_AXES[ax] = (size, None)
        return
    kwargs = {k: v for k, v in legend.items() if k not in ("loc", "bbox_to_anchor")}
    new = fig.legend(handles, labels, loc="outside lower center", **kwargs)
    _OWN_AXES[ax] = (size, weakref.ref(new))
    box = new.get_window_extent()  # display units (pixels at the figure's dpi)
    fig.set_size_inches(max(size[0], box.width / fig.dpi + 2 * LEGEND_PAD),
                        size[1] + box.height / fig.dpi + LEGEND_PAD)


def points(key: str = "font.size", scale: float = 1.0) -> float:
    """A font size in points derived from the rcParams in force: ``scale`` times ``rcParams[key]`` (a relative
    size such as "small" resolved against ``font.size``). For text that must stay smaller than its
    neighbours in a dense figure (a heatmap's token labels), so it follows the caller's sizes too."""
    import matplotlib
    from matplotlib.font_manager import FontProperties

    rc: dict = matplotlib.rcParams  # (its stubs accept literal keys only)
    return FontProperties(size=rc[key]).get_size_in_points() * scale


def legend(axes, **kwargs):
    """The models' legend beside the last of ``axes``, outside the panels: inside one it hides lines as soon as the
    labels are long (a seed, how a model pools, a band's note in the title), whatever the number of models.
    ``kwargs`` go to ``Axes.legend``."""
    return axes[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), **kwargs)


# ----------------------------------------------------------------------------- the suite's theme


# the suite's text sizes (points): the paper look of its saved figures
SIZES = {"font.size": 8, "axes.titlesize": 9, "axes.labelsize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7,
         "legend.fontsize": 7, "legend.title_fontsize": 6.5, "figure.titlesize": 10}


def theme_rc() -> dict:
    """The theme's rcParams: seaborn ``ticks`` style, ``paper`` context, the text sizes of :data:`SIZES`, the
    ``deep`` colour cycle, a light grid, 200 dpi when saved."""
    import seaborn as sns
    from cycler import cycler

    return {**sns.axes_style("ticks"), **sns.plotting_context("paper", font_scale=1.1), **SIZES,
            "axes.prop_cycle": cycler(color=sns.color_palette("deep")), "font.family": ["sans-serif"],
            "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.5, "savefig.dpi": 200}


@contextlib.contextmanager
def theme():
    """Draw under the suite's theme (its saved figures' look); matplotlib's rcParams are restored on exit
    (``matplotlib.rc_context``). A figure drawn inside keeps the theme's sizes when shown later
    (every plot function settles its ticks, :func:`drawing`)."""
    import matplotlib

    with matplotlib.rc_context(theme_rc()):
        try:
            yield
        finally:  # a backend first loaded inside (Jupyter's inline one) turns interactive mode on: that stays
            interactive = matplotlib.rcParams["interactive"]
    matplotlib.rcParams["interactive"] = interactive


def _all_axes(obj) -> list:
    """The Axes of an Axes, a Figure or a SubFigure (nested subfigures included)."""
    if hasattr(obj, "subfigs"):
        return [*obj.axes, *(a for sf in obj.subfigs for a in _all_axes(sf))]
    return [obj] if hasattr(obj, "xaxis") else []


def _settle_ticks(obj) -> None:
    """Make each axis's first tick now, under the rcParams of the call: matplotlib creates ticks lazily (at
    draw time, from the rcParams of that moment) and copies later ones from the first."""
    for ax in _all_axes(obj):
        for axis in (ax.xaxis, ax.yaxis):
            axis.majorTicks, axis.minorTicks  # noqa: B018 - touching the lazy lists creates the first tick


Draw = TypeVar("Draw", bound=Callable[..., Any])  # a plot function


def drawing(draw: Draw) -> Draw:
    """Decorator of every plot function: it draws under the rcParams in force (the caller's, or the suite's
    inside :func:`theme`) and settles the ticks of what it returns (a Figure, SubFigure or Axes), so that the
    figure keeps those sizes when shown after the ``with`` block. The decorated function keeps its signature for
    the type checker (a plot function given where a table's rows function is asked for fails make typecheck)."""
    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        drawn = draw(*args, **kwargs)
        _settle_ticks(drawn)
        return drawn

    return cast(Draw, wrapper)


# ----------------------------------------------------------------------------- figures and axes


def new_figure(fig=None, figsize: tuple[float, float] = (6.4, 4.0)):
    """``fig`` (a Figure or SubFigure to draw into) or, when None, a new constrained-layout figure."""
    if fig is not None:
        if not hasattr(fig, "subplots"):
            raise TypeError(f"fig= takes a matplotlib Figure or SubFigure, not {type(fig).__name__} "
                            "(for one Axes, use the Result's .plot(ax=ax))")
        return fig
    import matplotlib.pyplot as plt

    return plt.figure(figsize=figsize, layout="constrained")


def panel_grid(fig, n: int, cols: int = 3, panel: tuple[float, float] = (3.0, 2.6)):
    """(fig, axes): ``n`` panels (at least one) in rows of at most ``cols``, each about ``panel`` inches, in ``fig``
    (a Figure or SubFigure) or a new figure; the grid's unused places are hidden. axes: (rows * cols,)."""
    cols = min(max(n, 1), cols)
    rows = -(-max(n, 1) // cols)
    fig = new_figure(fig, (panel[0] * cols + 0.4, panel[1] * rows))
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes


def one_axes(ax=None, figsize: tuple[float, float] = (4.2, 3.0)):
    """``ax`` (one Axes to draw on) or, when None, the Axes of a new constrained-layout figure of ``figsize``
    (the panel's size: :func:`finish` adds the legend below it)."""
    if ax is not None:
        if not hasattr(ax, "xaxis"):
            raise TypeError(f"ax= takes one matplotlib Axes, not {type(ax).__name__} "
                            "(for a multi-panel figure, use the module's plot(results, fig=fig))")
        return ax
    ax = new_figure(None, figsize).subplots()
    _OWN_AXES[ax] = (tuple(figsize), None)
    return ax


def relative_depth(n_layers: int) -> np.ndarray:
    """(L+1,) layer l / L for l = 0..L: the x axis when models of different depth share a plot."""
    return np.arange(n_layers + 1) / max(n_layers, 1)


def display_name(name: str) -> str:
    """How a model is labelled in figures: its registry name as it is; a folder's ``dir--<folder>--<hash>``
    as ``<folder>`` and an ``hf--org--name[--rev]`` as ``org/name[@rev]`` (the hash only keeps file names apart)."""
    parts = str(name).split("--")
    if parts[0] == "dir" and len(parts) >= 3:
        return "--".join(parts[1:-1])
    if parts[0] == "hf" and len(parts) >= 2:
        org_name = [p for p in parts[1:] if not p.startswith("sentence-")]
        return "/".join(org_name[:2]).replace("_/", "") + (f"@{org_name[2]}" if len(org_name) > 2 else "")
    return str(name)
