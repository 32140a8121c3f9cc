"""The float16 cache (round trip, read-only float32 views, checksums, the
float32 fallback for states float16 cannot hold), ``python -m probes.capture.cache`` list/remove, the
forward pass in bfloat16 (tolerance vs float32 on tiny-bert, CPU) and ``--device`` checks.

Models: the seeded random-init ``tiny-bert`` (seconds, no download). Caches live in ``tmp_path``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import probes
import probes.capture.cache as pc
import probes.capture.extract as pe
import probes.capture.store as ps
import probes.capture.work as pw
from analyses.common import SentenceConfig, activations_identity, check_reached
from probes import ProbeError, extract
from probes.config import check_device
from probes.precision import FLOAT16_MAX, Float32View

ROOT = Path(__file__).resolve().parent.parent
TEXTS = ["Hello world.", "Representations change layer by layer.", "Short.", "A fourth, final sentence here.",
         "Five texts, so that a batch of two leaves one over."]
F16_REL = 2.0 ** -11  # float16 keeps 11 significant bits: rounding changes x by at most |x| 2^-11 (normal range)


def run(model, texts=TEXTS, **kw):
    return extract(model, texts, progress=False, **kw)


def entry_of(cache: Path, acts) -> Path:
    return cache / acts.meta["model"]["name"] / acts.meta["key"]


# --------------------------------------------------------------------------- float16 storage


def test_float16_round_trip_is_within_rounding_and_half_the_bytes(tmp_path, tiny_bert):
    f16 = run(tiny_bert, cache_dir=tmp_path / "a", maps=True)
    f32 = run(tiny_bert, cache_dir=tmp_path / "b", maps=True, cache_dtype="float32")
    assert (f16.meta["cache_dtype"], f32.meta["cache_dtype"]) == ("float16", "float32")
    assert f16.meta["key"] != f32.meta["key"]  # the storage dtype is part of the key
    assert "cache_dtype_fallback" not in f16.meta and f16.meta["dtype"] == "float32" and f16.meta["device"] == "cpu"
    for name, a, b in (("hidden", f16.hidden, f32.hidden), ("sentence", f16.sentence, f32.sentence),
                       ("attention", f16.maps["attention"], f32.maps["attention"])):
        assert isinstance(a, Float32View) and a.stored.dtype == np.float16, name
        assert isinstance(b, np.ndarray) and b.dtype == np.float32, name
        x, y = np.asarray(a), np.asarray(b)
        assert x.dtype == np.float32 and a[0].dtype == np.float32 and a.shape == b.shape and len(a) == len(b)
        err = np.abs(x - y)
        assert (err <= F16_REL * np.abs(y) + 6e-8).all(), name  # exactly float16 rounding, nothing more
        assert err.max() > 0, name  # and it really is float16
        np.testing.assert_array_equal(x, y.astype(np.float16).astype(np.float32))
    # every read is float32: indexing, fancy indexing, text_hidden, text_map
    assert f16.hidden[1, [0, 3]].dtype == np.float32 and f16.text_hidden(2).dtype == np.float32
    assert f16.text_attentions(1).dtype == np.float32
    # bytes per token per layer = 2 x d (hidden.npy holds nothing else but its header)
    L1, N, d = f16.hidden.shape
    e16, e32 = entry_of(tmp_path / "a", f16), entry_of(tmp_path / "b", f32)
    assert (e16 / "hidden.npy").stat().st_size - 128 == 2 * d * L1 * N
    assert (e32 / "hidden.npy").stat().st_size - 128 == 4 * d * L1 * N
    assert ps.entry_bytes(e16) < 0.6 * ps.entry_bytes(e32)


def test_float16_views_are_read_only_and_have_no_float16_arithmetic(tmp_path, tiny_bert):
    acts = run(tiny_bert, cache_dir=tmp_path)
    with pytest.raises(TypeError, match="read-only"):
        acts.hidden[0, 0] = 1.0
    with pytest.raises(TypeError, match="read-only"):
        acts.sentence[1] = 0.0
    for method in ("mean", "sum", "std", "astype", "tobytes"):  # nothing can compute in float16 by accident
        assert not hasattr(acts.hidden, method)
    assert np.asarray(acts.hidden).mean(dtype=np.float64) == pytest.approx(
        np.asarray(acts.hidden.stored, np.float64).mean())
    assert [r.dtype for r in acts.sentence] == [np.float32] * acts.sentence.shape[0]
    np.testing.assert_array_equal(np.array(acts.sentence, dtype=np.float64), np.asarray(acts.sentence))


def test_checksums_cover_float16_entries(tmp_path, tiny_bert):
    first = run(tiny_bert, cache_dir=tmp_path, maps=True)
    want, entry = np.asarray(first.hidden), entry_of(tmp_path, first)
    del first
    with open(entry / "hidden.npy", "r+b") as f:  # flip one byte of the float16 data
        f.seek(128 + 1001)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x5A]))
    with pytest.warns(UserWarning, match=r"hidden\.npy does not match its checksum"):
        again = run(tiny_bert, cache_dir=tmp_path, maps=True)
    np.testing.assert_array_equal(np.asarray(again.hidden), want)


def test_the_entry_size_is_printed_after_extraction(tmp_path, tiny_bert, capsys):
    extract(tiny_bert, TEXTS, cache_dir=tmp_path, progress=True)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("cache entry")]
    d = tiny_bert.hidden_size
    assert len(lines) == 1 and "(float16;" in lines[0] and f"{2 * d} bytes per token per layer = 2 x d" in lines[0]


# --------------------------------------------------------------------------- the float32 fallback


def planting(monkeypatch, encoder, value: float) -> None:
    """Make every forward over the longest text (the last one, so not in the first chunk) return
    ``value`` in one of its hidden states (layer 1, token 1, unit 3), as a real model would each time."""
    inner, longest = encoder.forward, max(len(t.ids) for t in encoder.tokenize(TEXTS))

    def forward(input_ids, attention_mask, maps=False):
        out = inner(input_ids, attention_mask, maps=maps)
        rows = (attention_mask.sum(1) == longest).nonzero().flatten().tolist()
        if rows:
            hidden = out.hidden.clone()  # (L+1, B, n, d); the forward's own tensor is an inference tensor
            hidden[1, rows[0], 1, 3] = value
            out = dataclasses.replace(out, hidden=hidden)
        return out

    monkeypatch.setattr(encoder, "forward", forward)


@pytest.mark.parametrize("direct_from", [0, None], ids=["hidden-written-directly", "hidden-as-sized"])
@pytest.mark.parametrize("value, why", [(1e5, f"> {FLOAT16_MAX:g}"), (float("nan"), "NaN or inf"),
                                        (-float("inf"), "NaN or inf")])
def test_a_state_float16_cannot_hold_makes_the_entry_float32(value, why, tmp_path, tiny_bert, monkeypatch,
                                                             direct_from):
    per_token = 4 * (tiny_bert.num_layers + 1) * tiny_bert.hidden_size
    monkeypatch.setattr(pe, "CHUNK_BYTES", 2 * 12 * per_token)  # several chunks: the bad one is not the first
    if direct_from is not None:  # float16 rows already in the file when the bad state comes
        monkeypatch.setattr(pw, "DIRECT_RUN_BYTES", direct_from)
    planting(monkeypatch, tiny_bert, value)
    with pytest.warns(UserWarning, match=f"float16 cannot hold the states: .*{why}.*stored as float32"):
        acts = run(tiny_bert, batch_size=1, cache_dir=tmp_path)
    assert acts.meta["cache_dtype"] == "float32" and acts.meta["cache_dtype_requested"] == "float16"
    assert why.split()[-1] in acts.meta["cache_dtype_fallback"]
    assert isinstance(acts.hidden, np.ndarray) and acts.hidden.dtype == np.float32
    stored = np.asarray(acts.hidden)
    if np.isfinite(value):
        assert stored.max() == value  # kept exactly, never rounded to inf
    else:
        assert not np.isfinite(stored).all()
    # the other states are float32-exact: equal to a run asked for float32 (with the same planted value)
    monkeypatch.undo()
    monkeypatch.setattr(pe, "CHUNK_BYTES", 2 * 12 * per_token)
    planting(monkeypatch, tiny_bert, value)
    ref = run(tiny_bert, batch_size=1, cache_dir=tmp_path / "ref", cache_dtype="float32")
    np.testing.assert_array_equal(stored, np.asarray(ref.hidden))
    # a second run with the same request is a plain hit on the fallback entry
    monkeypatch.undo()
    hit = run(tiny_bert, batch_size=1, cache_dir=tmp_path)
    assert hit.meta == acts.meta


def test_loaded_encoder_dtype_must_match(tiny_bert):
    with pytest.raises(ProbeError, match="runs in float32"):
        run(tiny_bert, cache_dir=None, dtype="bfloat16")
    with pytest.raises(ProbeError, match="--cache-dtype 'int8' is not one of"):
        run(tiny_bert, cache_dir=None, cache_dtype="int8")
    with pytest.raises(ProbeError, match="--dtype 'float64' is not one of"):
        run("tiny-bert", cache_dir=None, dtype="float64")


def test_the_cli_refuses_options_that_did_not_reach_the_extraction(tmp_path, tiny_bert):
    acts = run(tiny_bert, cache_dir=tmp_path)
    head = activations_identity(acts, SentenceConfig())
    assert head.activations["cache_dtype"] == "float16" and head.config["dtype"] == "float32"
    check_reached(acts, SentenceConfig())
    with pytest.raises(ProbeError, match="--cache-dtype float32 was asked for"):
        check_reached(acts, SentenceConfig(cache_dtype="float32"))
    with pytest.raises(ProbeError, match="--dtype bfloat16 was asked for"):
        check_reached(acts, SentenceConfig(dtype="bfloat16"))
    # compute records what the activations were made with, not a config default that did not apply
    assert activations_identity(acts, SentenceConfig(cache_dtype="float32")).config["cache_dtype"] == "float16"


# --------------------------------------------------------------------------- python -m probes.capture.cache


@pytest.mark.integration
def test_cache_cli_lists_and_removes_by_model_and_age(tmp_path, tiny_bert, capsys):
    a = run(tiny_bert, cache_dir=tmp_path)
    b = run(tiny_bert, TEXTS[:2], cache_dir=tmp_path, cache_dtype="float32")
    g = run("tiny-gpt2", TEXTS[:3], cache_dir=tmp_path)
    old = entry_of(tmp_path, b) / "meta.json"
    ten_days = time.time() - 10 * pc.DAY
    os.utime(old, (ten_days, ten_days))
    capsys.readouterr()
    pc.main(["--cache", str(tmp_path), "list"])
    out = capsys.readouterr().out.splitlines()
    rows = {ln.split()[1]: ln.split() for ln in out[1:-1]}
    assert set(rows) == {a.meta["key"], b.meta["key"], g.meta["key"]}
    assert rows[a.meta["key"]][:4] == ["tiny-bert", a.meta["key"], "float16", "5"]
    assert rows[b.meta["key"]][:4] == ["tiny-bert", b.meta["key"], "float32", "2"]
    assert rows[g.meta["key"]][:4] == ["tiny-gpt2", g.meta["key"], "float16", "3"]
    assert rows[b.meta["key"]][-2:] == ["d", "ok"] and float(rows[b.meta["key"]][-3]) == pytest.approx(10, abs=0.1)
    assert out[-1].startswith("3 entries")

    pc.main(["--cache", str(tmp_path), "remove", "--older-than", "5"])
    assert "removed 1 entries" in capsys.readouterr().out
    assert not entry_of(tmp_path, b).exists() and entry_of(tmp_path, a).exists()
    pc.main(["--cache", str(tmp_path), "remove", "--model", "tiny-gpt2"])
    assert not entry_of(tmp_path, g).exists() and entry_of(tmp_path, a).exists()
    # an entry whose lock another process holds is skipped, not cut
    with ps.entry_lock(entry_of(tmp_path, a), progress=False):
        script = (f"import probes.capture.cache as c; "
                  f"c.main(['--cache', {str(tmp_path)!r}, 'remove', '--model', 'tiny-bert'])")
        done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "skipped" in done.stderr and entry_of(tmp_path, a).exists()
    pc.main(["--cache", str(tmp_path), "remove", "--model", "tiny-bert"])
    assert not entry_of(tmp_path, a).exists()


def test_cache_cli_removes_stale_format_entries(tmp_path, tiny_bert, capsys):
    keep, old = run(tiny_bert, cache_dir=tmp_path), run(tiny_bert, TEXTS[:2], cache_dir=tmp_path)
    meta = entry_of(tmp_path, old) / "meta.json"
    doc = json.loads(meta.read_text())
    doc["meta"]["format"] = ps.CACHE_FORMAT - 1  # as an entry written before float16 storage
    meta.write_text(json.dumps(doc))
    capsys.readouterr()
    pc.main(["--cache", str(tmp_path), "list"])
    status = {ln.split()[1]: ln.split()[-1] for ln in capsys.readouterr().out.splitlines()[1:-1]}
    assert status == {keep.meta["key"]: "ok", old.meta["key"]: "stale"}
    pc.main(["--cache", str(tmp_path), "remove", "--stale"])
    assert entry_of(tmp_path, keep).exists() and not entry_of(tmp_path, old).exists()


def one_line_error(main, argv, capsys) -> str:
    """``main(argv)`` as ``python -m`` runs it (run_main; tests/test_cli.py starts each entry point once as a
    real process): exit status 2 and stderr, which must be one line."""
    from probes.config import run_main

    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        run_main(main, argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("argv, message", [
    (["remove"], "error: remove needs --model NAME, --older-than DAYS and/or --stale"),
    (["banana"], "error: argument command: invalid choice: 'banana'"),
    (["--cache", "/no/such/folder", "list"], "error: --cache /no/such/folder is not a folder"),
])
def test_cache_cli_user_errors_are_one_line(argv, message, tmp_path, capsys):
    argv = argv if "--cache" in argv else ["--cache", str(tmp_path), *argv]
    assert one_line_error(pc.main, argv, capsys).startswith(message)


# --------------------------------------------------------------------------- reduced precision, devices

BF16_TOL = {"max_abs": 0.08, "rel_max": 0.02, "rel_median": 0.008, "cosine_mean": 1e-3}


def test_bfloat16_forward_is_within_the_stated_tolerance_of_float32():
    """tiny-bert on CPU, 64 corpus sentences: bfloat16 vs float32 forward (both cached as float32).
    Measured (torch 2.13, CPU): max |dh| 0.038 (|h| <= 4.0), per-token relative error
    ||dh|| / ||h|| at most 0.0096 (median 0.0040), mean pairwise token cosine per layer within 6.6e-5."""
    from probes.corpus import load_corpus, sample_sentences

    texts = sample_sentences(load_corpus(None), 64, seed=0)
    ref = run("tiny-bert", texts, cache_dir=None)
    bf = run("tiny-bert", texts, cache_dir=None, dtype="bfloat16")
    assert bf.meta["dtype"] == "bfloat16" and ref.meta["dtype"] == "float32"
    h0, h1 = np.asarray(ref.hidden, np.float64), np.asarray(bf.hidden, np.float64)
    rel = np.linalg.norm(h1 - h0, axis=-1) / np.linalg.norm(h0, axis=-1)  # (L+1, N)

    def cosine_mean(h):  # (N, d) -> mean cosine over distinct token pairs
        u = h / np.linalg.norm(h, axis=-1, keepdims=True)
        return ((u.sum(0) @ u.sum(0)) - len(u)) / (len(u) * (len(u) - 1))

    dcos = max(abs(cosine_mean(h1[lyr]) - cosine_mean(h0[lyr])) for lyr in range(h0.shape[0]))
    assert 1e-4 < np.abs(h1 - h0).max() <= BF16_TOL["max_abs"]  # > 1e-4: it really ran in bfloat16
    assert rel.max() <= BF16_TOL["rel_max"] and np.median(rel) <= BF16_TOL["rel_median"]
    assert dcos <= BF16_TOL["cosine_mean"]
    enc = probes.load("tiny-bert", dtype="bfloat16")
    assert enc.dtype == torch.bfloat16 and next(enc.model.parameters()).dtype == torch.bfloat16


def test_device_auto_and_bad_devices():
    best = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    assert check_device("auto") == best and check_device("cpu") == "cpu"
    with pytest.raises(ProbeError, match="is not a torch device"):
        check_device("banana")
    if not torch.cuda.is_available():
        with pytest.raises(ProbeError, match="CUDA is not available"):
            check_device("cuda:1")


@pytest.mark.parametrize("flags, message", [
    (["--device", "banana"], "error: --device 'banana' is not a torch device"),
    (["--dtype", "float64"], "error: argument --dtype: invalid choice: 'float64'"),
    (["--cache-dtype", "int8"], "error: argument --cache-dtype: invalid choice: 'int8'"),
])
def test_bad_device_and_dtype_flags_are_one_line(flags, message, tmp_path, capsys):
    from analyses import anisotropy

    argv = ["--model", "tiny-bert", "--n-sentences", "4", "--out", str(tmp_path), *flags]
    assert one_line_error(anisotropy.main, argv, capsys).startswith(message)
    assert not (tmp_path / "cache").exists()


def test_cli_records_dtypes_and_device(tmp_path):
    """The command line's --dtype bfloat16 --cache-dtype float32 --device auto reach the extraction and the
    result."""
    from analyses import anisotropy

    anisotropy.main(["--model", "tiny-bert", "--n-sentences", "12", "--n-tokens", "60", "--dtype", "bfloat16",
                     "--cache-dtype", "float32", "--device", "auto", "--no-figures", "--out", str(tmp_path)])
    doc = json.loads((tmp_path / "results" / "anisotropy" / "tiny-bert.json").read_text())
    assert (doc["config"]["dtype"], doc["config"]["cache_dtype"], doc["config"]["device"]) == \
        ("bfloat16", "float32", "auto")
    assert (doc["activations"]["dtype"], doc["activations"]["cache_dtype"]) == ("bfloat16", "float32")
    assert doc["activations"]["device"] == check_device("auto")
