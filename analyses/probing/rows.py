"""The rows of a probing result, read by attribute: one layer's probe (:class:`LayerRow`), one task's build numbers
and rows (:class:`TaskResult`), a task the data could not build (:class:`Skipped`), and a split's sizes
(:class:`Split`). Written and read by the one codec (:mod:`analyses.records`); the saved keys are the fields' names,
as the files have always had them, the control task's keys left out of a task without one.

    >>> from analyses.records import to_json
    >>> to_json(LayerRow(layer=0, accuracy=0.5, ci_low=0.4, ci_high=0.6, majority=0.3, C=1.0, n_params=9))
    {'layer': 0, 'accuracy': 0.5, 'ci_low': 0.4, 'ci_high': 0.6, 'majority': 0.3, 'C': 1.0, 'n_params': 9}
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analyses.records import omitted

__all__ = ["LayerRow", "Skipped", "Split", "TaskResult"]


@dataclass(kw_only=True)
class LayerRow:
    """One layer's probe: held-out accuracy with its bootstrap interval over test sentences, the majority baseline,
    the C chosen and the probe's parameters; with a control task (Hewitt & Liang) also the control's accuracy,
    interval, majority, C and parameters, and the selectivity (accuracy - control accuracy) with its paired
    interval."""

    layer: int
    accuracy: float
    ci_low: float
    ci_high: float
    majority: float
    C: float | None = omitted()
    n_params: int | None = omitted()
    control_accuracy: float | None = omitted()
    control_ci_low: float | None = omitted()
    control_ci_high: float | None = omitted()
    control_majority: float | None = omitted()
    control_C: float | None = omitted()
    control_n_params: int | None = omitted()
    selectivity: float | None = omitted()
    selectivity_ci_low: float | None = omitted()
    selectivity_ci_high: float | None = omitted()

    def statistic(self, key: str) -> float | None:
        """``accuracy`` or ``selectivity`` (None: no control task), or one of their interval ends (``ci_low``,
        ``selectivity_ci_high``, ...), named as the figures name what they draw."""
        if key not in ("accuracy", "ci_low", "ci_high", "majority", "control_accuracy", "selectivity",
                       "selectivity_ci_low", "selectivity_ci_high"):
            raise ValueError(f"a probe row has no statistic {key!r}")
        return getattr(self, key)


@dataclass
class Split:
    """A task's split: items to train and to test the probe on, and the sentences the test items come from."""

    n_train: int
    n_test: int
    n_test_sentences: int


@dataclass(kw_only=True)
class TaskResult:
    """One task: its name and level (sentence / token), sizes, whether the test split is too small to read
    (``small_test``), classes and their balance, how it was built (``notes``), one :class:`LayerRow` per layer, and
    why it has no control task (``control``) or the control labels' balance (``control_balance``)."""

    task: str
    level: str
    n_items: int
    n_train: int
    n_test: int
    n_test_sentences: int | None = omitted()
    small_test: bool = False
    n_classes: int
    classes: list[str] = field(default_factory=list)
    balance: dict[str, int] = field(default_factory=dict)  # items per class name
    notes: dict = field(default_factory=dict)  # numbers about how the task was built
    layers: list[LayerRow]
    control: str | None = omitted()  # why there is no control task
    control_balance: dict[str, int] | None = omitted()  # control items per class name


@dataclass
class Skipped:
    """A task the data could not build, and why (the fix in one line)."""

    task: str
    reason: str
