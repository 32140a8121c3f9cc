"""Several processes, one cache entry (probes.capture.distributed, torchrun on CPU with gloo).

Two processes of one thread each must give result files byte-identical to one process of one
thread: chunks are the unit of work and the batches are planned within a chunk, so every state is
computed by the same operations either way. PROBES_CHUNK_BYTES makes the tiny model's entry
several chunks long, so that both ranks have work.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from probes import ProbeError, extract
from probes.capture import distributed

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
ARGS = ["-m", "analyses.anisotropy", "--model", "tiny-bert", "--n-sentences", "60", "--n-tokens", "300",
        "--bins", "20"]


def launch(prefix: list[str], out: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(OMP_NUM_THREADS="1", PROBES_CHUNK_BYTES="200000", HF_HOME=str(tmp_path / "hf-home"),
               TMPDIR=str(tmp_path))  # torchrun leaves a torchelastic_* folder in the temporary folder
    proc = subprocess.run([sys.executable, *prefix, *ARGS, "--out", str(out)], cwd=REPO, capture_output=True,
                          text=True, env=env, timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_shards_are_contiguous_and_cover_every_chunk_once():
    for n in (0, 1, 2, 5, 7, 64):
        for size in (1, 2, 3, 8):
            parts = [distributed.shard(n, r, size) for r in range(size)]
            assert [i for p in parts for i in p] == list(range(n))  # contiguous, in rank order
            assert max(map(len, parts)) - min(map(len, parts)) <= 1


TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


@pytest.fixture(scope="module")
def one(tmp_path_factory) -> Path:
    """The one-process, one-thread run everything is compared with."""
    tmp = tmp_path_factory.mktemp("one-process")
    launch([], tmp / "out", tmp)
    return tmp / "out"


def same_results(a: Path, b: Path) -> None:
    for name in ("tiny-bert.csv", "tiny-bert.json"):
        assert (a / "results" / "anisotropy" / name).read_bytes() == \
            (b / "results" / "anisotropy" / name).read_bytes(), name


@pytest.mark.integration
def test_two_processes_give_the_one_process_files_byte_for_byte(tmp_path, one):
    two = tmp_path / "two"
    torchrun = TORCHRUN
    proc = launch(torchrun, two, tmp_path)
    # both ranks extracted a share (texts / total on each bar), and rank 0 alone wrote the result
    shares = {int(r): int(n) for r, n in re.findall(r"rank (\d) of 2\): 100%\|[^|]*\| (\d+)/\d+", proc.stderr)}
    assert set(shares) == {0, 1} and all(shares.values()) and sum(shares.values()) == 60, proc.stderr[-2000:]
    assert proc.stdout.count("tiny-bert: wrote") == 1
    results = sorted(p.name for p in (one / "results" / "anisotropy").iterdir())
    assert results == ["tiny-bert.csv", "tiny-bert.json"]
    assert sorted(p.name for p in (two / "results" / "anisotropy").iterdir()) == results
    for name in results:
        assert (one / "results" / "anisotropy" / name).read_bytes() == \
            (two / "results" / "anisotropy" / name).read_bytes(), name
    # the same cache entry (key), the same arrays byte for byte; it records the two processes
    (e1,), (e2,) = (list((d / "cache" / "tiny-bert").iterdir()) for d in (one, two))
    assert e1.name == e2.name and not list((two / "cache" / "tiny-bert").glob("*.partial"))
    meta = json.loads((e2 / "meta.json").read_text())["meta"]
    assert meta["processes"] == 2 and json.loads((e1 / "meta.json").read_text())["meta"]["processes"] == 1
    assert meta["n_texts"] == 60
    for f in sorted(e1.glob("*.npy")):
        assert f.read_bytes() == (e2 / f.name).read_bytes(), f.name
    # a second torchrun finds the finished entry: no extraction, the same bytes
    (two / "results" / "anisotropy" / "tiny-bert.json").unlink()
    again = launch(torchrun, two, tmp_path)
    assert "extract tiny-bert" not in again.stderr
    same_results(one, two)


@pytest.mark.integration
def test_two_processes_resume_an_interrupted_one_process_extraction(tmp_path, one, monkeypatch):
    """Ctrl-C after two batches of a one-process run leaves a .partial entry; torchrun finishes it
    (the finished chunks are checked and kept) and the files are those of an uninterrupted run."""
    import torch

    import probes
    import probes.capture.extract as pe
    import probes.checkpoints.loaders
    from analyses.data import sentence_activations

    monkeypatch.setattr(pe, "CHUNK_BYTES", 200000)  # as PROBES_CHUNK_BYTES in launch()
    encoder, threads = probes.load("tiny-bert"), torch.get_num_threads()
    inner, calls = encoder.forward, []

    def interrupted(*a, **k):
        if len(calls) == 2:
            raise KeyboardInterrupt("simulated interruption")
        calls.append(1)
        return inner(*a, **k)

    monkeypatch.setattr(encoder, "forward", interrupted)
    monkeypatch.setattr(probes.checkpoints.loaders, "load", lambda *a, **k: encoder)  # what extract calls
    torch.set_num_threads(1)
    try:
        with pytest.raises(KeyboardInterrupt):
            sentence_activations("tiny-bert", "default", 60, 0, out=str(tmp_path / "two"))
    finally:
        torch.set_num_threads(threads)
    partial = next((tmp_path / "two" / "cache" / "tiny-bert").glob("*.partial"))
    assert json.loads((partial / "done.json").read_text())["chunks"]  # at least one chunk was finished
    proc = launch(TORCHRUN, tmp_path / "two", tmp_path)
    assert "damaged" not in proc.stderr and not partial.exists()
    same_results(one, tmp_path / "two")


def test_without_a_cache_several_processes_are_refused(monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert distributed.launched() and distributed.world_size() == 2
    with pytest.raises(ProbeError, match="cache_dir=None is not possible"):
        extract("tiny-bert", ["A text."], cache_dir=None, progress=False)


def test_a_second_rank_never_writes_a_result(monkeypatch, tmp_path):
    from analyses.common import write_result

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match="only rank 0"):
        write_result(tmp_path, "anisotropy", "tiny-bert", {"x": 1}, [])
    assert not list(tmp_path.iterdir())
