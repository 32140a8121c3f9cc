"""Training tokens streamed through a shuffling buffer: an SAE can train on more token states than fit in memory.

A :class:`TokenSource` reads the n training token states by contiguous ranges (``read(start, stop)``: the cache's
memory-mapped states, so a range reads only its rows). :class:`ShuffleBuffer` cuts the n tokens into chunks of
``buffer_tokens // 2`` consecutive tokens and, each pass, reads the chunks in a new seeded order into a buffer of
at most ``buffer_tokens`` token states; before a chunk would overflow the buffer, it hands out minibatches of
``batch`` tokens drawn at random (without replacement) from all the buffer holds, and at the end of a pass it
drains what is left, shuffled (the pass's last minibatch may be smaller). So every token comes out exactly once a
pass, tokens of one sentence are spread over many minibatches, and memory is the buffer, whatever n is.

:func:`moments` is the one streamed pass before training that the scale c = sqrt(d) / E||x|| and the mean
(b_dec's starting point) need.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch

from probes.errors import ProbeError


@dataclass(frozen=True)
class TokenSource:
    """``n`` token states of width ``d``; ``read(start, stop)`` gives rows start..stop-1 as (stop - start, d)."""

    n: int
    d: int
    read: Callable[[int, int], np.ndarray]


@dataclass
class ShuffleBuffer:
    """Iterate over shuffled minibatches ((<= batch, d) float32 arrays) of ``source``, pass after pass, holding at
    most ``buffer_tokens`` token states (``peak``: the most it has held); random order from ``generator``."""

    source: TokenSource
    batch: int
    buffer_tokens: int
    generator: torch.Generator
    peak: int = field(default=0, init=False)

    def __post_init__(self):
        if self.buffer_tokens < 2 * self.batch:
            raise ProbeError(f"--buffer-tokens {self.buffer_tokens} holds fewer than two minibatches of "
                             f"{self.batch} tokens (--tokens-per-step); give at least {2 * self.batch}")

    @property
    def chunk(self) -> int:
        return self.buffer_tokens // 2

    def __iter__(self) -> Iterator[np.ndarray]:
        while True:
            yield from self.one_pass()

    def one_pass(self) -> Iterator[np.ndarray]:
        """Every token once, in minibatches."""
        n, chunk = self.source.n, self.chunk
        starts = np.arange(0, n, chunk)
        buf = np.empty((self.buffer_tokens, self.source.d), np.float32)
        count = 0
        for i in torch.randperm(len(starts), generator=self.generator).tolist():
            start = int(starts[i])
            stop = min(start + chunk, n)
            while count + (stop - start) > self.buffer_tokens:  # count > buffer - chunk >= batch: a full batch
                out, count = self._take(buf, count, self.batch)
                yield out
            buf[count:count + stop - start] = self.source.read(start, stop)
            count += stop - start
            self.peak = max(self.peak, count)
        while count:
            out, count = self._take(buf, count, min(self.batch, count))
            yield out

    def _take(self, buf: np.ndarray, count: int, size: int) -> tuple[np.ndarray, int]:
        """``size`` random rows of buf[:count], removed (the last rows move into the holes); the new count."""
        take = np.sort(torch.randperm(count, generator=self.generator)[:size].numpy())
        out = buf[take].copy()
        rest = count - size
        tail = np.setdiff1d(np.arange(rest, count), take, assume_unique=True)  # kept rows past the new end
        buf[take[take < rest]] = buf[tail]
        return out, rest


def moments(source: TokenSource, chunk: int) -> tuple[float, np.ndarray]:
    """(E||x||, E x (d,) float32) over the source's tokens, read ``chunk`` at a time (float64 sums)."""
    norm_sum, total = 0.0, np.zeros(source.d)
    for start in range(0, source.n, chunk):
        x = np.asarray(source.read(start, min(start + chunk, source.n)), np.float64)
        norm_sum += float(np.linalg.norm(x, axis=1).sum())
        total += x.sum(0)
    return norm_sum / source.n, (total / source.n).astype(np.float32)
