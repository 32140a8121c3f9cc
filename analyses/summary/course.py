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


def last_half_change(seeds: list[dict]) -> float | None:
    """How the size of the difference moved over the last half, averaged over the seeds: (|d(end)| - |d(1/2)|) /
    |d(1/2)| (-0.2: a fifth smaller at the end than at half of training, heading towards 0; None without both
    points or with d(1/2) = 0). The rule reads signs; this says whether a kept sign is still shrinking."""
    changes = []
    for s in seeds:
        pts = [p for p in s["points"] if p["difference"] is not None]
        half = [p["difference"] for p in pts if abs(p["fraction"] - LAST_HALF) < 1e-9]
        if pts and half and pts[-1]["fraction"] == 1.0 and half[0] != 0:
            changes.append((abs(pts[-1]["difference"]) - abs(half[0])) / abs(half[0]))
    return float(np.mean(changes)) if changes else None


def describe(seeds: list[dict]) -> str:
    """The over-training cell of a comparison: the rule's word, the seeds it rests on (the moving ones named), and
    the change of the difference's size over the last half: "stable (seeds 1, 2; |A - B| -17% over the last half)"."""
    status = over_training(seeds)
    if status == NONE:
        return NONE
    names = ", ".join(str(s["seed"]) for s in seeds)
    which = f"seed{'s' if len(seeds) > 1 else ''} {names}"
    moving = [str(s["seed"]) for s in seeds if over_training([s]) == MOVING]
    if status == MOVING and len(moving) < len(seeds):
        which = f"seed{'s' if len(moving) > 1 else ''} {', '.join(moving)} of {which}"
    change = last_half_change(seeds)
    size = "" if change is None or status == MOVING else f"; size {change:+.0%} over the last half"
    return f"{status} ({which}{size})"


def check_over_training(points: list[dict]) -> str:
    """A check's course: :data:`STABLE` when its ``verdict`` at every point of the last half is the final one."""
    late = [p["verdict"] for p in points if p["fraction"] >= LAST_HALF]
    return NONE if not late else STABLE if all(v == late[-1] for v in late) else MOVING
