"""benchmarks.bench_extract on a tiny model: the forward clock counts only the time inside encoder.forward and
leaves the encoder as it was, and the benchmark's rows hold what they say (no timing is asserted)."""

from __future__ import annotations

import time

import probes
from benchmarks import bench_extract as be


def test_the_forward_clock_counts_the_forward_alone_and_restores_it():
    enc = probes.load("tiny-bert")
    inner = type(enc).forward

    def slow_forward(self, input_ids, attention_mask, maps=False):
        t0 = time.process_time()
        while time.process_time() - t0 < 0.02:  # 20 ms of CPU inside every forward pass
            pass
        return inner(self, input_ids, attention_mask, maps=maps)

    enc.forward = slow_forward.__get__(enc)  # an instance attribute, as a caller's patch would be
    with be.ForwardClock(enc) as clock:
        acts = probes.extract(enc, ["a short text", "another one, a little longer"] * 3, batch_size=2,
                              cache_dir=None, progress=False)
        batches = len(acts.texts) // 2
    assert clock.seconds >= 0.02 * batches  # every pass was clocked
    assert enc.forward.__func__ is slow_forward  # the encoder's own forward is back


def test_the_benchmark_rows_on_a_tiny_model():
    cfg = be.Settings(model="tiny-bert", n_sentences=12, batch_size=4, repeats=2, warmup=0, hit_repeats=1)
    rows = {r.measure: r for r in be.run(cfg)}
    own = rows["cold extraction's own work (outside encoder.forward)"]
    cold = rows["cold extraction: probes.extract writing the cache"]
    assert own.cpu_s is not None and cold.cpu_s is not None and 0 <= own.cpu_s <= cold.cpu_s
    assert own.ratio.endswith("x forward (CPU)") and cold.ratio.endswith("x bare (CPU)")
    assert rows["hidden.npy bytes / token / layer (float16)"].ratio == "2.000 x d"  # float16, no padding stored
    assert float(own.ratio.split()[0]) >= 1
