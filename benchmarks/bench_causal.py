"""Causal probing's cost over the forward passes it must run, with the objective in rows and as it was before.

On one model's activations of the default corpus's sentences (default ``bert-small`` and ``gpt2-small-base``,
400 sentences, one seed of the protocol; the extraction is done first and not timed), this times

* causal probing: ``analyses.causal_probing.compute`` with the model's objective (:mod:`probes.capture.objective`):
  the erasers' and probes' fits, the accuracies, and one scoring of the held-out sentences clean and under every
  eraser and random control, with the model's head on the scored positions only and the cross-entropy in rows;
* causal probing, before: the same with the objective as it was: the head's logits at every position and the
  cross-entropy over all of them with the class dimension strided (``cross_entropy(logits.transpose(1, 2))``);
* the floor: the forward passes it must run, bare: for every scoring the analysis made (recorded in an untimed
  run first), the model's forward with its own loss (transformers' ``labels=``: the masked positions' targets for a
  masked LM, every real next token for a causal LM) over exactly the same padded batches, built up front.

One thread, process CPU time, contenders interleaved in each round (start order rotating), in one process: the
ratios are of CPU time run side by side. Goal: causal probing <= 1.3 x the floor. Also printed: the objective's
loss with and without rows, which must agree to float round-off.

    $ python -m benchmarks.bench_causal [--model bert-small --model gpt2-small-base] [--n-sentences 400]
          [--seeds 1] [--rounds 1]
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch

from benchmarks.bench_extract import Row, goal_text, interleave, median, run_alone
from probes.capture.objective import MASKED, Objective, load_objective
from probes.config import arg, run_main

ObjectiveT = TypeVar("ObjectiveT", bound=Objective)
GOAL = 1.3  # causal probing / the bare forward passes with the model's loss it must run, process CPU time


@dataclass
class Settings:
    """Time causal probing against the bare forward passes with the model's loss that it must run."""

    model: list[str] = arg(["bert-small", "gpt2-small-base"], "checkpoint names from checkpoints.yaml")
    n_sentences: int = arg(400, "sentences sampled from the default corpus", min=10)
    seeds: int = arg(1, "the analysis's --seeds (every seed repeats the protocol, both sides)", min=1)
    task: list[str] = arg(["position", "token_identity", "sent_len"], "the analysis's tasks")
    random_draws: int = arg(2, "the analysis's --random-draws", min=1)
    n_boot: int = arg(1000, "the analysis's --n-boot", min=1)
    rounds: int = arg(1, "timed rounds of each contender (median reported)", min=1)
    out: str = arg("out", "output root whose cache/ holds (or receives) the activations")


class _Recording(Objective):
    """The objective, recording every scoring it is asked for: (texts, mask_prob, seed, batch_size)."""

    calls: list[tuple[tuple[str, ...], float, int, int]]

    def score(self, texts, interventions=(), mask_prob: float = 0.15, seed: int = 0, batch_size: int = 32):
        self.calls.append((tuple(texts), mask_prob, seed, batch_size))
        return super().score(texts, interventions, mask_prob, seed, batch_size)


class _Before(Objective):
    """The objective as it was: the head's logits at every position, the cross-entropy over all of them with the
    class dimension strided, then the scored positions kept."""

    @torch.inference_mode()
    def score(self, texts, interventions=(), mask_prob: float = 0.15, seed: int = 0, batch_size: int = 32):
        from probes.intervention import active, as_interventions, hooked
        from probes.models.hf import eval_mode

        toks = self.tokenizer.tokenize(list(texts))
        sums, counts = np.zeros(len(toks)), np.zeros(len(toks), np.int64)
        with hooked(self.model, active() + as_interventions(interventions)), eval_mode(self.model):
            for b in self._scored_batches(toks, mask_prob, seed, batch_size):
                logits = self._logits(b.inputs, b.real)  # (B, n, V)
                if self.kind == MASKED:
                    target, keep = b.inputs.clone(), b.at
                    target[b.at] = b.target
                else:
                    logits, target, keep = logits[:, :-1], b.inputs[:, 1:], b.at[:, :-1]
                nll = torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), target, reduction="none")
                sums[b.idx] = torch.where(keep, nll, 0.0).sum(1).double().cpu().numpy()
                counts[b.idx] = keep.sum(1).cpu().numpy()
        return sums, counts


def _as(cls: type[ObjectiveT], objective: Objective) -> ObjectiveT:
    """``objective`` as a ``cls`` (the same model, tokenizer and settings)."""
    return cls(**{f.name: getattr(objective, f.name) for f in dataclasses.fields(objective) if f.init})


def floor_batches(objective: Objective, calls) -> list[list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]]:
    """Per recorded scoring: its padded batches as (input ids, attention mask, labels) for the model's own loss."""
    built: dict[tuple, list] = {}
    out = []
    for key in calls:
        if key not in built:
            texts, mask_prob, seed, batch_size = key
            toks = objective.tokenizer.tokenize(list(texts))
            batches = []
            for b in objective._scored_batches(toks, mask_prob, seed, batch_size):
                if objective.kind == MASKED:
                    labels = torch.full_like(b.inputs, -100)
                    labels[b.at] = b.target
                else:
                    labels = b.inputs.masked_fill(~b.real, -100)  # transformers shifts them itself
                batches.append((b.inputs, b.real.long(), labels))
            built[key] = batches
        out.append(built[key])
    return out


def one_model(name: str, cfg: Settings) -> list[Row]:
    import probes
    from analyses import causal_probing
    from probes.corpus import load_corpus, sample_sentences

    texts = sample_sentences(load_corpus(), cfg.n_sentences, seed=0, min_words=5, max_words=60)
    acts = probes.extract(name, texts, cache_dir=f"{cfg.out}/cache", progress=False)
    options: dict[str, Any] = {"task": cfg.task, "random_draws": cfg.random_draws, "n_boot": cfg.n_boot}
    if "seeds" in causal_probing.Config.__dataclass_fields__:  # the protocol over several seeds
        options["seeds"] = cfg.seeds
    ccfg = causal_probing.Config(**options)
    objective = load_objective(name)
    rec, before = _as(_Recording, objective), _as(_Before, objective)
    rec.calls = []

    def analysis(obj):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return causal_probing.compute(ccfg, acts=acts, objective=obj)

    analysis(rec)  # untimed: which scorings the analysis makes
    batches = floor_batches(objective, rec.calls)
    model = objective.model

    @torch.inference_mode()
    def floor() -> float:
        total = 0.0
        for call in batches:
            for ids, mask, labels in call:
                total += float(model(input_ids=ids, attention_mask=mask, labels=labels).loss)
        return total

    key = rec.calls[0]
    rows_loss, _ = objective.score(list(key[0]), (), *key[1:])
    full_loss, _ = before.score(list(key[0]), (), *key[1:])
    agree = float(np.max(np.abs(rows_loss - full_loss) / np.abs(full_loss)))
    cpu: dict[str, list[float]] = {}
    interleave({"floor": floor, "rows": lambda: analysis(objective), "before": lambda: analysis(before)},
               cfg.rounds, warmup=0, cpu=cpu)
    f, r, b = median(cpu["floor"]), median(cpu["rows"]), median(cpu["before"])
    n_tok = sum(int(m.sum()) for call in batches for _, m, _ in call)
    print(f"causal probing {name}: {r / f:.2f} x the forward passes it must run (before: {b / f:.2f} x; CPU "
          f"{r:.1f} s, before {b:.1f} s, floor {f:.1f} s; goal <= {GOAL}); {len(batches)} scorings, {n_tok} tokens "
          f"through the model; the loss in rows vs every position: max relative difference {agree:.1e}", flush=True)
    return [Row("causal", f"{name}: forward passes with the model's loss (floor)", cpu_s=f),
            Row("causal", f"{name}: causal probing, objective before (every position, strided)", cpu_s=b,
                ratio=f"{b / f:.2f} x floor (CPU)", goal=goal_text(b / f, GOAL)),
            Row("causal", f"{name}: causal probing, objective in rows", cpu_s=r, ratio=f"{r / f:.2f} x floor (CPU)",
                goal=goal_text(r / f, GOAL), note=f"loss rows vs before: max rel diff {agree:.1e}")]


def run(cfg: Settings) -> list[Row]:
    return [row for name in cfg.model for row in one_model(name, cfg)]


def main(argv: list[str] | None = None) -> None:
    torch.set_num_threads(1)  # one thread, as python -m benchmarks runs every benchmark
    run_alone(Settings, run, __doc__, argv)


if __name__ == "__main__":
    run_main(main)
