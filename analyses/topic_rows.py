"""The rows of a topics result (:mod:`analyses.topics`), read by attribute: the paired statistics of the JSDs of A's
and B's continuations (:class:`TopicStatistics`) and each context's record (:class:`Continuation`, saved as JSON
lines beside the result). Written and read by the one codec (:mod:`analyses.records`); the saved keys are the fields'
names, as the files have always had them.

    >>> s = TopicStatistics(n_contexts=2, mean_jsd_a=0.1, mean_jsd_b=0.2, median_difference=-0.1, n_a_less=2,
    ...                     n_a_greater=0, n_ties=0, share_a_less=1.0, sign_test_p=0.5, sign_test_p_a_less=0.25,
    ...                     wilcoxon_p=0.5, wilcoxon_p_a_less=0.25)
    >>> from analyses.records import to_json
    >>> sorted(to_json(s))[:3]
    ['mean_jsd_a', 'mean_jsd_b', 'median_difference']
"""

from __future__ import annotations

from dataclasses import dataclass

from analyses.records import omitted
from analyses.stats import Bootstrap

__all__ = ["Continuation", "TopTopics", "TopicStatistics"]


@dataclass(kw_only=True)
class TopicStatistics:
    """JSD(context, A's continuation) against B's, paired over contexts: the means, the median difference, how many
    contexts A is below / above / tied with B, the sign test's and Wilcoxon's p-values (two-sided and for A < B; a
    ``note`` where no pair differs and both are void), the real continuation's mean JSD, and the percentile intervals
    over contexts of the means and of their paired difference with the bootstrap block that drew them (files written
    before these were saved lack them: None)."""

    n_contexts: int
    mean_jsd_a: float
    mean_jsd_b: float
    median_difference: float
    n_a_less: int
    n_a_greater: int
    n_ties: int
    share_a_less: float  # contexts with JSD_A < JSD_B over all contexts (ties count as not less)
    sign_test_p: float
    sign_test_p_a_less: float
    wilcoxon_p: float
    wilcoxon_p_a_less: float
    note: str | None = omitted()  # no pair differs: both tests are void (p = 1)
    mean_jsd_reference: float | None = omitted()  # the real continuation's mean JSD
    mean_jsd_a_ci: list[float | None] | None = omitted()
    mean_jsd_b_ci: list[float | None] | None = omitted()
    mean_difference: float | None = omitted()  # mean over contexts of JSD_A - JSD_B
    mean_difference_ci: list[float | None] | None = omitted()
    bootstrap: Bootstrap | None = omitted()  # how the intervals' replicates were drawn (over contexts)


@dataclass
class TopTopics:
    """The three most probable LDA topics of a context, of A's and B's continuations and of the real one."""

    context: list[int]
    a: list[int]
    b: list[int]
    reference: list[int]


@dataclass
class Continuation:
    """One context: where it was drawn from, its text, the three continuations (A's, B's, the real one), their JSDs
    to the context's topics and their top topics."""

    index: int
    document: str
    start_token: int
    context: str
    continuation_a: str
    continuation_b: str
    continuation_reference: str
    jsd_a: float
    jsd_b: float
    jsd_reference: float
    top_topics: TopTopics
