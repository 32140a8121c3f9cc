"""benchmarks.bench_causal on tiny models: the floor replays exactly the scorings the analysis made, with the
model's own loss over the positions the objective scores, the objective as it was gives the loss the objective in
rows gives, and the rows say what they hold (no timing is asserted)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmarks import bench_causal as bc
from probes.capture.objective import load_objective

TEXTS = [f"The {a} saw {n} {b} near the {c} today." for a in ("cat", "dog", "man") for n in ("two", "nine")
         for b in ("birds", "cars") for c in ("river", "old brown house")]


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-gpt2"])
def test_the_floor_scores_what_the_objective_scores_and_before_agrees(name):
    objective = load_objective(name)
    sums, counts = objective.score(TEXTS, batch_size=5)
    before = bc._as(bc._Before, objective).score(TEXTS, batch_size=5)
    np.testing.assert_allclose(before[0], sums, rtol=1e-6)
    np.testing.assert_array_equal(before[1], counts)
    (batches,) = bc.floor_batches(objective, [(tuple(TEXTS), 0.15, 0, 5)])
    with torch.inference_mode():
        losses = [float(objective.model(input_ids=i, attention_mask=m, labels=y).loss) * int((y != -100).sum()
                  - (0 if objective.kind == "masked-LM" else (y[:, 0] != -100).sum()))
                  for i, m, y in batches]
    assert sum(losses) == pytest.approx(sums.sum(), rel=1e-5)  # the model's own loss of the same positions


@pytest.mark.slow  # three runs of causal probing
def test_the_benchmark_runs_on_a_tiny_model(tmp_path):
    cfg = bc.Settings(model=["tiny-bert"], n_sentences=30, task=["position"], random_draws=1, n_boot=20, rounds=1,
                      out=str(tmp_path))
    rows = {r.measure: r for r in bc.run(cfg)}
    floor = rows["tiny-bert: forward passes with the model's loss (floor)"]
    now = rows["tiny-bert: causal probing, objective in rows"]
    assert floor.cpu_s > 0 and now.ratio.endswith("x floor (CPU)") and now.goal.startswith("<= 1.30")
    assert float(now.note.rpartition(" ")[2]) < 1e-6  # the loss in rows equals the loss before
