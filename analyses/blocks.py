"""Block bootstraps: intervals over stretches of running text, whose units are dependent over long distances.

Perplexity's scored tokens, the lens's windows and the held-out blocks of the masked-LM loss are consecutive pieces
of documents. Their losses are correlated far apart: gpt2-small-base's per-token loss on the held-out text is
still correlated at a thousand tokens, and the variance of a mean over n tokens is about 3.5 times what
independent tokens would give (docs/definitions.md, "Block bootstraps", has the measurement). A bootstrap over
short blocks treats neighbouring blocks as independent and its interval is too narrow: 256-token blocks covered
84-89% where they claimed 95%.

Every block bootstrap of the suite therefore follows one rule:

* **blocks**: the longest block length that still cuts the text into at least :data:`analyses.stats.MIN_UNITS`
  (20) blocks (:func:`block_length`; each document cut into max(1, n // b) runs of b consecutive steps, the
  remainder joined to its last, :func:`block_cuts`). It depends only on the documents' lengths, so two models
  with one tokenizer on the same text get the same blocks and are compared paired, block by block;
* **interval**: the percentile interval read at the expanded level (:func:`expanded_level`, Hesterberg 2015): it
  has the t interval's width, which 20 or so blocks need.

tests/test_block_bootstrap.py simulates text with the measured autocorrelation: the rule covers 93.9% on documents
of the held-out part's lengths, 93.6% and 94.1% on 7 documents of 6,000 and 8,000 tokens (95.1% on independent
tokens), where 256-token blocks with the plain percentile interval covered 83-84%. Less text leaves shorter blocks
and less coverage: 91.6% on 7 documents of 2,048 tokens, 90.8% on one document of 20,000.

    >>> block_length([6000] * 7)        # seven documents of 6,000 scored tokens: blocks of 2,000, 21 of them
    2000
"""

from __future__ import annotations

import dataclasses
import math

from analyses.stats import LEVEL, MIN_UNITS, RESAMPLES, SEED, Bootstrap, bootstrap_block

RULE = (f"the longest blocks that leave at least {MIN_UNITS} of them (each document cut into runs of that many "
        "consecutive units, the remainder joined to its last run); percentile interval read at the expanded level")


def block_cuts(n: int, length: int) -> list[int]:
    """Where a sequence of ``n`` steps is cut into blocks of ``length`` consecutive steps: [0, length, ..., n];
    the remainder joins the last block, and a sequence shorter than ``length`` is one block."""
    k = max(1, int(n) // int(length))
    return [i * int(length) for i in range(k)] + [int(n)]


def block_length(lengths, min_blocks: int = MIN_UNITS) -> int:
    """The longest block length b that cuts sequences of ``lengths`` steps into at least ``min_blocks`` blocks
    (sum over sequences of max(1, n // b), :func:`block_cuts`); 1 when even b = 1 gives fewer (fewer steps than
    blocks). Sequences of no step are left out."""
    ns = [int(n) for n in lengths if int(n) > 0]
    if not ns:
        raise ValueError("a block bootstrap needs at least one sequence with a step")
    lo, hi = 1, max(ns)
    while lo < hi:  # the number of blocks does not grow with b: bisect for the last b that gives enough
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if sum(max(1, n // mid) for n in ns) >= min_blocks else (lo, mid - 1)
    return lo


def runs(lengths, length: int) -> list[int]:
    """The first unit of every block when sequences of ``lengths`` units, saved one after the other, are cut
    into blocks of ``length`` (:func:`block_cuts`): what :func:`analyses.stats.grouped` sums over."""
    out, start = [], 0
    for n in lengths:
        out += [start + c for c in block_cuts(n, length)[:-1]] if n > 0 else []
        start += int(n)
    return out


def expanded_level(level: float, n_units: int) -> float:
    """The level at which to read a percentile interval over ``n_units`` units so that it is the EXPANDED
    percentile interval (Hesterberg 2015): its quantiles at Phi(-sqrt(n / (n - 1)) t_{n-1}) instead of the
    nominal (1 - level) / 2. The percentile interval of a mean is about mean +- z s_plugin / sqrt(n), narrower than
    the t interval mean +- t_{n-1} s / sqrt(n) by 9% at 20 units; expanded, it has the t interval's width. Below
    2 units: the level itself."""
    n = int(n_units)
    if n < 2:
        return float(level)
    from scipy.stats import norm, t

    return float(1 - 2 * norm.cdf(-math.sqrt(n / (n - 1)) * t.ppf((1 + level) / 2, n - 1)))


def bootstrap(unit: str, n_blocks: int, length: int, of: str, resamples: int = RESAMPLES, level: float = LEVEL,
              seed: int = SEED, units_id: str | None = None, runs: list[int] | None = None) -> Bootstrap:
    """The ``bootstrap`` block of a block bootstrap (:func:`analyses.stats.bootstrap_block` over ``n_blocks``
    blocks) with what the rule chose: ``block_length`` (in ``of``: "tokens", "windows", "held-out blocks"), the
    ``rule`` in words, ``interval_level``, the expanded level its intervals are read at, and ``runs`` where the
    blocks are runs of saved units (:func:`runs`)."""
    return dataclasses.replace(bootstrap_block(unit, n_blocks, resamples, level, seed, units_id),
                               method="percentile, expanded", interval_level=expanded_level(level, n_blocks),
                               block_length=int(length), block_length_of=of, rule=RULE, runs=runs)
