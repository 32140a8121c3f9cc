"""probes.models.slstm / slstm_encoder / slstm_import: the S-LSTM (Eq. 3-4), its checkpoints and its encoder.

* The five cell gates are a softmax per hidden unit (and g's weights over tokens + itself too).
* One block for all steps: the parameter count does not depend on the number of steps.
* A one-step model equals an independent loop-by-loop numpy computation of Eq. 3-4 (with the
  authors' implementation choices documented in probes.models.slstm), padded batch included.
* The fairseq layout: a state dict written the way the authors' SlstmModel names it, run through a
  transcription of their SLSTM_block.forward, equals our imported model; export -> torch.save ->
  import is exact; a SentencePiece-tokenised fairseq folder loads through the registry.
* Loading never executes the pickle: a checkpoint whose __reduce__ calls os.system is refused.
* Padding invariance through probes.extract, and the gate maps it captures.
"""

from __future__ import annotations

import argparse
import os
import pickle

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import probes
from probes import CheckpointError
from probes.models.slstm import GATES, SLSTM, SLSTMConfig, SLSTMForMaskedLM, count_parameters
from probes.models.slstm_import import export_fairseq_state_dict, import_fairseq

SHORT = "The cat sat."
LONG = ["A considerably longer sentence follows here, with many more words than the short one, so that "
        "the short text has to be padded by a large amount when it shares a batch with this one.",
        "Another long text: padding must never change the states of real tokens in any model."]


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():
        yield


def randomised(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Every parameter (LayerNorm weights and biases included) set to random values of moderate size."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)
    return model


def tiny(num_layers=1, d=4, V=20, window=1, seed=0, gate_layer_norm=True) -> SLSTMForMaskedLM:
    return randomised(SLSTMForMaskedLM(SLSTMConfig(vocab_size=V, hidden_size=d, num_layers=num_layers,
                                                   max_positions=16, window=window, pad_id=0,
                                                   gate_layer_norm=gate_layer_norm)), seed).eval()


# --------------------------------------------------------------------------- gates and parameters


def test_gate_softmax_sums_to_one():
    model = tiny(num_layers=3, d=6).slstm.double()
    ids = torch.tensor([[3, 4, 5, 6, 7], [8, 9, 0, 0, 0]])
    mask = (ids != 0).long()
    x, ux, m, lengths, state = model.initial_state(ids, mask)
    for _ in range(3):
        state, gates = model.block(state, ux, m, lengths, need_gates=True)
        w = gates.token  # (B, n, 5, d)
        np.testing.assert_allclose(w.sum(2).numpy(), 1.0, atol=1e-12)
        lo, hi = 1 / (1 + 4 * np.e), np.e / (np.e + 4)  # softmax of five values in (0, 1)
        assert (w >= lo - 1e-12).all() and (w <= hi + 1e-12).all()
        total = gates.sentence_tokens.sum(1) + gates.sentence_self  # over tokens + g itself, per unit
        np.testing.assert_allclose(total.numpy(), 1.0, atol=1e-12)
        assert (gates.sentence_tokens[1, 2:] == 0).all()  # pads get no weight
    out = model(ids, mask, output_gates=True)  # the per-token maps: (L, B, 5, n), mean over units
    assert out.gates.shape == (3, 2, len(GATES), 5) and out.sentence_weights.shape == (3, 2, 5)
    np.testing.assert_allclose(out.gates[:, 0].sum(1).numpy(), 1.0, atol=1e-12)
    np.testing.assert_allclose(out.gates[:, 1, :, :2].sum(1).numpy(), 1.0, atol=1e-12)
    assert (out.gates[:, 1, :, 2:] == 0).all()
    np.testing.assert_allclose((out.sentence_weights.sum(-1) + out.sentence_self_weight).numpy(), 1.0, atol=1e-12)
    np.testing.assert_allclose(out.gates_dominant[:, 0].sum(1).numpy(), 1.0, atol=1e-12)  # shares of units
    assert (out.gates_dominant[:, 1, :, 2:] == 0).all()
    last = model.block(model.initial_state(ids, mask)[-1], ux, m, lengths, need_gates=True)[1].token  # step 1
    share = (last.argmax(2)[0, 3] == torch.arange(5)[:, None]).double().mean(-1)  # token 3, by argmax
    np.testing.assert_allclose(out.gates_dominant[0, 0, :, 3].numpy(), share.numpy(), atol=1e-12)


def test_parameter_count_does_not_depend_on_steps():
    counts = {L: count_parameters(SLSTM(SLSTMConfig(vocab_size=50, hidden_size=8, num_layers=L)))
              for L in (1, 2, 6, 12)}
    assert len(set(counts.values())) == 1, counts
    d, V, P = 8, 50, 512
    block = 4 * d * 7 * d + 7 * d + d * 7 * d + 2 * d * 2 * d + 2 * d + 2 * d * d + d + 2 * 10 * d
    assert counts[1] == V * d + P * d + 2 * d + block
    mlm = {L: count_parameters(SLSTMForMaskedLM(SLSTMConfig(vocab_size=50, hidden_size=8, num_layers=L)))
           for L in (1, 9)}
    assert mlm[1] == mlm[9] == counts[1] + d * d + d + 2 * d + V  # head: dense, LayerNorm, bias; E tied


# --------------------------------------------------------------------------- Eq. 3-4 by hand


def _ln(v, w, b, eps=1e-5):
    mu = sum(v) / len(v)
    var = sum((a - mu) ** 2 for a in v) / len(v)
    return [(a - mu) / np.sqrt(var + eps) * wj + bj for a, wj, bj in zip(v, w, b)]


def _sig(a):
    return 1 / (1 + np.exp(-a))


def _matvec(W, v):
    return [sum(W[r][c] * v[c] for c in range(len(v))) for r in range(len(W))]


def hand_step(P: dict, ids: list[int]) -> tuple[list, list]:
    """One S-LSTM step on one text (no padding), by explicit loops (float64, plain Python lists).

    Returns (h^1 per token, g^1). Conventions (probes.models.slstm docstring): x = LN(E + P), h0 = c0 = x,
    g0 = c_g0 = mean x; token gates from [h_i, h_{i-1}, h_{i+1}, g0] and x_i; softmax over the five
    sigmoided cell gates; the sentence node from the NEW token states, LN after the sigmoid for
    f_g and o."""
    d, n = P["E"].shape[1], len(ids)
    x = [_ln([P["E"][w][j] + P["P"][i][j] for j in range(d)], P["ln_w"], P["ln_b"]) for i, w in enumerate(ids)]
    h0, c0 = x, x
    g0 = [sum(x[i][j] for i in range(n)) / n for j in range(d)]
    gc0 = list(g0)
    zero = [0.0] * d
    h1, c1 = [], []
    for i in range(n):
        left, right = (h0[i - 1] if i > 0 else zero), (h0[i + 1] if i < n - 1 else zero)
        cl, cr = (c0[i - 1] if i > 0 else zero), (c0[i + 1] if i < n - 1 else zero)
        inp = list(h0[i]) + list(left) + list(right) + list(g0)
        pre = [a + b + c for a, b, c in zip(_matvec(P["Wt"], inp), P["bt"], _matvec(P["Ut"], x[i]))]
        gate = []
        for k in range(7):  # i l r f s o u
            v = _ln(pre[k * d:(k + 1) * d], P["tn_w"][k], P["tn_b"][k])
            gate.append([np.tanh(a) for a in v] if k == 6 else [_sig(a) for a in v])
        c_new, h_new = [], []
        for j in range(d):
            e = [np.exp(gate[k][j]) for k in range(5)]
            wi, wl, wr, wf, ws = (a / sum(e) for a in e)
            cj = wl * cl[j] + wf * c0[i][j] + wr * cr[j] + ws * gc0[j] + wi * gate[6][j]
            c_new.append(cj)
            h_new.append(gate[5][j] * np.tanh(cj))
        h1.append(h_new)
        c1.append(c_new)
    hbar = [sum(h1[i][j] for i in range(n)) / n for j in range(d)]
    fo = [_sig(a + b) for a, b in zip(_matvec(P["Wfo"], list(g0) + hbar), P["bfo"])]
    f_g = _ln(fo[:d], P["sn_w"][0], P["sn_b"][0])
    o_g = _ln(fo[d:], P["sn_w"][1], P["sn_b"][1])
    f_tok = [[_sig(a) for a in _ln([p + q for p, q in zip(_matvec(P["Wf"], list(h1[i]) + list(g0)), P["bf"])],
                                   P["sn_w"][2], P["sn_b"][2])] for i in range(n)]
    g1 = []
    for j in range(d):
        e = [np.exp(f_tok[i][j]) for i in range(n)] + [np.exp(f_g[j])]
        s = sum(e)
        gcj = sum(e[i] / s * c1[i][j] for i in range(n)) + e[n] / s * gc0[j]
        g1.append(o_g[j] * np.tanh(gcj))
    return h1, g1


def _params(model: SLSTM) -> dict:
    b = model.block
    t = lambda p: p.detach().double().numpy()
    return {"E": t(model.embed_tokens.weight), "P": t(model.embed_positions.weight),
            "ln_w": t(model.layernorm_embedding.weight), "ln_b": t(model.layernorm_embedding.bias),
            "Wt": t(b.token_w.weight), "bt": t(b.token_w.bias), "Ut": t(b.token_u.weight),
            "tn_w": t(b.token_norm.weight), "tn_b": t(b.token_norm.bias),
            "Wfo": t(b.sent_fo.weight), "bfo": t(b.sent_fo.bias), "Wf": t(b.sent_f.weight), "bf": t(b.sent_f.bias),
            "sn_w": t(b.sent_norm.weight), "sn_b": t(b.sent_norm.bias)}


def test_one_step_matches_hand_computation_of_eq_3_and_4():
    model = tiny(num_layers=1, d=3, V=12, seed=1).slstm.double()
    P = _params(model)
    texts = [[5, 7, 2, 9], [4, 11]]  # the second is padded in the batch
    ids = torch.tensor([texts[0], texts[1] + [0, 0]])
    out = model(ids, (ids != 0).long())
    for r, text in enumerate(texts):
        h1, g1 = hand_step(P, text)
        np.testing.assert_allclose(out.hidden[1, r, :len(text)].numpy(), np.array(h1), rtol=0, atol=1e-12)
        np.testing.assert_allclose(out.sentence[1, r].numpy(), np.array(g1), rtol=0, atol=1e-12)
    assert (out.hidden[:, 1, 2:] == 0).all()  # pads stay zero
    one = model(torch.tensor([[8]]))  # a single token: both neighbours are the zero boundary
    h1, g1 = hand_step(P, [8])
    np.testing.assert_allclose(one.hidden[1, 0].numpy(), np.array(h1), atol=1e-12)
    np.testing.assert_allclose(one.sentence[1, 0].numpy(), np.array(g1), atol=1e-12)


# --------------------------------------------------------------------------- fairseq layout


def reference_forward(sd: dict, tokens: torch.Tensor, num_layers: int, pad: int = 1):
    """A transcription of the authors' SlstmEncoder.forward_embedding + SLSTM_block.forward
    (slstm_kernel_size 1, ln, pos_input, no dropout), on a fairseq-named state dict."""
    g = lambda k: sd[k].double()
    mask = tokens.eq(pad)
    positions = (torch.cumsum(~mask, 1) * ~mask) + pad  # fairseq make_positions
    x = g("encoder.embed_tokens.weight")[tokens] + g("encoder.embed_positions.weight")[positions]
    x = F.layer_norm(x, x.shape[-1:], g("encoder.layernorm_embedding.weight"), g("encoder.layernorm_embedding.bias"))
    sequence_mask = torch.unsqueeze(1 - mask.double(), dim=2)
    word_h = x * sequence_mask
    p = "encoder.encoder.layer."
    lin = lambda name, v: F.linear(v, g(p + name + ".weight"), g(p + name + ".bias") if p + name + ".bias" in sd
                                   else None)
    norm = lambda name, v: F.layer_norm(v, v.shape[-1:], g(p + name + "_norm.weight"), g(p + name + "_norm.bias"))
    B, n, H = word_h.shape
    Ux = F.linear(word_h.reshape(-1, H), g(p + "U_t_ilrfsou.weight"))
    word_c = word_h
    lengths = sequence_mask.sum(1)
    dummy_g_h = word_h.sum(1) / lengths
    dummy_g_c = word_c.sum(1) / lengths
    zeros = torch.zeros(B, 1, H, dtype=torch.float64)
    mask_score = (-mask.double() * 1e25).unsqueeze(2)
    for _ in range(num_layers):
        before = (torch.cat([zeros, word_h[:, :-1]], 1) * sequence_mask).reshape(-1, H)
        after = (torch.cat([word_h[:, 1:], zeros], 1) * sequence_mask).reshape(-1, H)
        c_before = (torch.cat([zeros, word_c[:, :-1]], 1) * sequence_mask).reshape(-1, H)
        c_after = (torch.cat([word_c[:, 1:], zeros], 1) * sequence_mask).reshape(-1, H)
        wh, wc = word_h.reshape(-1, H), word_c.reshape(-1, H)
        g_h_exp = (dummy_g_h[:, None].repeat(1, n, 1) * sequence_mask).reshape(-1, H)
        g_c_exp = dummy_g_c[:, None].repeat(1, n, 1).reshape(-1, H)
        all_gates = lin("WV_t_ilrfsou", torch.cat([wh, before, after, g_h_exp], 1)) + Ux
        v = list(torch.chunk(all_gates, 7, dim=1))
        v = [norm(k, t) for k, t in zip("ilrfsou", v)]
        gi, gl, gr, gf, gs, go = (torch.sigmoid(t) for t in v[:6])
        gu = torch.tanh(v[6])
        sm = F.softmax(torch.stack([gi, gl, gr, gf, gs], 1), dim=1)
        gi, gl, gr, gf, gs = sm.unbind(1)
        wc = gu * gi + c_before * gl + c_after * gr + wc * gf + g_c_exp * gs
        wh = go * torch.tanh(wc)
        word_h = wh.view(B, n, H) * sequence_mask
        word_c = wc.view(B, n, H) * sequence_mask
        avg = word_h.sum(1) / lengths
        fo = lin("WU_g_fo", torch.cat([dummy_g_h, avg], 1))
        f, o = torch.chunk(fo, 2, dim=1)
        f, o = norm("gf", torch.sigmoid(f)), norm("go", torch.sigmoid(o))
        f_ = torch.sigmoid(norm("gf_", lin("WU_g_f_", torch.cat([word_h.reshape(-1, H), g_h_exp], 1))))
        scores = F.softmax(torch.cat([f_.view(B, n, H) + mask_score, f[:, None]], 1), dim=1)
        dummy_g_c = (scores[:, :n] * word_c).sum(1) + scores[:, n] * dummy_g_c
        dummy_g_h = o * torch.tanh(dummy_g_c)
    return word_h, dummy_g_h


def fairseq_state(d=4, V=24, max_positions=16, seed=3) -> dict:
    """Random tensors under the names the authors' SlstmModel uses (ln=True, pos_input=True)."""
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen) * 0.5
    p = "encoder.encoder.layer."
    sd = {"encoder.embed_tokens.weight": r(V, d), "encoder.embed_positions.weight": r(max_positions + 2, d),
          "encoder.layernorm_embedding.weight": r(d), "encoder.layernorm_embedding.bias": r(d),
          p + "WV_t_ilrfsou.weight": r(7 * d, 4 * d), p + "WV_t_ilrfsou.bias": r(7 * d),
          p + "U_t_ilrfsou.weight": r(7 * d, d), p + "WU_g_fo.weight": r(2 * d, 2 * d), p + "WU_g_fo.bias": r(2 * d),
          p + "WU_g_f_.weight": r(d, 2 * d), p + "WU_g_f_.bias": r(d),
          "encoder.lm_head.dense.weight": r(d, d), "encoder.lm_head.dense.bias": r(d),
          "encoder.lm_head.layer_norm.weight": r(d), "encoder.lm_head.layer_norm.bias": r(d),
          "encoder.lm_head.bias": r(V), "classification_heads.x.dense.weight": r(3, d)}
    for name in ("i", "l", "r", "f", "s", "o", "u", "gf", "go", "gf_"):
        sd[f"{p}{name}_norm.weight"], sd[f"{p}{name}_norm.bias"] = r(d), r(d)
    sd["encoder.lm_head.weight"] = sd["encoder.embed_tokens.weight"]
    return sd


def test_fairseq_layout_matches_the_authors_forward(tmp_path):
    L = 3
    sd = fairseq_state()
    path = tmp_path / "checkpoint_last.pt"
    args = argparse.Namespace(encoder_layers=L, slstm_kernel_size=1, ln=True, pos_input=True, pos_g2h=False,
                              pos_h2g=False, arch="slstm1280_ln_posinput_layer24")
    torch.save({"args": args, "model": sd, "optimizer_history": [{"num_updates": 10}], "extra_state": {}}, path)
    model, notes = import_fairseq(path)
    assert model.config.num_layers == L and model.config.max_positions == 16 and model.config.pad_id == 1
    assert notes["ignored_keys"] == ["classification_heads.x.dense.weight"]
    tokens = torch.tensor([[0, 5, 9, 13, 7, 2], [0, 20, 6, 2, 1, 1]])  # <s> ... </s>, right-padded with 1
    ref_h, ref_g = reference_forward(sd, tokens, L)
    model = model.double()
    out = model.slstm(tokens, tokens.ne(1).long())
    np.testing.assert_allclose(out.hidden[-1].numpy(), ref_h.numpy(), atol=1e-10)
    np.testing.assert_allclose(out.sentence[-1].numpy(), ref_g.numpy(), atol=1e-10)
    logits = model(tokens, tokens.ne(1).long())  # the RoBERTa-style MLM head with tied embeddings
    d = lambda k: sd[k].double()
    hh = F.layer_norm(F.gelu(F.linear(ref_h, d("encoder.lm_head.dense.weight"), d("encoder.lm_head.dense.bias"))),
                      (4,), d("encoder.lm_head.layer_norm.weight"), d("encoder.lm_head.layer_norm.bias"))
    expected = F.linear(hh, d("encoder.embed_tokens.weight")) + d("encoder.lm_head.bias")
    np.testing.assert_allclose(logits[tokens.ne(1)].numpy(), expected[tokens.ne(1)].numpy(), atol=1e-9)


@pytest.mark.parametrize("gate_layer_norm", [True, False], ids=["gate-ln", "no-gate-ln"])
def test_fairseq_export_import_round_trip_is_exact(tmp_path, gate_layer_norm):
    """Without gate LayerNorms the export must not write the *_norm keys: the importer reads their
    presence as fairseq's ``ln`` (the randomised, unused norm parameters would then change h)."""
    model = tiny(num_layers=2, d=8, V=30, seed=5, gate_layer_norm=gate_layer_norm)
    model.config.pad_id = 1
    sd = export_fairseq_state_dict(model)
    assert {"encoder.embed_tokens.weight", "encoder.embed_positions.weight", "encoder.layernorm_embedding.weight",
            "encoder.encoder.layer.WV_t_ilrfsou.weight", "encoder.lm_head.weight"} <= set(sd)
    norms = {k for k in sd if k.startswith("encoder.encoder.layer.") and k.endswith(("_norm.weight", "_norm.bias"))}
    assert len(norms) == (20 if gate_layer_norm else 0)
    path = tmp_path / "model.pt"
    torch.save({"args": argparse.Namespace(encoder_layers=2, slstm_kernel_size=1), "model": sd}, path)
    back, _ = import_fairseq(path)
    assert back.config.gate_layer_norm is gate_layer_norm
    ids = torch.tensor([[3, 4, 5, 6], [7, 8, 1, 1]])
    mask = ids.ne(1).long()
    a, b = model.slstm(ids, mask, output_gates=True), back.slstm(ids, mask, output_gates=True)
    for k in ("hidden", "sentence", "gates", "sentence_weights"):
        torch.testing.assert_close(getattr(b, k), getattr(a, k), atol=1e-6, rtol=0, msg=k)
    torch.testing.assert_close(back(ids, mask), model(ids, mask), atol=1e-6, rtol=0)
    with pytest.raises(CheckpointError, match="encoder_layers"):  # no args: the step count must be given
        torch.save({"model": sd}, tmp_path / "bare.pt")
        import_fairseq(tmp_path / "bare.pt")
    assert import_fairseq(tmp_path / "bare.pt", num_layers=2)[0].config.num_layers == 2


def test_unknown_checkpoint_keys_are_refused_not_dropped(tmp_path, capsys):
    """Keys the mapping does not know (another variant) fail with one line naming them; the heads
    ignored on purpose stay allowed and listed in the notes."""
    from probes.models.slstm_import import main as convert_main

    p = "encoder.encoder.layer."
    sd = fairseq_state()
    extra = [f"{p}extra_gate.weight", f"{p}extra_gate.bias", "encoder.some_adapter.weight"]
    for k in extra:
        sd[k] = torch.zeros(4)
    path = tmp_path / "variant.pt"
    torch.save({"args": argparse.Namespace(encoder_layers=1), "model": sd}, path)
    with pytest.raises(CheckpointError, match="refused to load partially: 3 checkpoint key") as err:
        import_fairseq(path)
    msg = str(err.value)
    assert "\n" not in msg and all(k in msg for k in extra)
    from probes.config import run_main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:  # the converter CLI: one error line, exit 2, nothing written
        run_main(convert_main, [str(path), "--sentencepiece", str(path), "--out", str(tmp_path / "out")])
    err_lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert exit_.value.code == 2 and len(err_lines) == 1
    assert err_lines[0].startswith("error: ") and "extra_gate.weight" in err_lines[0]
    assert not (tmp_path / "out").exists()
    many = fairseq_state()
    for i in range(8):
        many[f"{p}w{i}.weight"] = torch.zeros(4)
    torch.save({"args": argparse.Namespace(encoder_layers=1), "model": many}, path)
    with pytest.raises(CheckpointError, match=r"w4\.weight and 3 more$"):  # the first five are named
        import_fairseq(path)
    # a half-present gate LayerNorm set, or args that disagree with the state dict, are refused too
    half = fairseq_state()
    del half[f"{p}gf__norm.bias"]
    torch.save({"args": argparse.Namespace(encoder_layers=1), "model": half}, path)
    with pytest.raises(CheckpointError, match="missing encoder.encoder.layer.gf__norm.bias"):
        import_fairseq(path)
    torch.save({"args": argparse.Namespace(encoder_layers=1, ln=False), "model": fairseq_state()}, path)
    with pytest.raises(CheckpointError, match="ln=False but its state dict has the gate LayerNorms"):
        import_fairseq(path)
    torch.save({"args": argparse.Namespace(encoder_layers=1, ln=True), "model": fairseq_state()}, path)
    _, notes = import_fairseq(path)  # the classification head is ignored on purpose and listed
    assert notes["ignored_keys"] == ["classification_heads.x.dense.weight"]


class Evil:
    """Unpickling this calls os.system (what a tampered checkpoint would do)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_tampered_checkpoint_is_refused_without_running_it(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    sd = fairseq_state()
    torch_file = tmp_path / "tampered.pt"
    torch.save({"args": argparse.Namespace(encoder_layers=1), "model": sd, "extra_state": Evil(marker)}, torch_file)
    raw_file = tmp_path / "raw.pt"
    raw_file.write_bytes(pickle.dumps({"model": sd, "x": Evil(marker)}))
    for path in (torch_file, raw_file):
        with pytest.raises(CheckpointError, match="refused: the checkpoint asks to run code") as err:
            import_fairseq(path)
        assert not marker.exists()
        if path == torch_file:
            assert "it asks for posix.system" in str(err.value) or "it asks for nt.system" in str(err.value)
    # the same file behind a registry entry: one clear error from probes.load, nothing executed
    folder = tmp_path / "slstm-fs"
    folder.mkdir()
    os.replace(torch_file, folder / "checkpoint_last.pt")
    (folder / "sp.model").write_bytes(b"unused")
    reg = tmp_path / "checkpoints.yaml"
    reg.write_text(f"evil:\n  family: slstm\n  kind: encoder\n  source: {{path: {folder}}}\n  sentence: g\n")
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(reg))
    with pytest.raises(CheckpointError, match="refused"):
        probes.load("evil")
    assert not marker.exists()
    (tmp_path / "junk.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match="not a readable torch checkpoint"):
        import_fairseq(tmp_path / "junk.pt")


def test_sentencepiece_fairseq_folder_loads_through_the_registry(tmp_path, monkeypatch):
    spm = pytest.importorskip("sentencepiece")
    corpus = tmp_path / "spm.txt"
    corpus.write_text("\n".join(LONG * 20 + [SHORT] * 5))
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "sp"), vocab_size=60,
                                   pad_id=-1, eos_id=-1, bos_id=-1, unk_id=0, minloglevel=2)
    V = 60 + 4 + 1  # <s> <pad> </s> <unk>, the pieces, <mask>
    folder = tmp_path / "fs"
    folder.mkdir()
    sd = fairseq_state(d=8, V=V, max_positions=64)
    torch.save({"args": argparse.Namespace(encoder_layers=2), "model": sd}, folder / "checkpoint_last.pt")
    (tmp_path / "sp.model").rename(folder / "sp.model")
    reg = tmp_path / "checkpoints.yaml"
    reg.write_text(f"fs:\n  family: slstm\n  kind: encoder\n  source: {{path: {folder}}}\n  sentence: g\n")
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(reg))
    a = probes.extract("fs", [SHORT, LONG[1]], cache_dir=None, progress=False)
    sp = spm.SentencePieceProcessor(model_file=str(folder / "sp.model"))
    ids = a.token_ids[a.offsets[0]:a.offsets[1]].tolist()
    assert ids == [0] + [i + 4 for i in sp.encode(SHORT)] + [2]
    assert a.tokens[0][0] == "<s>" and a.tokens[0][-1] == "</s>" and a.tokens[0][1:-1] == sp.encode(SHORT, out_type=str)
    assert a.special[a.offsets[0]:a.offsets[1]].tolist() == [True] + [False] * (len(ids) - 2) + [True]
    assert a.hidden.shape == (3, len(a.token_ids), 8) and a.meta["model"]["sentence_vector"] == "g"
    # the converted native folder gives the same activations, without any pickle
    from probes.models.slstm_import import main as convert_main

    convert_main([str(folder / "checkpoint_last.pt"), "--sentencepiece", str(folder / "sp.model"),
                  "--out", str(tmp_path / "native")])
    native = tmp_path / "native"
    reg.write_text(reg.read_text() + f"native:\n  family: slstm\n  kind: encoder\n  source: {{path: {native}}}\n"
                   "  sentence: g\n")
    b = probes.extract("native", [SHORT, LONG[1]], cache_dir=None, progress=False)
    assert b.tokens == a.tokens
    np.testing.assert_array_equal(b.hidden, a.hidden)
    np.testing.assert_array_equal(b.sentence, a.sentence)


# --------------------------------------------------------------------------- through probes.extract


@pytest.fixture()
def tiny_registry(tiny_slstm_registry):
    return tiny_slstm_registry(num_layers=3, max_positions=512)


def test_padding_invariance_and_gate_maps_through_extract(tiny_registry, monkeypatch):
    enc = probes.load("tiny-slstm")
    assert enc.has_attention is False and enc.num_layers == 3 and enc.hidden_size == 16
    randomised(enc.model, seed=2)  # weights far from the small init: padding leaks would show
    calls = []
    inner = enc.forward
    monkeypatch.setattr(enc, "forward", lambda i, m, maps=False: calls.append(i.shape) or
                        inner(i, m, maps=maps))
    alone = probes.extract(enc, [SHORT], maps=True, cache_dir=None, progress=False)
    calls.clear()
    batched = probes.extract(enc, [LONG[0], SHORT, LONG[1]], maps=True, cache_dir=None, progress=False)
    assert len(calls) == 1 and calls[0][1] > 3 * alone.hidden.shape[1]  # one padded batch
    np.testing.assert_allclose(batched.text_hidden(1), alone.text_hidden(0), atol=1e-5, rtol=0)
    np.testing.assert_allclose(batched.sentence[:, 1], alone.sentence[:, 0], atol=1e-5, rtol=0)
    assert set(batched.maps) == {"gates", "gates_dominant", "sentence_weights"}  # no attention map
    n = alone.hidden.shape[1]
    g_alone, g_batched = alone.text_map("gates", 0), batched.text_map("gates", 1)
    assert g_alone.shape == (3, len(GATES), n)
    np.testing.assert_allclose(g_batched, g_alone, atol=1e-5)
    np.testing.assert_allclose(batched.text_map("sentence_weights", 1), alone.text_map("sentence_weights", 0),
                               atol=1e-5)
    np.testing.assert_allclose(batched.text_map("gates_dominant", 1), alone.text_map("gates_dominant", 0), atol=1e-5)
    for t in range(3):
        np.testing.assert_allclose(batched.text_map("gates", t).sum(1), 1.0, atol=1e-5)
        np.testing.assert_allclose(batched.text_map("gates_dominant", t).sum(1), 1.0, atol=1e-5)
        sw = batched.text_map("sentence_weights", t)
        assert sw.shape == (3, 1, batched.offsets[t + 1] - batched.offsets[t]) and (sw.sum(-1) < 1).all()
    # the sentence vector is g, not a token
    assert batched.meta["model"]["sentence_vector"] == "g"
    assert not np.allclose(batched.sentence[-1, 1], batched.text_hidden(1)[-1, 0])
    assert probes.load_tokenizer("tiny-slstm").max_length == 512
