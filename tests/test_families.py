"""The model families users bring: seeded random tiny RoBERTa, ALBERT, DistilBERT,
MPNet, Llama and Gemma-3 from checkpoints.yaml, each through padding invariance, the trait of its
architecture that a loader can get wrong, and one run of every sentence analysis at tiny sizes.

Traits checked: RoBERTa / MPNet number positions from the padding index + 1 (RoBERTa's pad_token_id,
here the tokenizer's pad id 0, so padding really takes the padding path; MPNet's index is fixed at 1 by
transformers): the states we extract are the ones with those positions, and the length limit leaves
room for the offset; ALBERT applies one shared
layer at every depth; DistilBERT is never given token_type_ids; Llama / Gemma-3 attend only to the
past. (Gemma-3's <bos> comes from its own tokenizer: tests/test_hf_names.py checks that a Gemma-3
folder's tokenizer puts it first; ``tiny-gemma3`` borrows minilm-l6's tokenizer, which has no <bos>.)
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import probes
from probes import ProbeError, extract

FAMILIES = ["tiny-roberta", "tiny-albert", "tiny-distilbert", "tiny-mpnet", "tiny-llama", "tiny-gemma3"]
SHORT = "The cat sat."
LONG = [
    "A considerably longer sentence follows here, with many more words than the short one, so that "
    "the short text has to be padded by a large amount when it shares a batch with this one.",
    "Another long text: padding must never change the states of real tokens, whichever model we "
    "look at, encoder or causal, small or large, random or trained on real sentences.",
]


def run(model, texts, **kw):
    return extract(model, texts, progress=False, cache_dir=None, **kw)


@pytest.mark.parametrize("name", FAMILIES)
def test_padding_invariance(name, encoders, monkeypatch):
    enc = encoders(name)
    alone = run(enc, [SHORT], maps=True)
    shapes, pads = [], []
    inner = enc.forward

    def forward(input_ids, attention_mask, maps=False):
        shapes.append(tuple(input_ids.shape))
        pads.append(input_ids[~attention_mask.bool()].unique().tolist())
        return inner(input_ids, attention_mask, maps=maps)

    monkeypatch.setattr(enc, "forward", forward)
    batched = run(enc, [LONG[0], SHORT, LONG[1]], maps=True, batch_size=8)
    n = alone.hidden.shape[1]
    assert len(shapes) == 1 and shapes[0][1] > 2 * n, "the short text must share one batch and be padded heavily"
    assert pads[0] == [enc.pad_id]  # padded with the tokenizer's pad id ...
    if enc.model.config.model_type == "roberta":  # ... which RoBERTa skips when numbering positions
        assert enc.model.embeddings.padding_idx == enc.model.config.pad_token_id == enc.pad_id
    np.testing.assert_allclose(batched.text_hidden(1), alone.text_hidden(0), atol=1e-5, rtol=0)
    np.testing.assert_allclose(batched.sentence[:, 1], alone.sentence[:, 0], atol=1e-5, rtol=0)
    a_alone, a_batched = alone.text_attentions(0), batched.text_attentions(1)
    assert a_alone.shape == (enc.num_layers, enc.num_heads, n, n)
    np.testing.assert_allclose(a_batched, a_alone, atol=1e-5, rtol=0)
    if enc.spec.kind == "causal":
        assert np.all(np.triu(a_batched, k=1) == 0)
    else:  # bidirectional: real tokens do attend to later tokens
        assert np.triu(a_batched, k=1).sum() > 0


@pytest.mark.parametrize("name", ["tiny-roberta", "tiny-mpnet"])
def test_positions_start_after_the_padding_index(name, encoders):
    enc = encoders(name)
    pad = enc.model.embeddings.padding_idx  # RoBERTa: pad_token_id; MPNet: always 1 in transformers
    ids = torch.tensor([enc.tokenize([SHORT])[0].ids])
    n = ids.shape[1]
    emb = enc.model.embeddings
    after_pad = emb(input_ids=ids, position_ids=torch.arange(pad + 1, pad + 1 + n)[None])
    from_zero = emb(input_ids=ids, position_ids=torch.arange(n)[None])
    extracted = torch.from_numpy(run(enc, [SHORT]).text_hidden(0)[0])  # (n, d) hidden[0]
    torch.testing.assert_close(extracted, after_pad[0], atol=1e-6, rtol=0)
    assert not torch.allclose(extracted, from_zero[0], atol=1e-3)  # the offset matters: positions really differ
    # the length limit leaves room for the offset: the longest allowed input uses the last position
    limit = enc.model.config.max_position_embeddings - pad - 1  # roberta 130 - 0 - 1; mpnet 514 - 1 - 1
    assert enc.max_length == min(limit, enc.tokenizer.tokenizer.model_max_length)
    n_inner = enc.max_length - 2  # [CLS] ... [SEP]
    longest = run(enc, [[1000 + i for i in range(n_inner)]])
    assert longest.hidden.shape[1] == enc.max_length and np.isfinite(longest.hidden).all()
    with pytest.raises(ProbeError, match="longer"):
        run(enc, [[1000 + i for i in range(n_inner + 1)]])


def test_tiny_roberta_length_limit_binds(encoders):
    """max_position_embeddings 130 with pad id 0: positions 1..129, so 129 tokens, not 130."""
    assert encoders("tiny-roberta").max_length == 129


def test_albert_shares_one_layer(encoders):
    enc = encoders("tiny-albert")
    groups = enc.model.encoder.albert_layer_groups
    assert len(groups) == 1 and enc.num_layers == 2
    hidden = torch.from_numpy(run(enc, [SHORT]).text_hidden(0))  # (L+1, n, d)
    with torch.inference_mode():
        for layer in range(enc.num_layers):  # the same weights map every layer's input to its output
            out = groups[0](hidden[layer][None])
            out = out[0] if isinstance(out, tuple) else out
            torch.testing.assert_close(out[0], hidden[layer + 1], atol=1e-5, rtol=0)


def test_distilbert_gets_no_token_type_ids(encoders):
    enc = encoders("tiny-distilbert")
    seen: list[set] = []
    handle = enc.model.register_forward_pre_hook(lambda mod, args, kwargs: seen.append(set(kwargs)), with_kwargs=True)
    try:
        run(enc, [SHORT, LONG[0]])
    finally:
        handle.remove()
    assert seen and all("token_type_ids" not in k and "input_ids" in k for k in seen)


# --------------------------------------------------------------------------- every sentence analysis

N = ["--n-sentences", "120", "--no-figures"]  # the numbers of each family; figures are drawn by the contract tests


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILIES)
def test_every_sentence_analysis_runs(name, tmp_path):
    from analyses import anisotropy, probing, redundancy, similarity, transitions
    from analyses import maps as mp

    out = tmp_path / "out"
    book = str(Path(probes.__file__).resolve().parent.parent / "data" / "corpus" / "austen-persuasion.txt")
    anisotropy.main(["--model", name, *N, "--n-tokens", "80", "--bins", "10", "--out", str(out)])
    transitions.main(["--model", name, *N, "--out", str(out)])
    redundancy.main(["--model", name, "--corpus", book, "--window", "16", "--n-windows", "4", "--no-figures",
                     "--out", str(out)])
    mp.main(["--model", name, "--n-sentences", "12", "--examples", "1", "--max-offset", "4", "--no-figures",
             "--out", str(out)])
    probing.main(["--model", name, *N, "--task", "sent_len", "--task", "position", "--min-per-class", "5",
                  "--max-items", "200", "--cs", "1", "--cv-folds", "2", "--n-boot", "50", "--out", str(out)])
    similarity.main(["--model", name, *N, "--measure", "cka", "--out", str(out)])

    def doc(analysis, file=name):
        return json.loads((out / "results" / analysis / f"{file}.json").read_text())

    spec = probes.get_spec(name)
    L = 2
    for analysis in ("anisotropy", "transitions", "redundancy", "maps", "probing"):
        d = doc(analysis)
        assert d["model"]["name"] == name and d["model"]["kind"] == spec.kind
        assert d["model"]["sentence_vector"] == spec.sentence and d["model"]["num_layers"] == L
    ani = doc("anisotropy")["layers"]
    assert [r["layer"] for r in ani] == list(range(L + 1))
    assert all(-1 <= r["token"]["mean"] <= 1 and sum(r["token"]["counts"]) == r["token"]["n_pairs"] for r in ani)
    tr = doc("transitions")["layers"]
    assert [r["layer"] for r in tr] == [1, 2] and all(r["token"]["distance_mean"] > 0 for r in tr)
    (red,) = doc("redundancy")["windows"]
    k = [t["mean"] for t in red["thresholds"]]
    assert red["n_windows"] == 4 and 1 <= k[0] and k == sorted(k) and k[-1] <= red["max_components"] == 15
    maps = doc("maps")["maps"]["attention"]
    assert (maps["layers"], maps["heads"]) == (L, 4)
    # attention rows read back from the float16 cache: each entry within 2^-11 of itself, so the row sum too
    np.testing.assert_allclose([maps["captured_row_sums"]["min"], maps["captured_row_sums"]["max"]], 1.0,
                               atol=2.0 ** -11 + 1e-6)
    sim = doc("similarity", f"{name}__{name}__sentence")  # a model against itself: CKA 1 on the diagonal ...
    cka = np.diag(np.array(sim["matrices"]["cka"]["ab"], dtype=float))
    np.testing.assert_allclose(cka[1:], 1.0, atol=1e-5)
    # ... except at layer 0 when every sentence vector is the same (cls: one token, one position)
    d = 32
    assert cka[0] == pytest.approx(1.0, abs=1e-5) or (spec.sentence == "cls" and sim["constant_columns"]["a"][0] == d)
    pr = doc("probing")
    assert {t["task"] for t in pr["tasks"]} == {"sent_len", "position"}
