"""``Result.plot()`` without an Axes: the figure the suite makes itself fits its legend.

The panel's figure is small (about 3.5 x 2.8 in); a real model's legend entry, such as anisotropy's
"all-MiniLM-L6-v2, layer 6: mean 0.07, 26.2% < 0", is wider than that. On its own
figure the legend goes below the Axes, outside it, and the figure grows to hold it: for every analysis, with a
long model name, the legend lies inside the figure and clear of the Axes (its data area and tick labels),
and the data area keeps most of the panel's width. Two results drawn there share one legend. On the caller's
Axes nothing changes (tests/test_display.py)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import test_display as display  # noqa: E402 - its results of every analysis (saved documents, tiny runs)

from analyses import style  # noqa: E402

LONG = "all-MiniLM-L6-v2-finetuned-nli"  # a model folder's name as a user's may be


def _suite_legends(ax) -> list:
    return [*ax.figure.legends, *([ax.get_legend()] if ax.get_legend() else [])]


def _check_clear(ax) -> None:
    """The figure's one legend lies inside the figure, below the Axes and its tick labels."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()  # the layout as drawn (no rasterizing)
    (legend,) = _suite_legends(ax)
    box, figure, axes = legend.get_window_extent(renderer), fig.bbox, ax.get_tightbbox(renderer)
    assert figure.x0 - 1 <= box.x0 and box.x1 <= figure.x1 + 1 and figure.y0 - 1 <= box.y0, (box, figure)
    assert box.y1 <= axes.y0 + 1, (box, axes)  # below everything the Axes draws (its x label included)
    assert ax.get_window_extent(renderer).width >= 0.6 * fig.bbox.width  # the data area keeps the width


@pytest.mark.parametrize("name", display.LINE_PLOTS)
def test_a_long_models_legend_fits_the_figure_and_leaves_the_plot_clear(name):
    result = display._renamed(display._result(name), LONG)
    ax = result.plot()
    assert ax.get_legend() is None and len(ax.figure.legends) == 1  # the figure's legend, not the Axes'
    assert any(t.get_text().startswith(LONG)
               for t in ax.figure.legends[0].get_texts())
    _check_clear(ax)
    width, height = ax.figure.get_size_inches()
    display._renamed(display._result(name), "other-model").plot(ax=ax)  # a second result on the same Axes
    assert len(ax.figure.legends) == 1 and len(ax.figure.legends[0].get_texts()) >= 2
    _check_clear(ax)
    assert ax.figure.get_size_inches()[1] > height and ax.figure.get_size_inches()[0] == pytest.approx(width)
    plt.close(ax.figure)


def test_the_callers_axes_keep_their_own_legend():
    fig, ax = plt.subplots(figsize=(3, 2))
    display._renamed(display._result("anisotropy"), LONG).plot(ax=ax)
    assert ax.get_legend() is not None and not fig.legends
    assert tuple(fig.get_size_inches()) == (3, 2)
    plt.close(fig)


def test_a_short_legend_adds_only_its_height():
    ax = display._result("isoscore").plot()
    ax.figure.draw_without_rendering()
    (legend,) = ax.figure.legends
    width, height = ax.figure.get_size_inches()
    assert width == pytest.approx(3.8)  # the panel's width: the legend is narrower
    assert height == pytest.approx(2.9 + legend.get_window_extent().height / ax.figure.dpi + style.LEGEND_PAD)
    plt.close(ax.figure)


def test_an_own_figure_is_freed_when_closed():
    import gc
    import weakref

    ax = display._result("isoscore").plot()
    fig, axes = weakref.ref(ax.figure), weakref.ref(ax)
    plt.close(ax.figure)
    del ax
    gc.collect()
    assert fig() is None and axes() is None  # the record of its legend keeps neither alive
