"""The activation cache never hands back another model's states: its key covers every input of the states.

Each case changes one input that the weights do not show (a folder's config.json or tokenizer files, a model
object's tokenizer normaliser, a forward hook) and checks that the second extraction gives the numbers of a fresh
extraction without the cache, never the cached ones; and that what does not change the states (a pooler that
``AutoModel`` initialises at random, the tokenizer's transient truncation state) does not change the key. Tiny
random BERTs with the embedded MiniLM tokenizer, saved into tmp_path."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import probes
from probes.errors import CheckpointError, ProbeError

REPO = Path(__file__).resolve().parents[1]
TEXTS = ["Her Father was fond of the Sea.", "The Captain spoke to the crew at Night.", "Short one.",
         "Whales and ships and storms, in the Old Harbour."]


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(probes.get_spec("minilm-l6").local_path())


def tiny_bert(vocab_size: int, cls=None, seed: int = 0):
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128)
    return (cls or BertModel)(cfg).eval()


@pytest.fixture
def folder(tok, tmp_path):
    """A tiny BERT folder (config, weights, tokenizer files)."""
    path = tmp_path / "models" / "tiny"
    tiny_bert(len(tok)).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def run(model, cache, **kw):
    return probes.extract(model, TEXTS, cache_dir=cache, progress=False, **kw)


def entries(cache: Path) -> list[Path]:
    return sorted(p.parent for p in cache.rglob("meta.json"))


def same_states(a, b, atol=2e-3) -> bool:
    """Equal up to float16 storage (a cached entry) against float32 (no cache)."""
    return (a.tokens == b.tokens and np.allclose(np.asarray(a.hidden), np.asarray(b.hidden), atol=atol)
            and np.allclose(np.asarray(a.sentence), np.asarray(b.sentence), atol=atol))


# ----------------------------------------------------------------------------- folders


def test_an_edited_config_gives_fresh_states_not_the_cached_ones(folder, tmp_path):
    cache = tmp_path / "cache"
    first = run(str(folder), cache)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(hidden_act="relu", layer_norm_eps=0.5)  # the weights' shapes are the same
    (folder / "config.json").write_text(json.dumps(cfg))
    second, fresh = run(str(folder), cache), run(str(folder), None)
    assert second.meta["key"] != first.meta["key"] and len(entries(cache)) == 2
    assert same_states(second, fresh)
    assert not same_states(second, first)


def test_a_same_size_edit_with_its_old_mtime_set_back_is_seen(folder, tmp_path):
    """The file hashes are memoised within a process; an edit that keeps the size and sets the old mtime back
    (``touch -r``, ``cp -p``) must not be served the memo: ctime moves, and no user can set it back."""
    import os

    from probes.checkpoints import registry

    cache = tmp_path / "cache"
    path = folder / "config.json"
    first = run(str(folder), cache)
    st = path.stat()
    text = path.read_text()
    edited = text.replace('"gelu"', '"relu"') if '"gelu"' in text else None
    assert edited is not None and len(edited) == len(text)  # the same size: only the activation differs
    path.write_text(edited)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # the old mtime back
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    second, fresh = run(str(folder), cache), run(str(folder), None)
    assert second.meta["key"] != first.meta["key"] and same_states(second, fresh) and not same_states(second, first)
    reg = tmp_path / "checkpoints.yaml"  # the registry's memo, the same way
    reg.write_text("a-model:\n  family: hf\n  kind: encoder\n  source: {hub: org/a}\n  sentence: cls\n")
    st = reg.stat()
    assert set(registry.read_registry(reg)) == {"a-model"}
    reg.write_text("b-model:\n  family: hf\n  kind: encoder\n  source: {hub: org/b}\n  sentence: cls\n")
    os.utime(reg, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert set(registry.read_registry(reg)) == {"b-model"}


def test_an_edited_tokenizer_gives_fresh_tokens_and_states(folder, tmp_path):
    cache = tmp_path / "cache"
    first = run(str(folder), cache)
    doc = json.loads((folder / "tokenizer.json").read_text())
    doc["normalizer"]["lowercase"] = False
    (folder / "tokenizer.json").write_text(json.dumps(doc))
    tc = json.loads((folder / "tokenizer_config.json").read_text())
    tc["do_lower_case"] = False
    (folder / "tokenizer_config.json").write_text(json.dumps(tc))
    second, fresh = run(str(folder), cache), run(str(folder), None)
    assert second.meta["key"] != first.meta["key"]
    assert second.tokens == fresh.tokens != first.tokens  # capitals are [UNK] in an uncased vocabulary now
    assert "[UNK]" in second.tokens[0] and "[UNK]" not in first.tokens[0]
    assert same_states(second, fresh)


def test_a_file_the_loaders_do_not_read_leaves_the_key(folder, tmp_path):
    cache = tmp_path / "cache"
    first = run(str(folder), cache)
    (folder / "README.md").write_text("notes")
    (folder / "train_log.csv").write_text("step,loss\n")
    assert run(str(folder), cache).meta["key"] == first.meta["key"] and len(entries(cache)) == 1


def test_a_sentence_transformers_module_config_is_in_the_key(folder):
    (folder / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "", "type": "x.Transformer"},
                                                     {"idx": 1, "name": "1", "path": "1_Pooling", "type": "x.P"}]))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    before = probes.get_spec(str(folder)).fingerprint()
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    after = probes.get_spec(str(folder)).fingerprint()
    assert before["weights_sha256"] == after["weights_sha256"] and before["files_sha256"] != after["files_sha256"]


def test_a_tokenizer_larger_than_the_embedding_table_is_one_line(tok, tmp_path):
    path = tmp_path / "smallvocab"
    tiny_bert(100).save_pretrained(path)
    tok.save_pretrained(path)
    with pytest.raises(CheckpointError, match=r"^model 'dir--smallvocab--[0-9a-f]{8}': its tokenizer has ids up to "
                                              r"30,521 .* embedding table has 100 rows"):
        run(str(path), None)
    with pytest.raises(ProbeError, match="embedding table has 100 rows"):
        run(tiny_bert(100), None, tokenizer=tok)


# ----------------------------------------------------------------------------- registry entries


def test_a_random_entry_keys_on_its_tokenizer_entrys_files(folder, tmp_path, monkeypatch):
    reg = tmp_path / "reg.yaml"
    reg.write_text(f"tok:\n  family: hf\n  kind: encoder\n  source: {{path: {folder}}}\n  sentence: cls\n"
                   "rnd:\n  family: hf\n  kind: encoder\n  source:\n    random: {model_type: bert, hidden_size: 16, "
                   "num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32}\n    tokenizer: tok\n"
                   "  sentence: cls\n")
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(reg))
    before = probes.get_spec("rnd").fingerprint()
    tc = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**tc, "do_lower_case": False}))
    assert probes.get_spec("rnd").fingerprint()["tokenizer_files"] != before["tokenizer_files"]


def test_entry_settings_that_change_states_are_in_the_fingerprint(folder, tmp_path, monkeypatch):
    reg = tmp_path / "reg.yaml"
    entry = f"  family: slstm\n  kind: encoder\n  source: {{path: {folder}}}\n  sentence: g\n"
    reg.write_text(f"a:\n{entry}b:\n{entry}  num_layers: 3\n  fetch: make models\n")
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(reg))
    a, b = probes.get_spec("a").fingerprint(), probes.get_spec("b").fingerprint()
    assert b["settings"] == {"num_layers": 3} and "settings" not in a  # fetch is no setting
    assert a["code"] == b["code"] == {"slstm": 1}


# ----------------------------------------------------------------------------- model objects


def test_a_hooked_model_object_is_extracted_without_the_cache(tok, tmp_path):
    cache = tmp_path / "cache"
    model = tiny_bert(len(tok))
    plain = run(model, cache, tokenizer=tok, name="hooked")
    # an ablation of layer 1's output (prepended: before transformers' own hook that records it as hidden state 1)
    handle = model.encoder.layer[0].register_forward_hook(lambda m, i, o: (torch.zeros_like(o[0]),) + tuple(o[1:])
                                                          if isinstance(o, tuple) else torch.zeros_like(o),
                                                          prepend=True)
    with pytest.warns(UserWarning, match=r"BertModel\.encoder\.layer\.0 has a forward hook .*extracted without the "
                                         r"activation cache"):
        hooked = run(model, cache, tokenizer=tok, name="hooked")
    fresh = run(model, None, tokenizer=tok, name="hooked")
    assert np.abs(np.asarray(hooked.hidden[1])).max() == 0 < np.abs(np.asarray(plain.hidden[1])).max()
    assert not np.allclose(np.asarray(hooked.hidden[2]), np.asarray(plain.hidden[2]), atol=0.1)
    assert same_states(hooked, fresh, atol=1e-6) and len(entries(cache)) == 1  # nothing written either
    handle.remove()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no hook left: the cache again, the first entry
        assert run(model, cache, tokenizer=tok, name="hooked").meta["key"] == plain.meta["key"]


def test_a_hook_registered_after_the_first_forward_changes_the_recorded_state(tok):
    """transformers (5.x) records hidden states with hooks it installs at the first forward pass; a hook the user
    registers after that still gives the state its layer passes on (what the next layer reads), as a hook
    registered before it does."""
    model = tiny_bert(len(tok))
    plain = run(model, None, tokenizer=tok, name="late-hook")  # the first forward: transformers' hooks go in
    layer = model.encoder.layer[0]
    handle = layer.register_forward_hook(lambda m, i, o: (2 * o[0],) + tuple(o[1:]) if isinstance(o, tuple) else 2 * o)
    before = list(layer._forward_hooks)
    assert len(before) == 2 and before[-1] == handle.id  # transformers' recording hook first, then the late one
    try:
        late = run(model, None, tokenizer=tok, name="late-hook")
        assert list(layer._forward_hooks) == before  # the caller's model is left with its hooks in their order
    finally:
        handle.remove()
    np.testing.assert_allclose(np.asarray(late.hidden[1]), 2 * np.asarray(plain.hidden[1]), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(late.hidden[0]), np.asarray(plain.hidden[0]))


def test_global_hooks_and_parametrizations_bypass_the_cache(tok, tmp_path):
    from torch.nn.utils import parametrize

    cache = tmp_path / "cache"
    model = tiny_bert(len(tok))
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda m, i: None)
    try:
        with pytest.warns(UserWarning, match="a global module hook is registered"):
            run("tiny-bert", cache)  # a name too: the hook reaches every module
    finally:
        handle.remove()

    class Halve(torch.nn.Module):
        def forward(self, w):
            return w / 2

    parametrize.register_parametrization(model.encoder.layer[1].output.dense, "weight", Halve())
    with pytest.warns(UserWarning, match=r"layer\.1\.output\.dense has a parametrization"):
        run(model, cache, tokenizer=tok)
    assert entries(cache) == []


@pytest.mark.parametrize("edit", ["data", "no_grad", "eps", "activation"])
def test_an_encoder_from_probes_load_changed_in_memory_is_extracted_without_the_cache(tmp_path, edit):
    """An ablation on a loaded encoder (a weight zeroed in place through .data or under no_grad, a LayerNorm's eps,
    an activation swapped): its key comes from the files, so the cache would hand back the unablated states."""
    cache = tmp_path / "cache"
    enc = probes.load("tiny-bert")
    before = run(enc, cache)
    layer = enc.model.encoder.layer[0]
    if edit == "data":
        layer.output.dense.weight.data.zero_()  # .data: no version counter moves
    elif edit == "no_grad":
        with torch.no_grad():
            layer.output.dense.weight.mul_(0.5)
    elif edit == "eps":
        layer.output.LayerNorm.eps = 0.5
    else:
        layer.intermediate.intermediate_act_fn = torch.nn.ReLU()
    with pytest.warns(UserWarning, match="changed in memory since probes.load .*extracted without the activation "
                                         "cache"):
        after = run(enc, cache)
    fresh = run(enc, None)
    assert same_states(after, fresh, atol=1e-6) and not same_states(after, before)
    assert len(entries(cache)) == 1  # nothing written for the changed encoder
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fresh load is its files again: the cache, the first entry
        assert run(probes.load("tiny-bert"), cache).meta["key"] == before.meta["key"]


def test_a_forward_patched_on_the_class_bypasses_the_cache_and_a_model_objects_attributes_are_in_its_key(
        tok, tmp_path):
    from transformers.models.bert import modeling_bert

    cache = tmp_path / "cache"
    model = tiny_bert(len(tok))
    plain = run(model, cache, tokenizer=tok, name="obj")
    original = modeling_bert.BertOutput.forward

    def zeroed(self, hidden_states, input_tensor):
        return torch.zeros_like(original(self, hidden_states, input_tensor))

    modeling_bert.BertOutput.forward = zeroed
    try:
        with pytest.warns(UserWarning, match=r"BertOutput\.forward is replaced on the class by .*zeroed"):
            patched = run(model, cache, tokenizer=tok, name="obj")
        with pytest.warns(UserWarning, match=r"BertOutput\.forward is replaced on the class"):
            run("tiny-bert", cache)  # a registry name loaded after the patch too
    finally:
        modeling_bert.BertOutput.forward = original
    assert np.abs(np.asarray(patched.hidden[1])).max() == 0 and len(entries(cache)) == 1
    model.encoder.layer[0].output.LayerNorm.eps = 0.5  # no weight shows it: the object's key does
    changed = run(model, cache, tokenizer=tok, name="obj")
    assert changed.meta["key"] != plain.meta["key"] and same_states(changed, run(model, None, tokenizer=tok,
                                                                                name="obj"))


def test_a_tokenizer_with_the_same_vocabulary_and_another_normaliser_gets_another_key(tok, tmp_path):
    from tokenizers import normalizers

    cache = tmp_path / "cache"
    model = tiny_bert(len(tok))
    cased = copy.deepcopy(tok)
    cased.backend_tokenizer.normalizer = normalizers.BertNormalizer(lowercase=False)
    assert cased.get_vocab() == tok.get_vocab()
    first = run(model, cache, tokenizer=tok, name="m")
    second, fresh = run(model, cache, tokenizer=cased, name="m"), run(model, None, tokenizer=cased, name="m")
    assert second.meta["key"] != first.meta["key"]
    assert second.tokens == fresh.tokens != first.tokens and same_states(second, fresh)


def test_the_tokenizer_hash_does_not_move_when_the_tokenizer_is_used(tok):
    from probes.models.user import tokenizer_sha256

    fresh = copy.deepcopy(tok)
    before = tokenizer_sha256(fresh)
    fresh(["one text", "and another, longer one"], truncation=True, max_length=4, padding="max_length")
    state = fresh.backend_tokenizer.truncation, fresh.backend_tokenizer.padding
    assert state[0] is not None and tokenizer_sha256(fresh) == before
    assert (fresh.backend_tokenizer.truncation, fresh.backend_tokenizer.padding) == state  # hashing leaves them
    fresh.add_tokens(["zyzzyva"])  # in the backend's serialisation, not in any setting the hash reads besides
    assert tokenizer_sha256(fresh) != before


def test_a_random_pooler_from_autoModel_does_not_change_the_key(tok, tmp_path):
    """AutoModel on a masked-LM checkpoint initialises a pooler at random on every load: the suite never runs it."""
    from transformers import AutoModel, BertForMaskedLM

    from probes.models.user import object_spec

    path = tmp_path / "mlm"
    tiny_bert(len(tok), cls=BertForMaskedLM).save_pretrained(path)
    specs = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        model = AutoModel.from_pretrained(path)
        specs.append(object_spec(model, tok).fingerprint())
    assert specs[0] == specs[1]
    with torch.no_grad():
        model.encoder.layer[0].output.dense.bias.add_(1.0)  # a weight the states do pass through
    assert object_spec(model, tok).fingerprint()["weights_sha256"] != specs[0]["weights_sha256"]


def test_a_model_object_keeps_its_train_or_eval_mode(tok):
    model = tiny_bert(len(tok)).train()
    model.encoder.layer[1].eval()  # a mixed state, as a caller may leave it
    before = {n: m.training for n, m in model.named_modules()}
    acts = run(model, None, tokenizer=tok)
    assert {n: m.training for n, m in model.named_modules()} == before
    assert same_states(acts, run(model.eval(), None, tokenizer=tok), atol=1e-6)  # dropout was off all the same


def test_maps_of_a_model_loaded_with_sdpa_attention(tok, tmp_path):
    from transformers import AutoModel

    path = tmp_path / "m"
    tiny_bert(len(tok)).save_pretrained(path)
    sdpa = AutoModel.from_pretrained(path, attn_implementation="sdpa")
    eager = AutoModel.from_pretrained(path, attn_implementation="eager")
    a = run(sdpa, None, tokenizer=tok, maps=True)
    b = run(eager, None, tokenizer=tok, maps=True)
    assert sdpa.config._attn_implementation == "sdpa"  # switched for the call only
    assert np.allclose(np.asarray(a.maps["attention"]), np.asarray(b.maps["attention"]), atol=1e-6)


def test_a_forward_that_ignores_output_hidden_states_is_one_line(tok):
    from transformers import BertModel
    from transformers.modeling_outputs import BaseModelOutput

    class LastOnly(BertModel):
        def forward(self, input_ids=None, attention_mask=None, **kw):
            return BaseModelOutput(last_hidden_state=self.embeddings(input_ids=input_ids))

    with pytest.raises(ProbeError, match=r"^model 'last-only': its forward \(LastOnly\) returned no hidden states "
                                         r"although output_hidden_states=True was passed"):
        run(tiny_bert(len(tok), cls=LastOnly), None, tokenizer=tok, name="last-only")


def test_object_names_follow_the_name_rules(tok):
    with pytest.raises(ProbeError, match=r"^name=: model name 'xxxx.*\(300 characters\) is too long"):
        run(tiny_bert(len(tok)), None, tokenizer=tok, name="x" * 300)


def _extract_in_a_new_process(path: Path, cache: Path) -> str:
    code = ("import sys, probes; from transformers import AutoModel, AutoTokenizer; "
            "m = AutoModel.from_pretrained(sys.argv[1]); t = AutoTokenizer.from_pretrained(sys.argv[1]); "
            "print(probes.extract(m, ['A first text.', 'And a second one.'], tokenizer=t, name='mine', "
            "cache_dir=sys.argv[2], progress=False).meta['key'])")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-c", code, str(path), str(cache)], capture_output=True, text=True,
                         cwd=REPO, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.strip().splitlines()[-1]


@pytest.mark.integration
def test_reloading_a_masked_lm_checkpoint_in_a_new_process_reuses_the_entry(tok, tmp_path):
    from transformers import BertForMaskedLM

    path, cache = tmp_path / "mlm", tmp_path / "cache"
    tiny_bert(len(tok), cls=BertForMaskedLM).save_pretrained(path)
    tok.save_pretrained(path)
    keys = [_extract_in_a_new_process(path, cache) for _ in range(2)]
    assert keys[0] == keys[1] and len(entries(cache)) == 1
