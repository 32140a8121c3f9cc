"""probes.capture.windows: the one window rule, checked against a one-token-at-a-time brute force
(through probes.capture.windows.windowed_nll and recipes.train_lm.sequence_loss, its two batch layouts)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from probes.capture import windows
from probes.capture.windows import windowed_nll
from probes.errors import ProbeError
from recipes.train_lm import sequence_loss

SETTINGS = [(8, 0), (8, 3), (5, 4), (40, 0)]


def doc_ids(n=30, seed=0):
    return torch.randint(1000, 30000, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@torch.inference_mode()
def brute_force_nll(lm, ids, T, o):
    """Each target t_p scored on its own with exactly its context t_s..t_{p-1}, s = k (T - o),
    k = 0 if p <= T else ceil((p - T) / (T - o)); a recurrent model gets h_prev of window k - 1,
    itself computed from window k - 2's h_prev, on the full windows."""
    stride = T - o
    x = torch.tensor(ids)
    h = {0: None}

    def h_prev(k):  # h_prev entering window k
        if k not in h:
            s = (k - 1) * stride
            h[k] = lm.model(x[s:s + T][None], h_prev=h_prev(k - 1), pool_len=stride).h_next
        return h[k]

    out = []
    for p in range(1, len(ids)):
        k = 0 if p <= T else math.ceil((p - T) / stride)
        s = k * stride
        ctx = x[s:p][None]
        assert 1 <= ctx.shape[1] <= T
        logits = lm.model(ctx, h_prev=h_prev(k)).logits if lm.recurrent else lm.model(input_ids=ctx).logits
        out.append(-torch.log_softmax(logits[0, -1].double(), -1)[ids[p]].item())
    return np.array(out)


@pytest.mark.parametrize("T,o", SETTINGS)
@pytest.mark.parametrize("kind", ["plain", "recurrent"])
def test_windowed_nll_equals_the_brute_force_reference(tiny_lms, kind, T, o):
    lm = tiny_lms[kind]
    ids = doc_ids(22, seed=T + o)
    got = windowed_nll(lm, ids, T, o, batch_size=3)
    np.testing.assert_allclose(got["nll"], brute_force_nll(lm, ids, T, o), rtol=1e-5, atol=1e-5)
    assert got["tokens_processed"] == sum(got["window_lengths"])


def test_every_token_but_the_first_is_scored_once_paper_example():
    # §4.2: T = 10, o = 3 -> inputs t_{1:10}, t_{8:17}, t_{15:24} predict t_{2:11}, t_{12:18}, t_{19:25}
    assert windows.window_starts(25, 10, 3) == [0, 7, 14]
    plan = [(w.start, w.n_inputs, w.first) for w in windows.plan(25, 10, 3)]
    scored = [list(range(s + first + 2, s + n + 2)) for s, n, first in plan]  # 1-based targets
    assert scored == [list(range(2, 12)), list(range(12, 19)), list(range(19, 26))]
    for n, T, o in [(2, 4, 0), (100, 9, 0), (101, 9, 8), (57, 13, 5)]:
        plan = [(w.start, w.n_inputs, w.first) for w in windows.plan(n, T, o)]
        targets = [s + j + 1 for s, m, first in plan for j in range(first, m)]
        assert targets == [p for w in windows.plan(n, T, o) for p in w.targets]
        assert targets == list(range(1, n))  # each once, in order
        assert all(windows.scoring_context_start(p, T, o) == next(s for s, m, f in plan if s + f < p <= s + m)
                   for p in range(1, n))


def test_bad_windows_are_user_errors():
    with pytest.raises(ProbeError, match=r"overlap 8 must be in \[0, window\)"):
        windows.window_starts(50, 8, 8)
    with pytest.raises(ProbeError, match="positive"):
        windows.window_starts(50, 0, 0)


@pytest.mark.parametrize("T,o,k", [(8, 0, 3), (8, 3, 4), (5, 4, 2)])
@pytest.mark.parametrize("kind", ["plain", "recurrent"])
def test_training_loss_is_the_mean_of_the_brute_force_nll(tiny_lms, kind, T, o, k):
    """recipes.train_lm runs a batch of sequences through the same windows: its loss is the mean
    of the brute-force NLL of every target of the k windows."""
    lm = tiny_lms[kind]
    span = T + (k - 1) * (T - o) + 1
    seqs = [doc_ids(span, seed=s) for s in (1, 2)]
    with torch.inference_mode():
        loss = sequence_loss(lm.model, torch.tensor(seqs), T, o, k, lm.recurrent).item()
    ref = np.concatenate([brute_force_nll(lm, ids, T, o) for ids in seqs])
    assert math.isclose(loss, ref.mean(), rel_tol=1e-5, abs_tol=1e-5)
