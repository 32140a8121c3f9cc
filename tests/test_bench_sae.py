"""benchmarks.bench_sae on tiny sizes: the bare loop is the suite's arithmetic (the same decoder after training),
the step benchmark prints its ratio row, and (integration: child processes) the streamed runs report a peak each
and a growth row."""

from __future__ import annotations

import pytest

from analyses.sae.model import SaeShape
from analyses.sae.train import TrainSettings, train_sae
from benchmarks import bench_sae


def test_the_bare_loop_ends_at_the_suites_decoder_with_auxk_running():
    X = bench_sae.states(600, 16, seed=1)
    settings = TrainSettings(steps=25, batch=64, dead_window=64)
    trained = train_sae(X, SaeShape("topk", 16, 256, 2), settings)
    assert trained.dead_at_end > 0  # AuxK ran
    bare = bench_sae.bare_loop(X, 256, 2, 64, 25, 64)
    assert float((trained.sae.W_dec.detach() - bare).abs().max()) < 1e-6


def test_the_step_benchmark_gives_a_ratio_row():
    cfg = bench_sae.Settings(n=500, d=16, width=64, k=4, batch=64, steps=5, rounds=1, skip_memory=True)
    rows = bench_sae.run(cfg)
    assert [r.benchmark for r in rows] == ["sae", "sae"]
    assert rows[1].ratio.endswith("x bare (CPU)") and rows[0].cpu_s is not None and rows[0].cpu_s > 0


@pytest.mark.integration
def test_the_memory_benchmark_measures_each_size_in_a_child():
    cfg = bench_sae.Settings(stream_tokens=[20000, 40000], stream_d=8, stream_width=32, buffer_tokens=4096,
                             batch=256)
    rows = bench_sae.memory_rows(cfg)
    assert [r.measure for r in rows] == ["streamed, 20,000 tokens", "streamed, 40,000 tokens", "growth"]
    assert all("peak RssAnon" in r.note for r in rows[:2])
