"""The one command-line body of every analysis, and a corpus's sentence sample through the activation cache.

* :func:`run_analysis`: parse the analysis's Config, resolve each model once, load each unit's inputs through
  its kind of input (:mod:`analyses.inputs`), ``compute``, write the result files, draw the figures;
  :func:`run_config` is the same for a typed Config made in Python (:mod:`analyses.series`).
* :func:`sentence_activations`: the seeded sentence sample of a corpus, through the activation cache (for
  notebooks and scripts; an analysis gets it from its :class:`analyses.inputs.Sentences` kind).

    $ python -c "from analyses.data import sentence_activations as s; print(s('minilm-l6', 'default', 100, 0))"
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analyses.common import check_device, check_reached, check_writable, parse_config, read_results, write_result
from analyses.inputs import SentenceConfig, Sentences, cli_cache
from probes.capture.activations import Activations
from probes.capture.distributed import is_main


def sentence_activations(model, corpus: str = "default", n_sentences: int = 5000, seed: int = 0, out: str = "out",
                         *, maps: bool = False, token_states: bool = True, **settings) -> Activations:
    """Activations of ``n_sentences`` seeded random sentences of ``corpus`` (cached under ``<out>/cache``), as
    every sentence analysis draws them; ``meta["corpus"]`` records the corpus identity and the sampling.
    ``model``: a name or a resolved CheckpointSpec; ``settings``: any other :class:`SentenceConfig` field
    (``batch_size``, ``device``, ``dtype``, ``cache_dtype``, ``device_map``, ``min_words``, ``max_words``)."""
    cfg = SentenceConfig(corpus=corpus, n_sentences=n_sentences, seed=seed, out=str(out), **settings)
    return Sentences(maps=maps, token_states=token_states).activations(model, cfg, **cli_cache(cfg))


def run_analysis(analysis, argv: list[str] | None = None) -> None:
    """The command line of every analysis (``analysis``: its :class:`analyses.analysis.Analysis`):

    1. parse ``analysis.Config`` (validated) and run ``analysis.check(cfg)`` (what ``arg`` cannot check);
    2. resolve every model of the run once (unknown names fail before any work) and check each with the
       kind of input (e.g. "a causal LM"); check the device, the device map and ``--out``;
    3. for each unit of the run (a model, or a pair; :meth:`analyses.inputs.Inputs.units`): load its inputs
       (:meth:`~analyses.inputs.Inputs.load`), ``compute(cfg, **inputs)``, and write each Result to
       ``<out>/results/<name>/<result.model_name>.json`` (+ .csv);
    4. print ``analysis.summary`` of the results written, and draw their figures unless ``--no-figures``.

    Under torchrun every process loads its share of the inputs (probes.capture.distributed) and only
    rank 0 computes and writes."""
    run_config(analysis, parse_config(analysis.Config, argv, analysis.doc.split("\n\n")[0]))


def run_config(analysis, cfg, specs: Mapping[str, Any] | None = None) -> list[str]:
    """Steps 1-4 of :func:`run_analysis` for a Config already made (the command line's, or a caller's typed one:
    :mod:`analyses.series`); ``specs``: models already resolved, by the name ``cfg`` gives them (a series' points,
    which no registry file on the search path names), the others resolved here. Returns the names of the results
    written."""
    from probes.checkpoints.loaders import check_device_map

    if analysis.check is not None:
        analysis.check(cfg)
    kind = analysis.inputs
    units = kind.units(cfg)
    given = dict(specs or {})
    # each name resolved once, for the run
    specs = {name: given[name] if name in given else kind.resolve(name) for unit in units for name in unit}
    for spec in specs.values():
        kind.check_model(spec, cfg)
    check_device(cfg.device)
    if getattr(cfg, "device_map", "none") != "none":
        for spec in specs.values():
            check_device_map(spec, cfg.device_map)
    check_writable(cfg.out)
    written = []
    for unit in units:
        inputs = kind.load(tuple(specs[name] for name in unit), cfg)
        if not is_main():
            continue  # the other ranks of a torchrun only help extract
        for value in inputs.values():
            for acts in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(acts, Activations):
                    check_reached(acts, cfg)
        for res in kind.results(analysis.compute(cfg, **inputs)):
            record_requested(res, unit)
            json_path, _ = write_result(cfg.out, analysis.name, res.model_name, res, analysis.table_rows(res))
            written.append(res.model_name)
            print(f"{res.model_name}: wrote {json_path}")
    if not is_main():
        return written
    results = read_results(cfg.out, analysis, written)
    if analysis.summary is not None:
        print(analysis.summary(results), end="")
    if cfg.figures:
        paths = analysis.save_figures(results, cfg.out)
        print("figures: " + ", ".join(str(p) for p in paths))
    return written


def record_requested(result, unit: tuple) -> None:
    """Record the model as the caller named it (an ``hf:`` id, a folder) in a one-model result whose resolved
    name differs."""
    if len(unit) == 1 and isinstance(unit[0], str) and unit[0] != result.identity.model_name:
        result.identity.model_requested = unit[0]
