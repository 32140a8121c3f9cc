"""Each ratio benchmark of ``python -m benchmarks`` runs end to end at a tiny size and returns the rows it
prints: a benchmark that breaks when the code it times moves is found here, not at the next ``make bench``.
No timing is asserted (speed is measured by the benchmarks themselves, never by tests)."""

from __future__ import annotations

import pytest

from benchmarks import bench_pairwise, bench_probing, bench_similarity


def rows_of(rows) -> dict:
    return {r.measure: r for r in rows}


@pytest.mark.slow
def test_the_probing_benchmark_on_a_tiny_model(tmp_path):
    cfg = bench_probing.Settings(model="tiny-bert", n_sentences=1000, max_items=200, rounds=1, out=str(tmp_path))
    rows = rows_of(bench_probing.run(cfg))
    plain = rows["plain LogisticRegression() loop"]
    protocol = rows["probing protocol (CV over C, refit, control, intervals)"]
    assert plain.cpu_s > 0 and protocol.cpu_s > 0
    assert protocol.ratio.endswith("x plain (CPU)") and protocol.goal.startswith("<= 1.50")


def test_the_similarity_benchmark_at_a_tiny_size():
    rows = bench_similarity.run(bench_similarity.Settings(n=[300], layers=2, d=16, rounds=1, warmup=0))
    cka = next(r for r in rows if r.measure.startswith("CKA, 2 x 2 pairs (n = 300)"))
    assert cka.ratio.endswith("x floor (CPU)") and "max diff to float64" in cka.note


def test_the_pairwise_benchmark_at_a_tiny_size():
    cfg = bench_pairwise.Settings(n=200, d=16, repeats=1, summary_repeats=1, warmup=0, stream_n=0)
    rows = rows_of(bench_pairwise.run(cfg))
    assert rows["pairwise_cosines"].cpu_s is not None and "cosine_summary, streaming" in rows
