"""Probing: the suite's protocol against a plain ``LogisticRegression()`` loop on the same features.

On one model's cached activations (default ``minilm-l6``, 1,000 sentences of the default corpus), every
task of analyses.probing at every layer (6 tasks x 7 layers): the same items, split and features as the
analysis. Timed side by side, one thread, process CPU time, interleaved rounds (start order rotating):

* plain: for every task and layer, ``LogisticRegression()`` (scikit-learn defaults: lbfgs, C = 1,
  max_iter 100, tol 1e-4) fitted on the raw training features and predicting the test split;
* protocol: ``analyses.probing.probe_layers`` as the analysis runs it: standardised features, C from the
  grid by 3-fold cross-validation on the training split, refit, the control task for token tasks,
  bootstrap intervals (analyses.probing.fit).

Prints one ratio line: protocol / plain (goal <= 1.5). Extraction (cached under --out) is not timed.

    $ python -m benchmarks.bench_probing [--model minilm-l6] [--n-sentences 1000] [--rounds 2]
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from benchmarks.bench_extract import Row, goal_text, interleave, median, run_alone
from probes.config import arg, run_main

GOAL = 1.5  # protocol / plain LogisticRegression() loop


@dataclass
class Settings:
    """Time the probing protocol against a plain LogisticRegression() loop on the same features."""

    model: str = arg("minilm-l6", "checkpoint name from checkpoints.yaml")
    n_sentences: int = arg(1000, "sentences sampled from the default corpus", min=10)
    seed: int = arg(0, "seed of the sample, tasks and splits", min=0)
    max_items: int = arg(2000, "the analysis's --max-items", min=10)
    rounds: int = arg(2, "timed rounds of each contender (median reported)", min=1)
    warmup: int = arg(0, "untimed runs of each contender first", min=0)
    out: str = arg("out", "output root whose cache/ holds (or receives) the activations")


def task_features(cfg: Settings) -> list[dict]:
    """Per task: the (layers, n, d) float32 features, labels, groups and control labels of the analysis."""
    import probes
    from analyses import probing as pr
    from analyses.probing import tasks as pt
    from analyses.probing.inputs import documents_of
    from probes.corpus import load_corpus, sample_sentences

    pcfg = pr.Config(seed=cfg.seed, max_items=cfg.max_items)
    texts = sample_sentences(load_corpus(), cfg.n_sentences, seed=cfg.seed, min_words=5, max_words=60)
    cache = f"{cfg.out}/cache"
    acts = probes.extract(cfg.model, texts, cache_dir=cache, progress=False)
    perturbed = pt.bigram_shift_plan(acts.texts, cfg.seed)[2]
    shifted = probes.extract(cfg.model, perturbed, cache_dir=cache, progress=False, layers=()) if perturbed else None
    doc_of, doc_names = documents_of("default", acts.texts)
    out = []
    for name in pt.TASKS:
        task = pr.cap_items(pr.make_task(name, acts, pcfg, doc_of, doc_names), pcfg.max_items, pcfg.seed)
        layers = pr.TaskLayers(task, acts, shifted)
        X = np.stack([np.asarray(layers[lyr], np.float32) for lyr in range(len(layers))])
        control = (pt.control_labels(task.types, task.labels, len(task.classes), pcfg.seed)
                   if task.level == "token" else None)
        out.append({"name": name, "X": X, "y": task.labels, "groups": task.groups, "control": control})
    return out, pcfg


def run(cfg: Settings) -> list[Row]:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    from analyses import probing as pr

    tasks, pcfg = task_features(cfg)

    def plain():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for t in tasks:
                train, test = pr.split(t["y"], t["groups"], pcfg.test_size, pcfg.seed)
                for X in t["X"]:
                    LogisticRegression().fit(np.asarray(X[train], np.float64), t["y"][train]).predict(
                        np.asarray(X[test], np.float64))

    def protocol():
        for t in tasks:
            pr.probe_layers(t["X"], t["y"], t["groups"], pcfg, t["control"], desc=t["name"])

    cpu: dict[str, list[float]] = {}
    interleave({"plain": plain, "protocol": protocol}, cfg.rounds, cfg.warmup, cpu=cpu)
    p, q = median(cpu["plain"]), median(cpu["protocol"])
    ratio = q / p
    shapes = ", ".join(f"{t['name']} {t['X'].shape[1]}" for t in tasks)
    print(f"probing: protocol {ratio:.2f} x a plain LogisticRegression() loop (CPU {q:.1f} s / {p:.1f} s; "
          f"goal <= {GOAL}); {cfg.model}, {len(tasks)} tasks x {tasks[0]['X'].shape[0]} layers, items: {shapes}",
          flush=True)
    return [Row("probing", "plain LogisticRegression() loop", cpu_s=p),
            Row("probing", "probing protocol (CV over C, refit, control, intervals)", cpu_s=q,
                ratio=f"{ratio:.2f} x plain (CPU)", goal=goal_text(ratio, GOAL))]


def main(argv: list[str] | None = None) -> None:
    run_alone(Settings, run, __doc__, argv)


if __name__ == "__main__":
    run_main(main)
