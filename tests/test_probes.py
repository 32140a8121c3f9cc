"""Tests for probes: padding invariance, shapes and conventions, the activation cache, resuming
an interrupted extraction, user errors, and determinism.

Models: the seeded random-init ``tiny-bert`` / ``tiny-gpt2`` (seconds, no download) and the real
``minilm-l6`` (padding invariance and mean pooling only). Every cache lives in ``tmp_path``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import probes
import probes.capture.extract as pe
import probes.models.hf
from probes import CheckpointError, ProbeError, extract
from probes.capture.store import cache_key
from probes.precision import Float32View

SHORT = "The cat sat."
LONG = [
    "A considerably longer sentence follows here, with many more words than the short one, so that "
    "the short text has to be padded by a large amount when it shares a batch with this one.",
    "Another long text: padding must never change the states of real tokens, whichever model we "
    "look at, encoder or causal, small or large, random or trained on real sentences.",
]
TEXTS = ["Hello world.", "Representations change layer by layer.", "Short.", "A fourth, final sentence here."]


def run(model, texts, **kw):
    kw.setdefault("cache_dir", None)
    return extract(model, texts, progress=False, **kw)


def recording(monkeypatch, encoder, fail_at: int | None = None) -> list:
    """Wrap encoder.forward: record the unpadded id rows of every call; raise on call ``fail_at``."""
    calls: list[tuple[list[tuple[int, ...]], tuple[int, int]]] = []
    inner = encoder.forward

    def forward(input_ids, attention_mask, maps=False):
        if fail_at is not None and len(calls) + 1 == fail_at:
            raise KeyboardInterrupt("simulated interruption")
        rows = [tuple(ids[m.bool()].tolist()) for ids, m in zip(input_ids, attention_mask, strict=True)]
        calls.append((rows, tuple(input_ids.shape)))
        return inner(input_ids, attention_mask, maps=maps)

    monkeypatch.setattr(encoder, "forward", forward)
    return calls


# --------------------------------------------------------------------------- padding invariance


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2", "minilm-l6"])
def test_padding_invariance(name, encoders, monkeypatch):
    enc = encoders(name)
    alone = run(enc, [SHORT], maps=True)
    calls = recording(monkeypatch, enc)
    batched = run(enc, [LONG[0], SHORT, LONG[1]], maps=True, batch_size=8)
    # one forward over all three: the short text really was padded
    assert len(calls) == 1
    _, shape = calls[0]
    n_short = alone.hidden.shape[1]
    assert shape[1] > 2 * n_short, "the short text should be padded heavily"

    t = 1  # SHORT's index in the batched call
    assert batched.tokens[t] == alone.tokens[0]
    np.testing.assert_allclose(batched.text_hidden(t), alone.text_hidden(0), atol=1e-5, rtol=0)
    np.testing.assert_allclose(batched.sentence[:, t], alone.sentence[:, 0], atol=1e-5, rtol=0)

    a_alone, a_batched = alone.text_attentions(0), batched.text_attentions(t)
    L, H = enc.num_layers, enc.num_heads
    assert a_alone.shape == a_batched.shape == (L, H, n_short, n_short)
    np.testing.assert_allclose(a_batched, a_alone, atol=1e-5, rtol=0)
    for i in range(3):  # every attention row of every text sums to 1 over its real tokens
        np.testing.assert_allclose(batched.text_attentions(i).sum(-1), 1.0, atol=1e-5)
    if enc.spec.kind == "causal":  # nothing attends to the future
        assert np.all(np.triu(a_batched, k=1) == 0)


# --------------------------------------------------------------------------- shapes and conventions


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2"])
def test_shapes_tokens_and_special_mask(name, encoders):
    enc = encoders(name)
    a = run(enc, TEXTS)
    toks = enc.tokenize(TEXTS)
    lengths = [len(t.ids) for t in toks]
    L, d = enc.num_layers, enc.hidden_size
    assert (L, d) == (2, 32)
    assert a.n_layers == L and a.n_texts == len(TEXTS)
    assert a.hidden.shape == (L + 1, sum(lengths), d) and a.hidden.dtype == np.float32
    assert a.sentence.shape == (L + 1, len(TEXTS), d)
    assert a.offsets.tolist() == np.concatenate([[0], np.cumsum(lengths)]).tolist()
    assert a.token_ids.tolist() == [i for t in toks for i in t.ids]
    assert a.tokens == [t.tokens for t in toks]
    assert a.tokens[0] == (["[CLS]", "hello", "world", ".", "[SEP]"] if name == "tiny-bert"
                           else ["hello", "world", "."])
    assert a.text_index().tolist() == [t for t, n in enumerate(lengths) for _ in range(n)]
    for t in range(len(TEXTS)):
        sp = a.special[a.offsets[t]:a.offsets[t + 1]]
        if name == "tiny-bert":  # [CLS] ... [SEP]
            assert sp[0] and sp[-1] and not sp[1:-1].any()
            assert a.tokens[t][0] == "[CLS]" and a.tokens[t][-1] == "[SEP]"
        else:  # special_tokens: false
            assert not sp.any()
            assert "[CLS]" not in a.tokens[t] and "[SEP]" not in a.tokens[t]
    assert a.meta["model"]["name"] == name and a.meta["n_tokens"] == sum(lengths)


def test_sentence_vector_cls_and_last(encoders):
    a = run(encoders("tiny-bert"), TEXTS)
    assert a.meta["model"]["sentence_vector"] == "cls"
    for t in range(len(TEXTS)):
        np.testing.assert_array_equal(a.sentence[:, t], a.hidden[:, a.offsets[t]])
    g = run(encoders("tiny-gpt2"), TEXTS)
    assert g.meta["model"]["sentence_vector"] == "last"
    for t in range(len(TEXTS)):
        np.testing.assert_array_equal(g.sentence[:, t], g.hidden[:, g.offsets[t + 1] - 1])
    # not trivially equal to the first token for a causal model
    assert not np.allclose(g.sentence[-1, 1], g.hidden[-1, g.offsets[1]])


def test_sentence_vector_mean_minilm(encoders):
    a = run(encoders("minilm-l6"), TEXTS, batch_size=2)
    assert a.meta["model"]["sentence_vector"] == "mean"
    assert a.hidden.shape[0] == 7 and a.hidden.shape[2] == 384
    for t in range(len(TEXTS)):
        h = a.text_hidden(t)
        sp = a.special[a.offsets[t]:a.offsets[t + 1]]
        assert sp[0] and sp[-1] and sp.sum() == 2
        np.testing.assert_allclose(a.sentence[:, t], h[:, ~sp].mean(1), atol=1e-5, rtol=0)
        assert not np.allclose(a.sentence[:, t], h.mean(1), atol=1e-5)  # specials are excluded


# --------------------------------------------------------------------------- cache


def block_loading(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded although the cache should have answered")

    monkeypatch.setattr(probes, "load", refuse)
    monkeypatch.setattr(probes.models.hf, "load_hf", refuse)


def test_cache_hit_does_not_load_model(tmp_path, monkeypatch):
    first = run("tiny-bert", TEXTS, cache_dir=tmp_path)
    entries = list((tmp_path / "tiny-bert").iterdir())
    assert [e.name for e in entries] == [first.meta["key"]]
    block_loading(monkeypatch)
    second = run("tiny-bert", TEXTS, cache_dir=tmp_path)
    assert isinstance(second.hidden, Float32View) and isinstance(second.hidden.stored, np.memmap)
    for f in ("hidden", "sentence", "offsets", "token_ids", "special"):
        np.testing.assert_array_equal(getattr(second, f), getattr(first, f))
    assert second.tokens == first.tokens and second.texts == TEXTS
    assert second.meta == first.meta
    # a miss really does need the model: different texts, or maps=True
    with pytest.raises(AssertionError, match="was loaded"):
        run("tiny-bert", TEXTS[:-1], cache_dir=tmp_path)
    with pytest.raises(AssertionError, match="was loaded"):
        run("tiny-bert", TEXTS, cache_dir=tmp_path, maps=True)


def test_cache_key_changes_with_texts_and_settings():
    spec = probes.get_spec("tiny-bert")
    base = {"attentions": False, "truncate": False, "dtype": "float32", "cache_dtype": "float16"}
    k = cache_key(spec, TEXTS, base)
    assert k == cache_key(spec, list(TEXTS), dict(base))
    assert k != cache_key(spec, TEXTS[:-1], base)
    assert k != cache_key(spec, TEXTS[::-1], base)
    assert k != cache_key(spec, ["Hello", "world."], base) != cache_key(spec, ["Hello world."], base)
    assert k != cache_key(spec, TEXTS, {**base, "attentions": True})
    assert k != cache_key(spec, TEXTS, {**base, "truncate": True})
    assert k != cache_key(spec, TEXTS, {**base, "dtype": "bfloat16"})
    assert k != cache_key(spec, TEXTS, {**base, "cache_dtype": "float32"})
    assert k != cache_key(probes.get_spec("tiny-gpt2"), TEXTS, base)


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


CORRUPTIONS = {
    "hidden-empty": lambda e: _truncate(e / "hidden.npy", 0),
    "hidden-half": lambda e: _truncate(e / "hidden.npy", (e / "hidden.npy").stat().st_size // 2),
    "hidden-garbage": lambda e: (e / "hidden.npy").write_bytes(b"\x00garbage" * 64),
    "hidden-missing": lambda e: (e / "hidden.npy").unlink(),
    "sentence-half": lambda e: _truncate(e / "sentence.npy", (e / "sentence.npy").stat().st_size // 2),
    "meta-garbage": lambda e: (e / "meta.json").write_bytes(b"\xff\xfe{not json"),
    "meta-empty": lambda e: (e / "meta.json").write_text(""),
    "meta-null": lambda e: (e / "meta.json").write_text("null"),
    "meta-wrong-format": lambda e: (e / "meta.json").write_text(json.dumps({"meta": {"format": 999}})),
}


@pytest.mark.parametrize("how", list(CORRUPTIONS))
def test_corrupted_cache_is_detected_and_rebuilt(how, tmp_path, encoders):
    enc = encoders("tiny-bert")
    first = run(enc, TEXTS, cache_dir=tmp_path)
    want = {f: np.array(getattr(first, f)) for f in ("hidden", "sentence", "offsets", "token_ids")}
    entry = tmp_path / "tiny-bert" / first.meta["key"]
    del first  # release the memory map before damaging the file under it
    CORRUPTIONS[how](entry)
    with pytest.warns(UserWarning, match="unreadable"):
        again = run(enc, TEXTS, cache_dir=tmp_path)
    for f, v in want.items():
        np.testing.assert_array_equal(getattr(again, f), v)
    assert (entry / "meta.json").exists() and not entry.with_name(entry.name + ".partial").exists()
    # and the rebuilt entry is a clean hit
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        third = run(enc, TEXTS, cache_dir=tmp_path)
    np.testing.assert_array_equal(third.hidden, want["hidden"])


# --------------------------------------------------------------------------- resume


def test_interrupted_extraction_resumes(tmp_path, monkeypatch, encoders):
    enc = encoders("tiny-bert")
    texts = [f"Sentence number {i} says " + "more " * (i % 3) + "and stops." for i in range(7)]
    per_token = 4 * (enc.num_layers + 1) * enc.hidden_size
    monkeypatch.setattr(pe, "CHUNK_BYTES", 2 * 12 * per_token)  # about two texts per chunk

    clean_calls = recording(monkeypatch, enc)
    clean = run(enc, texts, batch_size=64)  # no cache; one forward per chunk
    n_chunks = len(clean_calls)
    assert n_chunks >= 3
    chunk_rows = [set(rows) for rows, _ in clean_calls]

    monkeypatch.undo()
    monkeypatch.setattr(pe, "CHUNK_BYTES", 2 * 12 * per_token)
    recording(monkeypatch, enc, fail_at=3)
    with pytest.raises(KeyboardInterrupt):
        run(enc, texts, batch_size=64, cache_dir=tmp_path)
    key = cache_key(enc.spec, texts, {"attentions": False, "truncate": False, "dtype": "float32",
                                      "cache_dtype": "float16"})
    entry = tmp_path / "tiny-bert" / key
    partial = entry.with_name(entry.name + ".partial")
    assert not entry.exists() and partial.is_dir()
    state = json.loads((partial / "done.json").read_text())
    assert state["key"] == key and sorted(state["chunks"]) == ["0", "1"]
    assert all(r["batch_size"] == 64 and len(r["xxh3_64"]) == 16 for r in state["chunks"].values())

    monkeypatch.undo()
    monkeypatch.setattr(pe, "CHUNK_BYTES", 2 * 12 * per_token)
    resumed_calls = recording(monkeypatch, enc)
    resumed = run(enc, texts, batch_size=64, cache_dir=tmp_path)
    assert len(resumed_calls) == n_chunks - 2
    assert [set(rows) for rows, _ in resumed_calls] == chunk_rows[2:]
    assert entry.is_dir() and not partial.exists()
    for f in ("hidden", "sentence", "offsets", "token_ids", "special"):  # float16 storage = the float32 states rounded
        want = np.asarray(getattr(clean, f))
        want = want.astype(np.float16).astype(np.float32) if want.dtype == np.float32 else want
        np.testing.assert_array_equal(getattr(resumed, f), want)  # atol 0


def test_last_chunk_is_not_recorded_and_an_interrupted_finalise_reruns_only_it(tmp_path, monkeypatch, encoders):
    """One process's last chunk gets no done.json record (the entry is finalised right after it): an
    interruption while finalising runs that one chunk again, and the entry is the one a clean run writes."""
    import probes.capture.store as store

    enc = encoders("tiny-bert")
    texts = [f"Sentence number {i} says " + "more " * (i % 3) + "and stops." for i in range(7)]
    per_token = 4 * (enc.num_layers + 1) * enc.hidden_size
    monkeypatch.setattr(pe, "CHUNK_BYTES", 2 * 12 * per_token)  # about two texts per chunk
    clean = run(enc, texts, batch_size=64, cache_dir=tmp_path / "clean")

    def interrupted(*a, **k):
        raise KeyboardInterrupt("simulated interruption while finalising")

    with monkeypatch.context() as m:
        m.setattr(store, "finalise_entry", interrupted)
        calls = recording(m, enc)
        with pytest.raises(KeyboardInterrupt):
            run(enc, texts, batch_size=64, cache_dir=tmp_path)
    n_chunks = len(calls)
    assert n_chunks >= 3
    (partial,) = (tmp_path / "tiny-bert").glob("*.partial")
    chunks = json.loads((partial / "done.json").read_text())["chunks"]
    assert sorted(chunks, key=int) == [str(c) for c in range(n_chunks - 1)]  # every chunk but the last

    resumed_calls = recording(monkeypatch, enc)
    resumed = run(enc, texts, batch_size=64, cache_dir=tmp_path)
    assert [set(rows) for rows, _ in resumed_calls] == [set(calls[-1][0])]  # only the last chunk again
    assert not partial.exists()
    for f in ("hidden", "sentence", "offsets", "token_ids", "special"):
        np.testing.assert_array_equal(np.asarray(getattr(resumed, f)), np.asarray(getattr(clean, f)))


# --------------------------------------------------------------------------- bad input


def test_unknown_model_lists_known_names(tmp_path):
    with pytest.raises(CheckpointError) as e:
        run("no-such-model", ["A text."], cache_dir=tmp_path)
    msg = str(e.value)
    assert "no-such-model" in msg and "tiny-bert" in msg and "minilm-l6" in msg and "gpt2" in msg


def test_hub_model_offline_fails_fast(tmp_path):
    if probes.checkpoints.names.hub_reachable(timeout=2.0):
        pytest.skip("the hub is reachable here; this test is about offline use")
    t0 = time.monotonic()
    with pytest.raises(CheckpointError) as e:
        run("roberta-large", ["A text."], cache_dir=tmp_path)
    assert time.monotonic() - t0 < 15
    msg = str(e.value)
    assert "roberta-large" in msg and "cannot be reached" in msg and "\n" not in msg


def test_empty_inputs(tmp_path, encoders):
    with pytest.raises(ProbeError, match="empty"):
        run("tiny-bert", [], cache_dir=tmp_path)
    with pytest.raises(ProbeError, match="text 1 gives no tokens"):
        run(encoders("tiny-gpt2"), ["Fine.", ""], cache_dir=tmp_path)
    assert not list(tmp_path.rglob("*.npy"))


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2"])
def test_too_long_text_is_an_error(name, tmp_path, encoders):
    enc = encoders(name)
    long = "word " * 2000
    n = len(enc.tokenize([long])[0].ids)
    assert n == 2000 + 2 * enc.spec.special_tokens
    with pytest.raises(ProbeError) as e:
        run(enc, ["Short.", long], cache_dir=tmp_path)
    msg = str(e.value)
    assert "text 1" in msg and str(n) in msg and f"({enc.max_length})" in msg and "truncate" in msg
    assert not (tmp_path / name).exists() or not list((tmp_path / name).rglob("hidden.npy"))


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2"])
def test_truncate_warns_and_records(name, tmp_path, encoders):
    enc = encoders(name)
    long = "word " * 2000
    with pytest.warns(UserWarning, match="truncated"):
        a = run(enc, ["Short.", long, "Also short."], truncate=True, cache_dir=tmp_path)
    assert a.meta["truncated_texts"] == [1] and a.meta["truncate"] is True
    n = a.offsets[2] - a.offsets[1]
    assert n == enc.max_length
    toks, sp = a.tokens[1], a.special[a.offsets[1]:a.offsets[2]]
    if enc.spec.special_tokens:  # [CLS] word ... word [SEP]: the final [SEP] is kept
        assert toks[0] == "[CLS]" and toks[-1] == "[SEP]" and set(toks[1:-1]) == {"word"}
        assert sp[0] and sp[-1] and not sp[1:-1].any()
    else:
        assert set(toks) == {"word"} and not sp.any()
    assert a.hidden.shape[1] == a.offsets[-1] and np.isfinite(a.hidden).all()
    # the other texts are untouched, and the cached copy remembers the cut
    assert a.tokens[0] == enc.tokenize(["Short."])[0].tokens
    b = run(enc, ["Short.", long, "Also short."], truncate=True, cache_dir=tmp_path)
    assert b.meta["truncated_texts"] == [1]
    np.testing.assert_array_equal(b.hidden, a.hidden)


GOOD_ENTRY = """\
  family: hf
  kind: encoder
  source: {hub: some/model}
  sentence: cls
"""


def write_registry(tmp_path, monkeypatch, text: str) -> Path:
    path = tmp_path / "checkpoints.yaml"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("PROBES_BUILTIN_CHECKPOINTS", str(path))
    return path


def test_custom_registry_is_used(tmp_path, monkeypatch):
    write_registry(tmp_path, monkeypatch, "mine:\n" + GOOD_ENTRY)
    spec = probes.get_spec("mine")
    assert (spec.kind, spec.sentence, spec.source_type, spec.special_tokens) == ("encoder", "cls", "hub", True)
    with pytest.raises(CheckpointError, match="unknown model 'tiny-bert'.*mine"):
        probes.get_spec("tiny-bert")


def test_a_misspelt_name_is_answered_with_the_names_it_is_close_to():
    with pytest.raises(CheckpointError, match=r"unknown model 'minilm-l7' \(did you mean minilm-l6 or minilm-l3\?\)"):
        probes.get_spec("minilm-l7")
    with pytest.raises(CheckpointError, match=r"unknown model 'zzz': checkpoints.yaml has"):  # nothing close: no guess
        probes.get_spec("zzz")


def test_the_corpus_and_series_modules_are_attributes_of_the_package():
    """``import probes`` then ``probes.corpus.sample_sentences(...)``, as ``probes.extract``: imported on first use."""
    assert probes.corpus.sample_sentences is __import__("probes.corpus", fromlist=["_"]).sample_sentences
    assert probes.series.__name__ == "probes.series"
    with pytest.raises(AttributeError, match="no attribute 'corpse'"):
        probes.corpse  # noqa: B018


BAD_REGISTRIES = {
    "bad sentence": ("mine:\n" + GOOD_ENTRY.replace("sentence: cls", "sentence: pooled"),
                     r"entry 'mine'.*sentence must be one of .*'pooled'"),
    "missing field": ("mine:\n" + GOOD_ENTRY.replace("  kind: encoder\n", ""), r"entry 'mine' lacks the field 'kind'"),
    "bad kind": ("mine:\n" + GOOD_ENTRY.replace("kind: encoder", "kind: decoder"), r"kind must be one of .*'decoder'"),
    "two sources": ("mine:\n" + GOOD_ENTRY.replace("{hub: some/model}", "{hub: a/b, path: c}"),
                    r"source must name exactly one"),
    "entry not a mapping": ("mine: just a string\n", r"entry 'mine' is not a mapping"),
    "not yaml": ("mine: [unclosed\n", r"cannot read the checkpoint registry"),
    "top level list": ("- mine\n- yours\n", r"checkpoint registry .* mapping"),
}


@pytest.mark.parametrize("case", list(BAD_REGISTRIES))
def test_bad_registry_is_a_clear_error(case, tmp_path, monkeypatch):
    text, pattern = BAD_REGISTRIES[case]
    path = write_registry(tmp_path, monkeypatch, text)
    with pytest.raises(CheckpointError, match=pattern) as e:
        run("mine", ["A text."], cache_dir=tmp_path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_registry_python_tag_is_refused_not_run(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    write_registry(tmp_path, monkeypatch,
                   f'evil: !!python/object/apply:os.system ["touch {marker}"]\n' + "mine:\n" + GOOD_ENTRY)
    with pytest.raises(CheckpointError, match="cannot read the checkpoint registry"):
        probes.get_spec("mine")
    with pytest.raises(CheckpointError):
        run("evil", ["A text."], cache_dir=tmp_path)
    assert not marker.exists()


# --------------------------------------------------------------------------- determinism


def test_extraction_is_deterministic(encoders):
    for name in ("tiny-bert", "tiny-gpt2"):
        a = run(encoders(name), TEXTS, maps=True)
        b = run(encoders(name), TEXTS, maps=True)
        assert np.array_equal(a.hidden, b.hidden) and np.array_equal(a.sentence, b.sentence)
        assert np.array_equal(a.attentions, b.attentions)
        assert a.hidden.tobytes() == b.hidden.tobytes()
    # a freshly loaded random-init model has the same (seeded) weights
    c = run("tiny-bert", TEXTS)
    assert np.array_equal(c.hidden, run(encoders("tiny-bert"), TEXTS).hidden)


def test_progress_bars_follow_progress(capsys):
    texts = ["one short text", "and a second one"]
    probes.extract("tiny-bert", texts, cache_dir=None, progress=True)
    assert "extract tiny-bert" in capsys.readouterr().err
    probes.extract("tiny-bert", texts, cache_dir=None, progress=False)
    assert "extract tiny-bert" not in capsys.readouterr().err


@pytest.mark.integration
def test_tqdm_disable_turns_the_bars_off():
    """What make demo sets for its second chain (tqdm reads its environment defaults when it is imported)."""
    code = "import probes; probes.extract('tiny-bert', ['one short text'], cache_dir=None, progress=True)"
    env = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
    shown = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    hidden = subprocess.run([sys.executable, "-c", code], env={**env, "TQDM_DISABLE": "1"}, capture_output=True,
                            text=True, check=True)
    assert "extract tiny-bert" in shown.stderr and "extract tiny-bert" not in hidden.stderr
