"""Corpus -> texts -> cached Activations: the one data path the sentence-level analysis CLIs share.

    $ python -c "from analyses.data import sentence_activations as s; print(s('minilm-l6', 'default', 100, 0))"
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from analyses.common import check_device, check_writable, read_results, unique, write_result
from probes.capture.activations import Activations
from probes.capture.distributed import is_main
from probes.capture.extract import extract
from probes.checkpoints.names import get_spec
from probes.corpus import load_corpus, sample_sentences


def sentence_activations(model: str, corpus: str, n_sentences: int, seed: int, out: str = "out",
                         batch_size: int = 32, device: str = "cpu", maps: bool = False,
                         min_words: int = 5, max_words: int = 60, dtype: str = "float32",
                         cache_dtype: str = "float16", device_map: str | None = None,
                         layers: tuple[int, ...] | None = None) -> Activations:
    """Activations of ``n_sentences`` seeded random sentences of ``corpus`` (cached under out/cache);
    ``meta["corpus"]`` records the corpus identity and the sampling. ``dtype``: the forward pass's;
    ``cache_dtype``: the cache's storage (see probes.precision); ``device_map``: see probes.load;
    ``layers``: the layers whose token states are cached (None: all; ``()``: none, see probes.extract).

    The model name is checked before the corpus is read, so a typo fails at once."""
    get_spec(model)
    corp = load_corpus(None if corpus == "default" else corpus)
    texts = sample_sentences(corp, n_sentences, seed=seed, min_words=min_words, max_words=max_words)
    ident = {**corp.identity(), "unit": "sentence", "n_sampled": len(texts), "seed": seed,
             "min_words": min_words, "max_words": max_words,
             # which sentences were drawn: sha256 of the sample, one sentence per line, in order
             "sample_sha256": hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()}
    return extract(model, texts, maps=maps, batch_size=batch_size, cache_dir=Path(out) / "cache", device=device,
                   corpus=ident, dtype=dtype, cache_dtype=cache_dtype, device_map=device_map, layers=layers)


def extract_options(cfg) -> dict:
    """The extraction keywords a config carries (batch_size, device, dtype, cache_dtype, device_map:
    the RunConfig fields), for ``sentence_activations(..., **extract_options(cfg))``."""
    opts = {k: getattr(cfg, k) for k in ("batch_size", "device", "dtype", "cache_dtype") if hasattr(cfg, k)}
    if getattr(cfg, "device_map", "none") != "none":
        opts["device_map"] = cfg.device_map
    return opts


def run_sentence_analysis(analysis: str, cfg, compute, table_rows, figures, maps: bool = False,
                          layers: tuple[int, ...] | None = None) -> None:
    """The CLI body of the sentence-level analyses: for each ``cfg.model`` (repeats once), the cached
    activations of the seeded sentence sample -> ``compute`` -> result files; then ``figures`` for
    all the models. Names, device and ``--out`` are checked before any model runs. Under torchrun every
    process extracts its share (probes.capture.distributed) and only rank 0 computes and writes. ``layers=()``:
    an analysis of maps or sentence vectors only, whose cache entry keeps no token states."""
    models = unique(cfg.model)
    for name in models:
        get_spec(name)
    check_device(cfg.device)
    if getattr(cfg, "device_map", "none") != "none":
        from probes.checkpoints.loaders import check_device_map

        for name in models:
            check_device_map(get_spec(name), cfg.device_map)
    check_writable(cfg.out)
    for name in models:
        acts = sentence_activations(name, cfg.corpus, cfg.n_sentences, cfg.seed, out=cfg.out, maps=maps,
                                    min_words=cfg.min_words, max_words=cfg.max_words, layers=layers,
                                    **extract_options(cfg))
        if not is_main():
            continue  # the other ranks of a torchrun only help extract
        result = compute(acts, cfg)
        json_path, _ = write_result(cfg.out, analysis, name, result, table_rows(result))
        print(f"{name}: wrote {json_path}")
    if not is_main():
        return
    paths = figures(read_results(cfg.out, analysis, models), cfg.out)
    print("figures: " + ", ".join(str(p) for p in paths))


def text_activations(model: str, texts: list[str], out: str = "out", batch_size: int = 32,
                     device: str = "cpu", dtype: str = "float32", cache_dtype: str = "float16",
                     device_map: str | None = None, layers: tuple[int, ...] | None = None) -> Activations:
    """Activations of given texts (e.g. perturbed copies of a sentence sample) through the same
    extraction cache as :func:`sentence_activations`; the analysis itself never runs the model."""
    return extract(model, texts, batch_size=batch_size, cache_dir=Path(out) / "cache", device=device,
                   dtype=dtype, cache_dtype=cache_dtype, device_map=device_map, layers=layers)
