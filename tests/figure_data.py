"""What a saved figure draws, for end-to-end tests: the figures come from conftest's ``drawn`` fixture (name ->
Figure, as the command saved it), the numbers from the result files the same command wrote."""

from __future__ import annotations

import numpy as np


def numbers(values) -> np.ndarray:
    """``values`` as floats, a missing value (None, a JSON null) as NaN."""
    return np.array([np.nan if v is None else v for v in values], float)


def line_drawing(ax, values, x=None):
    """The line of ``ax`` whose y data are ``values`` (and x data ``x`` when given), to float32 precision;
    fails naming the panel and what its lines draw."""
    want = numbers(values)
    for line in ax.get_lines():
        y = np.asarray(line.get_ydata(), float)
        if y.shape == want.shape and np.allclose(y, want, rtol=1e-6, atol=1e-9, equal_nan=True):
            if x is None or np.allclose(np.asarray(line.get_xdata(), float), numbers(x), rtol=1e-6, atol=1e-9):
                return line
    drawn = [np.round(np.asarray(ln.get_ydata(), float), 6).tolist() for ln in ax.get_lines()]
    raise AssertionError(f"no line of the panel {ax.get_title()!r} draws {want.tolist()}; its lines: {drawn}")
