"""A causal LM object given from Python (probes.models.lm.load_lm(model, tokenizer=tok)) is left as it came in:
scoring, generation, the logit lens and tuned-lens training run its forward passes in eval mode (dropout off) and
give back every module's train/eval flag and every weight's requires_grad after."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import probes


@pytest.fixture(scope="module")
def gpt():
    """(model in train mode, with dropout; its tokenizer) of a tiny random GPT-2 with the MiniLM tokenizer."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    tok = AutoTokenizer.from_pretrained(probes.get_spec("minilm-l6").local_path())
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                       resid_pdrop=0.5, embd_pdrop=0.5, attn_pdrop=0.5))
    return model, tok


def flags(model: torch.nn.Module) -> dict[str, bool]:
    return {name: m.training for name, m in model.named_modules()}


@pytest.fixture()
def caller(gpt):
    """The model as a caller leaves it: training, one block switched to eval by hand, the embeddings frozen."""
    model, tok = gpt
    model.train()
    model.transformer.h[1].eval()
    model.transformer.wte.weight.requires_grad_(False)
    before = flags(model), {n: p.requires_grad for n, p in model.named_parameters()}
    yield model, tok, before
    model.transformer.wte.weight.requires_grad_(True)


def unchanged(model, before) -> bool:
    return (flags(model), {n: p.requires_grad for n, p in model.named_parameters()}) == before


def test_scoring_and_generation_run_in_eval_mode_and_restore_the_callers_mode(caller):
    from probes.capture.windows import greedy_windowed, windowed_nll
    from probes.models.lm import load_lm

    model, tok, before = caller
    lm = load_lm(model, tokenizer=tok, model_name="my-gpt")
    assert unchanged(model, before) and model.training  # loading leaves it as it is
    ids = [int(i) for i in torch.arange(1000, 1050)]
    first, second = windowed_nll(lm, ids, T=16, o=4)["nll"], windowed_nll(lm, ids, T=16, o=4)["nll"]
    assert unchanged(model, before)
    np.testing.assert_array_equal(first, second)  # no dropout: the same numbers twice
    model.eval()
    want = windowed_nll(lm, ids, T=16, o=4)["nll"]
    model.train()
    model.transformer.h[1].eval()
    np.testing.assert_allclose(first, want, rtol=0, atol=1e-6)  # the numbers of the model in eval mode
    context = torch.tensor([ids[:20]])
    assert torch.equal(greedy_windowed(lm, context, 5, T=16, o=4), greedy_windowed(lm, context, 5, T=16, o=4))
    assert unchanged(model, before)


def test_the_lenses_restore_the_callers_mode_and_gradients(caller, tmp_path):
    from probes.capture.lens import lens_statistics
    from probes.capture.tuned_lens import TrainSettings, train
    from probes.models.lm import load_lm

    model, tok, before = caller
    lm = load_lm(model, tokenizer=tok, model_name="my-gpt")
    ids = [int(i) for i in torch.arange(2000, 2040)]
    a, b = lens_statistics(lm, ids, T=16, o=4), lens_statistics(lm, ids, T=16, o=4)
    np.testing.assert_array_equal(a["stats"]["logit"]["kl"], b["stats"]["logit"]["kl"])
    assert unchanged(model, before)
    train(lm, [ids, ids[::-1]], TrainSettings(window=16, steps=2, tokens_per_step=16), tmp_path, progress=False)
    assert unchanged(model, before)  # requires_grad too: the frozen embeddings stay frozen, the rest trainable


def test_eval_mode_reaches_every_module_and_restores_each_flag_once_a_module_is_shared():
    from probes.models.hf import eval_mode

    shared = torch.nn.Dropout(0.5)
    model = torch.nn.Sequential(torch.nn.Sequential(shared, torch.nn.Linear(2, 2)), shared, torch.nn.Dropout(0.5))
    model.train()
    model[0][1].eval()
    before = flags(model)
    with eval_mode(model):
        assert not any(m.training for m in model.modules())
    assert flags(model) == before
    model.eval()
    with eval_mode(model):  # already in eval mode: nothing switched
        assert not any(m.training for m in model.modules())
    assert not any(flags(model).values())
