"""Where a warning of the suite points: the first frame outside the suite's own packages, so that a warning names
the caller's line from Python, and no line of the suite's source on the command line.

    >>> isinstance(outside_stacklevel(), int)
    True
"""

from __future__ import annotations

import os
import sys
from types import FrameType


def outside_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning issued by the caller of this function name the first frame outside
    the suite (the packages ``analyses`` and ``probes``, and Python's ``-m`` runner): the line of a caller's own
    code from Python, and no line of the suite's source on the command line (there it points past the stack)."""
    root = os.path.dirname(os.path.dirname(__file__))  # spelled as the suite's modules' code objects spell it
    inside = tuple(os.path.join(root, package) + os.sep for package in ("analyses", "probes"))
    frame: FrameType | None = sys._getframe(1)  # the frame that warns: stacklevel 1
    level = 1
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith(inside) or "runpy" in name):
            return level
        frame, level = frame.f_back, level + 1
    return level  # past the outermost frame: warnings names "sys", with no source line
