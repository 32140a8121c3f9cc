"""Corpus -> texts -> cached Activations (the sentence analyses' inputs), and the one CLI body of every analysis.

* :func:`sentence_activations`: the seeded sentence sample of a corpus, through the activation cache;
  :func:`text_activations`: texts the caller gives, through the same cache.
* :func:`run_analysis`: parse the analysis's Config, resolve each model once, ``load_inputs`` ->
  ``compute`` -> result files -> figures (see analyses/__init__.py for the contract).

    $ python -c "from analyses.data import sentence_activations as s; print(s('minilm-l6', 'default', 100, 0))"
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from analyses.common import (
    check_device,
    check_reached,
    check_writable,
    parse_config,
    read_results,
    unique,
    write_result,
)
from probes.capture.activations import Activations
from probes.capture.distributed import is_main
from probes.capture.extract import extract
from probes.checkpoints.names import get_spec
from probes.checkpoints.registry import CheckpointSpec
from probes.corpus import load_corpus, sample_sentences


def sentence_activations(model: str | CheckpointSpec, corpus: str, n_sentences: int, seed: int, out: str = "out",
                         batch_size: int = 32, device: str = "cpu", maps: bool = False,
                         min_words: int = 5, max_words: int = 60, dtype: str = "float32",
                         cache_dtype: str = "float16", device_map: str | None = None,
                         layers: tuple[int, ...] | None = None) -> Activations:
    """Activations of ``n_sentences`` seeded random sentences of ``corpus`` (cached under out/cache);
    ``meta["corpus"]`` records the corpus identity and the sampling (with the corpus and size asked
    for). ``model``: a name or a resolved CheckpointSpec; ``dtype``: the forward pass's;
    ``cache_dtype``: the cache's storage (see probes.precision); ``device_map``: see probes.load;
    ``layers``: the layers whose token states are cached (None: all; ``()``: none, see probes.extract).

    The model name is checked before the corpus is read, so a typo fails at once."""
    spec = get_spec(model)
    corp = load_corpus(corpus)
    texts = sample_sentences(corp, n_sentences, seed=seed, min_words=min_words, max_words=max_words)
    ident = {**corp.identity(), "unit": "sentence", "n_sampled": len(texts), "seed": seed,
             "min_words": min_words, "max_words": max_words, "requested": corpus, "n_requested": n_sentences,
             # which sentences were drawn: sha256 of the sample, one sentence per line, in order
             "sample_sha256": hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()}
    acts = extract(spec, texts, maps=maps, batch_size=batch_size, cache_dir=Path(out) / "cache", device=device,
                   corpus=ident, dtype=dtype, cache_dtype=cache_dtype, device_map=device_map, layers=layers)
    return _requested(acts, model)


def _requested(acts: Activations, model) -> Activations:
    """Record the model as the caller named it (an ``hf:`` id, a folder) beside the resolved spec."""
    if isinstance(model, str):
        acts.meta["model_requested"] = model
    return acts


def text_activations(model: str | CheckpointSpec, texts: list[str], out: str = "out", batch_size: int = 32,
                     device: str = "cpu", dtype: str = "float32", cache_dtype: str = "float16",
                     device_map: str | None = None, layers: tuple[int, ...] | None = None) -> Activations:
    """Activations of given texts (e.g. perturbed copies of a sentence sample) through the same
    extraction cache as :func:`sentence_activations`; the analysis itself never runs the model."""
    acts = extract(get_spec(model), texts, batch_size=batch_size, cache_dir=Path(out) / "cache", device=device,
                   dtype=dtype, cache_dtype=cache_dtype, device_map=device_map, layers=layers)
    return _requested(acts, model)


def config_sample(cfg) -> dict:
    """The sentence-sample keywords of a SentenceConfig, for ``sentence_activations(model, **...)``."""
    return {"corpus": cfg.corpus, "n_sentences": cfg.n_sentences, "seed": cfg.seed, "out": cfg.out,
            "min_words": cfg.min_words, "max_words": cfg.max_words}


def load_sentence_inputs(model: str | CheckpointSpec, cfg, maps: bool = False,
                         layers: tuple[int, ...] | None = None) -> dict:
    """``{"acts": ...}``: the cached activations of the config's seeded sentence sample, the inputs of the
    sentence analyses' ``compute(cfg, acts)`` (their ``load_inputs``)."""
    return {"acts": sentence_activations(model, **config_sample(cfg), maps=maps, layers=layers,
                                         **cfg.extract_kwargs())}


# ----------------------------------------------------------------------------- the CLI


def run_analysis(analysis: str, module, argv: list[str] | None = None) -> None:
    """The one CLI body of every analysis module (``main(argv) = run_analysis(name, module, argv)``):

    1. parse ``module.Config`` (validated), refuse a shared option the analysis cannot apply, and run
       ``module.check_config(cfg)`` if the module has one (settings ``arg`` cannot check);
    2. resolve every model name once (unknown names fail before any work), run
       ``module.check_model(spec, cfg)`` on each if the module has one (e.g. "a causal LM"), check the
       device, the device map and ``--out``;
    3. for each unit (a model; the pairs ``module.pairs(cfg)`` names for a pairwise analysis, each a
       tuple of names): ``inputs = module.load_inputs(spec(s), cfg)``, ``result = module.compute(cfg,
       **inputs)``, written to ``<out>/results/<analysis>/<result.model_name>.json`` (+ .csv);
    4. ``module.figures`` of every result written, unless ``--no-figures`` (and ``module.summarise(results)``'s
       text, if any).

    Under torchrun every process loads its share of the inputs (probes.capture.distributed) and only
    rank 0 computes and writes."""
    from probes.checkpoints.loaders import check_device_map

    cfg = parse_config(module.Config, argv, module.__doc__.split("\n\n")[0])
    cfg.check_applicable(analysis)
    if hasattr(module, "check_config"):
        module.check_config(cfg)
    units = module.pairs(cfg) if hasattr(module, "pairs") else [(name,) for name in unique(cfg.model)]
    resolve = getattr(module, "resolve_model", get_spec)  # speed: its random-init architectures stay names
    specs = {name: resolve(name) for unit in units for name in unit}  # each name resolved once, for the run
    if hasattr(module, "check_model"):
        for spec in specs.values():
            module.check_model(spec, cfg)
    check_device(cfg.device)
    if cfg.device_map != "none":
        for spec in specs.values():
            check_device_map(spec, cfg.device_map)
    check_writable(cfg.out)
    written = []
    for unit in units:
        model = specs[unit[0]] if len(unit) == 1 else tuple(specs[name] for name in unit)
        inputs = module.load_inputs(model, cfg)
        if not is_main():
            continue  # the other ranks of a torchrun only help extract
        for value in inputs.values():
            for acts in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(acts, Activations):
                    check_reached(acts, cfg)
        result = module.compute(cfg, **inputs)
        if len(unit) == 1 and not isinstance(result, dict) and unit[0] != result.identity.model_name:
            result.identity.model_requested = unit[0]  # as named on the command line (an hf: id, a folder)
        # speed times its models together: its compute gives {model: Result}
        for res in result.values() if isinstance(result, dict) else [result]:
            json_path, _ = write_result(cfg.out, analysis, res.model_name, res, module.table_rows(res))
            written.append(res.model_name)
            print(f"{res.model_name}: wrote {json_path}")
    if not is_main():
        return
    results = read_results(cfg.out, analysis, written)
    if hasattr(module, "summarise"):
        print(module.summarise(results), end="")
    if cfg.figures:
        paths = module.figures(results, cfg.out)
        print("figures: " + ", ".join(str(p) for p in paths))
