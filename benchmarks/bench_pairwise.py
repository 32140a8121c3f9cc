"""Pairwise cosines: ``pairwise_cosines`` against one float32 matrix product, and ``cosine_summary``.

On X = n x d float32 (seeded standard normal; default 5000 x 1024) this times, side by side, in process CPU
time (wall seconds are shown beside, labelled):

* ``X @ X.T``: one float32 matrix product of the same size (numpy BLAS), the floor;
* ``pairwise_cosines(X)``: the C(n,2) upper-triangle cosines in row-major order (goal: <= 3 x the
  product);
* ``cosine_summary(X)`` (exact quantiles) and ``cosine_summary(X, exact_limit=0)`` (the streaming
  histogram path), interleaved with each other.

Then, once, the streaming path on a large cloud (default 50,000 x 384: 1.25e9 pairs) in a fresh
child process, reporting its time and how far the child's peak RSS rises above its RSS with X
already built (peak reset via /proc/self/clear_refs on Linux, else ``resource.getrusage``). It
must stay bounded: holding the C(n,2) float32 cosines at once would take 5 GB.

    $ python -m benchmarks.bench_pairwise [--n 5000] [--d 1024] [--repeats 5] [--stream-n 50000]
"""

from __future__ import annotations

import multiprocessing
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from analyses.anisotropy import cosine_summary, pairwise_cosines
from benchmarks.bench_extract import Row, goal_text, interleave, median, paired_ratio, run_alone
from probes.config import arg, run_main

GOAL = 3.0  # pairwise_cosines / (X @ X.T)


@dataclass
class Settings:
    """Time pairwise_cosines against one matrix product, and both cosine_summary paths."""

    n: int = arg(5000, "rows of X", min=2)
    d: int = arg(1024, "columns of X", min=1)
    seed: int = arg(0, "seed of X", min=0)
    repeats: int = arg(5, "timed repeats of pairwise_cosines vs X @ X.T (median reported)", min=1)
    summary_repeats: int = arg(3, "timed repeats of each cosine_summary path", min=1)
    warmup: int = arg(1, "untimed runs of each contender first", min=0)
    stream_n: int = arg(50_000, "rows for the one large streaming run (0 skips it)", min=0)
    stream_d: int = arg(384, "columns for the large streaming run", min=1)


def cloud(n: int, d: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d), dtype=np.float32)


def _status_mib(field: str) -> float | None:
    """A memory line of /proc/self/status ("VmRSS", "VmHWM") in MiB; None where there is none."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset the peak RSS (VmHWM) to the current RSS (Linux >= 4.0); False where not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status_mib("VmHWM") is not None
    except OSError:
        return False


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def streaming_child(n: int, d: int, seed: int) -> tuple[float, float, float, str]:
    """In a fresh process, with X built: (seconds, RSS MiB before, peak RSS MiB after, how measured).

    The peak is reset to the current RSS first where Linux allows it (so imports do not mask it);
    else it is the process's ``ru_maxrss`` before and after."""
    X = cloud(n, d, seed)
    reset = _reset_peak_rss()
    before = _status_mib("VmRSS") if reset else _maxrss_mib()
    t0 = time.perf_counter()
    cosine_summary(X, exact_limit=0)
    secs = time.perf_counter() - t0
    after = _status_mib("VmHWM") if reset else _maxrss_mib()
    return secs, before, after, "VmRSS -> VmHWM, peak reset" if reset else "ru_maxrss before -> after"


def run(cfg: Settings) -> list[Row]:
    """Measure and print; returns the summary rows."""
    X = cloud(cfg.n, cfg.d, cfg.seed)
    shape = f"{cfg.n}x{cfg.d}"
    print(f"pairwise: X {shape} float32, {cfg.n * (cfg.n - 1) // 2} pairs; "
          f"{cfg.repeats} repeats after {cfg.warmup} warm-up")
    cpu: dict[str, list[float]] = {}
    t = interleave({"matmul": lambda: X @ X.T, "pairwise_cosines": lambda: pairwise_cosines(X)},
                   cfg.repeats, cfg.warmup, cpu=cpu)
    s = interleave({"exact": lambda: cosine_summary(X), "streaming": lambda: cosine_summary(X, exact_limit=0)},
                   cfg.summary_repeats, cfg.warmup, cpu=cpu)
    wall = {k: median(v) for k, v in {**t, **s}.items()}
    med = {k: median(v) for k, v in cpu.items()}
    for k, v in cpu.items():
        print(f"  {k:16s} CPU median {med[k]:7.3f} s  runs: {', '.join(f'{x:.3f}' for x in v)}; "
              f"wall median {wall[k]:7.3f} s")
    ratio = paired_ratio(cpu, "pairwise_cosines", "matmul")
    print(f"  pairwise_cosines / matmul = {ratio:.2f} in CPU time (goal <= {GOAL:.0f}; median of paired repeats)")
    rows = [
        Row("pairwise", f"X @ X.T float32 ({shape})", med["matmul"], wall["matmul"]),
        Row("pairwise", "pairwise_cosines", med["pairwise_cosines"], wall["pairwise_cosines"],
            f"{ratio:.2f} x matmul (CPU)", goal_text(ratio, GOAL)),
        Row("pairwise", "cosine_summary, exact", med["exact"], wall["exact"],
            f"{med['exact'] / med['matmul']:.2f} x matmul (CPU)"),
        Row("pairwise", "cosine_summary, streaming", med["streaming"], wall["streaming"],
            f"{med['streaming'] / med['matmul']:.2f} x matmul (CPU)"),
    ]
    if cfg.stream_n:
        n, d = cfg.stream_n, cfg.stream_d
        full_gb = n * (n - 1) // 2 * 4 / 1e9
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            secs, before, after, how = pool.submit(streaming_child, n, d, cfg.seed).result()
        grow = max(after - before, 0.0)
        print(f"  streaming {n}x{d} once (child process): {secs:.1f} s, RSS {before:.0f} -> peak {after:.0f} MiB "
              f"(+{grow:.0f} MiB; {how}); all C(n,2) float32 cosines would be {full_gb:.1f} GB")
        rows.append(Row("pairwise", f"cosine_summary, streaming {n}x{d} (once)", wall_s=secs,
                        note=f"peak RSS +{grow:.0f} MiB (all pairs: {full_gb:.1f} GB)"))
    return rows


def main(argv: list[str] | None = None) -> None:
    run_alone(Settings, run, __doc__, argv)


if __name__ == "__main__":
    run_main(main)
