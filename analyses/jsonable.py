"""A result's numbers as JSON holds them: the one rounding every result file is written with (read by the writer,
:mod:`analyses.files`, and by what must name a record as its file will hold it, :mod:`analyses.edited`).

    >>> jsonable({"x": 0.123456789123, "p": 1.23456789e-7, "nan": float("nan")})
    {'x': 0.12345679, 'p': 1.2345679e-07, 'nan': None}
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from analyses import records


def jsonable(x: Any, nulls: list | None = None, where: str = "") -> Any:
    """JSON-ready copy of ``x``: floats rounded to 8 decimals (8 significant digits below 1e-3); a
    non-finite float becomes None (null) and its place is appended to ``nulls``."""
    if isinstance(x, dict):
        return {str(k): jsonable(v, nulls, f"{where}/{k}") for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v, nulls, f"{where}/{i}") for i, v in enumerate(x)]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist(), nulls, where)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (float, np.floating)):
        if not math.isfinite(x):
            if nulls is not None:
                nulls.append(where)
            return None
        x = float(x)
        # 8 decimals; below 1e-3 8 significant digits instead, so that a small p-value or variance
        # is never written as 0 (a rounding that would change what the number says)
        return round(x, 8) if abs(x) >= 1e-3 else float(f"{x:.8g}")
    if (dataclasses.is_dataclass(x) and not isinstance(x, type)) or isinstance(x, records.Definitions):
        return jsonable(records.to_json(x), nulls, where)  # a record as its codec writes it
    if isinstance(x, Path):
        return str(x)
    return x
