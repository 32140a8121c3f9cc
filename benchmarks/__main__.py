"""The suite's speed benchmarks, each printing one ratio line, then one summary table.

    $ python -m benchmarks                       # or: make bench; probing, similarity and extract in turn
    $ python -m benchmarks probing|similarity|extract|sae|causal [...]   # one of them
    $ python -m benchmarks all                   # the five, then bench_shard and bench_pairwise

* probing (``benchmarks.bench_probing``): the probing protocol over a plain ``LogisticRegression()``
  loop on the same features (goal <= 1.5);
* similarity (``benchmarks.bench_similarity``): all-pairs CKA over the float32 floor (the stacked cross
  products and every layer's Gram), at n = 5,000 and 20,000 (goal <= 1.5);
* extract (``benchmarks.bench_extract``): cold extraction (writing the cache entry) over a bare forward
  loop, in CPU time (goal <= 1.03);
* sae (``benchmarks.bench_sae``, by name or with ``all``): SAE training steps over a bare PyTorch loop on the same
  tensors (goal <= 1.2), and peak memory of streamed training at 1 M and 4 M tokens;
* causal (``benchmarks.bench_causal``, by name or with ``all``): causal probing over the forward passes with the
  model's loss that it must run, on bert-small and gpt2-small-base, with the objective in rows and as it was
  (goal <= 1.3; several CPU-minutes).

Every benchmark runs in one thread (``OMP_NUM_THREADS=1`` and torch's intra-op threads set here, before
numpy and torch load) and compares process CPU time over interleaved rounds (one exception, labelled:
bench_shard's sharding ratio is of wall time, what sharding buys). The summary table has a CPU-seconds
and a wall-seconds column, and every ratio names its clock. The CPU model, its vector units (avx2,
avx512, amx) and the machine's load average are printed at the start, the load again at the end: quote
a ratio with them.
"""

from __future__ import annotations

import os
import sys
import time

# one thread per process; no progress bars (they would garble the printed lines)
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS"):
    os.environ.setdefault(_var, "1")

import torch  # noqa: E402

torch.set_num_threads(1)

from benchmarks import (  # noqa: E402
    bench_causal,
    bench_extract,
    bench_pairwise,
    bench_probing,
    bench_sae,
    bench_shard,
    bench_similarity,
)
from benchmarks.bench_extract import cpu_model_and_flags, load_average, machine_info, print_table  # noqa: E402

RATIOS = {"probing": bench_probing, "similarity": bench_similarity, "extract": bench_extract, "sae": bench_sae,
          "causal": bench_causal}
PLAIN = ("probing", "similarity", "extract")  # what `python -m benchmarks` alone runs
DEFAULTS = {"extract": ["--n-sentences", "300", "--repeats", "5", "--threads", "1"]}  # 5: a steadier median


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    which = argv[0] if argv else ""
    if which and which not in (*RATIOS, "all"):
        raise SystemExit(f"error: unknown benchmark {which!r}; choose from {', '.join(RATIOS)}, all")
    names = [which] if which in RATIOS else list(RATIOS) if which == "all" else list(PLAIN)
    t0 = time.perf_counter()
    print("\n".join(machine_info()))
    rows = []
    for name in names:
        module = RATIOS[name]
        rest = argv[1:] if which == name else []
        from probes.config import parse_config

        cfg = parse_config(module.Settings, rest or DEFAULTS.get(name, []), module.__doc__.split("\n\n")[0])
        print()
        rows += module.run(cfg)
    if which == "all":
        for module in (bench_shard, bench_pairwise):
            print()
            rows += module.run(module.Settings())
    print(f"\nsummary ({time.perf_counter() - t0:.0f} s wall in all; load average at the end {load_average()}; "
          f"{cpu_model_and_flags()[0]})")
    print_table(rows)


if __name__ == "__main__":
    main()
