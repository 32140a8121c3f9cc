"""What probing reads: the sentence sample's activations and what its tasks need beyond them.

* ``bigram_shift``: the activations of the perturbed copies of the sampled sentences
  (:func:`analyses.probing.tasks.bigram_shift_plan` with the same seed), sentence vectors only;
* ``source``: each sampled sentence's document in its corpus (a list of texts given from Python has none:
  the task is then skipped, and the result says why).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from analyses.inputs import Sentences, cli_cache, corpus_of, object_options, python_cache, record_model_requested
from analyses.probing import tasks as pt
from probes.capture.store import USER_CACHE
from probes.errors import ProbeError


def check_tasks(tasks: list[str]) -> list[str]:
    """The tasks, each once, in order; one error line for an unknown task or none."""
    bad = [t for t in tasks if t not in pt.TASKS]
    if bad:
        raise ProbeError(f"unknown task {bad[0]!r}; tasks: {', '.join(pt.TASKS)}")
    if not tasks:
        raise ProbeError(f"no task given; tasks: {', '.join(pt.TASKS)}")
    return list(dict.fromkeys(tasks))


def documents_of(corpus: str, texts: list[str]) -> tuple[np.ndarray, list[str]]:
    """(T,) document index of each sampled text (its first occurrence, as the sampler keeps) and the
    corpus's document names."""
    from probes.corpus import load_corpus, sentences

    corp = load_corpus(corpus)
    first: dict[str, int] = {}
    for doc, s in sentences(corp):
        first.setdefault(s, doc)
    return np.array([first[t] for t in texts], np.int64), [d.name for d in corp.documents]


@dataclasses.dataclass(frozen=True)
class ProbingInputs(Sentences):
    """Sentences, plus the perturbed sentences' activations and the sentences' documents the tasks of the
    Config need: ``{"acts", "shifted", "doc_of", "doc_names"}``."""

    def load(self, unit: tuple, cfg) -> dict:
        check_tasks(cfg.task)
        acts = self.activations(unit[0], cfg, **cli_cache(cfg))
        return {"acts": acts, **self.task_inputs(unit[0], acts, cfg, cfg.corpus, **cli_cache(cfg))}

    def from_python(self, model, texts, cfg, *, tokenizer=None, name=None, cache_dir=USER_CACHE) -> dict:
        check_tasks(cfg.task)
        inputs = super().from_python(model, texts, cfg, tokenizer=tokenizer, name=name, cache_dir=cache_dir)
        corpus = cfg.corpus if texts is None or corpus_of(texts) is not None else None
        options = {**python_cache(cache_dir), **object_options(model, tokenizer, name)}
        return {**inputs, **self.task_inputs(model, inputs["acts"], cfg, corpus, **options)}

    def task_inputs(self, model, acts, cfg, corpus: str | None, **options) -> dict:
        """``shifted`` (bigram_shift) and ``doc_of``, ``doc_names`` (source; None without a ``corpus``)."""
        from probes.capture.extract import extract

        shifted = None
        if "bigram_shift" in cfg.task:
            perturbed = pt.bigram_shift_plan(acts.texts, cfg.seed)[2]
            if perturbed:  # BigramShift reads the perturbed texts' sentence vectors only: no token states cached
                shifted = record_model_requested(extract(model, perturbed, layers=(), **options,
                                                         **cfg.extract_kwargs()), model)
        doc_of, doc_names = None, None
        if "source" in cfg.task and corpus is not None:
            doc_of, doc_names = documents_of(corpus, acts.texts)
        return {"shifted": shifted, "doc_of": doc_of, "doc_names": doc_names}
