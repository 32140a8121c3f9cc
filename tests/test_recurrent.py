"""probes.models.recurrent: h_prev is one extra key/value at layer l_ins, and changes nothing else."""

from __future__ import annotations

import pytest
import torch
import transformers.models.gpt2.modeling_gpt2 as modeling_gpt2

from probes.errors import CheckpointError
from probes.models.lm import load_lm
from probes.models.recurrent import RecurrenceConfig, RecurrentLM


@pytest.fixture(scope="module")
def plain():
    return load_lm("tiny-gpt2")


@pytest.fixture(scope="module")
def rec():
    return load_lm("tiny-gpt2-recurrent")


def ids(n, seed=0, vocab=30000):
    return torch.randint(1000, vocab, (1, n), generator=torch.Generator().manual_seed(seed))


@torch.inference_mode()
def test_first_window_equals_the_plain_model_exactly(plain, rec):
    x = ids(32)
    a = plain.model(input_ids=x, output_hidden_states=True)
    b = rec.model(x)
    assert torch.equal(a.logits, b.logits)
    assert all(torch.equal(h, g) for h, g in zip(a.hidden_states, b.hidden_states))


@torch.inference_mode()
def test_h_prev_changes_the_next_window_from_layer_l_ins_on_and_nothing_else(plain, rec):
    w1, w2 = ids(32, 1), ids(32, 2)
    first = rec.model(w1)
    again = rec.model(w1)  # running window 2 with h_prev leaves no state behind
    second = rec.model(w2, h_prev=first.h_next)
    ref = plain.model(input_ids=w2, output_hidden_states=True)
    l_ins = rec.model.config.l_ins
    for layer, (h, g) in enumerate(zip(second.hidden_states, ref.hidden_states)):
        if layer < l_ins:  # embeddings and the outputs of the layers below l_ins: untouched
            assert torch.equal(h, g), layer
        else:  # the output of layer l_ins and everything above: every position changed
            assert (h - g).abs().amax(-1).min() > 1e-6, layer
    assert (second.logits - ref.logits).abs().amax(-1).min() > 1e-6
    after = rec.model(w2)  # and without h_prev the window is plain again
    assert torch.equal(after.logits, ref.logits)
    assert torch.equal(again.logits, first.logits)


@torch.inference_mode()
def test_300_queries_and_301_keys_at_l_ins_only(rec, monkeypatch):
    seen = []
    orig = modeling_gpt2.eager_attention_forward

    def record(module, query, key, value, mask, **kw):
        seen.append((module.layer_idx, query.shape[2], key.shape[2], value.shape[2]))
        return orig(module, query, key, value, mask, **kw)

    monkeypatch.setattr(modeling_gpt2, "eager_attention_forward", record)
    outs = []
    hook = rec.model.attn.register_forward_hook(lambda m, a, o: outs.append(o[0].shape))
    try:
        h = rec.model(ids(300, 3)).h_next
        seen.clear()
        out = rec.model(ids(300, 4), h_prev=h)
    finally:
        hook.remove()
    l_ins = rec.model.config.l_ins
    assert seen == [(i, 300, 301 if i == l_ins - 1 else 300, 301 if i == l_ins - 1 else 300)
                    for i in range(rec.base.config.num_hidden_layers)]
    assert outs[-1][1] == 300 and out.logits.shape[1] == 300  # 300 outputs at l_ins and at the top


@torch.inference_mode()
def test_the_slot_keeps_attention_causal(rec):
    h = rec.model(ids(32, 5)).h_next
    x = ids(32, 6)
    y = x.clone()
    y[0, 20] = 1234
    a, b = rec.model(x, h_prev=h), rec.model(y, h_prev=h)
    assert torch.equal(a.logits[0, :20], b.logits[0, :20])
    assert not torch.equal(a.logits[0, 20:], b.logits[0, 20:])


@torch.inference_mode()
def test_pooling_is_eq_1_over_layer_outputs_and_the_non_repeated_positions(rec):
    out = rec.model(ids(32, 7))
    module = rec.model.recurrence
    w = torch.softmax(module.alpha, 0)
    assert torch.allclose(w.sum(), torch.tensor(1.0))
    L = len(out.hidden_states) - 1
    want = sum(w[k - 1] * out.hidden_states[k][:, :24].mean(1) for k in range(1, L + 1))  # hidden[0] excluded
    assert torch.allclose(module.pool(out.hidden_states, pool_len=24), want, atol=1e-6)
    assert torch.allclose(rec.model(ids(32, 7), pool_len=24).h_next, module.ffn(want), atol=1e-6)
    assert torch.allclose(out.h_next, module.ffn(module.pool(out.hidden_states)), atol=1e-6)


def test_gradients_flow_through_the_windows(rec):
    model = rec.model
    model.zero_grad()
    first = model(ids(16, 8))
    second = model(ids(16, 9), h_prev=first.h_next, need_state=False)
    second.logits.logsumexp(-1).sum().backward()
    assert model.recurrence.alpha.grad is not None and model.recurrence.alpha.grad.abs().sum() > 0
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.recurrence.ffn.parameters())
    model.zero_grad()


@torch.inference_mode()
def test_fast_training_kernels_match_eager(rec):
    x1, x2 = ids(24, 10), ids(24, 11)
    h = rec.model(x1).h_next
    ref = rec.model(x2, h_prev=h).logits
    for b in rec.base.transformer.h:
        b.attn._probes_fast = True
    try:
        fast = rec.model(x2, h_prev=h).logits
    finally:
        for b in rec.base.transformer.h:
            b.attn._probes_fast = False
    assert torch.allclose(fast, ref, atol=1e-5)


@torch.inference_mode()
def test_save_and_load_round_trip(rec, tmp_path):
    rec.model.save_recurrence(tmp_path)
    import json

    cfg = RecurrenceConfig.from_dict(json.loads((tmp_path / "recurrence.json").read_text()))
    assert cfg == rec.model.config
    import copy

    other = RecurrentLM.with_weights(copy.deepcopy(rec.base), cfg, tmp_path / "recurrence.safetensors").eval()
    x = ids(16, 12)
    assert torch.equal(other(x).h_next, rec.model(x).h_next)


def test_bad_settings_are_one_line_errors(plain):
    import copy

    lm = copy.deepcopy(plain.model)
    with pytest.raises(CheckpointError, match="l_ins = 5 is out of range"):
        RecurrentLM(lm, RecurrenceConfig(window=16, l_ins=5))
    with pytest.raises(CheckpointError, match="overlap 16"):
        RecurrentLM(lm, RecurrenceConfig(window=16, overlap=16))


def test_an_encoder_is_not_a_causal_lm():
    with pytest.raises(CheckpointError, match="'tiny-bert' is not a causal language model") as err:
        load_lm("tiny-bert")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-llama", "tiny-gemma3"])
def test_the_recurrent_family_is_an_encoder_of_one_window(name):
    import numpy as np

    import probes

    texts = ["A short text here.", "Another one, a little longer than the first."]
    a = probes.extract(f"{name}-recurrent", texts, cache_dir=None, progress=False)
    b = probes.extract(name, texts, cache_dir=None, progress=False)
    np.testing.assert_array_equal(np.asarray(a.hidden), np.asarray(b.hidden))


# ----------------------------------------------------------------------------- Llama and Gemma-3 (rotary, GQA, sliding)

FAMILIES = ["tiny-gpt2", "tiny-llama", "tiny-gemma3"]


@pytest.fixture(scope="module", params=FAMILIES)
def pair(request):
    """(plain LM, the same LM wrapped with a random recurrence module) for each family."""
    return load_lm(request.param), load_lm(f"{request.param}-recurrent")


def test_tiny_configs_have_gqa_and_a_short_sliding_window():
    llama, gemma = load_lm("tiny-llama").base.config, load_lm("tiny-gemma3").base.config
    assert llama.num_key_value_heads < llama.num_attention_heads
    assert gemma.num_key_value_heads < gemma.num_attention_heads
    assert gemma.layer_types[0] == "sliding_attention" and gemma.sliding_window < 32  # windows of 32 tokens
    assert load_lm("tiny-gemma3-recurrent").model.config.l_ins == 1  # h_prev goes into the sliding layer


@torch.inference_mode()
def test_without_h_prev_every_family_is_the_plain_model_exactly(pair):
    plain, rec = pair
    x = torch.cat([ids(32, 20), ids(32, 21)])
    mask = torch.ones_like(x)
    mask[1, 20:] = 0
    for m in (None, mask):
        a = plain.model(input_ids=x, attention_mask=m, output_hidden_states=True)
        b = rec.model(x, attention_mask=m)
        assert torch.equal(a.logits, b.logits)
        assert all(torch.equal(h, g) for h, g in zip(a.hidden_states, b.hidden_states))


@torch.inference_mode()
def test_every_position_attends_to_h_prev_from_l_ins_on(pair):
    plain, rec = pair
    x = ids(32, 22)
    h1 = rec.model(ids(32, 23)).h_next
    h2 = rec.model(ids(32, 24)).h_next
    a, b = rec.model(x, h_prev=h1), rec.model(x, h_prev=h2)
    ref = plain.model(input_ids=x, output_hidden_states=True)
    l_ins = rec.model.config.l_ins
    for layer in range(l_ins):  # below l_ins nothing changes
        assert torch.equal(a.hidden_states[layer], ref.hidden_states[layer])
    # another h_prev changes every position's output, also those beyond a sliding window (tiny-gemma3: 8)
    assert (a.hidden_states[l_ins] - b.hidden_states[l_ins]).abs().amax(-1).min() > 1e-6
    assert (a.logits - b.logits).abs().amax(-1).min() > 1e-6
    assert (a.logits - ref.logits).abs().amax(-1).min() > 1e-6


def _reference_attention(rec, x, h_prev, slot_position=-1):
    """Layer l_ins's attention output as the PLAIN attention module computes it on the n + 1 inputs
    [norm(h_prev), norm(x_1..x_n)] at positions [slot_position, 0..n-1], with the slot visible to every query and
    the window causal (and, in a sliding layer, limited to its window) -> (B, n, d)."""
    model = rec.model
    l_ins, n = model.config.l_ins, x.shape[1]
    below = model(x).hidden_states[l_ins - 1]  # the block's input (unchanged by h_prev)
    seq = torch.cat([model.norm(h_prev).unsqueeze(1), model.norm(below)], dim=1)  # (B, 1 + n, d)
    pos = torch.cat([torch.tensor([slot_position]), torch.arange(n)])[None].expand(x.shape[0], -1)
    rotary = model.lm.get_submodule(model.adapter.rotary)
    cos_sin = rotary(seq, pos, model.attn.layer_type) if model.adapter.rotary_by_layer_type else rotary(seq, pos)
    i, j = torch.arange(n + 1)[:, None], torch.arange(n + 1)[None]
    allowed = j <= i
    window = getattr(model.attn, "sliding_window", None)
    if window:
        allowed &= i - j < window
    allowed[:, 0] = True
    mask = torch.zeros(n + 1, n + 1).masked_fill(~allowed, torch.finfo(torch.float32).min)[None, None]
    out = model.attn(hidden_states=seq, position_embeddings=cos_sin, attention_mask=mask)[0]
    return out[:, 1:]


@pytest.mark.parametrize("name", ["tiny-llama-recurrent", "tiny-gemma3-recurrent"])
@torch.inference_mode()
def test_h_prev_is_one_extra_key_value_at_position_minus_1(name):
    rec = load_lm(name)
    assert rec.model.config.slot_position == -1
    x, h = ids(32, 25), rec.model(ids(32, 26)).h_next
    got = []
    hook = rec.model.attn.register_forward_hook(lambda m, a, o: got.append(o[0]))
    try:
        rec.model(x, h_prev=h)
    finally:
        hook.remove()
    want = _reference_attention(rec, x, h)
    assert got[0].shape == want.shape == (1, 32, rec.base.config.hidden_size)
    torch.testing.assert_close(got[0], want, rtol=1e-6, atol=1e-7)
    for other in (0, -2):  # the slot's rotation matters: another position gives another output
        assert not torch.allclose(_reference_attention(rec, x, h, other), want, rtol=1e-6, atol=1e-7)
    if name == "tiny-gemma3-recurrent":  # the sliding window matters here: a full mask gives another output
        rec.model.attn.sliding_window, keep = None, rec.model.attn.sliding_window
        try:
            assert not torch.allclose(_reference_attention(rec, x, h), want, atol=1e-5)
        finally:
            rec.model.attn.sliding_window = keep


@torch.inference_mode()
def test_right_padding_does_not_change_the_real_tokens(pair):
    _, rec = pair
    short, long = ids(20, 27), ids(32, 28)
    h = rec.model(torch.cat([ids(32, 29), ids(32, 30)])).h_next  # (2, d)
    x = torch.cat([long, torch.cat([short, torch.zeros(1, 12, dtype=torch.long)], 1)])
    mask = torch.ones_like(x)
    mask[1, 20:] = 0
    both = rec.model(x, h_prev=h, attention_mask=mask)
    alone = rec.model(short, h_prev=h[1:])
    torch.testing.assert_close(both.logits[1, :20], alone.logits[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(both.h_next[1], alone.h_next[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(both.logits[0], rec.model(long, h_prev=h[:1]).logits[0], rtol=1e-5, atol=1e-5)


def test_a_frozen_base_training_step_changes_only_the_recurrence_module(pair):
    _, rec = pair
    model = rec.model
    model.freeze_base()
    try:
        before = {k: v.detach().clone() for k, v in model.state_dict().items()}
        params = [p for p in model.parameters() if p.requires_grad]
        assert {id(p) for p in params} == {id(p) for p in model.recurrence.parameters()}
        opt = torch.optim.Adam(params, lr=1e-2)
        x1, x2 = ids(16, 31), ids(16, 32)
        h = model(x1).h_next
        logits = model(x2, h_prev=h, need_state=False).logits
        loss = torch.nn.functional.cross_entropy(logits[0, :-1], x2[0, 1:])
        loss.backward()
        opt.step()
        after = model.state_dict()
        changed = {k for k in before if not torch.equal(before[k], after[k])}
        assert changed == {f"recurrence.{k}" for k in model.recurrence.state_dict()}
    finally:
        model.load_state_dict(before)
        model.freeze_base(False)
        model.zero_grad(set_to_none=True)


@pytest.mark.parametrize("name", ["tiny-llama-recurrent", "tiny-gemma3-recurrent"])
@torch.inference_mode()
def test_fast_kernels_match_eager_for_rotary_families(name):
    rec = load_lm(name)
    x1, x2 = ids(24, 33), ids(24, 34)
    h = rec.model(x1).h_next
    ref = rec.model(x2, h_prev=h).logits
    for layer in rec.base.model.layers:
        layer.self_attn._probes_fast = True
    fast = rec.model(x2, h_prev=h).logits
    torch.testing.assert_close(fast, ref, rtol=1e-5, atol=1e-5)
