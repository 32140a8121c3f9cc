"""probes.models.convbert: ConvBERT's dynamic-convolution kernels as banded maps, checked against the model.

* The identity: with the captured maps M (L, H_conv, n, n) and the convolution branch's values
  V = conv_out_layer(X) split into heads, M @ V is exactly the convolution half of each layer's
  ConvBertSelfAttention output (the half HF concatenates after the self-attention heads), checked
  against the installed transformers model. The random init's kernels are within 3e-5 of uniform
  (1/9), which would hide a wrong band, head or offset; this test scales ``conv_kernel_layer``'s
  weights by KERNEL_SCALE so the kernels are peaked (mean row maximum ~0.8), and a band shifted by
  one, swapped heads or reversed offsets in probes.models.convbert then miss by 0.1-1, not 1e-5.
* The band: rows sum to 1 away from the sequence edges and to less than 1 within (k-1)//2 of
  them (zero-padded offsets are dropped, not renormalised); nothing outside |i - j| <= (k-1)//2.
* The padding leak: HF's convolution branch applies no attention mask, so right padding changes
  the last (k-1)//2 real tokens of a shorter text at layer 1, and every real token from layer 2
  on. The encoder says so (padding_safe = False) and probes.extract then avoids padding: its
  activations are padding-invariant.

Model: the seeded random ``tiny-convbert`` from checkpoints.yaml (2 layers, 32 wide, 2 attention
+ 2 convolution heads, kernel 9), built in about a second.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import probes
from probes.models.convbert import MAP_NAME, ConvKernelCapture, banded_kernel_maps

SHORT = "The cat sat on the mat."
LONG = ["A considerably longer sentence follows here, with many more words than the short one, so "
        "that the short text is padded when it shares a batch with this one.",
        "Another long text: padding must never change the states of real tokens in any model."]


KERNEL_SCALE = 1e5  # the random init's kernel logits are ~1e-4 (near-uniform kernels); scaled, they are peaked


@pytest.fixture(scope="module")
def enc():
    return probes.load("tiny-convbert")


@pytest.fixture(scope="module")
def peaked():
    """tiny-convbert (a fresh copy) with every layer's kernel-producing Linear scaled by KERNEL_SCALE."""
    model = probes.load("tiny-convbert")
    with torch.no_grad():
        for layer in model.model.encoder.layer:
            layer.attention.self.conv_kernel_layer.weight.mul_(KERNEL_SCALE)
    return model


def batch(enc, texts):
    """Right-padded ids and mask (B, n) of ``texts``."""
    toks = enc.tokenize(texts)
    n = max(len(t.ids) for t in toks)
    ids = torch.full((len(toks), n), enc.pad_id, dtype=torch.long)
    mask = torch.zeros((len(toks), n), dtype=torch.long)
    for r, t in enumerate(toks):
        ids[r, :len(t.ids)] = torch.tensor(t.ids)
        mask[r, :len(t.ids)] = 1
    return ids, mask, [len(t.ids) for t in toks]


def forward_with_branches(enc, ids, mask):
    """enc.forward(maps=True), also recording each layer's conv values (B, n, H*hs) and
    self-attention output (B, n, 2*H*hs)."""
    values, outputs, handles = {}, {}, []
    for lyr, layer in enumerate(enc.model.encoder.layer):
        sa = layer.attention.self
        handles.append(sa.conv_out_layer.register_forward_hook(
            lambda m, i, o, lyr=lyr: values.__setitem__(lyr, o.detach())))
        handles.append(sa.register_forward_hook(lambda m, i, o, lyr=lyr: outputs.__setitem__(lyr, o[0].detach())))
    try:
        out = enc.forward(ids, mask, maps=True)
    finally:
        for h in handles:
            h.remove()
    return out, values, outputs


def test_specs_and_shapes(enc):
    sa = enc.model.encoder.layer[0].attention.self
    cfg = enc.model.config
    assert sa.num_attention_heads == cfg.num_attention_heads // cfg.head_ratio == 2
    spec = enc.map_specs()[MAP_NAME]
    assert (spec.layers, spec.k, spec.token_axes) == (2, 2, 2)
    assert "not renormalised" in spec.description
    ids, mask, _ = batch(enc, [SHORT])
    out = enc.forward(ids, mask, maps=True)
    assert out.maps[MAP_NAME].shape == (2, 1, 2, ids.shape[1], ids.shape[1])
    assert enc.forward(ids, mask, maps=False).maps == {}  # captured only when asked


@pytest.mark.parametrize("texts", [[SHORT], [SHORT, LONG[0]]], ids=["alone", "padded-batch"])
def test_kernel_maps_times_values_reproduce_the_convolution_heads(peaked, texts):
    ids, mask, _ = batch(peaked, texts)
    out, values, outputs = forward_with_branches(peaked, ids, mask)
    M = out.maps[MAP_NAME]  # (L, B, H, n, n)
    L, B, H, n, _ = M.shape
    p = (peaked.model.config.conv_kernel_size - 1) // 2
    interior_max = M[..., p:n - p, :].amax(-1)  # (L, B, H, n - 2p): each kernel's largest weight
    assert interior_max.mean() > 0.5, "the fixture's kernels must be peaked, not near-uniform (1/9)"
    for lyr in range(L):
        hs = values[lyr].shape[-1] // H
        V = values[lyr].reshape(B, n, H, hs).transpose(1, 2)  # (B, H, n, hs)
        conv_half = outputs[lyr][..., H * hs:].reshape(B, n, H, hs).transpose(1, 2)  # after the attention heads
        torch.testing.assert_close(M[lyr] @ V, conv_half, atol=1e-5, rtol=0)
        # the check can tell heads apart: the other head's kernels miss by far more than the tolerance
        assert (M[lyr].flip(1) @ V - conv_half).abs().max() > 1e-2


def test_band_rows_and_edges(enc):
    ids, mask, (n,) = batch(enc, [LONG[0]])
    M = enc.forward(ids, mask, maps=True).maps[MAP_NAME].numpy()[:, 0]  # (L, H, n, n)
    k = enc.model.config.conv_kernel_size
    p = (k - 1) // 2
    i, j = np.indices((n, n))
    assert np.all(M[..., np.abs(i - j) > p] == 0)  # nothing outside the band
    assert np.all(M >= 0)
    rows = M.sum(-1)  # (L, H, n)
    np.testing.assert_allclose(rows[..., p:n - p], 1.0, atol=1e-6)  # interior: the whole kernel
    assert np.all(rows[..., :p] < 1 - 1e-6) and np.all(rows[..., n - p:] < 1 - 1e-6)  # edges: zero padding
    assert np.all(rows <= 1 + 1e-6)


def test_banded_maps_equal_hf_unfold_convolution_even_when_shorter_than_the_kernel():
    torch.manual_seed(0)
    B, H, k, hs = 2, 3, 7, 4
    for n in (1, 3, 12):
        logits, V = torch.randn(B, n, H * k), torch.randn(B, n, H * hs)
        # HF's computation (ConvBertSelfAttention.forward), verbatim in shape handling
        kern = torch.softmax(logits.reshape(-1, k, 1), dim=1)
        u = torch.nn.functional.unfold(V.transpose(1, 2).contiguous().unsqueeze(-1), kernel_size=[k, 1],
                                       padding=[(k - 1) // 2, 0])
        u = u.transpose(1, 2).reshape(B, -1, H * hs, k).reshape(-1, hs, k)
        ref = torch.matmul(u, kern).reshape(B, n, H, hs).transpose(1, 2)
        M = banded_kernel_maps(logits, H, k)
        assert M.shape == (B, H, n, n)
        torch.testing.assert_close(M @ V.reshape(B, n, H, hs).transpose(1, 2), ref, atol=1e-6, rtol=0)


def test_hf_convbert_leaks_padding_so_the_encoder_is_not_padding_safe(enc):
    """Documents the leak in the raw HF model: the convolution branch is not masked."""
    assert ConvKernelCapture.padding_safe is False and enc.padding_safe is False
    assert probes.load("tiny-bert").padding_safe is True
    alone_ids, alone_mask, (n,) = batch(enc, [SHORT])
    ids, mask, _ = batch(enc, [SHORT, LONG[0]])
    with torch.no_grad():
        a = enc.model(input_ids=alone_ids, attention_mask=alone_mask, output_hidden_states=True).hidden_states
        b = enc.model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    p = (enc.model.config.conv_kernel_size - 1) // 2
    diff = (a[1][0] - b[1][0, :n]).abs().amax(-1)  # layer 1, per real token of SHORT
    assert torch.all(diff[:n - p] < 1e-5), "tokens further than p from the end must not see the padding"
    assert torch.all(diff[n - p:] > 1e-4), "the last p real tokens see pad tokens through the convolution"
    diff2 = (a[2][0] - b[2][0, :n]).abs().amax(-1)  # layer 2: the change has reached every real token
    assert torch.all(diff2 > 1e-6) and diff2[:n - p].min() > 100 * diff[:n - p].max()


def test_encoder_counts_the_attention_heads_after_head_ratio(enc):
    """ConvBERT's attention maps have num_attention_heads // head_ratio heads (2 here), not 4."""
    assert enc.num_heads == enc.model.encoder.layer[0].attention.self.num_attention_heads == 2


def test_extract_is_padding_invariant_for_convbert(enc):
    run = lambda texts: probes.extract(enc, texts, maps=True, batch_size=8, cache_dir=None, progress=False)
    alone, batched = run([SHORT]), run([LONG[0], SHORT, LONG[1]])
    t = 1
    assert batched.tokens[t] == alone.tokens[0]
    np.testing.assert_allclose(batched.text_hidden(t), alone.text_hidden(0), atol=1e-5, rtol=0)
    np.testing.assert_allclose(batched.sentence[:, t], alone.sentence[:, 0], atol=1e-5, rtol=0)
    np.testing.assert_allclose(batched.text_map("attention", t), alone.text_attentions(0), atol=1e-5, rtol=0)
    k_alone, k_batched = alone.text_map(MAP_NAME, 0), batched.text_map(MAP_NAME, t)
    n = len(alone.tokens[0])
    assert k_alone.shape == (2, 2, n, n)
    np.testing.assert_allclose(k_batched, k_alone, atol=1e-5, rtol=0)
    np.testing.assert_allclose(k_alone.sum(-1)[..., 4:n - 4], 1.0, atol=1e-5)  # the model saw no padding
