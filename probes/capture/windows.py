"""Windowed execution of a causal LM: which window scores which token, and what h_prev carries.

The one statement of the rule that training (``recipes.train_lm``), scoring
(:func:`windowed_nll`, used by ``analyses.perplexity``) and generation
(:func:`greedy_windowed`, used by ``analyses.topics``) share (recurrence paper §4.2):

* A document of n tokens is run in windows of T tokens that start every T - o tokens (overlap o),
  up to the window that predicts the last token (:func:`window_starts`, :func:`plan`).
* A window's inputs predict the token after each input; window 0 scores all its predictions, a
  later window only its last T - o (the ones no earlier window scored). So target t_p (p >= 1) is
  scored with the context t_s..t_{p-1}, s = k (T - o), k = 0 if p <= T else
  ceil((p - T) / (T - o)) (:func:`scoring_context_start`).
* A recurrent model (:class:`probes.models.recurrent.RecurrentLM`) runs the windows in order; window k
  gets h_prev = h_next of window k - 1, pooled over window k - 1's first T - o positions (those
  the next window does not repeat). A plain model runs them independently.

:func:`forward` is the one place that calls a model on a window; :func:`run_windows` yields
``(window, logits)`` for a plan, carrying h_prev.

    >>> [w.start for w in plan(25, 10, 3)]
    [0, 7, 14]
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from probes.errors import ProbeError

if TYPE_CHECKING:
    from probes.models.lm import LM  # the causal LM that windowed_nll / greedy_windowed run


def check_window(T: int, o: int) -> None:
    """Fail with one line unless T >= 1 and 0 <= o < T."""
    if T < 1:
        raise ProbeError(f"window must be a positive number of tokens, got {T}")
    if not 0 <= o < T:
        raise ProbeError(f"overlap {o} must be in [0, window) = [0, {T})")


def window_starts(n: int, T: int, o: int) -> list[int]:
    """Start of every window over a document of n tokens: 0, T-o, 2(T-o), ... until the window
    that predicts the last token (t_{n-1}) is included."""
    check_window(T, o)
    if n < 2:
        return []
    stride = T - o
    k_last = 0 if n - 1 <= T else math.ceil((n - 1 - T) / stride)
    return [k * stride for k in range(k_last + 1)]


def scoring_context_start(p: int, T: int, o: int) -> int:
    """Where the context of target t_p starts (the window that scores it): k (T - o) with
    k = 0 if p <= T else ceil((p - T) / (T - o))."""
    return 0 if p <= T else math.ceil((p - T) / (T - o)) * (T - o)


@dataclass(frozen=True)
class Window:
    """One window of a plan: inputs t_start..t_{start+n_inputs-1}; input j predicts t_{start+j+1};
    positions ``first``..n_inputs-1 are the ones it scores."""

    start: int
    n_inputs: int
    first: int

    @property
    def targets(self) -> range:
        """Indices p of the tokens t_p this window scores."""
        return range(self.start + self.first + 1, self.start + self.n_inputs + 1)


def plan(n: int, T: int, o: int) -> list[Window]:
    """The windows over a document of n tokens (every target t_1..t_{n-1} scored exactly once)."""
    return [Window(s, min(T, n - 1 - s), 0 if k == 0 else o) for k, s in enumerate(window_starts(n, T, o))]


def forward(model, recurrent: bool, inputs: torch.Tensor, h_prev: torch.Tensor | None = None,
            pool_len: int | None = None, need_state: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(logits (B, n, V), h_next (B, d) or None) of one window ``inputs`` (B, n). A recurrent model
    gets ``h_prev`` and, with ``need_state``, returns h_next pooled over the first ``pool_len``
    positions; a plain model (a transformers causal LM) ignores both and returns h_next None."""
    if recurrent:
        out = model(inputs, h_prev=h_prev, pool_len=pool_len, need_state=need_state)
        return out.logits, out.h_next
    return model(input_ids=inputs).logits, None


def run_windows(model, recurrent: bool, x: torch.Tensor, windows: list[Window], T: int, o: int,
                batch_size: int | None = None) -> Iterator[tuple[Window, torch.Tensor]]:
    """``(window, logits (B, n_inputs, V))`` for every window of ``windows`` over ``x`` (B, n).

    Recurrent: in order, h_prev carried from each window to the next (pooled over its first T - o
    positions; the last window computes no h_next). Plain with ``batch_size`` (and B = 1): the
    full-length windows are stacked ``batch_size`` at a time into one forward, the shorter ones run
    alone after them; plain without it: one forward per window, in order."""
    if recurrent or batch_size is None:
        h_prev = None
        for k, w in enumerate(windows):
            last = k + 1 == len(windows)
            logits, h_prev = forward(model, recurrent, x[:, w.start:w.start + w.n_inputs], h_prev,
                                     pool_len=None if last else T - o, need_state=not last)
            yield w, logits
        return
    if x.shape[0] != 1:
        raise ValueError("batching windows needs a single sequence (B = 1)")
    full = [w for w in windows if w.n_inputs == T]
    for b in range(0, len(full), batch_size):
        chunk = full[b:b + batch_size]
        logits, _ = forward(model, False, torch.cat([x[:, w.start:w.start + T] for w in chunk]))
        yield from zip(chunk, logits.unsqueeze(1))
    for w in windows:
        if w.n_inputs != T:
            yield w, forward(model, False, x[:, w.start:w.start + w.n_inputs])[0]


# ----------------------------------------------------------------------------- scoring and generation


def check_fits(lm: LM, T: int) -> None:
    """Fail with one line if window T is longer than ``lm`` allows."""
    if T > lm.max_positions:
        raise ProbeError(f"window {T} is longer than model '{lm.name}' allows ({lm.max_positions} positions)")


def _target_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(logits.float(), -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


@torch.inference_mode()
def windowed_nll(lm: LM, ids: list[int], T: int, o: int, batch_size: int = 16) -> dict:
    """Per-target negative log-likelihoods (n - 1,) of one document under windowed execution
    (the rule of :mod:`probes.capture.windows`; plain models batch ``batch_size`` full windows per forward).

    Returns {"nll": float64 array for targets t_1..t_{n-1}, "n_windows", "tokens_processed",
    "window_lengths", "pool_lengths"}."""
    x = torch.tensor(ids, dtype=torch.long, device=lm.device)[None]  # (1, n)
    windows = plan(len(ids), T, o)
    nll = np.full(max(len(ids) - 1, 0), np.nan)
    with lm.running():  # eval mode; a caller's model object gets its train/eval flags back after
        for w, logits in run_windows(lm.model, lm.recurrent, x, windows, T, o, None if lm.recurrent else batch_size):
            logp = _target_logprobs(logits[0], x[0, w.start + 1:w.start + w.n_inputs + 1])
            nll[w.start + w.first:w.start + w.n_inputs] = -logp[w.first:w.n_inputs].double().cpu().numpy()
    if np.isnan(nll).any():
        raise AssertionError("windowed_nll left a target unscored")  # a bug, not a user error
    return {"nll": nll, "n_windows": len(windows), "tokens_processed": int(sum(w.n_inputs for w in windows)),
            "window_lengths": [w.n_inputs for w in windows],
            "pool_lengths": [min(T - o, w.n_inputs) for w in windows[:-1]]}


@torch.inference_mode()
def greedy_windowed(lm: LM, context: torch.Tensor, n_new: int, T: int, o: int) -> torch.Tensor:
    """(B, n_new) greedy tokens after ``context`` (B, C), with the model run in windows of T tokens
    every T - o tokens: token p is predicted from t_s..t_{p-1} of the window that would score it
    (:func:`probes.capture.windows.scoring_context_start`); a recurrent model carries h_prev from each
    complete window to the next."""
    check_window(T, o)
    check_fits(lm, T)
    stride = T - o
    seq = context.to(lm.device)
    h, k_have = None, 0  # h = h_prev entering window k_have
    with lm.running():  # eval mode; a caller's model object gets its train/eval flags back after
        for _ in range(n_new):
            p = seq.shape[1]
            s = scoring_context_start(p, T, o)
            if lm.recurrent:
                while k_have < s // stride:
                    a = k_have * stride
                    _, h = forward(lm.model, True, seq[:, a:a + T], h, pool_len=stride)
                    k_have += 1
            logits, _ = forward(lm.model, lm.recurrent, seq[:, s:p], h, need_state=False)
            seq = torch.cat([seq, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return seq[:, context.shape[1]:].cpu()
