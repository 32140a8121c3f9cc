"""A model object in: probes.extract(model, texts, tokenizer=tok) takes a loaded
transformers model and its tokenizer, records its identity (class, config, weights hash), keys the
cache on that content, and gives the numbers the CLI gives for the same model saved as a folder.

The model is a tiny random BERT built here (with the committed MiniLM tokenizer); docs/python-api.md
shows the same ten lines."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

import probes
from probes.errors import ProbeError

REPO = Path(__file__).resolve().parents[1]
WORDS = ("whale ship sea captain harpoon boat crew storm wind sail deck rope island night morning voyage "
         "water wave harbour island coast light star cold long dark old young strange quiet").split()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(model, tokenizer, folder with both saved, corpus file) of a tiny random BERT."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    os.environ.pop("PROBES_CHECKPOINTS", None)
    tok = AutoTokenizer.from_pretrained(probes.get_spec("minilm-l6").local_path())
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64, max_position_embeddings=128)).eval()
    root = tmp_path_factory.mktemp("user-model")
    folder = root / "my-bert"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(WORDS, size=rng.integers(6, 14))).capitalize() + "." for _ in range(40)]
    corpus = root / "sentences.txt"
    corpus.write_text("\n\n".join(lines) + "\n", encoding="utf-8")
    return model, tok, folder, corpus


def _texts(corpus: Path, n: int) -> list[str]:
    from probes.corpus import load_corpus, sample_sentences

    return sample_sentences(load_corpus(corpus), n, seed=0)


def test_readme_example_equals_the_cli(tiny, tmp_path, monkeypatch):
    """docs/python-api.md's example on the in-memory object and on the folder reloaded gives the CLI's numbers."""
    from transformers import AutoModel, AutoTokenizer

    from analyses import anisotropy

    model, tok, folder, corpus = tiny
    n = 30
    out = tmp_path / "out"
    monkeypatch.delenv("PROBES_CHECKPOINTS", raising=False)
    anisotropy.main(["--model", str(folder), "--corpus", str(corpus), "--n-sentences", str(n), "--n-tokens", "150",
                     "--no-figures", "--out", str(out)])
    cli = json.loads(next((out / "results" / "anisotropy").glob("*.json")).read_text())

    texts = _texts(corpus, n)
    reloaded = AutoModel.from_pretrained(folder)
    for obj, tokenizer in ((model, tok), (reloaded, AutoTokenizer.from_pretrained(folder))):
        # -- the example (docs/python-api.md) --
        acts = probes.extract(obj, texts, tokenizer=tokenizer, name="my-bert", cache_dir=tmp_path / "cache")
        result = anisotropy.compute(anisotropy.Config(n_tokens=150), acts=acts)
        # --
        assert result.model_name == "my-bert"
        assert acts.meta["model"]["fingerprint"]["object"].endswith("BertModel")
        assert len(result.layers) == len(cli["layers"]) == 3
        for mine, theirs in zip(result.layers, cli["layers"]):
            for level in ("token", "sentence"):
                assert mine.of(level).mean == pytest.approx(theirs[level]["mean"], abs=1e-4)
                assert mine.of(level).std == pytest.approx(theirs[level]["std"], abs=1e-4)
            assert mine.baseline_cosine == pytest.approx(theirs["baseline_cosine"], abs=1e-4)


def test_the_cache_keys_on_content_not_on_the_object(tiny, tmp_path):
    model, tok, folder, corpus = tiny
    texts = _texts(corpus, 8)
    a = probes.extract(model, texts, tokenizer=tok, name="m", cache_dir=tmp_path, progress=False)
    twin = type(model)(model.config)
    twin.load_state_dict(model.state_dict())
    b = probes.extract(twin, texts, tokenizer=tok, name="m", cache_dir=tmp_path, progress=False)
    assert a.meta["key"] == b.meta["key"]  # equal weights, config, tokenizer: one cache entry
    with torch.no_grad():
        next(twin.parameters()).add_(1.0)
    c = probes.extract(twin, texts, tokenizer=tok, name="m", cache_dir=tmp_path, progress=False)
    assert c.meta["key"] != a.meta["key"]  # other weights: another entry
    ident = a.meta["model"]["fingerprint"]
    assert set(ident) >= {"object", "config_sha256", "weights_sha256", "tokenizer_sha256"}
    default = probes.extract(model, texts, tokenizer=tok, cache_dir=None, progress=False)
    assert default.meta["model"]["name"] == f"bert-{ident['weights_sha256'][:8]}"


def test_a_causal_lm_object(tiny):
    """A causal LM object: an encoder for extract (last-token sentence vector), an LM for the LM entry points."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from probes.models.lm import load_lm

    _, tok, _, corpus = tiny
    torch.manual_seed(0)
    lm = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=2, n_positions=128))
    acts = probes.extract(lm, _texts(corpus, 4), tokenizer=tok, name="my-gpt", cache_dir=None, progress=False)
    assert acts.meta["model"]["sentence_vector"] == "last" and acts.n_layers == 2
    assert acts.meta["model"]["final_norm_on_last_hidden"]  # GPT-2's ln_f, found under the head
    wrapped = load_lm(lm, tokenizer=tok, model_name="my-gpt")
    assert wrapped.name == "my-gpt" and wrapped.describe()["fingerprint"]["object"].endswith("GPT2LMHeadModel")


def test_object_errors_are_one_line(tiny):
    model, tok, _, _ = tiny
    with pytest.raises(ProbeError, match="needs its tokenizer"):
        probes.extract(model, ["A text here."], cache_dir=None)
    with pytest.raises(ProbeError, match="is not allowed"):
        probes.extract(model, ["A text here."], tokenizer=tok, name="../x", cache_dir=None)
    with pytest.raises(ProbeError, match="go with a model object"):
        probes.extract("minilm-l6", ["A text here."], tokenizer=tok, cache_dir=None)


def test_a_tokenizer_of_special_tokens_only_is_refused_and_one_ordinary_token_is_enough(tiny):
    """Every word would be [UNK]: refused in one line, whether the tokenizer's size already tells (a fast tokenizer
    with more tokens than special ones) or its vocabulary has to be read."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    from probes.checkpoints.folder import only_special_tokens

    model = tiny[0]
    special = {"unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]"}

    def fast(vocab):
        backend = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
        return PreTrainedTokenizerFast(tokenizer_object=backend, **special)

    bare, one_word = fast(list(special.values())), fast([*special.values(), "whale"])
    assert only_special_tokens(bare) and not only_special_tokens(one_word)
    with pytest.raises(ProbeError, match="holds only its 4 special tokens: every word would be"):
        probes.extract(model, ["a whale"], tokenizer=bare, cache_dir=None, progress=False)
    assert not only_special_tokens(tiny[1])
