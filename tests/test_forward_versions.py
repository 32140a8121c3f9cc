"""Each of the suite's own architectures versions its forward code (``FORWARD_VERSION``, in every cache key of the
family: probes.checkpoints.identity), and this file holds that version to the numbers it gives.

For each family a seeded tiny model runs on fixed token ids, and a few output numbers are pinned together with the
version that produced them. A change to a forward that alters its output fails here until its FORWARD_VERSION is
bumped and the pinned numbers are updated with it, so no cache entry of the old code is read by the new one. (A
torch upgrade that changes seeded initialisation fails here too: then the forward did not change, and only the
numbers are updated.)"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import probes

IDS = torch.tensor([[101, 2023, 2003, 1037, 3231, 6251, 1012, 102], [101, 2178, 2028, 1012, 102, 0, 0, 0]])
MASK = (torch.arange(8)[None, :] < torch.tensor([[8], [5]])).long()


def _summary(*tensors: torch.Tensor) -> list[float]:
    """Three numbers per tensor: two fixed random projections and the largest magnitude (sums alone say little:
    a LayerNorm's outputs sum to 0 and their squares to n x d whatever the weights)."""
    out = []
    for t in tensors:
        t = t.detach().double().flatten()
        w = torch.randn(2, t.numel(), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        out += [float(w[0] @ t), float(w[1] @ t), float(t.abs().max())]
    return out


def _encoder(name: str) -> list[float]:
    """Every output that an extraction with maps caches: states of real tokens, sentence vectors, attention, maps."""
    enc = probes.load(name)
    with torch.inference_mode():
        out = enc.forward(IDS, MASK, maps=True)
    tensors = [out.hidden[:, MASK.bool()]]  # (L+1, real tokens, d)
    tensors += [t for t in (out.sentence, out.attentions) if t is not None]
    return _summary(*tensors, *(out.maps[m] for m in sorted(out.maps)))


def _recurrent() -> list[float]:
    from probes.capture.windows import windowed_nll
    from probes.models.lm import load_lm

    lm = load_lm("tiny-gpt2-recurrent")
    ids = [int(i) for i in torch.arange(1000, 1040)]  # 40 tokens: 3 windows of 16, h_prev carried on
    return _summary(torch.from_numpy(windowed_nll(lm, ids, T=16, o=0)["nll"]))


# family -> (module holding FORWARD_VERSION, the version the numbers below were made with, how to get them, numbers)
PINNED = {
    "slstm": ("probes.models.slstm", 1, lambda: _encoder("tiny-slstm"),
              [19.669593, 1.7750525, 2.9747083, 0.27833311, -2.2213345, 1.3837671, -2.5688945, -1.5125529,
               0.20208661, -2.5580331, -1.7729498, 0.34375, -0.81210626, -0.39900181, 0.17232242]),
    "mog": ("probes.models.mog", 1, lambda: _encoder("tiny-mog"),
            [4.9902198, 45.569249, 3.6396613, -0.53214425, 3.8264915, 0.2079443, -0.52703672, 3.8183113,
             0.20006682, -0.52626267, 3.8182479, 0.20006385, -4.2610658, -0.31572047, 0.50817692]),
    "mog-lens": ("probes.models.mog_lens", 1, lambda: _encoder("tiny-bert-lens"),
                 [97.653846, -15.838364, 3.0996494, -0.54476604, 3.8218298, 0.20786028, 0.0053509311,
                  0.0041431197, 0.0040676901, -0.0033720297, 0.0055844962, 0.0040719621]),
    "convbert": ("probes.models.convbert", 1, lambda: _encoder("tiny-convbert"),
                 [-5.7764324, -33.052432, 3.0384412, 1.0978158, 3.9564278, 0.2032817, -1.8769895, 0.94308083,
                  0.11112779]),
    "recurrent": ("probes.models.recurrent", 1, _recurrent, [-108.41216, -1.2633667, 10.52012]),
}


@pytest.mark.parametrize("family", list(PINNED))
def test_a_forward_that_changes_its_output_has_a_new_version(family):
    module, version, compute, numbers = PINNED[family]
    current = importlib.import_module(module).FORWARD_VERSION
    got = compute()
    assert current == version, (f"{module}.FORWARD_VERSION is {current}, the pinned numbers are of version {version}: "
                                f"update PINNED[{family!r}] to ({module!r}, {current}, ..., {got})")
    assert np.allclose(got, numbers, rtol=1e-4, atol=1e-5), (
        f"the forward of family {family} gives other numbers than version {version} did: bump FORWARD_VERSION in "
        f"{module} (old cache entries must not be read) and pin the new numbers with it: {got}")
