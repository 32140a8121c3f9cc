"""Retraining a committed model with its recipe and seed reproduces it.

Each model below was trained in float32 with one thread (``train_config.json``); its recorded settings are run
again here for the first two optimiser steps (the same schedule: the learning rate of the first steps depends on
the warm-up only) and every logged loss must equal the committed ``train_log.csv``'s (written to 5 decimals;
2e-5 allows the last digit to round the other way on a CPU whose float32 kernels sum in another order). Step 2's
loss is computed after step 1's update, so the data order, the masking, the initialisation and the optimiser
all take part. The models trained with bfloat16 autocast are not rerun here: on a CPU without bfloat16
instructions that autocast is emulated (about 100 s a step). The whole-model check, every weight bit for bit
after all 300 steps, is recorded in checkpoints/README.md.

The training corpus (data/train-corpus, built from PyPI archives by ``make train-corpus``, which .ci/run runs
first) is what the committed models were trained on; a missing one is built here.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from recipes import mlm_data
from recipes.train import TrainConfig, train

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
# one committed float32 model of each architecture the claims compare (trained in different sessions)
MODELS = ["albert-small-seed1", "bert-small-seed1"]


@pytest.fixture(scope="module")
def corpus():
    folder = REPO / "data" / "train-corpus"
    if not (folder / "PROVENANCE.json").exists():
        subprocess.run([sys.executable, str(REPO / "scripts" / "build_train_corpus.py")], check=True, cwd=REPO)
    return folder


@pytest.fixture(scope="module")
def shared_data():
    """The recipe's data, loaded once for every model of the module (tokenising the corpus is the slow part)."""
    loaded, original = {}, mlm_data.MLMData.load

    def load(self, out_dir, max_length):
        key = (*[getattr(self, f.name) for f in dataclasses.fields(mlm_data.MLMData)], str(out_dir), max_length)
        if key not in loaded:
            loaded[key] = original(self, out_dir, max_length)
        return loaded[key]

    mlm_data.MLMData.load = load
    yield
    mlm_data.MLMData.load = original


def logged(folder: Path, steps: int) -> list[float]:
    with open(folder / "train_log.csv") as f:
        return [float(r["loss"]) for r in csv.DictReader(f)][:steps]


@pytest.mark.parametrize("name", MODELS)
def test_the_recorded_recipe_gives_the_committed_losses(name, corpus, shared_data, tmp_path):
    folder = REPO / "checkpoints" / name
    record = json.loads((folder / "train_config.json").read_text())
    assert record["amp"] == "float32" and record["torch_threads"] == 1, "a float32 one-thread run is rerun here"
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    recorded = {k: v for k, v in record["config"].items() if k in fields}
    cfg = TrainConfig(**{**recorded, "corpus": str(corpus), "tokenizer": str(REPO / "checkpoints" / "wordpiece-4096"),
                         "out_dir": str(tmp_path), "steps": 2, "eval_every": 0, "eval_blocks": 1, "progress": False,
                         "max_minutes": 0.0, "snapshots": False, "overwrite": False})
    assert cfg.warmup >= 2  # the first two steps' learning rates are those of the full run
    again = train(cfg)
    assert logged(again, 2) == pytest.approx(logged(folder, 2), abs=2e-5)
