"""SAE training: the suite's trainer against a bare PyTorch loop on the same tensors, and its memory when streaming.

* step (CPU time, one thread): :func:`analyses.sae.train.train_sae` on ``--n`` token states held in memory (the
  states a cache entry gives) against a bare loop written here with the same math: TopK of k latents, unit-norm
  decoder rows after each step, b_dec at the mean, inputs scaled to E||x|| = sqrt(d), Adam with the same warm-up
  and decay, the same dead-latent count and AuxK term, the same seeded weights and minibatches. Both run
  ``--steps`` steps, side by side in interleaved rounds (process CPU time, the median of each); the ratio is
  suite / bare (goal <= 1.2). The two must end at the same decoder (checked to float32 round-off), so the loop
  timed is the same arithmetic.
* memory (peak of a child process): :func:`analyses.sae.train.train_sae_streamed` on ``--stream-tokens`` token
  states (default 1 M and 4 M, width ``--stream-d``) through a shuffling buffer of ``--buffer-tokens``, one pass
  over every token (steps = tokens / batch), the states made range by range as a cache entry's memory-mapped read
  gives them (seeded by the range's start; never all in memory). Each size runs in its own process; the parent
  samples its RssAnon (the memory the process allocated) as :mod:`benchmarks.bench_memory` does, and the child
  prints its VmHWM (its peak resident memory; not ru_maxrss, which on Linux keeps the parent's peak across the
  fork and exec) and the most states the buffer held. Flat means the 4 M peak is within a few MiB of the
  1 M one.

    $ python -m benchmarks.bench_sae [--n 20000 --d 384 --width 3072 --k 32 --steps 30 --rounds 3]
          [--stream-tokens 1000000 --stream-tokens 4000000 --stream-d 64 --buffer-tokens 65536]
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass

import numpy as np
import torch

from benchmarks.bench_extract import Row, goal_text, interleave, load_average, median, run_alone
from probes.config import arg, run_main

GOAL = 1.2  # suite trainer / bare loop, process CPU time
FLAT_MIB = 16.0  # peak RssAnon growth from the smallest to the largest stream still called flat


@dataclass
class Settings:
    """Time an SAE training step against a bare PyTorch loop; peak memory of streamed training at two sizes."""

    n: int = arg(20000, "token states in memory for the step benchmark", min=2)
    d: int = arg(384, "their width (MiniLM-L6: 384)", min=2)
    width: int = arg(3072, "SAE latents", min=2)
    k: int = arg(32, "latents per token (TopK)", min=1)
    batch: int = arg(1024, "token states per step", min=1)
    steps: int = arg(30, "steps per timed run", min=1)
    dead_window: int = arg(4096, "tokens without firing: dead (small, so AuxK runs in the timed steps)", min=1)
    rounds: int = arg(3, "timed rounds of each contender (median reported)", min=1)
    stream_tokens: list[int] = arg([1_000_000, 4_000_000], "token states streamed; one child process each")
    stream_d: int = arg(64, "width of the streamed states", min=2)
    stream_width: int = arg(256, "SAE latents for the streamed runs", min=2)
    buffer_tokens: int = arg(65536, "shuffling buffer of the streamed runs (token states)", min=2)
    skip_memory: bool = arg(False, "time the step only")


def states(n: int, d: int, seed: int) -> np.ndarray:
    """(n, d) float32: sparse sums of random unit directions plus an offset (token states with a mean)."""
    rng = np.random.default_rng(seed)
    D = rng.normal(size=(4 * d, d)).astype(np.float32)
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    codes = rng.random((n, 4 * d), dtype=np.float32) * (rng.random((n, 4 * d), dtype=np.float32) < 8 / (4 * d))
    return codes @ D + np.float32(0.5)


def bare_loop(X: np.ndarray, width: int, k: int, batch: int, steps: int, dead_window: int, lr: float = 1e-3,
              warmup: float = 0.05, decay: float = 0.2, aux_coef: float = 1 / 32, seed: int = 0) -> torch.Tensor:
    """TopK SAE training written out in plain torch (the math of analyses.sae.train); the final (width, d) W_dec
    in scaled units."""
    g = torch.Generator().manual_seed(seed)
    data = torch.from_numpy(X)
    n, d = data.shape
    c = math.sqrt(d) / float(data.norm(dim=1).mean())
    W = torch.randn(width, d, generator=g)
    W = W / W.norm(dim=1, keepdim=True)
    W_dec, W_enc = W.clone().requires_grad_(True), W.T.clone().requires_grad_(True)
    b_enc = torch.zeros(width, requires_grad=True)
    b_dec = (data.mean(0) * c).requires_grad_(True)
    opt = torch.optim.Adam([W_dec, W_enc, b_enc, b_dec], lr=lr)
    w_steps, d_steps = max(1, round(warmup * steps)), max(1, round(decay * steps))
    since = torch.zeros(width, dtype=torch.long)
    b = min(batch, n)
    order, pos = torch.randperm(n, generator=g), 0
    for t in range(steps):
        if pos + b > n:
            order, pos = torch.randperm(n, generator=g), 0
        x = data[order[pos:pos + b]] * c
        pos += b
        for group in opt.param_groups:
            group["lr"] = lr * ((t + 1) / w_steps if t < w_steps else min(1.0, (steps - t) / d_steps))
        pre = (x - b_dec) @ W_enc + b_enc
        top = pre.topk(k, dim=-1)
        z = torch.zeros_like(pre).scatter(-1, top.indices, torch.relu(top.values))
        x_hat = z @ W_dec + b_dec
        loss = (x - x_hat).pow(2).sum(-1).mean()
        dead = since >= dead_window
        if bool(dead.any()):
            e = (x - x_hat).detach()
            dead_pre = torch.relu(pre[:, dead])
            top_aux = dead_pre.topk(min(d // 2, int(dead.sum())), dim=-1)
            e_hat = torch.zeros_like(dead_pre).scatter(-1, top_aux.indices, top_aux.values) @ W_dec[dead]
            loss = loss + aux_coef * (e - e_hat).pow(2).sum(-1).mean() / (e - e.mean(0)).pow(2).sum(-1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            W_dec.div_(W_dec.norm(dim=1, keepdim=True))
            since = torch.where((z > 0).any(0), torch.zeros_like(since), since + b)
    return W_dec.detach()


def step_rows(cfg: Settings) -> list[Row]:
    from analyses.sae.model import SaeShape
    from analyses.sae.train import TrainSettings, train_sae

    X = states(cfg.n, cfg.d, seed=0)
    shape = SaeShape("topk", cfg.d, cfg.width, cfg.k)
    settings = TrainSettings(steps=cfg.steps, batch=cfg.batch, dead_window=cfg.dead_window)
    ours = train_sae(X, shape, settings).sae.W_dec.detach()
    theirs = bare_loop(X, cfg.width, cfg.k, cfg.batch, cfg.steps, cfg.dead_window)
    gap = float((ours - theirs).abs().max())
    print(f"sae: the suite's and the bare loop's decoders after {cfg.steps} steps differ by at most {gap:.2e}",
          flush=True)
    if gap > 1e-4:
        raise RuntimeError(f"the bare loop is not the suite's arithmetic (decoders differ by {gap:.2e})")
    cpu: dict[str, list[float]] = {}
    interleave({"bare": lambda: bare_loop(X, cfg.width, cfg.k, cfg.batch, cfg.steps, cfg.dead_window),
                "suite": lambda: train_sae(X, shape, settings)}, cfg.rounds, warmup=0, cpu=cpu)
    p, q = median(cpu["bare"]), median(cpu["suite"])
    ratio = q / p
    what = f"topk d {cfg.d}, {cfg.width} latents, k {cfg.k}, batch {cfg.batch}, {cfg.steps} steps"
    print(f"sae: train_sae {ratio:.3f} x a bare PyTorch loop (CPU {q:.2f} s / {p:.2f} s, "
          f"{1000 * q / cfg.steps:.0f} / {1000 * p / cfg.steps:.0f} ms a step; goal <= {GOAL}); {what}", flush=True)
    return [Row("sae", f"bare PyTorch loop ({what})", cpu_s=p),
            Row("sae", "analyses.sae.train.train_sae, same tensors", cpu_s=q, ratio=f"{ratio:.3f} x bare (CPU)",
                goal=goal_text(ratio, GOAL))]


CHILD = """import sys
import numpy as np
from analyses.sae.model import SaeShape
from analyses.sae.stream import ShuffleBuffer, TokenSource
from analyses.sae.train import TrainSettings, train_sae_streamed
n, d, width, buffer, batch = (int(a) for a in sys.argv[1:6])
def read(start, stop):
    rng = np.random.default_rng([7, start])
    return (rng.standard_normal((stop - start, d), dtype=np.float32) + np.float32(0.5))
buffers = []
real = ShuffleBuffer.__post_init__
def post_init(self):
    real(self)
    buffers.append(self)
ShuffleBuffer.__post_init__ = post_init
steps = -(-n // batch)
trained = train_sae_streamed(TokenSource(n=n, d=d, read=read), SaeShape("topk", d, width, 16),
                             TrainSettings(steps=steps, batch=batch), buffer)
hwm = [int(line.split()[1]) / 1024 for line in open("/proc/self/status") if line.startswith("VmHWM")]
print(f"child: {n} tokens, {steps} steps, final loss {trained.final_loss:.4f}, buffer peak "
      f"{max([b.peak for b in buffers] or [0])} states, VmHWM {max(hwm or [0]):.0f} MiB")
"""


def memory_rows(cfg: Settings) -> list[Row]:
    from benchmarks.bench_memory import peak_memory

    env = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
    rows, peaks = [], []
    for n in cfg.stream_tokens:
        cmd = [sys.executable, "-c", CHILD, str(n), str(cfg.stream_d), str(cfg.stream_width), str(cfg.buffer_tokens),
               str(cfg.batch)]
        peak, secs, tail = peak_memory(cmd, env)
        peaks.append((n, peak["RssAnon"]))
        print(f"sae: streamed {n:,} tokens (d {cfg.stream_d}, buffer {cfg.buffer_tokens:,}): peak RssAnon "
              f"{peak['RssAnon']:.0f} MiB, RssFile {peak['RssFile']:.0f} MiB, {secs:.0f} s wall; {tail.strip()}",
              flush=True)
        rows.append(Row("sae memory", f"streamed, {n:,} tokens", wall_s=secs,
                        note=f"peak RssAnon {peak['RssAnon']:.0f} MiB, RssFile {peak['RssFile']:.0f} MiB"))
    (n0, a0), (n1, a1) = peaks[0], peaks[-1]
    held = n1 * cfg.stream_d * 4 / 2 ** 20
    print(f"sae: peak RssAnon {a0:.0f} -> {a1:.0f} MiB from {n0:,} to {n1:,} tokens ({a1 - a0:+.0f} MiB; the "
          f"{n1:,} states alone would be {held:.0f} MiB)")
    rows.append(Row("sae memory", "growth", ratio=f"{a1 - a0:+.0f} MiB", goal=f"<= {FLAT_MIB:.0f} MiB: "
                    f"{'met' if a1 - a0 <= FLAT_MIB else 'MISSED'}", note=f"{n0:,} -> {n1:,} tokens"))
    return rows


def run(cfg: Settings) -> list[Row]:
    torch.set_num_threads(1)
    rows = step_rows(cfg)
    if not cfg.skip_memory:
        rows += memory_rows(cfg)
    print(f"sae: load average now {load_average()}")
    return rows


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("TQDM_DISABLE", "1")
    run_alone(Settings, run, __doc__ or "", argv)


if __name__ == "__main__":
    run_main(main)
