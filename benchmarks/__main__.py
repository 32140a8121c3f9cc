"""Run every benchmark in sequence with its default settings and print one summary table.

    $ python -m benchmarks          # or: make bench

Each benchmark prints its own detail (every timed run) first; see ``benchmarks.bench_extract``
(extraction overhead, cache bytes), ``benchmarks.bench_shard`` (2 processes x 1 thread against
1 process x 2 threads) and ``benchmarks.bench_pairwise`` for what they measure and for their options.
The machine's load average is printed at the start and at the end.
"""

from __future__ import annotations

import os
import time

from benchmarks import bench_extract, bench_pairwise, bench_shard
from benchmarks.bench_extract import machine_info, print_table


def main() -> None:
    t0 = time.perf_counter()
    print("\n".join(machine_info()))
    rows = []
    for module in (bench_extract, bench_shard, bench_pairwise):
        print()
        rows += module.run(module.Settings())
    print(f"\nsummary ({time.perf_counter() - t0:.0f} s in all; load average at the end "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())})")
    print_table(rows)


if __name__ == "__main__":
    main()
