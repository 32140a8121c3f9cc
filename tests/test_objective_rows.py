"""The objective (probes.capture.objective) scores in rows: the model's head runs on the scored positions' final
states only (a masked LM's masked tokens, a causal LM's positions whose next token is real), and the loss and the
divergence equal a plain computation from every position's logits (float64 log-softmax, picked at the scored
positions) to float round-off, on a tiny random model of every family it scores and on a caller's model object."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from probes.capture.objective import MASKED, Objective, load_objective, mask_positions
from probes.intervention import AddVector, Intervention

TEXTS = [f"The {a} saw {n} {b} near the {c} today." for a in ("cat", "dog", "man") for n in ("two", "nine")
         for b in ("birds", "cars") for c in ("river", "old brown house")] + ["Hi.", "A much longer sentence, with a "
                                                                              "comma, and a few more words in it."]
FAMILIES = ["tiny-bert", "tiny-roberta", "tiny-albert", "tiny-distilbert", "tiny-mpnet", "tiny-convbert",
            "tiny-bert-lens", "tiny-slstm", "tiny-mog", "tiny-gpt2", "tiny-llama", "tiny-gemma3", "tiny-gpt2-recurrent"]


@pytest.fixture(scope="module", params=FAMILIES)
def objective(request) -> Objective:
    return load_objective(request.param)


def reference_logprobs(objective: Objective, texts: list[str], batch_size: int, interventions=()):
    """Per text: the log-probabilities (float64) of the scored tokens, from the logits at every position of the
    objective's own batches (the head on every position, as a plain forward pass gives them)."""
    from probes.intervention import hooked
    from probes.models.hf import eval_mode

    toks = objective.tokenizer.tokenize(texts)
    out: dict[int, torch.Tensor] = {}
    with torch.inference_mode(), eval_mode(objective.model), hooked(objective.model, interventions):
        for b in objective._scored_batches(toks, 0.15, 0, batch_size):
            logits = objective.model(input_ids=b.inputs, attention_mask=b.real.long())
            logits = logits if isinstance(logits, torch.Tensor) else logits.logits  # (B, n, V)
            logp = torch.log_softmax(logits.double(), -1)
            for r, i in enumerate(b.idx):
                ids = torch.tensor(toks[i].ids)
                if objective.kind == MASKED:
                    pos = torch.from_numpy(np.flatnonzero(mask_positions(toks[i].ids, toks[i].special, 0.15, 0)))
                    out[int(i)] = logp[r, pos, ids[pos]]
                else:
                    pos = torch.arange(len(ids) - 1)
                    out[int(i)] = logp[r, pos, ids[pos + 1]]
    return [out[i] for i in range(len(texts))]


def head_rows(objective: Objective) -> tuple[torch.nn.Module, list[int]]:
    """The model's output projection and a list that records how many rows each of its calls gets."""
    model = objective.model
    head = model.lm_head if hasattr(model, "slstm") or hasattr(model, "mog") else model.get_output_embeddings()
    rows: list[int] = []
    head.register_forward_pre_hook(lambda module, args: rows.append(int(np.prod(args[0].shape[:-1]))))
    return head, rows


def test_the_loss_equals_a_plain_full_logits_computation(objective):
    ref = reference_logprobs(objective, TEXTS, batch_size=5)
    sums, counts = objective.score(TEXTS, batch_size=5)
    np.testing.assert_allclose(sums, [-float(r.sum()) for r in ref], rtol=1e-6)
    np.testing.assert_array_equal(counts, [len(r) for r in ref])
    assert objective._rows, "the head ran on every position: the row path fell back"


def test_the_head_runs_on_the_scored_positions_only(objective):
    head, rows = head_rows(objective)
    try:
        _, counts = objective.score(TEXTS, batch_size=5)
    finally:
        head._forward_pre_hooks.clear()
    total = sum(len(t.ids) for t in objective.tokenizer.tokenize(TEXTS))
    assert sum(rows) == counts.sum() < total  # not one row more than is scored
    if objective.kind == MASKED:
        assert counts.sum() < 0.3 * total


def test_the_loss_under_an_intervention_equals_the_plain_computation(objective):
    d = int(getattr(objective.model.config, "hidden_size", 0) or objective.model.config.n_embd)
    iv = [Intervention(1, AddVector(np.random.default_rng(0).normal(size=d)))]
    ref = reference_logprobs(objective, TEXTS, 4, iv)
    sums, _ = objective.score(TEXTS, iv, batch_size=4)
    np.testing.assert_allclose(sums, [-float(r.sum()) for r in ref], rtol=1e-6)
    clean, _ = objective.score(TEXTS, batch_size=4)
    assert np.abs(sums - clean).max() > 1e-3  # the intervention reached the scored loss


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2", "tiny-slstm"])
def test_the_divergence_equals_the_plain_computation(name):
    objective = load_objective(name)
    d = int(getattr(objective.model.config, "hidden_size", 0) or objective.model.config.n_embd)
    iv = [Intervention(1, AddVector(np.random.default_rng(1).normal(size=d)))]
    toks = objective.tokenizer.tokenize(TEXTS)
    kl = np.zeros(len(TEXTS))
    with torch.inference_mode():
        from probes.intervention import hooked

        for b in objective._scored_batches(toks, 0.15, 0, 6):
            full = [objective._logits(b.inputs, b.real).double()]
            with hooked(objective.model, iv):
                full.append(objective._logits(b.inputs, b.real).double())
            p, q = (torch.log_softmax(x[b.at], -1) for x in full)  # (M, V) at the scored positions
            per = (p.exp() * (p - q)).sum(-1)
            rows = b.at.nonzero()[:, 0]
            for r, i in enumerate(b.idx):
                kl[i] = float(per[rows == r].sum())
    div = objective.divergence(TEXTS, iv, batch_size=6)
    np.testing.assert_allclose(div.kl, kl, rtol=1e-6, atol=1e-9)
    assert (div.kl > 0).all()
    ref = reference_logprobs(objective, TEXTS, 6, iv)
    np.testing.assert_allclose(div.edited, [-float(r.sum()) for r in ref], rtol=1e-6)


def test_a_callers_model_object_is_scored_in_rows():
    from transformers import BertConfig, BertForMaskedLM

    from probes.models.user import wrap_encoder

    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=64)).eval()
    tokenizer = load_objective("tiny-bert").tokenizer.tokenizer
    objective = load_objective(model, tokenizer=tokenizer, name="mine")
    assert wrap_encoder(model, tokenizer, name="mine") is not None
    ref = reference_logprobs(objective, TEXTS, 5)
    sums, _ = objective.score(TEXTS, batch_size=5)
    np.testing.assert_allclose(sums, [-float(r.sum()) for r in ref], rtol=1e-6)
    assert objective._rows


def test_a_head_that_cannot_take_gathered_states_falls_back_to_every_position():
    objective = load_objective("tiny-bert")
    want, _ = objective.score(TEXTS, batch_size=13)

    def refusing(module, args):
        if args[0].shape[0] == 1:  # the gathered (1, M, d) states (batches of 13 texts here)
            raise RuntimeError("this head wants (B, n, d)")
        return None

    fresh = load_objective("tiny-bert")
    fresh.model.cls.register_forward_pre_hook(refusing)
    got, _ = fresh.score(TEXTS, batch_size=13)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert not fresh._rows


def test_texts_scored_again_are_tokenized_once_and_score_the_same(monkeypatch):
    objective = load_objective("tiny-bert")
    calls = []
    real = objective.tokenizer.tokenize
    monkeypatch.setattr(objective.tokenizer, "tokenize", lambda texts: calls.append(len(texts)) or real(texts))
    first = objective.score(TEXTS, batch_size=5)
    again = objective.score(iter(TEXTS), [Intervention(1, AddVector(np.zeros(32)))], batch_size=5)
    assert calls == [len(TEXTS)]  # the same texts, masks and batches: tokenized once
    np.testing.assert_array_equal(first[0], again[0])
    other = objective.score(TEXTS, mask_prob=0.3, batch_size=5)  # other masks: tokenized and masked anew
    fewer = objective.score(TEXTS[:5], batch_size=5)
    assert calls == [len(TEXTS), len(TEXTS), 5] and (other[1] > first[1]).any()
    np.testing.assert_allclose(fewer[0], first[0][:5], rtol=1e-5)  # other batches: other padding
