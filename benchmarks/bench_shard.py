"""Sharded extraction on one machine: 2 processes x 1 thread against 1 process x 2 threads.

The same texts (sampled from the default corpus with the seed; default 1000 sentences of
``minilm-l6``) are extracted into a fresh cache folder, float16, either by one process with 2
torch threads or by ``torchrun --standalone --nproc_per_node 2`` (probes.capture.distributed: each rank
fills its contiguous share of the entry's chunks with 1 thread, rank 0 checks every chunk and
finalises). Each run is a fresh child process; it loads the model first (untimed), the ranks meet
at a barrier, then ``probes.extract`` is timed to its return on rank 0 (extraction + finalising
the entry). The two set-ups alternate (start order rotating), and medians are compared: the
ratio says what sharding gains or costs on this machine's cores (the scaling case is GPUs). This one
ratio is of wall time, and labelled so: what sharding buys is elapsed time, both set-ups keep two cores
busy, and their CPU time is the same work by design.

``PROBES_CHUNK_BYTES`` is set (default 32 MiB) so that the entry has several chunks to share.
Two processes x 1 thread and one process x 2 threads round floats differently (matrix products
split differently), so their states may differ in the last bits; equal threads per process give
equal bytes (tests/test_distributed.py).

    $ python -m benchmarks.bench_shard [--n-sentences 1000] [--repeats 3] [--chunk-mib 32]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from benchmarks.bench_extract import Row, load_average, machine_info, median, print_table
from probes.config import arg, parse_config, run_main


@dataclass
class Settings:
    """Throughput of 2 processes x 1 thread against 1 process x 2 threads, one cache entry each."""

    model: str = arg("minilm-l6", "checkpoint name from checkpoints.yaml")
    n_sentences: int = arg(1000, "sentences sampled from the default corpus", min=1)
    seed: int = arg(0, "seed of the sentence sample", min=0)
    batch_size: int = arg(32, "texts per forward pass", min=1)
    repeats: int = arg(3, "timed runs of each set-up (median reported)", min=1)
    chunk_mib: int = arg(32, "PROBES_CHUNK_BYTES in MiB: the unit of work the ranks share", min=1)


def worker(argv: list[str]) -> None:
    """One timed extraction (run as ``python -m benchmarks.bench_shard --worker MODEL N SEED BATCH CACHE``)."""
    import time

    import torch

    import probes
    from probes.capture import distributed
    from probes.corpus import load_corpus, sample_sentences

    model, n, seed, batch, cache = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), argv[4]
    encoder = probes.load(model)
    texts = sample_sentences(load_corpus(), n, seed=seed)
    if distributed.launched():
        distributed.init("cpu")
        distributed.barrier()
    t0 = time.perf_counter()
    acts = probes.extract(encoder, texts, batch_size=batch, cache_dir=cache, progress=False)
    seconds = time.perf_counter() - t0
    if distributed.is_main():
        print(json.dumps({"seconds": seconds, "tokens": int(acts.offsets[-1]), "threads": torch.get_num_threads(),
                          "processes": distributed.world_size()}))


def run_once(cfg: Settings, processes: int, threads: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(OMP_NUM_THREADS=str(threads), PROBES_CHUNK_BYTES=str(cfg.chunk_mib * 2**20))
    launcher = (["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes)]
                if processes > 1 else [])
    with tempfile.TemporaryDirectory(prefix="bench-shard-") as cache:
        proc = subprocess.run([sys.executable, *launcher, "-m", "benchmarks.bench_shard", "--worker", cfg.model,
                               str(cfg.n_sentences), str(cfg.seed), str(cfg.batch_size), cache],
                              capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"bench_shard worker failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(cfg: Settings) -> list[Row]:
    """Measure and print; returns the summary rows."""
    setups = {"1 process x 2 threads": (1, 2), "2 processes x 1 thread": (2, 1)}
    print(f"shard: {cfg.model}, {cfg.n_sentences} sentences, chunks of {cfg.chunk_mib} MiB, fresh float16 cache "
          f"entry per run; {cfg.repeats} alternating runs of each set-up")
    times: dict[str, list[float]] = {k: [] for k in setups}
    tokens = 0
    names = list(setups)
    for r in range(cfg.repeats):
        for name in names[r % 2:] + names[:r % 2]:
            res = run_once(cfg, *setups[name])
            times[name].append(res["seconds"])
            tokens = res["tokens"]
    med = {k: median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"  {k:24s} wall median {med[k]:7.3f} s ({tokens / med[k]:7.0f} tokens/s)  runs: "
              f"{', '.join(f'{t:.3f}' for t in v)}")
    ratio = med["2 processes x 1 thread"] / med["1 process x 2 threads"]
    print(f"  wall-time ratio 2x1 / 1x2 = {ratio:.3f} (< 1: sharding is faster here); load average now "
          f"{load_average()}")
    return [Row("shard", f"1 process x 2 threads ({cfg.n_sentences} sentences)", wall_s=med["1 process x 2 threads"],
                note=f"{tokens / med['1 process x 2 threads']:.0f} tokens/s"),
            Row("shard", "2 processes x 1 thread (torchrun)", wall_s=med["2 processes x 1 thread"],
                ratio=f"{ratio:.3f} x 1x2 (wall)", note=f"{tokens / med['2 processes x 1 thread']:.0f} tokens/s")]


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        worker(argv[1:])
        return
    cfg = parse_config(Settings, argv, __doc__.split("\n\n")[0])
    print("\n".join(machine_info()))
    print_table(run(cfg))


if __name__ == "__main__":
    run_main(main)
