"""Memory against the number of sentences: peak anonymous memory of capture, anisotropy, similarity at 1k-16k.

Each analysis runs as its own command line (``python -m analyses.<name> --no-figures``) in a child process,
on a fresh output folder, twice: cold (the extraction writes the cache entry, then the analysis runs) and warm
(the analysis reads the entry). ``extract`` runs ``probes.extract`` alone on the same sample (cold: the
capture; warm: a cache hit), so the capture's own memory is told apart from the analyses'. The parent
samples the child's ``/proc/<pid>/status`` every few milliseconds and reports the peak of ``RssAnon``: the
memory the process itself allocated (heap, arrays, tensors), which is what must stay bounded. File-backed
pages (``RssFile``: the memory-mapped cache entry, shared libraries) are shown beside it: the kernel drops
them under pressure, so they are not the process's to bound. A sample every few milliseconds can miss a
spike shorter than that; the warm runs repeat the analysis alone.

Prints, per analysis and run, the peak RssAnon at each size and its growth per 1,000 sentences, then the
summary table (peaks in MiB in the note column; wall seconds of each run).

``--workdir DIR`` keeps each size's output folder (``DIR/n<N>``: its cache and its result files) instead of a
temporary one, so a later call with ``--runs warm`` measures the analyses again on the same cache entries and
writes result files that ``scripts/compare_results.py`` can hold against the earlier ones (before and after a
change to an analysis).

    $ python -m benchmarks.bench_memory [--n 1000 --n 4000 --n 16000] [--model bert-small] [--pair slstm-small]
          [--workdir DIR] [--runs cold --runs warm]
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from benchmarks.bench_extract import Row, load_average, run_alone
from probes.config import arg, run_main

PERIOD = 0.005  # seconds between samples of the child's /proc/<pid>/status


@dataclass
class Settings:
    """Peak anonymous memory of anisotropy and similarity against the number of sentences."""

    n: list[int] = arg([1000, 4000, 16000], "sentences; one measurement per value")
    model: str = arg("bert-small", "the model both analyses read")
    pair: str = arg("slstm-small", "the second model of the similarity pair")
    analyses: list[str] = arg(["extract", "anisotropy", "similarity"],
                              "what to run: extract (probes.extract alone), anisotropy, similarity")
    seed: int = arg(0, "seed of the sentence sample", min=0)
    runs: list[str] = arg(["cold", "warm"], "cold: on a fresh output folder (the extraction runs first; with "
                          "--workdir, whatever that folder's cache holds); warm: the cache entry is there",
                          choices=("cold", "warm"))
    workdir: str = arg("", "keep each size's output folder (cache, results) as <workdir>/n<N> (default: a "
                       "temporary folder, removed)")


def status_kib(pid: int) -> dict[str, int]:
    """The memory lines of /proc/<pid>/status in KiB (empty once the process is gone)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("RssAnon", "RssFile", "VmHWM"):
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def peak_memory(cmd: list[str], env: dict) -> tuple[dict[str, float], float, str]:
    """Run ``cmd``; (peak MiB of RssAnon and RssFile, wall seconds, the tail of its output)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = {"RssAnon": 0, "RssFile": 0}
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    while proc.poll() is None:
        for k, v in status_kib(proc.pid).items():
            if k in peak:
                peak[k] = max(peak[k], v)
        time.sleep(PERIOD)
    reader.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{''.join(lines[-30:])}")
    return {k: v / 1024 for k, v in peak.items()}, time.perf_counter() - t0, "".join(lines[-3:])


EXTRACT = """import sys
import probes
from probes.corpus import load_corpus, sample_sentences
model, n, seed, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
texts = sample_sentences(load_corpus(), n, seed=seed, min_words=5, max_words=60)
probes.extract(model, texts, cache_dir=out, progress=False)
"""


def command(analysis: str, cfg: Settings, n: int, out: str) -> list[str]:
    if analysis == "extract":  # the capture alone, as the analyses' sample makes it (a second run is a hit)
        return [sys.executable, "-c", EXTRACT, cfg.model, str(n), str(cfg.seed), f"{out}/cache"]
    models = [cfg.model] if analysis == "anisotropy" else [cfg.model, cfg.pair]
    return [sys.executable, "-m", f"analyses.{analysis}", *(a for m in models for a in ("--model", m)),
            "--n-sentences", str(n), "--seed", str(cfg.seed), "--out", out, "--no-figures"]


def out_folder(cfg: Settings, n: int):
    """The output folder of size ``n``: ``<workdir>/n<N>`` (kept) or a temporary one (removed on exit)."""
    if not cfg.workdir:
        return tempfile.TemporaryDirectory(prefix="bench-memory-")
    path = os.path.join(cfg.workdir, f"n{n}")
    os.makedirs(path, exist_ok=True)
    return contextlib.nullcontext(path)


def run(cfg: Settings) -> list[Row]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    rows = []
    for analysis in cfg.analyses:
        peaks: dict[str, list[tuple[int, float]]] = {k: [] for k in cfg.runs}
        for n in cfg.n:
            with out_folder(cfg, n) as out:
                for run_kind in cfg.runs:
                    peak, secs, _ = peak_memory(command(analysis, cfg, n, out), env)
                    peaks[run_kind].append((n, peak["RssAnon"]))
                    print(f"memory: {analysis} {run_kind} n = {n}: peak RssAnon {peak['RssAnon']:.0f} MiB "
                          f"(RssFile {peak['RssFile']:.0f} MiB), {secs:.1f} s wall", flush=True)
                    rows.append(Row("memory", f"{analysis}, {run_kind}, {n} sentences", wall_s=secs,
                                    note=f"peak RssAnon {peak['RssAnon']:.0f} MiB, RssFile {peak['RssFile']:.0f} MiB"))
        for run_kind, pts in peaks.items():
            (n0, a0), (n1, a1) = pts[0], pts[-1]
            slope = (a1 - a0) / (n1 - n0) * 1000 if n1 > n0 else 0.0
            print(f"memory: {analysis} {run_kind}: peak RssAnon {a0:.0f} -> {a1:.0f} MiB from {n0} to {n1} sentences "
                  f"({slope:+.1f} MiB per 1,000 sentences)")
            rows.append(Row("memory", f"{analysis}, {run_kind}: growth", ratio=f"{slope:+.1f} MiB / 1k sentences",
                            note=f"{a0:.0f} -> {a1:.0f} MiB, {n0} -> {n1} sentences"))
    print(f"memory: load average now {load_average()}")
    return rows


def main(argv: list[str] | None = None) -> None:
    run_alone(Settings, run, __doc__, argv)


if __name__ == "__main__":
    run_main(main)
