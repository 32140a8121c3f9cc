"""One look for every figure: a fixed colour per model, one theme, relative depth on shared axes.

* :func:`model_color` gives every model the same colour in every figure. Colours come from
  seaborn's ``colorblind`` palette (Wong's colour-blind-safe set); the models of the demo and the
  registry's common names have fixed slots, any other name gets a slot from a hash of its name, so
  a colour never depends on which other models share the figure.
* :func:`theme` is the one theme (seaborn's ``ticks`` style, paper context) as a context manager;
  every ``plot`` function and ``Result.plot`` method draws under it through :func:`themed`, so no
  plot call changes matplotlib's global rcParams (a user's later figures keep their own style).
* :func:`new_figure` / :func:`one_axes` honour a ``fig=`` (Figure or SubFigure) or ``ax=`` (one Axes)
  given by the caller and make a new figure only when none is given.
* :func:`relative_depth` puts models of different depth on one axis (layer / L).

    $ python -c "from analyses.style import model_color; print(model_color('minilm-l6'))"
"""

from __future__ import annotations

import contextlib
import functools
import hashlib

import numpy as np

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


def model_color(name: str) -> str:
    """The colour of ``name`` in every figure (a hex string); a seed variant (``bert-small-seed1``) has
    its model's colour (:func:`seed_style` tells it apart)."""
    colors = palette()
    name = seed_of(name)[0]
    if name in FIXED:
        return colors[FIXED[name]]
    slot = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") % len(colors)
    return colors[slot]


def seed_style(name: str) -> dict:
    """Line keywords that tell a model's seed variants apart in one colour: seed 0 solid, seed 1 dashed,
    seed 2 dotted, later seeds dash-dotted."""
    return {"linestyle": ("-", "--", ":", "-.")[min(seed_of(name)[1], 3)]}


def legend(axes, n_models: int, **kwargs):
    """The models' legend on the first of ``axes`` or, for more than four models (whose long legend would hide
    the first panel's lines), beside the last one. ``kwargs`` go to ``Axes.legend``."""
    if n_models > 4:
        return axes[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), **kwargs)
    return axes[0].legend(**kwargs)


def theme_rc() -> dict:
    """The theme's rcParams: seaborn ``ticks`` style, ``paper`` context (font scale 1.1), the ``deep``
    colour cycle, a light grid, 200 dpi when saved."""
    import seaborn as sns
    from cycler import cycler

    return {**sns.axes_style("ticks"), **sns.plotting_context("paper", font_scale=1.1),
            "axes.prop_cycle": cycler(color=sns.color_palette("deep")), "font.family": ["sans-serif"],
            "axes.grid": True, "grid.alpha": 0.3, "savefig.dpi": 200}


@contextlib.contextmanager
def theme():
    """Draw under the one theme; matplotlib's rcParams are restored on exit (``matplotlib.rc_context``)."""
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
    """Make each axis's first tick now, inside the theme: matplotlib creates ticks lazily (at draw
    time, from the rcParams of that moment) and copies later ones from the first."""
    for ax in _all_axes(obj):
        for axis in (ax.xaxis, ax.yaxis):
            axis.majorTicks, axis.minorTicks  # noqa: B018 - touching the lazy lists creates the first tick


def themed(draw):
    """Decorator: run a plot function under :func:`theme` and settle the ticks of what it returns
    (a Figure, SubFigure or Axes)."""
    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        with theme():
            drawn = draw(*args, **kwargs)
            _settle_ticks(drawn)
        return drawn

    return wrapper


def new_figure(fig=None, figsize: tuple[float, float] = (6.4, 4.0)):
    """``fig`` (a Figure or SubFigure to draw into) or, when None, a new constrained-layout figure."""
    if fig is not None:
        if not hasattr(fig, "subplots"):
            raise TypeError(f"fig= takes a matplotlib Figure or SubFigure, not {type(fig).__name__} "
                            "(for one Axes, use the Result's .plot(ax=ax))")
        return fig
    import matplotlib.pyplot as plt

    return plt.figure(figsize=figsize, layout="constrained")


def one_axes(ax=None, figsize: tuple[float, float] = (4.2, 3.0)):
    """``ax`` (one Axes to draw on) or, when None, the Axes of a new figure."""
    if ax is not None:
        if not hasattr(ax, "xaxis"):
            raise TypeError(f"ax= takes one matplotlib Axes, not {type(ax).__name__} "
                            "(for a multi-panel figure, use the module's plot(results, fig=fig))")
        return ax
    return new_figure(None, figsize).subplots()


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
