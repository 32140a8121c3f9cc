"""probes.models.mog_lens: the Eq. 14 split of a BERT's attention logits is exact.

* On tiny-bert (random weights made large), the six terms sum to the model's own q k^T / sqrt(d_head)
  (q, k hooked from its query/key Linear layers during its own forward) to 1e-4, and softmax of the
  sum plus the padding mask equals the attention the model returns.
* Layer 1 is all "ii" (r_p = 0); bias_row is constant along every row.
* Through probes.extract: the covariance map sums over terms to the logit variance; padding invariance.
* Models the lens cannot split exactly are refused.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import probes
from probes.errors import CheckpointError
from probes.models.mog_lens import TERMS, LensEncoder, lens_terms

TEXTS = ["The cat sat on the mat.", "A much longer sentence that forces the short one to be padded a lot."]


def big(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return model


def test_terms_sum_to_the_models_own_logits():
    enc = probes.load("tiny-bert-lens")
    big(enc.model)
    toks = enc.tokenize(TEXTS)
    n = max(len(t.ids) for t in toks)
    ids = torch.tensor([t.ids + [enc.pad_id] * (n - len(t.ids)) for t in toks])
    mask = torch.tensor([[1] * len(t.ids) + [0] * (n - len(t.ids)) for t in toks])
    seen = {}
    hooks = []
    for i, layer in enumerate(enc.model.encoder.layer):
        for name in ("query", "key"):
            hooks.append(getattr(layer.attention.self, name).register_forward_hook(
                lambda m, a, out, i=i, name=name: seen.__setitem__((i, name), out.detach())))
    with torch.no_grad():
        out = enc.model(input_ids=ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
    for h in hooks:
        h.remove()
    hidden = out.hidden_states
    for i, layer in enumerate(enc.model.encoder.layer):
        attn = layer.attention.self
        H = attn.num_attention_heads
        q = seen[(i, "query")].view(2, n, H, -1).transpose(1, 2).double()
        k = seen[(i, "key")].view(2, n, H, -1).transpose(1, 2).double()
        logits = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5  # the model's own
        r_p = hidden[i - 1] if i > 0 else torch.zeros_like(hidden[0])
        with torch.no_grad():
            terms = lens_terms(attn, r_p, hidden[i] - r_p)
        total = sum(terms[t] for t in TERMS)
        assert logits.abs().max() > 1  # the logits are not trivially small
        torch.testing.assert_close(total, logits, atol=1e-4, rtol=0)
        bias = torch.zeros(2, 1, 1, n, dtype=total.dtype).masked_fill(mask[:, None, None] == 0, float("-inf"))
        torch.testing.assert_close(torch.softmax(total + bias, -1), out.attentions[i].double(), atol=1e-5, rtol=0)
        row = terms["bias_row"]
        torch.testing.assert_close(row, row[..., :1].expand_as(row))  # constant along each row
        if i == 0:  # r_p = 0: every r_p term vanishes
            for t in ("pp", "pi", "ip"):
                assert terms[t].abs().max() == 0


def test_lens_maps_through_extract_are_exact_shares_and_padding_safe():
    enc = probes.load("tiny-bert-lens")
    big(enc.model, seed=1)
    alone = probes.extract(enc, [TEXTS[0]], maps=True, cache_dir=None, progress=False)
    batched = probes.extract(enc, [TEXTS[1], TEXTS[0]], maps=True, cache_dir=None, progress=False)
    L, H = 2, 4
    for m in ("mog_lens_cov", "mog_lens_var", "attention"):  # float32 model with large weights: 1e-3 relative
        a = alone.text_map(m, 0)
        np.testing.assert_allclose(batched.text_map(m, 1), a, rtol=1e-3, atol=1e-5 * np.abs(a).max())
    for t in range(2):
        cov = batched.text_map("mog_lens_cov", t).reshape(L, len(TERMS), H, -1)
        var = batched.text_map("mog_lens_var", t).reshape(L, len(TERMS) + 1, H, -1)
        np.testing.assert_allclose(cov.sum(1), var[:, -1], rtol=1e-4, atol=1e-6)  # shares add to 1
        assert np.all(var >= 0) and np.abs(cov[:, TERMS.index("bias_row")]).max() < 1e-4 * var[:, -1].max()
        np.testing.assert_allclose(cov[0, :3], 0.0, atol=1e-6)  # layer 1: no r_p terms
    # the lens leaves the hidden states alone
    plain = probes.extract("tiny-bert", [TEXTS[0]], cache_dir=None, progress=False)
    unlensed = probes.extract(enc, [TEXTS[0]], cache_dir=None, progress=False)
    assert unlensed.hidden.shape == plain.hidden.shape and not unlensed.maps


def test_unsupported_models_are_refused():
    with pytest.raises(CheckpointError, match="BERT-style"):
        LensEncoder(probes.load("tiny-gpt2"))
    with pytest.raises(CheckpointError, match="BERT-style"):
        LensEncoder(probes.load("tiny-mog"))


def test_lens_statistics_pool_rows_and_add_to_one(tmp_path):
    import json

    from analyses import mog_lens as ml

    enc = probes.load("tiny-bert-lens")
    big(enc.model, seed=2)
    texts = TEXTS + ["One two three.", "Four five six seven eight nine ten eleven twelve thirteen fourteen."]
    acts = probes.extract(enc, texts, maps=True, cache_dir=None, progress=False)
    res = ml.compute(ml.Config(edges=[8, 14]), acts=acts)
    assert res.bucket_labels == ["all", "<8", "8-13", ">=14"] and res.bucket_counts[0] == 4
    assert sum(res.bucket_counts[1:]) == 4
    for b, rows in enumerate(res.share):
        if res.bucket_counts[b] == 0:
            assert rows == [None, None]
            continue
        np.testing.assert_allclose(np.sum(rows, -1), 1.0, atol=1e-4)
        np.testing.assert_allclose(rows[0][:3], 0.0, atol=1e-6)  # layer 1: no r_p terms (ii + biases)
    # planted: every row's cov = (1, 2, 0, 1, 0, 0) x c, var_logit = 4 c -> shares 1/4, 1/2, 0, 1/4, 0, 0
    L, K, H = 2, len(TERMS), 4
    for t in range(acts.n_texts):
        n = acts.offsets[t + 1] - acts.offsets[t]
        c = np.broadcast_to(np.array([1, 2, 0, 1, 0, 0.0])[None, :, None, None] * (t + 1), (L, K, H, n))
        v = np.concatenate([c ** 2, np.full((L, 1, H, n), 4.0 * (t + 1))], 1)
        for m, x in (("mog_lens_cov", c), ("mog_lens_var", v)):
            a, b = acts.map_offsets[m][t:t + 2]
            acts.maps[m][a:b] = x.ravel()
    res = ml.compute(ml.Config(edges=[8, 14]), acts=acts)
    np.testing.assert_allclose(res.share[0], [[0.25, 0.5, 0, 0.25, 0, 0]] * 2, atol=1e-6)
    doc = json.loads(json.dumps(res.to_json(), allow_nan=False))
    fig = ml.plot([ml.Result.from_json(doc)])
    for line, k in zip(fig.axes[0].get_lines(), range(5)):
        np.testing.assert_allclose(line.get_ydata(), np.array(res.share[0])[:, k])
    from analyses.common import Result
    from analyses.style import model_color

    assert fig.axes[0].title.get_color() == model_color(res.model_name)  # the model's colour in every figure
    assert isinstance(res, Result) and ml.Result.from_json(doc).to_json() == doc  # JSON round trip
    assert len(ml.table_rows(res)) == 4 * 2 * K
    with pytest.raises(probes.ProbeError, match="mog-lens"):
        ml.compute(acts=probes.extract("tiny-bert", TEXTS, maps=True, cache_dir=None, progress=False))


def test_any_bert_style_encoder_goes_through_the_lens(tmp_path):
    """A registry name of family hf, and a model object, are read through the lens: the same numbers as the
    mog-lens entry of the same weights, in cache entries of their own; a causal LM is refused in one line."""
    from transformers import BertModel

    from analyses import maps, mog_lens
    from probes.checkpoints.names import get_spec
    from probes.models.hf import hf_tokenizer

    texts = [f"sentence number {i} is about a cat and a dog" for i in range(12)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny maps that float16 cannot hold: stored as float32
        entry = mog_lens.run("tiny-bert-lens", texts, cache_dir=tmp_path)
        named = mog_lens.run("tiny-bert", texts, cache_dir=tmp_path)
        plain = maps.run("tiny-bert", texts, cache_dir=tmp_path)  # the plain encoder's maps: another entry
        model = probes.load("tiny-bert").model
        mine = mog_lens.run(model, texts, tokenizer=hf_tokenizer(get_spec("tiny-bert")), name="mine",
                            cache_dir=tmp_path)
    assert named.share == entry.share and named.model_name == "tiny-bert"
    assert len({entry.activations["key"], named.activations["key"], plain.activations["key"]}) == 3
    assert isinstance(model, BertModel)
    assert mine.model_name == "mine" and mine.share == entry.share
    with pytest.raises(CheckpointError, match="BERT-style"):
        mog_lens.run("tiny-gpt2", texts, cache_dir=tmp_path)
