"""A claim's course over training in a word, by the rule docs/definitions.md states ("over training").

Per comparison of a claim, from the seeds whose snapshots were analysed (:mod:`analyses.summary.trajectories`):
*stable* when every seed's paired difference has the sign it ends with at every point of the last half of
training (:data:`LAST_HALF` on: 1/2, 3/4 and the end); *still moving* when any seed's sign changes there. A claim
checked on point values (a :class:`~analyses.summary.claim.Check`) is *stable* when its verdict is the same at
every point of the last half.

    >>> over_training([{"points": [{"fraction": 0.5, "difference": -1.0}, {"fraction": 1.0, "difference": 2.0}]}])
    'still moving'
"""

from __future__ import annotations

import numpy as np

TRAJECTORY_FILE = "claims-over-training.json"  # in <out>/trajectories/: what the claims table reads when present
LAST_HALF = 0.5  # the rule looks at the points at or after this fraction of training
STABLE, MOVING, NONE = "stable", "still moving", "no trajectory"


def over_training(seeds: list[dict]) -> str:
    """:data:`STABLE` or :data:`MOVING` for seeds' ``points`` (``fraction``, ``difference``); :data:`NONE`
    without points."""
    moving = False
    for s in seeds:
        late = [p["difference"] for p in s["points"] if p["fraction"] >= LAST_HALF and p["difference"] is not None]
        if late:
            moving |= any(np.sign(d) != np.sign(late[-1]) for d in late)
    return NONE if not any(s["points"] for s in seeds) else MOVING if moving else STABLE


def check_over_training(points: list[dict]) -> str:
    """A check's course: :data:`STABLE` when its ``verdict`` at every point of the last half is the final one."""
    late = [p["verdict"] for p in points if p["fraction"] >= LAST_HALF]
    return NONE if not late else STABLE if all(v == late[-1] for v in late) else MOVING
