"""Run every benchmark in sequence with its default settings and print one summary table.

    $ python -m benchmarks          # or: make bench

Each benchmark prints its own detail (every timed run) first; see ``benchmarks.bench_extract``
and ``benchmarks.bench_pairwise`` for what they measure and for their options.
"""

from __future__ import annotations

import os
import time

from benchmarks import bench_extract, bench_pairwise
from benchmarks.bench_extract import machine_info, print_table


def main() -> None:
    t0 = time.perf_counter()
    print("\n".join(machine_info()))
    rows = []
    for module in (bench_extract, bench_pairwise):
        print()
        rows += module.run(module.Settings())
    print(f"\nsummary ({time.perf_counter() - t0:.0f} s in all; load average at the end "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())})")
    print_table(rows)


if __name__ == "__main__":
    main()
