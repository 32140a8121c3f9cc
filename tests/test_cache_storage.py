"""The activation cache's storage: float16 that never flushes states to zero, writes that survive a full disk,
the record of quick verification, the per-user cache folder, and the work arrays' layout.

Models: the seeded random-init ``tiny-bert`` (seconds, no download), some with their LayerNorms scaled so that
every state is tiny (1e-9) or huge (1e6). Caches live in ``tmp_path``.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import os
import warnings

import numpy as np
import pytest
import torch

import probes
import probes.capture.extract as pe
import probes.capture.work as pw
from analyses.common import activations_entry
from probes import ProbeError, extract
from probes.capture.store import read_entry, user_cache_dir
from probes.precision import FLOAT16_TINY, float16_problem, float16_rows_ok

TEXTS = ["Hello world.", "Representations change layer by layer.", "Short.", "A fourth, final sentence here.",
         "Five texts, so that a batch of two leaves one over.", "Six is the last one of them."]
ARRAYS = ("hidden", "sentence", "offsets", "token_ids", "special")


def run(model, texts=TEXTS, **kw):
    return extract(model, texts, progress=False, **kw)


def scaled_bert(factor: float, folder):
    """tiny-bert with every LayerNorm's weight and bias times ``factor``, saved as a model folder (with the MiniLM
    tokenizer) and loaded from it: every state (each is a LayerNorm's output) is ``factor`` times the usual size.
    (Edited in memory after probes.load instead, it would be extracted without the cache.)"""
    from transformers import AutoTokenizer

    enc = probes.load("tiny-bert")
    with torch.no_grad():
        for m in enc.model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.mul_(factor)
                m.bias.mul_(factor)
    enc.model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(probes.get_spec("minilm-l6").local_path()).save_pretrained(folder)
    return probes.load(str(folder))


def several_chunks(monkeypatch, enc) -> None:
    per_token = 4 * (enc.num_layers + 1) * enc.hidden_size
    monkeypatch.setattr(pe, "CHUNK_BYTES", 2 * 12 * per_token)  # about two texts per chunk


# --------------------------------------------------------------------------- float16 that holds what it is given


@pytest.mark.parametrize("factor, why", [(1e-9, "subnormals or zeros"), (1e6, "the largest float16")])
def test_tiny_and_huge_states_fall_back_to_float32_and_equal_a_float32_extraction(tmp_path, factor, why):
    enc = scaled_bert(factor, tmp_path / "scaled")
    with pytest.warns(UserWarning, match=why):
        f16 = run(enc, cache_dir=tmp_path / "f16", batch_size=2)
    f32 = run(enc, cache_dir=tmp_path / "f32", batch_size=2, cache_dtype="float32")
    assert f16.meta["cache_dtype"] == "float32" and f16.meta["cache_dtype_requested"] == "float16"
    assert why in f16.meta["cache_dtype_fallback"]
    for name in ARRAYS:
        np.testing.assert_array_equal(np.asarray(getattr(f16, name)), np.asarray(getattr(f32, name)))
    # layer 0 (the embeddings' LayerNorm) is the usual one times factor: kept at that scale, not zeros, not inf,
    # and its token cosines are the usual model's (a zero vector would have no cosine at all)
    usual = run(probes.load("tiny-bert"), cache_dir=None, batch_size=2)
    a, b = np.asarray(f16.hidden[0], np.float64), np.asarray(usual.hidden[0], np.float64)
    np.testing.assert_allclose(a, factor * b, rtol=1e-4, atol=1e-6 * factor)
    cos = lambda x: (x[:-1] * x[1:]).sum(1) / np.linalg.norm(x[:-1], axis=1) / np.linalg.norm(x[1:], axis=1)
    np.testing.assert_allclose(cos(a), cos(b), atol=1e-5)


def test_usual_states_stay_float16(tmp_path):
    acts = run(probes.load("tiny-bert"), cache_dir=tmp_path, maps=True)
    assert acts.meta["cache_dtype"] == "float16" and "cache_dtype_fallback" not in acts.meta


def test_the_row_rule_bounds_the_rounding_error_and_refuses_below_it():
    """A row whose root-mean-square is at least the smallest normal float16 is stored within sqrt(2) 2^-11 of
    its norm (also when most of its numbers are subnormal); a row below it is refused; zero rows are exact."""
    rng = np.random.default_rng(0)
    d = 384
    for rms in (FLOAT16_TINY, 3 * FLOAT16_TINY, 1e-3, 1.0):
        x = rng.standard_normal((200, d)).astype(np.float32)
        x *= np.float32(rms) / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True)).astype(np.float32) * 1.0001
        assert float16_problem(x, "x") is None
        err = np.linalg.norm(x.astype(np.float16).astype(np.float64) - x, axis=1) / np.linalg.norm(x, axis=1)
        assert err.max() <= math.sqrt(2) * 2.0 ** -11
    low = np.full((3, d), 0.5 * FLOAT16_TINY, np.float32)
    assert "root-mean-square" in float16_problem(low, "x")
    assert float16_problem(np.zeros((3, d), np.float32), "x") is None
    mixed = np.vstack([np.ones((2, d), np.float32), np.full((1, d), 1e-9, np.float32)])  # one tiny row is enough
    assert "1 of 3 rows" in float16_problem(mixed, "x")
    norms = torch.linalg.vector_norm(torch.from_numpy(mixed), dim=-1)
    assert not float16_rows_ok(norms, d) and float16_rows_ok(norms[:2], d)
    # zero rows pass the screen beside fine ones; a NaN or inf norm among fine ones does not; nothing to screen passes
    fine = torch.tensor([1.0, 2.0, 3.0])
    assert float16_rows_ok(torch.cat([fine, torch.zeros(2)]), d) and float16_rows_ok(torch.zeros(0), d)
    for odd in (math.nan, math.inf, 7e4):
        assert not float16_rows_ok(torch.cat([fine, torch.tensor([odd])]), d)
    # the screen is never laxer than the full check: a norm above 65504 only asks for a closer look
    wide = np.full((1, 4), 40000.0, np.float32)  # norm 80000, every number < 65504: storable
    assert not float16_rows_ok(torch.linalg.vector_norm(torch.from_numpy(wide), dim=-1), 4)
    assert float16_problem(wide, "x") is None
    assert "NaN" in float16_problem(np.array([[1.0, np.nan]], np.float32), "x")


# --------------------------------------------------------------------------- a full disk


def test_no_space_when_the_arrays_are_reserved_is_one_line_and_resumes(tmp_path, monkeypatch):
    enc = probes.load("tiny-bert")

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(pw.os, "posix_fallocate", full)
        with pytest.raises(ProbeError) as e:
            run(enc, cache_dir=tmp_path)
    text = str(e.value)
    assert "\n" not in text and text.startswith(f"no space left on {tmp_path / 'tiny-bert'}") and "resume" in text
    assert not list(tmp_path.rglob("meta.json"))
    acts = run(enc, cache_dir=tmp_path)
    ref = run(enc, cache_dir=tmp_path / "ref")
    for name in ARRAYS:
        np.testing.assert_array_equal(np.asarray(getattr(acts, name)), np.asarray(getattr(ref, name)))


@pytest.mark.parametrize("direct_from", [0, None], ids=["hidden-written-directly", "hidden-as-sized"])
@pytest.mark.parametrize("code, start", [(errno.ENOSPC, "no space left on"), (errno.EIO, "cannot write the")])
def test_a_write_error_midway_is_one_line_and_the_same_command_resumes(tmp_path, monkeypatch, code, start,
                                                                      direct_from):
    """Another process fills the disk (or the disk fails) while chunk 2 is written: one line, the finished chunk
    stays recorded, and the rerun runs only the chunks not done and writes the entry a clean run writes."""
    if direct_from is not None:
        monkeypatch.setattr(pw, "DIRECT_RUN_BYTES", direct_from)
    enc = probes.load("tiny-bert")
    several_chunks(monkeypatch, enc)
    forwards, inner = [], enc.forward
    monkeypatch.setattr(enc, "forward", lambda *a, **k: forwards.append(1) or inner(*a, **k))
    clean = run(enc, cache_dir=tmp_path / "clean", batch_size=2)
    n_clean, real_pwrite, real_save = len(forwards), os.pwrite, pw.save_done
    recorded = []

    def failing(fd, data, offset):  # once chunk 0 is recorded as done, the next write fails
        if recorded:
            raise OSError(code, os.strerror(code))
        return real_pwrite(fd, data, offset)

    def saving(*a, **k):
        real_save(*a, **k)
        recorded.append(1)

    with monkeypatch.context() as m:
        m.setattr(pw.os, "pwrite", failing)
        m.setattr(pe, "save_done", saving)
        with pytest.raises(ProbeError) as e:
            run(enc, cache_dir=tmp_path, batch_size=2)
    assert "\n" not in str(e.value) and str(e.value).startswith(start), str(e.value)
    (partial,) = (tmp_path / "tiny-bert").glob("*.partial")
    assert list(json.loads((partial / "done.json").read_text())["chunks"]) == ["0"]
    forwards.clear()
    again = run(enc, cache_dir=tmp_path, batch_size=2)
    assert 0 < len(forwards) < n_clean  # chunk 0 was not run again
    for name in ARRAYS:
        np.testing.assert_array_equal(np.asarray(getattr(again, name)), np.asarray(getattr(clean, name)))


def test_nothing_is_written_through_a_writable_memory_map(tmp_path, monkeypatch):
    """A page of a memory map written after another process filled the disk kills the process (SIGBUS): the
    cache writes with plain writes only, so the memory maps it makes are read-only."""
    modes, real = [], np.memmap.__new__

    def watching(cls, filename, dtype=np.uint8, mode="r+", *a, **k):
        modes.append(mode)
        return real(cls, filename, dtype, mode, *a, **k)

    monkeypatch.setattr(np.memmap, "__new__", watching)
    enc = probes.load("tiny-bert")
    several_chunks(monkeypatch, enc)
    run(enc, cache_dir=tmp_path, maps=True)
    run(enc, cache_dir=tmp_path, maps=True)  # a hit
    assert modes and set(modes) <= {"r", "c"}


# --------------------------------------------------------------------------- quick verification is recorded


def test_activations_read_under_quick_verification_say_so(tmp_path, monkeypatch):
    enc = probes.load("tiny-bert")
    fresh = run(enc, cache_dir=tmp_path)
    assert "cache_verify" not in fresh.meta
    monkeypatch.setenv("PROBES_CACHE_VERIFY", "quick")
    quick = run(enc, cache_dir=tmp_path)
    assert quick.meta["cache_verify"].startswith("quick") and "would pass" in quick.meta["cache_verify"]
    assert activations_entry(quick.meta)["cache_verify"] == quick.meta["cache_verify"]  # results record it
    monkeypatch.setenv("PROBES_CACHE_VERIFY", "full")
    full = run(enc, cache_dir=tmp_path)
    assert "cache_verify" not in full.meta and "cache_verify" not in activations_entry(full.meta)
    entry = tmp_path / "tiny-bert" / fresh.meta["key"]
    assert "cache_verify" in read_entry(entry, full=False).meta


# --------------------------------------------------------------------------- the Python API's cache folder


def test_the_python_api_caches_in_the_user_folder_never_the_current_one(tmp_path, monkeypatch):
    here = tmp_path / "notebook"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.delenv("PROBES_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert user_cache_dir() == tmp_path / "home" / ".cache" / "probes"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG spec: a relative value is ignored
    assert user_cache_dir() == tmp_path / "home" / ".cache" / "probes"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache_dir() == tmp_path / "xdg" / "probes"
    acts = extract("tiny-bert", TEXTS[:2], progress=False)
    assert (tmp_path / "xdg" / "probes" / "tiny-bert" / acts.meta["key"] / "meta.json").is_file()
    monkeypatch.setenv("PROBES_CACHE", "moved")  # read when called, made absolute at once
    assert user_cache_dir() == here / "moved"
    acts = extract("tiny-bert", TEXTS[:2], progress=False)
    assert (here / "moved" / "tiny-bert" / acts.meta["key"] / "meta.json").is_file()
    assert sorted(p.name for p in here.iterdir()) == ["moved"]  # nothing else in the current folder


# --------------------------------------------------------------------------- the work arrays


@pytest.mark.parametrize("chunk_bytes", [None, 40_000], ids=["one-chunk", "several-chunks"])
def test_hidden_written_directly_or_staged_makes_the_same_entry(tmp_path, monkeypatch, chunk_bytes):
    if chunk_bytes:
        monkeypatch.setattr(pe, "CHUNK_BYTES", chunk_bytes)
    chunks, chunk = [], pw.WorkArrays.chunk
    monkeypatch.setattr(pw.WorkArrays, "chunk", lambda self, spans: chunks.append(spans) or chunk(self, spans))
    files = {}
    for direct_from in (0, 10**9):  # every run written straight to the file / every run staged
        monkeypatch.setattr(pw, "DIRECT_RUN_BYTES", direct_from)
        acts = run("tiny-bert", TEXTS * 5, cache_dir=tmp_path / str(direct_from))
        entry = tmp_path / str(direct_from) / "tiny-bert" / acts.meta["key"]
        files[direct_from] = {p.name: p.read_bytes() for p in entry.iterdir() if p.suffix == ".npy"}
    assert (len(chunks) == 2) == (chunk_bytes is None)  # one chunk per extraction, or several
    assert files[0] == files[10**9] and "hidden.npy" in files[0]  # byte for byte


@pytest.mark.parametrize("direct_from", [0, 10**9], ids=["hidden-written-directly", "hidden-staged"])
def test_work_arrays_on_disk_hold_what_the_same_chunks_hold_in_memory(tmp_path, monkeypatch, direct_from):
    monkeypatch.setattr(pw, "DIRECT_RUN_BYTES", direct_from)
    shapes = {"hidden": (3, 10, 4), "sentence": (3, 4, 4), "map.x": (17,)}
    spans = [{"hidden": (0, 6), "sentence": (0, 2), "map.x": (0, 9)},
             {"hidden": (6, 10), "sentence": (2, 4), "map.x": (9, 17)}]
    rng = np.random.default_rng(0)
    (tmp_path / "w").mkdir()
    disk, memory = pw.WorkArrays.create(tmp_path / "w", shapes, "float16"), pw.WorkArrays(shapes, "float16")
    expected = np.full(shapes["hidden"], np.nan, np.float16)
    for sp in spans:
        n_rows, n_texts = sp["hidden"][1] - sp["hidden"][0], sp["sentence"][1] - sp["sentence"][0]
        # two texts per chunk, written in the other order (as a batch sorted by length would), and a map each
        starts, lengths = np.array([n_rows // 2, 0]), np.array([n_rows - n_rows // 2, n_rows // 2])
        runs = [(0, int(starts[0]), int(lengths[0])), (int(lengths[0]), int(starts[1]), int(lengths[1]))]
        layers = rng.standard_normal((3, n_rows, 4)).astype(np.float16)
        sentence = rng.standard_normal((3, n_texts, 4)).astype(np.float16)
        flat = rng.standard_normal(sp["map.x"][1] - sp["map.x"][0]).astype(np.float16)
        for src, dst, k in runs:  # where each text's run of rows belongs
            expected[:, sp["hidden"][0] + dst:sp["hidden"][0] + dst + k] = layers[:, src:src + k]
        for w in (disk, memory):
            out = w.chunk(sp)
            for lead in range(3):
                out.runs("hidden", lead, layers[lead], runs)
            out.sentence[...] = sentence
            out.run("map.x", 3, flat[3:])
            out.run("map.x", 0, flat[:3])
            out.commit()
        assert pw.chunk_digest(disk.read(sp)) == pw.chunk_digest(memory.read(sp))
    disk.close()
    np.testing.assert_array_equal(memory.result()["hidden"], expected)  # every row written, each where it belongs
    for name in shapes:
        loaded = np.load(tmp_path / "w" / f"{name}.npy")  # a plain .npy file
        np.testing.assert_array_equal(loaded, memory.result()[name])
    again = pw.WorkArrays.reopen(tmp_path / "w", shapes, "float16")
    np.testing.assert_array_equal(again.result()["hidden"], memory.result()["hidden"])
    again.close()
    with pytest.raises(ValueError, match="not float32"):
        pw.WorkArrays.reopen(tmp_path / "w", shapes, "float32")
    with open(tmp_path / "w" / "map.x.npy", "ab") as f:
        f.write(b"\0\0")
    with pytest.raises(ValueError, match="bytes, not"):
        pw.WorkArrays.reopen(tmp_path / "w", shapes, "float16")


def test_a_file_system_without_fallocate_still_gets_files_of_the_full_size(tmp_path, monkeypatch):
    def unsupported(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(pw.os, "posix_fallocate", unsupported)
    (tmp_path / "w").mkdir()
    w = pw.WorkArrays.create(tmp_path / "w", {"hidden": (2, 5, 3)}, "float32")
    w.close()
    assert np.load(tmp_path / "w" / "hidden.npy").shape == (2, 5, 3)


@pytest.mark.parametrize("older", ["sha256", "crc32"])
def test_entries_with_older_block_checksums_are_still_read(tmp_path, monkeypatch, older):
    import probes.capture.store as ps

    enc = probes.load("tiny-bert")
    monkeypatch.setattr(ps, "CHECKSUM", older)  # an entry written before XXH3 blocks
    old = run(enc, cache_dir=tmp_path)
    monkeypatch.setattr(ps, "CHECKSUM", "xxh3_64")
    entry = tmp_path / "tiny-bert" / old.meta["key"]
    assert json.loads((entry / "meta.json").read_text())["checksums"]["algorithm"] == older
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a checksum mismatch would warn and extract again
        again = run(enc, cache_dir=tmp_path)
    np.testing.assert_array_equal(np.asarray(again.hidden), np.asarray(old.hidden))
    with open(entry / "hidden.npy", "r+b") as f:  # and damage is still caught
        f.seek(200)
        f.write(b"\xff\xff")
    with pytest.warns(UserWarning, match="does not match its checksum"):
        run(enc, cache_dir=tmp_path)


# --------------------------------------------------------------------------- NaN and inf states


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-bert?sentence=mean"])
def test_states_that_hold_nan_are_counted_in_the_meta_with_a_warning(tmp_path, monkeypatch, name):
    """A model whose states hold NaN: float16 storage falls back to float32, and the activations say how many
    states of which layers are not finite, so that a result's empty statistics have their cause on record."""
    enc = probes.load(name)
    inner = enc.forward

    def forward(input_ids, attention_mask, maps=False):
        out = inner(input_ids, attention_mask, maps=maps)
        hidden = out.hidden.clone()  # (L+1, B, n, d)
        hidden[1, 0, 1, 3] = float("nan")  # the second token (not a special one) of each batch's first text
        return dataclasses.replace(out, hidden=hidden)

    monkeypatch.setattr(enc, "forward", forward)
    with pytest.warns(UserWarning) as caught:
        acts = run(enc, cache_dir=tmp_path, batch_size=4)
    n_batches = math.ceil(len(TEXTS) / 4)
    assert acts.meta["cache_dtype"] == "float32" and "NaN" in acts.meta["cache_dtype_fallback"]
    assert int(np.isnan(np.asarray(acts.hidden[1])).any(1).sum()) == n_batches
    sentences = int(np.isnan(np.asarray(acts.sentence[1])).any(1).sum())  # 0 when the [CLS] vector is the sentence's
    assert sentences == (n_batches if enc.spec.sentence == "mean" else 0)
    assert acts.meta["nonfinite_states"] == {"hidden layer 1": n_batches,
                                             **({"sentence layer 1": sentences} if sentences else {})}
    assert any("meta['nonfinite_states']" in str(w.message) for w in caught)
    hit = run(enc, cache_dir=tmp_path, batch_size=4)
    assert hit.meta["nonfinite_states"] == acts.meta["nonfinite_states"]
    assert "nonfinite_states" in activations_entry(hit.meta)  # a result records them with its activations


@pytest.mark.parametrize("direct_from", [0, 10**9], ids=["hidden-written-directly", "hidden-staged"])
def test_a_single_chunk_is_checksummed_from_memory_as_it_would_be_read_back(tmp_path, monkeypatch, direct_from):
    import probes.capture.store as ps

    monkeypatch.setattr(ps, "CHECK_BLOCK", 1000)  # blocks that cross the header and the arrays' ends
    monkeypatch.setattr(pw, "DIRECT_RUN_BYTES", direct_from)
    shapes = {"hidden": (2, 301, 3), "sentence": (2, 301, 3)}
    (tmp_path / "w").mkdir()
    w = pw.WorkArrays.create(tmp_path / "w", shapes, "float16")
    out = w.chunk({"hidden": (0, 301), "sentence": (0, 301)})
    states = np.arange(2 * 301 * 3).reshape(2, 301, 3).astype(np.float16)
    for lead in range(2):  # a text's run at a time (three texts, out of order)
        out.runs("hidden", lead, states[lead], [(200, 200, 101), (0, 0, 150), (150, 150, 50)])
    out.sentence[...] = states
    out.commit()
    contents = w.contents()
    # staged arrays are checksummed from memory; hidden written straight to its file is read back
    assert sorted(contents) == (["sentence.npy"] if direct_from == 0 else ["hidden.npy", "sentence.npy"])
    for name in contents:
        from_memory = ps.file_blocks(tmp_path / "w" / name, contents[name])
        assert from_memory == ps.file_blocks(tmp_path / "w" / name)
        assert len(from_memory["blocks"]) == 4
    assert ps.file_blocks(tmp_path / "w" / "hidden.npy") == ps.file_blocks(tmp_path / "w" / "sentence.npy")
    w.chunk({"hidden": (0, 100), "sentence": (0, 2)}).commit()  # a chunk of part of the arrays: read back
    assert w.contents() == {}
    w.close()
