"""The rows of a causal probing result, as records (:mod:`analyses.records` writes and reads them): per task
(:class:`TaskRow`) and layer (:class:`LayerRow`), each eraser's numbers over the seeds (:class:`MethodRow`) and in
each seed's run of the protocol (:class:`SeedEntry`); the objective scored (:class:`ObjectiveBlock`); the tasks
left out (:class:`SkippedTask`); and the per-sentence sums the headline number is resampled from
(:class:`HeldOut`).

A file written before the protocol ran over several seeds reads back: its rows lack the seeds, the shares of
variance removed and the verdicts (None, []), and an INLP row keeps its iterations at the row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analyses.records import omitted

VERDICTS = ("used", "not used", "inconclusive")


@dataclass
class SeedEntry:
    """One eraser at one layer in one seed's run of the protocol (split, masks, controls, INLP's split)."""

    seed: int
    rank: int  # the eraser's rank (0: INLP removed nothing)
    accuracy: float  # the probe's held-out accuracy after erasure
    random_accuracy: float  # after the first random control
    removed_variance: float  # share of the training states' variance the eraser removes
    random_removed_variance: list[float]  # the same for each random control drawn (matched to the above)
    random_rank: list[int]  # each random control's rank
    delta_loss: float | None = omitted()  # loss(erased) - loss(clean), nats per scored token
    random_delta_loss: float | None = omitted()  # the same for the controls' mean
    excess_loss: float | None = omitted()  # delta_loss - random_delta_loss
    excess_loss_ci: list[float] | None = omitted()  # this seed's 95% interval over its held-out sentences
    p_value: float | None = omitted()  # share of this seed's bootstrap replicates of the excess <= 0
    used: bool | None = omitted()  # Holm's test over the task's layers rejects "excess <= 0" in this seed
    iterations: int | None = omitted()  # INLP: classifiers removed
    dev_accuracy: list[float] | None = omitted()  # INLP: each classifier's accuracy on its held-out fifth
    dev_majority: float | None = omitted()  # INLP: that fifth's majority baseline


@dataclass
class MethodRow:
    """One eraser (LEACE or INLP) at one layer over the seeds: means over seeds, intervals over seeds and
    held-out sentences, and the verdict."""

    rank: int  # the first seed's (LEACE's is K - 1 in each; INLP's per seed in ``seeds``)
    accuracy: float  # mean over seeds
    accuracy_ci: list[float]  # from the lowest seed's 95% interval's low to the highest one's high
    random_accuracy: float
    random_accuracy_ci: list[float]
    removed_variance: float | None = omitted()  # mean over seeds
    random_removed_variance: float | None = omitted()  # mean over seeds and draws
    delta_loss: float | None = omitted()  # mean over seeds
    delta_loss_ci: list[float] | None = omitted()  # every seed's bootstrap replicates pooled (see definitions)
    random_delta_loss: float | None = omitted()
    random_delta_loss_ci: list[float] | None = omitted()
    excess_loss: float | None = omitted()
    excess_loss_ci: list[float] | None = omitted()
    p_value: float | None = omitted()  # share of every seed's bootstrap replicates of the excess <= 0 (pooled)
    verdict: str | None = omitted()  # one of VERDICTS; None: no objective was scored
    used_in: int | None = omitted()  # the seeds whose own test says used
    iterations: int | None = omitted()  # INLP, the first seed's
    dev_accuracy: list[float] | None = omitted()
    dev_majority: float | None = omitted()
    seeds: list[SeedEntry] = field(default_factory=list)


@dataclass
class LayerRow:
    """One layer of one task: the probe on the unerased states (means over seeds) and each eraser."""

    layer: int
    majority: float  # the majority baseline's held-out accuracy, mean over seeds
    accuracy: float  # the probe's on the unerased states, mean over seeds
    accuracy_ci: list[float]  # the seeds' 95% intervals' envelope
    leace: MethodRow
    inlp: MethodRow

    def method(self, name: str) -> MethodRow:
        """The row of eraser ``name`` (``leace`` or ``inlp``)."""
        if name not in ("leace", "inlp"):
            raise ValueError(f"no causal probing method {name!r}")
        return self.leace if name == "leace" else self.inlp


@dataclass
class HeldOut:
    """One seed's held-out sentences as the headline number resamples them: per sentence LEACE's excess loss sum
    (erased minus the controls' mean, nats), averaged over the task's layers, and its scored tokens."""

    seed: int
    units_id: str  # the held-out sentences' fingerprint (analyses.stats.units_id)
    excess_sums: list[float]  # (n_test,)
    scored_tokens: list[int]  # (n_test,)


@dataclass
class TaskRow:
    """One task's items and its rows, one per layer."""

    task: str
    n_items: int
    n_train: int  # the first seed's split
    n_test: int
    n_classes: int
    classes: list[str]
    notes: dict
    layers: list[LayerRow]
    held_out: list[HeldOut] = field(default_factory=list)  # per seed; [] without an objective


@dataclass
class ObjectiveBlock:
    """The model's own objective on the held-out sentences (the first seed's: its loss and interval), or why it
    was not scored (``skipped``)."""

    skipped: str | None = omitted()
    objective: str | None = omitted()  # masked-LM or next-token
    model_head: str | None = omitted()
    intervention: list | None = omitted()  # the edits every score ran under, as recorded
    mask_prob: float | None = omitted()
    mask_seed: int | None = omitted()
    mask_token_id: int | None = omitted()
    masking: str | None = omitted()
    scored: str | None = omitted()
    n_texts: int | None = omitted()
    scored_tokens: int | None = omitted()
    loss: float | None = omitted()
    loss_ci: list[float] | None = omitted()
    mask_seeds: list[int] | None = omitted()  # each seed's masks (the seeds of the protocol)


@dataclass
class SkippedTask:
    """A built-in task the sentences could not build, and why."""

    task: str
    reason: str
