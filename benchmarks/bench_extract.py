"""Extraction overhead: ``probes.extract`` against a bare loop of forward passes over the same batches.

On one loaded encoder (default ``minilm-l6``) and the same sentences (sampled from the default
corpus with the seed), this times

* bare: ``encoder.model(**batch, output_hidden_states=True)`` under ``torch.inference_mode()`` for
  exactly the padded batches that extract runs (same chunks, same length-sorted order, same batch
  size), built once up front, outside the timed region;
* extract: ``probes.extract(encoder, texts, cache_dir=None, progress=False)``: tokenizing,
  batching, the forward passes, slicing padding off, sentence vectors, the output arrays;
* extract + cache write (cold extraction): the same with ``cache_dir`` a fresh temporary folder
  (includes writing and checksumming the cache entry);
* cache hit: extract again on a written entry (meta, small arrays and every block's checksum read;
  hidden is memory-mapped);
* own work: in each cold extraction, the CPU time spent inside ``encoder.forward`` is clocked too
  (:class:`ForwardClock`); the rest of the run's CPU time is the capture's own work (tokenizing, batching,
  checks, pooling, writing, checksums), and the run's CPU time over its forward's is the cold ratio without the
  forward's run-to-run noise, which on a shared machine is often larger than the whole difference (the work of
  the suite's thin wrapper inside ``encoder.forward``, an eval-mode check per batch, counts as forward). Both come
  from real extractions, with the memory and the file system as an extraction finds them: replaying recorded
  outputs back to back would find freshly freed memory still mapped and undercount;
* cache size: bytes per token per layer of the written (float16) entry, ``hidden.npy`` alone and
  the whole entry (sentence vectors, ids, meta.json too), against the goal of 2 x d.

Before timing, one untimed extract records the batches that reach ``encoder.forward``: the bare loop
runs exactly those. The first three contenders then run interleaved within each repeat (start order
rotating), after a warm-up, in one process. Every ratio is of process CPU time (all threads), the
median over the repeats of each repeat's ratio to the bare loop run beside it (the own-work ratio: to
the same run's forward passes): CPU time is steadier than wall time when other processes share the
cores, and a repeat's contenders share its load. Wall seconds are shown too, and labelled as such.
Goal for cold extraction: <= 1.03 x bare.

    $ python -m benchmarks.bench_extract [--n-sentences 1000] [--repeats 5] [--batch-size 32] [--threads 1]

The module also holds the helpers the other benchmarks share: :func:`machine_info`,
:func:`interleave`, :func:`print_table` and :func:`run_alone` (each benchmark's ``main``).
"""

from __future__ import annotations

import gc
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from probes.capture.timing import frozen_heap
from probes.config import arg, parse_config, run_main

CPU_GOAL = 1.03  # cold extraction (writing the cache entry) / bare, process CPU time
BYTES_GOAL = 2.0  # cache bytes per token per layer / d (float16)


@dataclass
class Settings:
    """Time probes.extract against bare forward passes over the same padded batches."""

    model: str = arg("minilm-l6", "checkpoint name from checkpoints.yaml")
    n_sentences: int = arg(1000, "sentences sampled from the default corpus", min=1)
    seed: int = arg(0, "seed of the sentence sample", min=0)
    batch_size: int = arg(32, "texts per forward pass (extract's batch_size)", min=1)
    repeats: int = arg(5, "timed repeats of each contender (median reported)", min=1)
    warmup: int = arg(1, "untimed runs of each contender first", min=0)
    hit_repeats: int = arg(5, "timed cache-hit reloads", min=1)
    threads: int = arg(0, "torch intra-op threads (0: torch's default); 1 is steadier on a busy machine", min=0)


# ----------------------------------------------------------------------------- shared helpers


def machine_info() -> list[str]:
    """Lines describing what the timings ran on: the CPU model and its vector units, the kernels torch picked,
    the load average, torch's threads and numpy's BLAS."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    model, flags = cpu_model_and_flags()
    vector = [f for f in ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16") if f in flags]
    lines = [f"python {platform.python_version()} on {platform.machine()}: {model}, {cpus} usable CPUs of "
             f"{os.cpu_count()}; vector units: {' '.join(vector) or 'none of avx2/avx512/amx'}"
             + ("" if flags else " (flags unknown)"),
             f"torch {torch.__version__}: {torch.get_num_threads()} intra-op threads, "
             f"{torch.get_num_interop_threads()} inter-op threads, CPU kernels "
             f"{torch.backends.cpu.get_cpu_capability()}",
             f"numpy {np.__version__}", f"load average at the start: {load_average()}"]
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        lines.append("threadpoolctl not installed: BLAS thread pools unknown")
        return lines
    for pool in threadpool_info():
        lines.append(f"  {pool['user_api']}: {pool['internal_api']} {pool.get('version') or ''}, "
                     f"{pool['num_threads']} threads ({os.path.basename(pool['filepath'])})")
    return lines


def cpu_model_and_flags() -> tuple[str, set[str]]:
    """The CPU's model name and its feature flags (Linux /proc/cpuinfo; elsewhere platform's name, no flags)."""
    model, flags = platform.processor() or "cpu", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model in ("", "cpu", platform.processor()):
                    model = value.strip()
                elif key.strip() in ("flags", "Features") and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return model, flags


def load_average() -> str:
    """The 1, 5 and 15 minute load averages ("unknown" where the system has none): quote a ratio with them."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "unknown"


def interleave(contenders: dict[str, Callable[[], object]], repeats: int, warmup: int = 1,
               before: dict[str, Callable[[], object]] | None = None,
               cpu: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """Wall seconds per call of each contender, measured side by side.

    Each contender runs ``warmup`` times untimed; then every repeat runs all of them once, the
    start order rotating from repeat to repeat. ``before[name]`` (untimed) runs before each call
    of ``name``, followed by a garbage collection. If ``cpu`` is given, it receives the process
    CPU seconds of each call too (all threads; steadier than wall time when other work competes
    for the cores, as long as the threads do not spin)."""
    before = before or {}
    names = list(contenders)
    for _ in range(warmup):
        for name in names:
            before.get(name, lambda: None)()
            contenders[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    with frozen_heap():
        for r in range(repeats):
            for name in names[r % len(names):] + names[:r % len(names)]:
                before.get(name, lambda: None)()
                gc.collect()
                c0, t0 = time.process_time(), time.perf_counter()
                contenders[name]()
                times[name].append(time.perf_counter() - t0)
                if cpu is not None:
                    cpu.setdefault(name, []).append(time.process_time() - c0)
    return times


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def paired_ratio(cpu: dict[str, list[float]], name: str, base: str) -> float:
    """The median over repeats of each repeat's ``name`` / ``base`` CPU time (the two ran side by side)."""
    return median([a / b for a, b in zip(cpu[name], cpu[base], strict=True)])


@dataclass
class Row:
    """One line of a summary table: each time says its clock (CPU: process CPU seconds, all threads; wall:
    elapsed seconds), and so does each ratio."""

    benchmark: str
    measure: str
    cpu_s: float | None = None  # median process CPU seconds; None: not measured, or not a time
    wall_s: float | None = None  # median wall seconds
    ratio: str = ""  # e.g. "1.04 x bare (CPU)"
    goal: str = ""  # e.g. "<= 1.10: met"
    note: str = ""


def print_table(rows: list[Row]) -> None:
    head = ("benchmark", "measure", "CPU s", "wall s", "ratio", "goal", "note")
    num = lambda x: "" if x is None else f"{x:.3f}"
    cells = [head] + [(r.benchmark, r.measure, num(r.cpu_s), num(r.wall_s), r.ratio, r.goal, r.note) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    for k, c in enumerate(cells):
        print("  ".join(s.rjust(w) if i in (2, 3) else s.ljust(w)
                        for i, (s, w) in enumerate(zip(c, widths))).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))


def run_alone(settings_class, run, doc: str, argv: list[str] | None) -> None:
    """A benchmark module's ``main``: its settings from ``argv`` (``settings_class``, the module docstring's
    first paragraph as the help), the machine, then the rows ``run(settings)`` returns as the summary table."""
    cfg = parse_config(settings_class, argv, doc.split("\n\n")[0])
    print("\n".join(machine_info()))
    print_table(run(cfg))


def goal_text(ratio: float, goal: float) -> str:
    return f"<= {goal:.2f}: {'met' if ratio <= goal else 'MISSED'}"


# ----------------------------------------------------------------------------- this benchmark


def bare_batches(encoder, texts: list[str], batch_size: int) -> list[dict]:
    """The padded batches extract runs, in its order, recorded from one untimed extract (no cache, no maps): the
    bare loop then does exactly the same model work."""
    import probes

    seen = []
    inner = encoder.forward

    def recording(input_ids, attention_mask, maps=False):
        seen.append({"input_ids": input_ids.clone(), "attention_mask": attention_mask.long().clone()})
        return inner(input_ids, attention_mask, maps=maps)

    encoder.forward = recording
    try:
        probes.extract(encoder, texts, batch_size=batch_size, cache_dir=None, progress=False)
    finally:
        del encoder.forward  # back to the class's method
    return seen


class ForwardClock:
    """``encoder.forward`` wrapped (inside ``with``) to add the process CPU seconds spent in it to ``seconds``: a
    run's CPU time less this is the capture's own work around the forward, measured in the same run."""

    def __init__(self, encoder):
        self.encoder, self.seconds, self.patched = encoder, 0.0, None

    def __enter__(self) -> ForwardClock:
        self.patched = vars(self.encoder).get("forward")  # a forward already set on the instance, kept after
        inner = self.encoder.forward

        def timed(input_ids, attention_mask, maps=False):
            c0 = time.process_time()
            try:
                return inner(input_ids, attention_mask, maps=maps)
            finally:
                self.seconds += time.process_time() - c0

        self.encoder.forward = timed
        return self

    def __exit__(self, *exc) -> None:
        if self.patched is None:
            del self.encoder.forward  # back to the class's method
        else:
            self.encoder.forward = self.patched


def run(cfg: Settings) -> list[Row]:
    """Measure and print; returns the summary rows."""
    import probes
    from probes.corpus import load_corpus, sample_sentences

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    encoder = probes.load(cfg.model)
    texts = sample_sentences(load_corpus(), cfg.n_sentences, seed=cfg.seed)
    batches = bare_batches(encoder, texts, cfg.batch_size)
    n_tokens = sum(int(b["attention_mask"].sum()) for b in batches)
    padded = sum(b["input_ids"].numel() for b in batches)
    print(f"extract: {cfg.model}, {len(texts)} sentences, {n_tokens} tokens ({padded} with padding), "
          f"{len(batches)} batches of <= {cfg.batch_size} (recorded from extract); "
          f"{cfg.repeats} repeats after {cfg.warmup} warm-up; {torch.get_num_threads()} torch threads")

    def bare():
        with torch.inference_mode():
            for batch in batches:
                encoder.model(**batch, output_hidden_states=True)

    root = tempfile.mkdtemp(prefix="bench-extract-")
    cache = {"dir": None}

    def fresh_cache_dir():
        if cache["dir"] is not None:
            shutil.rmtree(cache["dir"], ignore_errors=True)
        cache["dir"] = tempfile.mkdtemp(dir=root)

    cpu: dict[str, list[float]] = {}
    hit_cpu: dict[str, list[float]] = {}
    forward_cpu: list[float] = []  # CPU seconds inside encoder.forward of each cold extraction

    def cold():
        with ForwardClock(encoder) as clock:
            probes.extract(encoder, texts, batch_size=cfg.batch_size, cache_dir=cache["dir"], progress=False)
        forward_cpu.append(clock.seconds)

    try:
        times = interleave(
            {"bare": bare,
             "extract": lambda: probes.extract(encoder, texts, batch_size=cfg.batch_size, cache_dir=None,
                                               progress=False),
             "extract+cache": cold},
            cfg.repeats, cfg.warmup, before={"extract+cache": fresh_cache_dir}, cpu=cpu)
        hit = interleave({"hit": lambda: probes.extract(encoder, texts, batch_size=cfg.batch_size,
                                                        cache_dir=cache["dir"], progress=False)},
                         cfg.hit_repeats, warmup=1, cpu=hit_cpu)["hit"]
        size_rows = cache_size(encoder, cache["dir"])
    finally:
        shutil.rmtree(root, ignore_errors=True)

    for k in times:
        print(f"  {k:14s} CPU median {median(cpu[k]):7.3f} s (runs: {', '.join(f'{t:.3f}' for t in cpu[k])}); "
              f"wall median {median(times[k]):7.3f} s")
    print(f"  {'cache hit':14s} CPU median {median(hit_cpu['hit']):7.3f} s; wall median {median(hit):7.3f} s")
    r_ex, r_cold = paired_ratio(cpu, "extract", "bare"), paired_ratio(cpu, "extract+cache", "bare")
    r_hit = median(hit_cpu["hit"]) / median(cpu["bare"])
    # the capture's own work in each timed cold extraction (the warm-up's come first): its CPU time outside
    # encoder.forward, and the run's CPU time over its forward passes' (both from the same run)
    runs = list(zip(cpu["extract+cache"], forward_cpu[-cfg.repeats:], strict=True))
    own, r_own = median([t - f for t, f in runs]), median([t / f for t, f in runs])
    print(f"  outside the forward (same runs): {own * 1e3:.0f} ms CPU = {r_own - 1:.1%} of the forward passes' own "
          f"CPU time, so cold extraction = {r_own:.3f} x its forward without the run-to-run noise between runs")
    print(f"extract: cold extraction (cache write) {r_cold:.3f} x a bare forward in CPU time (goal <= {CPU_GOAL:.2f}; "
          f"without a cache {r_ex:.3f}; median of {cfg.repeats} paired repeats); {cfg.model}, {len(texts)} "
          f"sentences, {torch.get_num_threads()} torch threads; load average now {load_average()}", flush=True)
    tag = f"{len(texts)} sentences"
    return [
        Row("extract", f"bare forward loop ({tag})", median(cpu["bare"]), median(times["bare"])),
        Row("extract", "cold extraction: probes.extract writing the cache", median(cpu["extract+cache"]),
            median(times["extract+cache"]), f"{r_cold:.3f} x bare (CPU)", goal_text(r_cold, CPU_GOAL)),
        Row("extract", "probes.extract, cache_dir=None", median(cpu["extract"]), median(times["extract"]),
            f"{r_ex:.3f} x bare (CPU)"),
        Row("extract", "cold extraction's own work (outside encoder.forward)", own,
            ratio=f"{r_own:.3f} x forward (CPU)", goal=goal_text(r_own, CPU_GOAL),
            note="a run's CPU time / the CPU time inside its encoder.forward calls, median over the runs"),
        Row("extract", "probes.extract, cache hit", median(hit_cpu["hit"]), median(hit), f"{r_hit:.3f} x bare (CPU)",
            note="every block verified; hidden memory-mapped"),
        *size_rows,
    ]


def cache_size(encoder, cache_dir: str) -> list[Row]:
    """Bytes per token per layer of the one entry in ``cache_dir``: hidden.npy alone, and the whole entry."""
    from probes.capture.store import entry_bytes

    (entry,) = [p for p in (Path(cache_dir) / encoder.name).iterdir() if p.is_dir()]
    meta = json.loads((entry / "meta.json").read_text())["meta"]
    per = (encoder.num_layers + 1) * meta["n_tokens"]  # token-layer states
    d = encoder.hidden_size
    # the array's own bytes (the .npy header is counted with the whole entry)
    hidden, whole = np.load(entry / "hidden.npy", mmap_mode="r").nbytes / per, entry_bytes(entry) / per
    print(f"  cache entry ({meta['cache_dtype']}, d = {d}): hidden.npy {hidden:.1f} bytes per token per layer "
          f"= {hidden / d:.3f} x d; whole entry {whole:.1f} = {whole / d:.3f} x d "
          f"(+ sentence vectors, ids, tokens, checksums)")
    return [Row("cache", f"hidden.npy bytes / token / layer ({meta['cache_dtype']})", ratio=f"{hidden / d:.3f} x d",
                goal=goal_text(hidden / d, BYTES_GOAL), note=f"{hidden:.1f} B, d = {d}"),
            Row("cache", "whole entry bytes / token / layer", ratio=f"{whole / d:.3f} x d",
                note=f"{whole:.1f} B: hidden.npy + sentence vectors, ids, tokens, checksums (no goal)")]


def main(argv: list[str] | None = None) -> None:
    run_alone(Settings, run, __doc__, argv)


if __name__ == "__main__":
    run_main(main)
