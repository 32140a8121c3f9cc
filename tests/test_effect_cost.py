"""The effect call (analyses.effect.run) costs two runs of the analysis, three with a control, and not one model
forward pass more: every forward pass of the tiny model (its class's forward, whichever instance runs it) is
counted in one run of the analysis alone and in the effect call."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from analyses import anisotropy, effect, perplexity
from probes.intervention import AddVector, Intervention, ProjectOut

TEXTS = [f"Sentence number {i} says something about the {w} today." for i, w in
         enumerate(["weather", "sea", "cat", "market", "river", "city", "garden", "train", "book", "song", "road",
                    "house", "lamp", "chair", "door", "wall", "pen", "cup", "boat", "cloud"])]
WIDTH = 32  # tiny-bert's and tiny-gpt2's states


def counting_forwards(monkeypatch, cls) -> list[int]:
    """``cls.forward`` replaced by itself, counting its calls (every instance, however it is loaded)."""
    calls = [0]
    real = cls.forward

    def forward(self, *args, **kwargs):
        calls[0] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cls, "forward", forward)
    return calls


CASES = {
    "anisotropy": ("tiny-bert", "transformers.models.bert.modeling_bert.BertModel", anisotropy,
                   {"n_tokens": 40, "cache_dir": None}),
    "perplexity": ("tiny-gpt2", "transformers.models.gpt2.modeling_gpt2.GPT2LMHeadModel", perplexity,
                   {"overlap": [0], "cache_dir": None}),
}


def _class(path: str):
    import importlib

    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("analysis", list(CASES))
def test_the_effect_costs_two_runs_of_the_analysis_and_three_with_a_control(monkeypatch, analysis: str):
    model, cls, module, options = CASES[analysis]
    calls = counting_forwards(monkeypatch, _class(cls))
    v = np.random.default_rng(0).normal(size=WIDTH)
    iv = Intervention(-1, AddVector(v / np.linalg.norm(v)))
    kw: dict[str, Any] = dict(options)
    module.run(model, TEXTS, intervention=iv, **kw)
    one = calls[0]
    assert one > 0  # the counter sees the analysis's forward passes
    calls[0] = 0
    effect.run(analysis, model, TEXTS, intervention=iv, **kw)
    assert calls[0] == 2 * one
    calls[0] = 0
    effect.run(analysis, model, TEXTS, intervention=iv, control="random", **kw)
    assert calls[0] == 3 * one


def test_the_counter_sees_a_run_more():
    # the count above can fail: a second run of the analysis shows up as twice the forward passes
    with pytest.MonkeyPatch.context() as mp:
        model, cls, module, options = CASES["anisotropy"]
        calls = counting_forwards(mp, _class(cls))
        iv = Intervention(1, ProjectOut(np.eye(WIDTH)[:2]))
        module.run(model, TEXTS, intervention=iv, **options)
        one = calls[0]
        module.run(model, TEXTS, intervention=iv, **options)
        assert calls[0] == 2 * one > 0
