"""Sentence vectors a sentence-transformers model declares (probes.checkpoints.pooling): a folder whose modules.json
lists a Pooling module follows its 1_Pooling/config.json (mean_tokens -> mean_all, the mean over every real token,
[CLS] and [SEP] included, as sentence-transformers computes it); a folder without one keeps the rule it had; every
result says in words which pooling it used and why.

The folders are save_pretrained copies of the seeded tiny-bert with the sentence-transformers files written here.
"""

from __future__ import annotations

import json

import huggingface_hub.constants
import numpy as np
import pytest

import probes
from probes import CheckpointError, extract
from probes.capture.store import cache_key
from probes.checkpoints.pooling import pooling_words

TEXTS = ["The cat sat.", "Representations change layer by layer, and padding never matters at all here.",
         "A third, middling sentence."]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A save_pretrained copy of tiny-bert (weights and tokenizer), made once; copied per test."""
    folder = tmp_path_factory.mktemp("pool") / "tiny"
    enc = probes.load("tiny-bert")
    enc.model.save_pretrained(folder)
    enc.tokenizer.tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture()
def folder(saved, tmp_path):
    import shutil

    return shutil.copytree(saved, tmp_path / "st-model")


def sentence_transformers(folder, **modes) -> None:
    """Write modules.json (Transformer, Pooling, Normalize) and 1_Pooling/config.json with ``modes`` set."""
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    flags = {f"pooling_mode_{m}": False for m in ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens")}
    flags.update({f"pooling_mode_{k}": v for k, v in modes.items()})
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32, **flags}))


def run(model, **kw):
    return extract(model, TEXTS, progress=False, cache_dir=None, batch_size=8, **kw)


def means(acts, special: bool) -> np.ndarray:
    """(L+1, T, d) the mean of each text's real tokens, float64: all of them, or the non-special ones only."""
    out = []
    for t in range(acts.n_texts):
        h = np.asarray(acts.text_hidden(t), np.float64)  # (L+1, n_t, d), no padding
        keep = np.ones(h.shape[1], bool) if special else ~acts.special[acts.offsets[t]:acts.offsets[t + 1]]
        out.append(h[:, keep].mean(1))
    return np.stack(out, 1)


def test_mean_tokens_is_the_mean_over_all_real_tokens(folder):
    sentence_transformers(folder, mean_tokens=True)
    spec = probes.get_spec(str(folder))
    assert spec.sentence == "mean_all" and "Pooling module" in spec.description
    acts = run(str(folder))
    assert acts.meta["batch_size"] == 8 and len({len(t) for t in acts.tokens}) == 3  # one padded batch
    got = np.asarray(acts.sentence, np.float64)
    np.testing.assert_allclose(got, means(acts, special=True), atol=2e-6, rtol=0)  # [CLS] and [SEP] counted
    assert not np.allclose(got, means(acts, special=False), atol=1e-3)
    words = acts.meta["model"]["sentence_pooling"]
    assert words == ("mean over all tokens incl. [CLS]/[SEP], padding excluded, as the model's 1_Pooling declares; "
                     "the model's modules.json then applies Normalize to it, which the suite does not: this vector "
                     "is the pooled one, before them, not the model's own sentence embedding")
    # the suite's own mean stays one suffix away, under another name (another cache key and result file)
    other = probes.get_spec(f"{folder}?sentence=mean")
    assert other.sentence == "mean" and other.name == f"{spec.name}--sentence-mean"
    assert cache_key(other, TEXTS, {}) != cache_key(spec, TEXTS, {})
    acts_mean = run(f"{folder}?sentence=mean")
    np.testing.assert_allclose(np.asarray(acts_mean.sentence, np.float64), means(acts, special=False), atol=2e-6,
                               rtol=0)
    assert acts_mean.meta["model"]["sentence_pooling"].startswith("mean over the real tokens other than special")
    assert "as asked" in acts_mean.meta["model"]["sentence_pooling"]
    assert "declares the mean over all tokens incl. [CLS]/[SEP]" in acts_mean.meta["model"]["sentence_pooling"]


def test_mean_all_on_any_name_and_in_a_registry_entry(tmp_path, monkeypatch):
    spec = probes.get_spec("tiny-bert?sentence=mean_all")
    assert (spec.name, spec.sentence) == ("tiny-bert--sentence-mean_all", "mean_all")
    acts = run("tiny-bert?sentence=mean_all")
    np.testing.assert_allclose(np.asarray(acts.sentence, np.float64), means(acts, special=True), atol=2e-6, rtol=0)
    assert acts.meta["model"]["sentence_pooling"] == "mean over all tokens incl. [CLS]/[SEP], padding excluded"
    reg = tmp_path / "reg.yaml"
    reg.write_text("my-tiny:\n  family: hf\n  kind: encoder\n  source:\n    random: {model_type: bert, "
                   "hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, intermediate_size: 64}\n"
                   "    tokenizer: minilm-l6\n"
                   "  sentence: mean_all\n")
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(reg))
    assert probes.get_spec("my-tiny").sentence == "mean_all"
    with pytest.raises(CheckpointError, match=r"sentence vector must be one of cls, mean, mean_all, last, not 'max'"):
        probes.get_spec("tiny-bert?sentence=max")


@pytest.mark.parametrize("modes, vector, said", [
    ({"cls_token": True}, "cls", "as the model's 1_Pooling declares"),
    ({"lasttoken": True}, "last", "as the model's 1_Pooling declares"),
    ({"max_tokens": True}, "mean", "declares the maximum over tokens (pooling_mode_max_tokens), which is none of "
                                   "the suite's sentence vectors"),
    ({"weightedmean_tokens": True}, "mean", "a mean over tokens weighted by position"),
    ({"mean_tokens": True, "max_tokens": True}, "mean", "the concatenation of the mean over all tokens"),
    ({}, "mean", "declares no pooling mode"),
])
def test_each_declared_pooling(folder, modes, vector, said):
    sentence_transformers(folder, **modes)
    spec = probes.get_spec(str(folder))
    assert spec.sentence == vector
    assert said in pooling_words(spec)


def test_a_folder_without_a_pooling_module_keeps_its_rule(folder):
    assert probes.get_spec(str(folder)).sentence == "cls"  # no sentence-transformers files: the first token
    (folder / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "",
                                                      "type": "sentence_transformers.models.Transformer"}]))
    spec = probes.get_spec(str(folder))
    assert spec.sentence == "mean" and "Pooling" not in spec.description  # a sentence-transformers folder: mean
    assert pooling_words(spec).startswith("mean over the real tokens other than special tokens")
    acts = run(str(folder))
    np.testing.assert_allclose(np.asarray(acts.sentence, np.float64), means(acts, special=False), atol=2e-6, rtol=0)


POOLING = '[{"type": "sentence_transformers.models.Pooling", "path": '


@pytest.mark.parametrize("modules, config, message", [
    ("{", None, r"cannot read .*modules\.json"),
    ('{"a": 1}', None, "is not a list of modules"),
    (POOLING + '"../x"}]', None, "not a folder inside the model's"),
    (POOLING + '"1_Pooling"}]', None, "1_Pooling/config.json is missing"),
    (POOLING + '"1_Pooling"}]', "[1]", "is not a JSON object"),
])
def test_unreadable_sentence_transformers_files_are_one_line(folder, modules, config, message):
    (folder / "modules.json").write_text(modules)
    if config is not None:
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text(config)
    with pytest.raises(CheckpointError, match=message) as e:
        probes.get_spec(str(folder))
    assert "\n" not in str(e.value)


def test_builtin_entries_keep_their_mean_and_say_how_to_get_the_declared_one():
    spec = probes.get_spec("minilm-l6")
    assert spec.sentence == "mean"  # the published numbers stay comparable
    words = pooling_words(spec)
    assert words.startswith("mean over the real tokens other than special tokens")
    assert ("the registry entry's sentence: mean, kept so that the suite's published numbers stay comparable" in words
            and "1_Pooling declares the mean over all tokens incl. [CLS]/[SEP]" in words
            and "'minilm-l6?sentence=mean_all'" in words)
    assert "as the model's 1_Pooling declares; " in pooling_words(probes.get_spec("minilm-l6?sentence=mean_all"))


def test_a_hub_model_follows_its_cached_pooling_and_refuses_to_guess_offline(saved, tmp_path, monkeypatch):
    import shutil

    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    sha = "b" * 40
    repo = cache / "models--someorg--st-tiny"
    snap = shutil.copytree(saved, repo / "snapshots" / sha)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(sha)
    sentence_transformers(snap, mean_tokens=True)
    spec = probes.get_spec("hf:someorg/st-tiny")
    assert spec.sentence == "mean_all" and "as the model's 1_Pooling declares; " in pooling_words(spec)
    (snap / "1_Pooling" / "config.json").unlink()  # listed, but neither cached nor downloadable
    with pytest.raises(CheckpointError, match=r"its 1_Pooling/config\.json \(the sentence-transformers pooling\) is "
                                              r"not in the local Hugging Face cache"):
        probes.get_spec("hf:someorg/st-tiny")
