"""The activation cache never hands back states that another model, other code or other files made: what changes a
model without changing its weights (code patched at run time, a module's plain attributes, a loaded encoder's
config) and a model folder whose files are replaced while they are read.

Each case checks that the extraction after the change equals a fresh extraction without the cache (float32 storage,
so equal means bit for bit), and that nothing is written under the old key. Tiny random BERTs with the embedded
MiniLM tokenizer."""

from __future__ import annotations

import functools
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import probes

TEXTS = ["Her Father was fond of the Sea.", "The Captain spoke to the crew at Night.", "Short one."]


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(probes.get_spec("minilm-l6").local_path())


def tiny_bert(vocab_size: int, seed: int = 0):
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    return BertModel(BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=64, max_position_embeddings=128)).eval()


@pytest.fixture
def folder(tok, tmp_path):
    path = tmp_path / "models" / "tiny"
    tiny_bert(len(tok)).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def run(model, cache, **kw):
    return probes.extract(model, TEXTS, cache_dir=cache, progress=False, cache_dtype="float32", **kw)


def states(acts) -> np.ndarray:
    return np.concatenate([np.asarray(acts.layer_hidden(layer)).ravel() for layer in range(acts.n_layers + 1)])


def entries(cache: Path) -> int:
    return len(list(cache.rglob("meta.json")))


def wraps_patch(cls, name="forward"):
    """``cls.<name>`` replaced by a wrapper written with functools.wraps (it copies the original's names), which
    halves the output; returns a function that puts the original back."""
    original = getattr(cls, name)

    @functools.wraps(original)
    def halved(self, *args, **kwargs):
        return original(self, *args, **kwargs) * 0.5

    setattr(cls, name, halved)
    return lambda: setattr(cls, name, original)


def layer_norm_patch():
    original = torch.nn.functional.layer_norm

    def doubled(x, shape, weight=None, bias=None, eps=1e-5):
        return original(x, shape, weight, bias, eps) * 2

    torch.nn.functional.layer_norm = doubled
    return lambda: setattr(torch.nn.functional, "layer_norm", original)


@pytest.mark.parametrize("patch", ["wraps", "layer_norm"])
@pytest.mark.parametrize("how", ["object", "loaded", "name"])
def test_code_patched_at_run_time_is_never_served_the_cached_states(tok, folder, tmp_path, patch, how):
    """A class-level forward wrapped with functools.wraps, and a patched torch.nn.functional function, for a model
    object, an encoder from probes.load and a folder named by its path."""
    from transformers.models.bert import modeling_bert

    cache = tmp_path / "cache"
    model = tiny_bert(len(tok)) if how == "object" else probes.load(str(folder)) if how == "loaded" else str(folder)
    kw = {"tokenizer": tok, "name": "obj"} if how == "object" else {}
    before = run(model, cache, **kw)
    undo = wraps_patch(modeling_bert.BertIntermediate) if patch == "wraps" else layer_norm_patch()
    try:
        with pytest.warns(UserWarning, match="is replaced .*extracted without the activation cache"):
            after = run(model, cache, **kw)
        fresh = run(model, None, **kw)
    finally:
        undo()
    assert np.array_equal(states(after), states(fresh)) and not np.array_equal(states(after), states(before))
    assert entries(cache) == 1


def test_a_module_level_function_replaced_after_the_first_extraction_is_seen(tok, tmp_path):
    from transformers.models.bert import modeling_bert

    cache = tmp_path / "cache"
    model = tiny_bert(len(tok))
    model.set_attn_implementation("eager")  # the forward calls modeling_bert.eager_attention_forward
    before = run(model, cache, tokenizer=tok, name="obj")
    original = modeling_bert.eager_attention_forward

    @functools.wraps(original)
    def sharper(module, query, key, value, attention_mask, scaling=None, **kwargs):
        return original(module, query, key, value, attention_mask, scaling=4 * (scaling or 1.0), **kwargs)

    modeling_bert.eager_attention_forward = sharper
    try:
        with pytest.warns(UserWarning, match=r"modeling_bert\.eager_attention_forward is replaced"):
            after = run(model, cache, tokenizer=tok, name="obj")
        fresh = run(model, None, tokenizer=tok, name="obj")
    finally:
        modeling_bert.eager_attention_forward = original
    assert np.array_equal(states(after), states(fresh)) and not np.array_equal(states(after), states(before))


def _scaling(m):
    m.encoder.layer[0].attention.self.scaling *= 4


def _activation_function(m):
    m.encoder.layer[0].intermediate.intermediate_act_fn.act = torch.relu  # the module's repr stays the same


def _is_decoder(m):
    m.config.is_decoder = True  # a causal mask from then on


@pytest.mark.parametrize("edit", [_scaling, _activation_function, _is_decoder], ids=lambda f: f.__name__.strip("_"))
def test_plain_attributes_and_the_config_are_part_of_a_models_identity(tok, folder, tmp_path, edit):
    """A model object gets another key (and the numbers of a fresh run); a loaded encoder, whose key comes from
    its files, is extracted without the cache."""
    cache = tmp_path / "cache"
    model = tiny_bert(len(tok))
    before = run(model, cache, tokenizer=tok, name="obj")
    edit(model)
    after = run(model, cache, tokenizer=tok, name="obj")
    assert after.meta["key"] != before.meta["key"]
    assert np.array_equal(states(after), states(run(model, None, tokenizer=tok, name="obj")))
    assert not np.array_equal(states(after), states(before))
    enc = probes.load(str(folder))
    loaded_before = run(enc, cache)
    edit(enc.model)
    with pytest.warns(UserWarning, match="changed in memory since probes.load"):
        loaded_after = run(enc, cache)
    assert np.array_equal(states(loaded_after), states(run(enc, None)))
    assert not np.array_equal(states(loaded_after), states(loaded_before))


def test_an_unchanged_model_keeps_its_key_and_its_loaded_state_through_extractions(tok, tmp_path):
    cache = tmp_path / "cache"
    for name in ("tiny-bert", "tiny-gpt2", "tiny-slstm"):
        enc = probes.load(name)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no patch, no change: the cache is used every time
            first = run(enc, cache, maps=True)
            assert run(enc, cache, maps=True).meta["key"] == first.meta["key"]
    model = tiny_bert(len(tok))
    assert run(model, cache, tokenizer=tok).meta["key"] == run(tiny_bert(len(tok)), cache, tokenizer=tok).meta["key"]


def test_weights_replaced_while_a_folder_is_loaded_are_not_cached_under_the_old_files_key(tok, folder, tmp_path,
                                                                                         monkeypatch):
    """A training job saving into the folder an analysis reads: the key hashes the files before the load, the load
    reads the new weights. The states are the new weights', and no entry is written under the old files' key."""
    import probes.models.hf as hf

    other = tmp_path / "models" / "other"
    shutil.copytree(folder, other)
    tiny_bert(len(tok), seed=1).save_pretrained(other)
    load_hf = hf.load_hf

    def replaced_then_loaded(spec, *args, **kwargs):
        shutil.copyfile(other / "model.safetensors", folder / "model.safetensors.tmp")
        (folder / "model.safetensors.tmp").replace(folder / "model.safetensors")
        return load_hf(spec, *args, **kwargs)

    cache = tmp_path / "cache"
    monkeypatch.setattr(hf, "load_hf", replaced_then_loaded)
    with pytest.warns(UserWarning, match="files of its folder changed .*extracted without the activation cache"):
        raced = run(str(folder), cache)
    monkeypatch.setattr(hf, "load_hf", load_hf)
    assert entries(cache) == 0
    assert np.array_equal(states(raced), states(run(str(other), None)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(states(run(str(folder), cache)), states(raced))  # the files now: the new weights
    assert entries(cache) == 1


def test_an_encoder_whose_folder_changed_after_probes_load_is_extracted_without_the_cache(tok, folder, tmp_path):
    cache = tmp_path / "cache"
    enc = probes.load(str(folder))
    tiny_bert(len(tok), seed=1).save_pretrained(folder)  # the folder's weights are another model's now
    with pytest.warns(UserWarning, match="files of its folder changed since probes.load"):
        loaded = run(enc, cache)
    assert entries(cache) == 0
    assert not np.array_equal(states(loaded), states(run(str(folder), None)))  # the old weights' states


def test_the_checks_remember_clean_namespaces_and_still_see_every_later_change():
    """code_patch skips a namespace that holds the very objects it held when last found clean: a patch put in after
    a clean check, taken out and put in again, is seen every time, and the original objects are clean again."""
    from transformers.models.bert import modeling_bert

    from probes.models.patches import code_patch

    classes = [modeling_bert.BertIntermediate]
    assert code_patch(classes) is None
    for _ in range(2):
        for patch, seen in ((lambda: wraps_patch(modeling_bert.BertIntermediate), "BertIntermediate.forward"),
                            (layer_norm_patch, "torch.nn.functional.layer_norm")):
            undo = patch()
            try:
                assert seen in (code_patch(classes) or "")
            finally:
                undo()
            assert code_patch(classes) is None
