"""probes.models.mog / mog_encoder: the Graph-Transformer (Duan & Zhao §4.1-4.2) and its maps.

* weight_gate is Eq. 16 elementwise (against numpy by hand); the layer uses it.
* self-gate: the 3 x 3 slot weights are a softmax per query slot (rows sum to 1 before the /4) and
  the fused vector is sum_k c_k R_v[k] with c_k = column sums / 4, summing to 3/4 (as printed).
* The multi-order attentions read r_i = r_f - r_p and r_p = the previous layer's input (layer 1:
  r_p = 0), checked against probabilities computed by hand from the captured hidden states.
* Parameter counts equal a closed formula for every fusion x shared-qkv x half-dim.
* Padding invariance of tiny-mog in all three fusions through probes.extract, maps included.
* The MLM recipe trains --arch mog; the folder loads through the registry; save/load is exact.
* anisotropy, transitions, redundancy and maps run on tiny-mog.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import probes
from probes.models.mog import (
    FUSIONS,
    MoG,
    MoGConfig,
    MoGForMaskedLM,
    attend,
    load_pretrained,
    parameter_formula,
    parameter_table,
    save_pretrained,
    weight_gate,
)
from probes.models.slstm import count_parameters

SHORT = "The cat sat."
LONG = ["A considerably longer sentence follows here, with many more words than the short one, so that "
        "the short text has to be padded by a large amount when it shares a batch with this one.",
        "Another long text: padding must never change the states of real tokens in any model."]
TINY = {"sum": "tiny-mog-sum", "weight-gate": "tiny-mog", "self-gate": "tiny-mog-selfgate"}


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():
        yield


def randomised(model: torch.nn.Module, seed: int = 0, scale: float = 0.5) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * scale)
    return model


def small(fusion="weight-gate", **kw) -> MoG:
    cfg = MoGConfig(vocab_size=30, hidden_size=8, num_layers=3, num_heads=2, intermediate_size=12, fusion=fusion,
                    max_positions=16, **kw)
    return randomised(MoG(cfg)).double().eval()


# --------------------------------------------------------------------------- fusions


def test_weight_gate_is_eq_16_by_hand():
    rng = np.random.default_rng(0)
    h, m, low = (rng.normal(size=(2, 3, 5)) for _ in range(3))
    fused, w = weight_gate(*(torch.tensor(a) for a in (h, m, low)))
    w_hand = 1 / (1 + np.exp(-(h + m + low)))
    np.testing.assert_allclose(w.numpy(), w_hand, rtol=1e-12)
    np.testing.assert_allclose(fused.numpy(), (h + m) * w_hand + low * (1 - w_hand), rtol=1e-12)
    # one scalar worked out: h + m + l = 0 -> w = 1/2, fused = ((1 + 2) + (-3)) / 2 = 0
    f, w = weight_gate(torch.tensor(1.0), torch.tensor(2.0), torch.tensor(-3.0))
    assert float(w) == 0.5 and float(f) == 0.0


def test_layer_fuses_with_weight_gate_and_reports_its_unit_mean():
    model = small("weight-gate")
    layer = model.layers[0]
    seen = {}
    layer.norm1.register_forward_pre_hook(lambda mod, args: seen.setdefault("pre_norm", args[0]))
    out = model(torch.tensor([[3, 4, 5, 6]]), output_maps=True)
    x = out.hidden[0]
    r_p = torch.zeros_like(x)
    qkv_h = layer.proj_h(x)
    bias = torch.zeros(1, 1, 1, 4, dtype=x.dtype)
    high = layer.out_h(attend(*qkv_h, bias)[0])
    qi, ki, vi = layer.proj_m(x)
    qp, kp, vp = layer.proj_m(r_p)
    middle = layer.out_m(attend(qi, kp, vp, bias)[0] + attend(qp, ki, vi, bias)[0])
    low = layer.low(r_p)
    w = torch.sigmoid(high + middle + low)
    torch.testing.assert_close(seen["pre_norm"], x + (high + middle) * w + low * (1 - w))
    torch.testing.assert_close(out.subgraph_weight[0, 0, 0], w[0].mean(-1))


def test_self_gate_slot_weights_and_the_printed_quarter():
    model = small("self-gate")
    gate = model.layers[1].self_gate
    rng = np.random.default_rng(1)
    h, m, low = (torch.tensor(rng.normal(size=(1, 4, 8))) for _ in range(3))
    fused, A = gate(h, m, low)
    assert A.shape == (1, 4, 3, 3)
    torch.testing.assert_close(A.sum(-1), torch.ones(1, 4, 3, dtype=A.dtype))  # rows sum to 1 before the /4
    R = torch.stack([h, m, low], -2)
    q, k, v = gate.qkv(R).chunk(3, -1)
    A_hand = torch.softmax(q @ k.transpose(-1, -2) / 8, -1)  # / d_k = d, not sqrt(d), as printed
    torch.testing.assert_close(A, A_hand)
    c = A.sum(-2) / 4  # (1, 4, 3): weight of each value slot in the fused vector
    torch.testing.assert_close(c.sum(-1), torch.full((1, 4), 0.75, dtype=c.dtype))  # 3/4, not 1
    torch.testing.assert_close(fused, (c[..., None] * v).sum(-2))
    out = model(torch.tensor([[3, 4, 5]]), output_maps=True)
    S = out.subgraph_weight  # (L, B, 9, n)
    assert S.shape == (3, 1, 9, 3)
    torch.testing.assert_close(S.view(3, 1, 3, 3, 3).sum(3), torch.ones(3, 1, 3, 3, dtype=S.dtype))


def test_sum_fusion_has_no_weight_map():
    out = small("sum")(torch.tensor([[3, 4]]), output_maps=True)
    assert out.subgraph_weight is None and out.attention_high.shape == (3, 1, 2, 2, 2)


# --------------------------------------------------------------------------- the multi-order reading


def _probs(q, k, heads):
    B, n, a = q.shape
    q, k = (t.view(B, n, heads, -1).transpose(1, 2) for t in (q, k))
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(a // heads), -1)


@pytest.mark.parametrize("shared", [False, True])
def test_attentions_read_increment_and_previous_representation(shared):
    model = small("weight-gate", shared_qkv=shared, half_dim=True)
    ids = torch.tensor([[3, 4, 5, 6, 7]])
    out = model(ids, output_maps=True)
    a = model.config.attention_size

    def qk(x, W, b):
        y = x @ W.T + b  # [Q | K | V] columns, each of width a
        return y[..., :a], y[..., a:2 * a]

    for j, layer in enumerate(model.layers):
        r_f = out.hidden[j]
        r_p = out.hidden[j - 1] if j > 0 else torch.zeros_like(r_f)  # layer 1: r_p^0 = 0
        r_i = r_f - r_p
        W_h, b_h = layer.proj_h.qkv.weight, layer.proj_h.qkv.bias
        W_m, b_m = layer.proj_m.qkv.weight, layer.proj_m.qkv.bias
        qi_h, ki_h = qk(r_i, W_h, b_h)
        qi_m, ki_m = qk(r_i, W_m, b_m)
        qp_m, kp_m = qk(r_p, W_m, b_m)
        torch.testing.assert_close(out.attention_high[j], _probs(qi_h, ki_h, 2))
        torch.testing.assert_close(out.attention_middle_qi[j], _probs(qi_m, kp_m, 2))
        torch.testing.assert_close(out.attention_middle_qp[j], _probs(qp_m, ki_m, 2))
    assert (layer.proj_m is layer.proj_h) == shared
    # layer 1: K^p is the bias alone, so the (Q^i, K^p) attention is uniform over the tokens
    torch.testing.assert_close(out.attention_middle_qi[0], torch.full_like(out.attention_middle_qi[0], 1 / 5))


# --------------------------------------------------------------------------- parameters


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("half", [False, True])
def test_parameter_count_formula(fusion, shared, half):
    cfg = MoGConfig(vocab_size=37, hidden_size=12, num_layers=3, num_heads=2, intermediate_size=20, fusion=fusion,
                    shared_qkv=shared, half_dim=half, max_positions=24)
    model = MoGForMaskedLM(cfg)
    assert count_parameters(model) == parameter_formula(cfg)
    assert count_parameters(model.mog) == parameter_formula(cfg, head=False)
    # by hand, per layer: attention projections + outputs, low-order Linear, self-gate, FFN, 2 LayerNorms
    d, a, ff = 12, 6 if half else 12, 20
    layer = ((1 if shared else 2) * 3 * (d * a + a) + 2 * (a * d + d) + d * d + d
             + (3 * (d * d + d) if fusion == "self-gate" else 0) + 2 * d * ff + ff + d + 4 * d)
    assert count_parameters(model.mog.layers[0]) == layer


def test_parameter_table_readings():
    rows = {r["variant"]: r["ours_encoder"] for r in parameter_table()}
    d = 512
    assert rows["sum"] == rows["weight-gate"]  # Eq. 16 has no parameters
    assert rows["self-gate"] - rows["sum"] == 6 * 3 * (d * d + d)
    # W_Q, W_K, W_V, W_O of the two attentions at half width
    assert rows["weight-gate"] - rows["weight-gate&half-dim"] == 6 * (4 * d * d + 3 * d)
    assert rows["weight-gate"] - rows["weight-gate&shared-qkv"] == 6 * 3 * (d * d + d)


# --------------------------------------------------------------------------- through the registry


@pytest.mark.parametrize("fusion", FUSIONS)
def test_padding_invariance_and_maps_through_extract(fusion):
    name = TINY[fusion]
    enc = probes.load(name)
    assert enc.model.config.fusion == fusion and enc.has_attention is False
    randomised(enc.model, seed=2)  # weights far from the small init: padding leaks would show
    alone = probes.extract(enc, [SHORT], maps=True, cache_dir=None, progress=False)
    batched = probes.extract(enc, [LONG[0], SHORT, LONG[1]], maps=True, cache_dir=None, progress=False,
                             batch_size=3)
    np.testing.assert_allclose(batched.text_hidden(1), alone.text_hidden(0), atol=1e-5, rtol=0)
    expected = {"attention_high", "attention_middle_qi", "attention_middle_qp"}
    expected |= set() if fusion == "sum" else {"subgraph_weight"}
    assert set(batched.maps) == expected
    n = alone.hidden.shape[1]
    for m in expected:
        a, b = alone.text_map(m, 0), batched.text_map(m, 1)
        assert a.shape[0] == 2 and a.shape[-1] == n
        np.testing.assert_allclose(b, a, atol=1e-5)
    for m in expected - {"subgraph_weight"}:
        for t in range(3):
            np.testing.assert_allclose(batched.text_map(m, t).sum(-1), 1.0, atol=1e-5)  # no mass on padding
    if fusion == "weight-gate":
        w = batched.text_map("subgraph_weight", 0)
        assert w.shape[1] == 1 and np.all((w > 0) & (w < 1))
    if fusion == "self-gate":
        s = batched.text_map("subgraph_weight", 0)
        np.testing.assert_allclose(s.reshape(2, 3, 3, -1).sum(2), 1.0, atol=1e-5)


def test_train_save_load_through_registry(tmp_path, monkeypatch):
    from probes.corpus import DEFAULT_CORPUS_DIR
    from recipes.train import TrainConfig, train

    corpus = tmp_path / "small.txt"
    corpus.write_text((DEFAULT_CORPUS_DIR / "austen-emma.txt").read_text(encoding="utf-8")[:20_000])
    cfg = TrainConfig(arch="mog", fusion="self-gate", shared_qkv=True, half_dim=True, corpus=str(corpus),
                      out_dir=str(tmp_path), vocab_size=200, width=16, layers=2, heads=2, intermediate=32,
                      max_positions=64, seq_len=48, batch_size=4, steps=3, warmup=1, progress=False, threads=1,
                      dtype="float32")
    with torch.enable_grad():
        folder = train(cfg)
    info = json.loads((folder / "train_config.json").read_text())
    doc = json.loads((folder / "config.json").read_text())
    assert doc["model_type"] == "mog" and doc["fusion"] == "self-gate" and "first_layer" in doc["readings"]
    model = load_pretrained(folder)
    assert info["parameters"] == count_parameters(model) == parameter_formula(model.config)
    again = tmp_path / "again"
    save_pretrained(model, again, dtype="float32")
    for k, v in load_pretrained(again).state_dict().items():
        torch.testing.assert_close(v, model.state_dict()[k], rtol=0, atol=0)
    (tmp_path / "reg.yaml").write_text(f"m:\n  family: mog\n  kind: encoder\n  source: {{path: {folder}}}\n"
                                       f"  sentence: cls\n  special_tokens: true\n")
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(tmp_path / "reg.yaml"))
    enc = probes.load("m")
    assert enc.num_layers == 2 and set(enc.map_specs()) >= {"attention_high", "subgraph_weight"}
    ids = torch.tensor([enc.tokenize([SHORT])[0].ids])
    torch.testing.assert_close(enc.forward(ids, torch.ones_like(ids)).hidden, model.mog(ids).hidden)
    from probes.errors import ProbeError
    with pytest.raises(ProbeError, match="fusion"):
        train(TrainConfig(**{**cfg.__dict__, "fusion": "max", "overwrite": True}))


# --------------------------------------------------------------------------- analysis CLIs


@pytest.mark.slow
def test_analysis_clis_run_on_tiny_mog(tmp_path):
    from analyses import anisotropy, redundancy, transitions
    from analyses import maps as mp

    out = tmp_path / "out"
    anisotropy.main(["--model", "tiny-mog", "--n-sentences", "30", "--n-tokens", "80", "--bins", "5",
                     "--out", str(out)])
    transitions.main(["--model", "tiny-mog", "--n-sentences", "30", "--out", str(out)])
    mp.main(["--model", "tiny-mog", "--n-sentences", "12", "--examples", "1", "--max-offset", "4", "--out", str(out)])
    from pathlib import Path
    book = str(Path(probes.__file__).resolve().parent.parent / "data" / "corpus" / "austen-persuasion.txt")
    redundancy.main(["--model", "tiny-mog", "--corpus", book, "--window", "16", "--n-windows", "4", "--layer", "1",
                     "--out", str(out)])
    for sub in ("anisotropy", "transitions", "maps", "redundancy"):
        doc = json.loads((out / "results" / sub / "tiny-mog.json").read_text())
        assert doc["model"]["name"] == "tiny-mog"
    maps_doc = json.loads((out / "results" / "maps" / "tiny-mog.json").read_text())
    assert {"attention_high", "attention_middle_qi", "attention_middle_qp",
            "subgraph_weight"} <= set(maps_doc["maps_captured"])
