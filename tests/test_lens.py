"""The logit lens and the tuned lens (probes.capture.lens, probes.capture.tuned_lens, analyses.lens): equal to
the ``tuned-lens`` package's LogitLens and TunedLens on a tiny GPT-2, the last layer is the model's output (KL
0, cross-entropy = the perplexity analysis's NLL), a model whose layers are copies of its last gives KL 0 at
every layer, chunked decoding equals unchunked, translators are reused by key and resume bit for bit, and the
CLI on tiny registry models."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from probes.capture import tuned_lens as tl
from probes.capture.lens import chunk_tokens, lens_statistics, unembedding
from probes.capture.windows import windowed_nll
from probes.config import run_main
from probes.models.lm import load_lm

TEXT = ("It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
        "want of a wife. However little known the feelings or views of such a man may be on his first entering a "
        "neighbourhood, this truth is so well fixed in the minds of the surrounding families.")
DOCS = [TEXT, "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my "
              "purse, and nothing particular to interest me on shore, I thought I would sail about a little."]
SETTINGS = tl.TrainSettings(window=16, overlap=2, steps=6, tokens_per_step=24, seed=0)


@pytest.fixture(scope="module")
def gpt2():
    return load_lm("tiny-gpt2")


def reference_statistics(lm, ids, lens) -> dict:
    """CE, KL(final || layer) and top-1 agreement per layer from the tuned-lens package's lens on one window:
    layers 0..L-1 through ``lens(h, idx=l)``, the last layer the model's own logits (as the package does); the
    package's float32 logits go through a float64 softmax, as the suite's do."""
    x = torch.tensor([ids])
    with torch.no_grad():
        out = lm.base(input_ids=x, output_hidden_states=True)
        final = torch.log_softmax(out.logits[0, :-1].double(), -1)
        targets = x[0, 1:]
        rows = []
        for lyr, h in enumerate(out.hidden_states[:-1]):
            logp = torch.log_softmax(lens(h[0, :-1], idx=lyr).double(), -1)
            rows.append((-logp.gather(-1, targets[:, None])[:, 0], (final.exp() * (final - logp)).sum(-1),
                         (logp.argmax(-1) == final.argmax(-1)).float()))
    return {s: np.stack([r[i].double().numpy() for r in rows]) for i, s in enumerate(("ce", "kl", "top1"))}


def test_logit_lens_equals_the_tuned_lens_package(gpt2):
    nn = pytest.importorskip("tuned_lens.nn", reason="tuned-lens (test extra 'reference') is not installed")
    ids = gpt2.encode(TEXT)
    mine = lens_statistics(gpt2, ids, T=len(ids), o=0)["stats"]["logit"]
    ref = reference_statistics(gpt2, ids, nn.LogitLens.from_model(gpt2.base))
    for s in ("ce", "kl", "top1"):
        np.testing.assert_allclose(mine[s][:-1], ref[s], atol=1e-6, rtol=0)
    assert np.all(mine["kl"][-1] == 0) and np.all(mine["top1"][-1] == 1)


def test_trained_translators_in_the_packages_tuned_lens_give_the_suites_outputs(gpt2, tmp_path):
    nn = pytest.importorskip("tuned_lens.nn", reason="tuned-lens (test extra 'reference') is not installed")
    from safetensors.torch import load_file

    docs = [gpt2.encode(t) for t in DOCS]
    translators, record = tl.tuned_translators(gpt2, docs, {"name": "two"}, SETTINGS, tmp_path, progress=False)
    assert any(float(p.abs().max()) > 0 for p in translators.parameters())  # trained away from the identity
    ref_lens = nn.TunedLens.from_model(gpt2.base)
    ref_lens.layer_translators.load_state_dict(load_file(f"{record['folder']}/translators.safetensors"))
    ids = docs[0]
    mine = lens_statistics(gpt2, ids, T=len(ids), o=0, lenses={"tuned": translators})["stats"]["tuned"]
    ref = reference_statistics(gpt2, ids, ref_lens)
    for s in ("ce", "kl", "top1"):
        np.testing.assert_allclose(mine[s][:-1], ref[s], atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-llama", "tiny-gemma3", "tiny-gpt2-recurrent"])
def test_last_layer_is_the_models_output(name):
    lm = load_lm(name)
    ids = lm.encode(TEXT)
    s = lens_statistics(lm, ids, T=16, o=3)
    logit = s["stats"]["logit"]
    np.testing.assert_allclose(logit["ce"][-1], windowed_nll(lm, ids, 16, 3)["nll"], atol=1e-5, rtol=0)
    assert np.all(logit["kl"][-1] == 0) and np.all(logit["top1"][-1] == 1)
    assert np.all(logit["kl"][:-1] > -1e-6) and logit["kl"].shape == (lm.base.config.num_hidden_layers + 1,
                                                                       len(ids) - 1)


def test_gemma_softcapping_is_part_of_the_unembedding():
    lm = load_lm("tiny-gemma3")
    lm.base.config.final_logit_softcapping = 2.0  # strong enough to change every distribution
    assert unembedding(lm).softcap == 2.0
    ids = lm.encode(TEXT)
    s = lens_statistics(lm, ids, T=len(ids), o=0)  # checks that decoding hidden[L] gives the model's logits
    np.testing.assert_allclose(s["stats"]["logit"]["ce"][-1], windowed_nll(lm, ids, len(ids), 0)["nll"], atol=1e-5)


def test_layers_that_copy_the_last_give_kl_zero_everywhere():
    lm = load_lm("tiny-gpt2")
    with torch.no_grad():  # every block adds nothing to the residual stream: hidden[0] = ... = hidden[L-1]
        for block in lm.base.transformer.h:
            for proj in (block.attn.c_proj, block.mlp.c_proj):
                proj.weight.zero_()
                proj.bias.zero_()
    ids = lm.encode(TEXT)
    s = lens_statistics(lm, ids, T=20, o=4)["stats"]["logit"]
    assert np.abs(s["kl"]).max() < 1e-6 and np.all(s["top1"] == 1)
    np.testing.assert_allclose(s["ce"], np.broadcast_to(s["ce"][-1], s["ce"].shape), atol=1e-5)


def test_chunked_decoding_equals_one_chunk(gpt2):
    ids = gpt2.encode(TEXT)
    whole = lens_statistics(gpt2, ids, T=24, o=5)["stats"]["logit"]
    vocab = gpt2.base.get_output_embeddings().weight.shape[0]
    tiny = lens_statistics(gpt2, ids, T=24, o=5, chunk_elements=2 * vocab)["stats"]["logit"]  # 2 tokens a chunk
    for s in ("ce", "kl", "top1"):  # float32 products of other shapes round differently: ~1e-6
        np.testing.assert_allclose(tiny[s], whole[s], atol=1e-5, rtol=0)


def test_a_262k_vocabulary_is_decoded_a_few_tokens_at_a_time():
    """Gemma-3's vocabulary: no (tokens x vocabulary) matrix beyond a chunk of tokens is ever made."""
    lm = load_lm("tiny-gpt2")
    lm.base.resize_token_embeddings(262144)  # the tied output matrix grows with it
    rows = []
    lm.base.get_output_embeddings().register_forward_hook(  # tokens decoded per call of the output matrix
        lambda mod, args, out: rows.append(out.reshape(-1, out.shape[-1]).shape[0]))
    ids = lm.encode(TEXT)
    s = lens_statistics(lm, ids, T=64, o=0)["stats"]["logit"]
    assert chunk_tokens(262144) == 16 and max(rows[1:]) <= 16  # rows[0]: the model's own last position
    with torch.no_grad():  # one window; float64 softmax (float32 over 262k logits is off by ~1e-4)
        logp = torch.log_softmax(lm.base(input_ids=torch.tensor([ids])).logits[0, :-1].double(), -1)
    np.testing.assert_allclose(s["ce"][-1], -logp.gather(-1, torch.tensor(ids[1:])[:, None])[:, 0], atol=1e-6)


def test_recurrent_first_window_equals_its_plain_twin(gpt2):
    rec = load_lm("tiny-gpt2-recurrent")
    ids = gpt2.encode(TEXT)
    a = lens_statistics(gpt2, ids, T=16, o=0)["stats"]["logit"]
    b = lens_statistics(rec, ids, T=16, o=0)["stats"]["logit"]
    np.testing.assert_allclose(b["kl"][:, :15], a["kl"][:, :15], atol=1e-6)  # window 0: no h_prev yet
    assert np.abs(b["kl"][1:, 16:] - a["kl"][1:, 16:]).max() > 1e-6  # later windows: h_prev changes layers >= 1


def test_translators_are_reused_by_key_and_resume_bit_for_bit(gpt2, tmp_path, monkeypatch):
    docs = [gpt2.encode(t) for t in DOCS]
    split = {"name": "two documents"}
    full, rec = tl.tuned_translators(gpt2, docs, split, SETTINGS, tmp_path / "a", save_every=2, progress=False)
    again, rec2 = tl.tuned_translators(gpt2, docs, split, SETTINGS, tmp_path / "a", progress=False)
    assert not rec["reused"] and rec2["reused"] and rec2["key"] == rec["key"]
    other = tl.translators_key(gpt2, tl.TrainSettings(**{**SETTINGS.__dict__, "steps": 7}), split)
    assert other != rec["key"] and tl.translators_key(gpt2, SETTINGS, {"name": "other"}) != rec["key"]
    saves = []
    save = tl.save_state

    def interrupted(*args):
        save(*args)
        saves.append(args[4])
        if len(saves) == 2:  # state written at step 4, then the run dies
            raise KeyboardInterrupt

    monkeypatch.setattr(tl, "save_state", interrupted)
    with pytest.raises(KeyboardInterrupt):
        tl.tuned_translators(gpt2, docs, split, SETTINGS, tmp_path / "b", save_every=2, progress=False)
    monkeypatch.setattr(tl, "save_state", save)
    resumed, rec3 = tl.tuned_translators(gpt2, docs, split, SETTINGS, tmp_path / "b", save_every=2, progress=False)
    assert saves == [2, 4] and rec3["log"] == rec["log"]
    for k, v in full.state_dict().items():
        assert torch.equal(resumed.state_dict()[k], v), k
    assert not (tmp_path / "b" / gpt2.name / rec["key"] / "state.pt").exists()


@pytest.mark.slow
def test_cli_on_a_plain_and_a_recurrent_tiny_gpt2(tmp_path):
    from analyses import lens as lens_analysis

    run_main(lens_analysis.main, ["--model", "tiny-gpt2", "--model", "tiny-gpt2-recurrent", "--n-documents", "2",
                                  "--max-tokens", "120", "--window", "32", "--train-steps", "2", "--train-tokens",
                                  "40", "--resamples", "50", "--out", str(tmp_path)])
    docs = {m: json.loads((tmp_path / "results" / "lens" / f"{m}.json").read_text())
            for m in ("tiny-gpt2", "tiny-gpt2-recurrent")}
    for doc in docs.values():
        assert doc["lenses"] == ["logit", "tuned"] and doc["window"] == 32
        last = doc["layers"][-1]
        assert last["final"] and last["logit"]["kl"] == 0 and last["tuned"]["top1"] == 1
        for row in doc["layers"]:
            for lens in ("logit", "tuned"):
                lo, hi = row[lens]["ce_ci"]
                assert lo <= row[lens]["ce"] <= hi and 0 <= row[lens]["top1"] <= 1
        assert len(list((tmp_path / "lens" / doc["model_name"]).glob("*/translators.safetensors"))) == 1
    assert docs["tiny-gpt2"]["bootstrap"]["units_id"] == docs["tiny-gpt2-recurrent"]["bootstrap"]["units_id"]
    for fig in ("lens", "lens-difference"):
        assert (tmp_path / "figures" / f"{fig}.png").exists()


def test_an_encoder_is_refused_in_one_line(tmp_path, capsys):
    from analyses import lens as lens_analysis

    with pytest.raises(SystemExit) as e:
        run_main(lens_analysis.main, ["--model", "tiny-bert", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "not a causal language model" in err and err.count("\n") == 1


def test_a_late_hook_changes_the_recorded_hidden_state_of_a_causal_lm(gpt2):
    """As for the encoders: a hook registered after the first forward pass (transformers' recording hooks are in
    by then) gives the changed output as its layer's hidden state inside ``lm.running()``."""
    ids = torch.arange(5)[None] % gpt2.base.config.vocab_size

    def states():
        with gpt2.running(), torch.no_grad():
            return gpt2.base(input_ids=ids, output_hidden_states=True, use_cache=False).hidden_states

    plain = states()
    block = gpt2.base.transformer.h[0]
    handle = block.register_forward_hook(lambda m, i, o: (2 * o[0],) + tuple(o[1:]) if isinstance(o, tuple) else 2 * o)
    before = list(block._forward_hooks)
    try:
        late = states()
        assert list(block._forward_hooks) == before  # the order is the caller's again after running()
    finally:
        handle.remove()
    torch.testing.assert_close(late[1], 2 * plain[1])


def test_intervals_resample_runs_of_consecutive_windows(gpt2):
    """A block bootstrap (analyses.blocks): runs of consecutive windows of one document, the longest that leave 20,
    read at the expanded level; the saved per-window sums grouped into those runs give the saved intervals, and two
    models on the same windows pair run by run."""
    from analyses import blocks, stats
    from analyses import lens as lens_analysis
    from analyses.inputs import caller_documents

    texts = [" ".join(f"w{i % 13} and" for i in range(60)), " ".join(f"v{i % 7} or" for i in range(40))]
    cfg = lens_analysis.Config(window=4, tuned=False, resamples=200)
    r = lens_analysis.compute(cfg, lm=gpt2, documents=caller_documents(gpt2, texts))
    b = r.bootstrap
    counts = np.asarray(b.units["tokens"])
    run = b.block_length
    assert b.block_length_of == "windows" and run > 1 and b.n_units == len(b.runs) >= 20
    assert b.runs[0] == 0 and np.all(np.diff(b.runs) >= run)  # whole runs of windows, one document each
    W = stats.resample_weights(b.n_units, b.resamples, b.seed)
    sums = np.asarray(b.units["logit"]["ce"])
    rep = lens_analysis.ratio_replicates(stats.grouped(sums, b), stats.grouped(counts, b), W)
    want = stats.interval(rep, blocks.expanded_level(0.95, b.n_units))
    got = np.array([row.logit.ce_ci for row in r.layers]).T
    assert got == pytest.approx(want, rel=1e-4)  # the saved sums are rounded to 6 digits
    assert lens_analysis.paired_difference(r, r, "logit")[1] == pytest.approx(np.zeros((2, len(r.layers))))
