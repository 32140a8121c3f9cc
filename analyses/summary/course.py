"""A claim's course over training in a word, by the rule docs/definitions.md states ("over training").

Per comparison of a claim, from the seeds whose snapshots were analysed (:mod:`analyses.summary.trajectories`):
*stable* when every seed's paired difference has the sign it ends with at every point of the last half of
training (:data:`LAST_HALF` on: 1/2, 3/4 and the end); *still moving* when any seed's sign changes there. A claim
checked on point values (a :class:`~analyses.summary.claim.Check`) is *stable* when its verdict is the same at
every point of the last half.

A seed with no number in the last half (every difference there null) says nothing: it is left out, and
seeds none of which has one have no course (:data:`NONE`).

    >>> from analyses.summary.trajectory_doc import CoursePoint, CourseSeed
    >>> pts = [CoursePoint(0.5, 4, None, -1.0, None), CoursePoint(1.0, 8, None, 2.0, None)]
    >>> over_training([CourseSeed(0, "a", "b", {"a": None, "b": None}, pts)])
    'still moving'
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from analyses.summary.trajectory_doc import CheckPoint, CourseSeed

TRAJECTORY_FILE = "claims-over-training.json"  # in <out>/trajectories/: what the claims table reads when present
LAST_HALF = 0.5  # the rule looks at the points at or after this fraction of training
STABLE, MOVING, NONE = "stable", "still moving", "no trajectory"


def late(seed: CourseSeed) -> list[float]:
    """The seed's differences at the points of the last half of training that have one."""
    return [p.difference for p in seed.points if p.fraction >= LAST_HALF and p.difference is not None]


def over_training(seeds: Sequence[CourseSeed]) -> str:
    """:data:`STABLE` or :data:`MOVING` for the seeds with a number in the last half; :data:`NONE` when none has
    one."""
    numbers = [d for d in (late(s) for s in seeds) if d]
    if not numbers:
        return NONE
    return MOVING if any(np.sign(x) != np.sign(d[-1]) for d in numbers for x in d) else STABLE


def last_half_change(seeds: Sequence[CourseSeed]) -> float | None:
    """How the size of the difference moved over the last half, averaged over the seeds: (|d(end)| - |d(1/2)|) /
    |d(1/2)| (-0.2: a fifth smaller at the end than at half of training, heading towards 0; None without both
    points or with d(1/2) = 0). The rule reads signs; this says whether a kept sign is still shrinking."""
    changes = []
    for s in seeds:
        pts = [p for p in s.points if p.difference is not None]
        half = [p.difference for p in pts if abs(p.fraction - LAST_HALF) < 1e-9 and p.difference is not None]
        end = pts[-1].difference if pts and pts[-1].fraction == 1.0 else None
        if end is not None and half and half[0] != 0:
            changes.append((abs(end) - abs(half[0])) / abs(half[0]))
    return float(np.mean(changes)) if changes else None


def describe(seeds: Sequence[CourseSeed]) -> str:
    """The over-training cell of a comparison: the rule's word, the seeds it rests on (the moving ones named), and
    the change of the difference's size over the last half: "stable (seeds 1, 2; |A - B| -17% over the last half)".
    Seeds without a number in the last half are left out."""
    seeds = [s for s in seeds if late(s)]
    status = over_training(seeds)
    if status == NONE:
        return NONE
    names = ", ".join(str(s.seed) for s in seeds)
    which = f"seed{'s' if len(seeds) > 1 else ''} {names}"
    moving = [str(s.seed) for s in seeds if over_training([s]) == MOVING]
    if status == MOVING and len(moving) < len(seeds):
        which = f"seed{'s' if len(moving) > 1 else ''} {', '.join(moving)} of {which}"
    change = last_half_change(seeds)
    size = "" if change is None or status == MOVING else f"; size {change:+.0%} over the last half"
    return f"{status} ({which}{size})"


def check_over_training(points: Sequence[CheckPoint]) -> str:
    """A check's course: :data:`STABLE` when its ``verdict`` at every point of the last half is the final one."""
    late = [p.verdict for p in points if p.fraction >= LAST_HALF]
    return NONE if not late else STABLE if all(v == late[-1] for v in late) else MOVING
