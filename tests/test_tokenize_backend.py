"""Tokenizing through the Rust backend's ``encode_batch_fast`` gives what transformers' ``__call__`` gives.

``HFTokenizer.tokenize`` asks a plain fast tokenizer's backend for its encodings directly (no character offsets:
faster), and goes through ``__call__`` when the tokenizer's class changes a step of that path. Checked on a
WordPiece (the tiny models' MiniLM tokenizer), a byte-level BPE and a Unigram tokenizer built here, with texts that
hold special-token strings, accents, other scripts, emoji, whitespace and nothing: ids, special marks and token
strings equal ``__call__``'s (an unknown's string is the text it stands for, as there); a backend left padding
or truncating by its user is not obeyed (as ``__call__``); ``split_special_tokens`` is honoured; a class that
overrides a step falls back to ``__call__``.
"""

from __future__ import annotations

import dataclasses

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from probes.checkpoints.loaders import load_tokenizer
from probes.checkpoints.registry import read_registry
from probes.models.hf import HFTokenizer, plain_fast_tokenizer

TEXTS = ["Mr. Knightley was one of the few people who could see faults in Emma.", "", "   ",
         "naïve café, “quoted” [SEP] <s> </s> [MASK] x", "日本語のテキスト", "tab\tand\nnewline",
         "emoji 🙂 ok", "a" * 300, "The cat sat on the mat. The cat sat on the mat."]


def through_call(tok: HFTokenizer, texts: list[str]):
    """The same tokenizer forced through transformers' ``__call__``."""
    forced = HFTokenizer(tok.spec, tok.tokenizer, tok.max_length)
    forced._backend_encodings = lambda texts: None  # type: ignore[method-assign]
    return forced.tokenize(texts)


def same(a, b) -> bool:
    return all(x.ids == y.ids and x.special == y.special and x.tokens == y.tokens for x, y in zip(a, b, strict=True))


def spec(special_tokens: bool = True):
    return dataclasses.replace(read_registry()["tiny-bert"], special_tokens=special_tokens)


def byte_bpe() -> PreTrainedTokenizerFast:
    words = ["the", "cat", "sat", "on", "mat", "Ġthe", "Ġcat", "Ġsat", "Ġon", "Ġmat"]
    vocab: dict[str, int] = {}
    for t in ["<s>", "</s>", "<pad>"] + sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab.setdefault(t, len(vocab))
    merges = []
    for w in words:  # each word's characters merged left to right
        for k in range(2, len(w) + 1):
            if w[:k] not in vocab:
                vocab[w[:k]] = len(vocab)
                merges.append((w[:k - 1], w[k - 1]))
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def unigram() -> PreTrainedTokenizerFast:
    pieces = [("<unk>", 0.0), ("<s>", 0.0), ("</s>", 0.0), ("<pad>", 0.0)] + [
        (p, -float(i)) for i, p in enumerate(["▁the", "▁cat", "▁sat", "▁", "t", "h", "e", "a", "c", "s", "m", "▁on"])]
    tk = Tokenizer(models.Unigram(pieces, unk_id=0, byte_fallback=False))
    tk.pre_tokenizer = pre_tokenizers.Metaspace()
    tk.decoder = decoders.Metaspace()
    tk.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>")


@pytest.fixture(scope="module")
def wordpiece() -> HFTokenizer:
    tok = load_tokenizer("tiny-bert")
    assert isinstance(tok, HFTokenizer)
    return tok


@pytest.mark.parametrize("kind", ["wordpiece", "byte-bpe", "unigram"])
@pytest.mark.parametrize("special_tokens", [True, False])
def test_backend_path_equals_call(kind, special_tokens, wordpiece):
    inner = {"wordpiece": lambda: wordpiece.tokenizer, "byte-bpe": byte_bpe, "unigram": unigram}[kind]()
    tok = HFTokenizer(spec(special_tokens), inner, 512)
    assert plain_fast_tokenizer(inner)
    got = tok.tokenize(TEXTS)
    assert same(got, through_call(tok, TEXTS))
    assert any(t.special[:1] == [True] for t in got) == special_tokens  # the special tokens are there, or not
    if kind != "wordpiece":  # a tokenizer built here knows only a few words: the texts gave more than unknowns
        assert len({i for t in got for i in t.ids}) > 5
    if kind == "unigram":  # an unknown's string is the text it covers, as in __call__'s encodings, not "<unk>"
        assert any(i == 0 and s not in ("<unk>", "") for t in got for i, s in zip(t.ids, t.tokens))


def test_backend_settings_of_the_user_are_not_obeyed(wordpiece):
    """A backend left padding and truncating (as the raw tokenizer of some checkpoints is until the first
    ``__call__``) gives the same unpadded, untruncated tokens as ``__call__``."""
    tok = HFTokenizer(spec(), load_tokenizer("tiny-bert").tokenizer, 512)
    backend = tok.tokenizer._tokenizer
    backend.enable_padding(length=64, pad_id=0, pad_token="[PAD]")
    backend.enable_truncation(max_length=5)
    got = tok.tokenize(TEXTS)
    assert len(got[0].ids) > 5 and len(got[1].ids) == 2  # "" is [CLS] [SEP]
    backend.enable_padding(length=64, pad_id=0, pad_token="[PAD]")
    backend.enable_truncation(max_length=5)
    assert same(got, through_call(tok, TEXTS))


def test_split_special_tokens_is_honoured(wordpiece):
    inner = load_tokenizer("tiny-bert").tokenizer
    inner.split_special_tokens = True
    tok = HFTokenizer(spec(), inner, 512)
    got = tok.tokenize(["a [SEP] b"])
    assert got[0].special == [True] + [False] * (len(got[0].ids) - 2) + [True]  # "[SEP]" in the text is words
    assert same(got, through_call(tok, ["a [SEP] b"]))


def test_a_class_that_changes_the_path_goes_through_call(wordpiece):
    base = type(load_tokenizer("tiny-bert").tokenizer)

    class Dogs(base):  # type: ignore[misc, valid-type]
        def _encode_plus(self, text, *args, **kwargs):  # its own preprocessing
            text = [t.replace("cat", "dog") for t in text] if isinstance(text, list) else text.replace("cat", "dog")
            return super()._encode_plus(text, *args, **kwargs)

    inner = load_tokenizer("tiny-bert").tokenizer
    inner.__class__ = Dogs
    assert not plain_fast_tokenizer(inner)
    tok = HFTokenizer(spec(), inner, 512)
    got = tok.tokenize(["the cat"])
    plain = HFTokenizer(spec(), load_tokenizer("tiny-bert").tokenizer, 512).tokenize(["the cat"])
    assert got[0].tokens == ["[CLS]", "the", "dog", "[SEP]"] and plain[0].tokens[2] == "cat"  # it ran
    assert same(got, through_call(tok, ["the cat"]))
