"""Planted result documents for the claims tests: what the analyses write (identity block, numbers and
bootstrap blocks), with differences and noise chosen by the test."""

from __future__ import annotations

import json

import numpy as np

from analyses import records, stats

ENCODER = {"num_layers": 4, "hidden_size": 256, "kind": "encoder"}
CORPUS = {"name": "default", "sha256": "d3544bab" * 8, "unit": "sentence", "n_sampled": 100,
          "sample_sha256": "1bb3c1a0" * 8}
SETTINGS = {"model": ["x"], "corpus": "default", "seed": 0, "n_sentences": 100, "n_tokens": 300, "layer": -1,
            "keep_special": False, "batch_size": 32, "dtype": "float32", "cache_dtype": "float16"}


def identity(name: str, family: str, corpus: dict | None = None, settings: dict | None = None,
             model: dict | None = None) -> dict:
    return {"model_name": name, "config": {**SETTINGS, **(settings or {})}, "corpus": {**CORPUS, **(corpus or {})},
            "model": {"name": name, "family": family, **ENCODER, **(model or {})}}


def write(out, analysis: str, docs: list[dict]) -> None:
    folder = out / "results" / analysis
    folder.mkdir(parents=True, exist_ok=True)
    for d in docs:
        (folder / f"{d['model_name']}.json").write_text(json.dumps({"analysis": analysis, **d}))


def per_unit(mean: float, seed: int, n: int = 100, sd: float = 3.0, base: np.ndarray | None = None) -> np.ndarray:
    """n per-unit values around ``mean`` (plus what each unit does to every model: ``base``)."""
    noise = np.random.default_rng(seed).normal(0, sd, n)
    return mean + noise + (0 if base is None else base)


def redundancy(name: str, family: str, k, units="same", **ident) -> dict:
    """A redundancy result at n = 100 with per-window k (thresholds 0.9 and 0.98: k and k + 20)."""
    k = np.asarray(k, dtype=float)
    ks = np.stack([k, k + 20], 1)
    block = records.to_json(stats.bootstrap_block("window", len(k), units_id=stats.units_id([units, len(k)])))
    summary = [{"threshold": p, "mean": float(c.mean()), "std": float(c.std()), "median": float(np.median(c)),
                "min": int(c.min()), "max": int(c.max()), "count": len(c)} for p, c in zip((0.9, 0.98), ks.T)]
    return {**identity(name, family, **ident), "layer": -1, "thresholds": [0.9, 0.98], "definitions": {},
            "windows": [{"window": 100, "n_windows": len(k), "hidden_size": 256, "max_components": 99,
                         "thresholds": summary, "mean_cumulative_variance": np.linspace(0.1, 1, 99).tolist(),
                         "k": ks.tolist(), "bootstrap": block}]}


def cosines(mean: float, n: int = 100) -> dict:
    """A cosine summary (analyses.cosines.CosineSummary as saved) of n vectors whose pairs average ``mean``."""
    pairs = n * (n - 1) // 2
    return {"n_vectors": n, "n_zero_vectors": 0, "n_pairs": pairs, "mean": mean, "std": 0.1, "frac_negative": 0.0,
            "quantiles": {"0.5": mean}, "quantile_method": "exact", "counts": [pairs]}


def anisotropy_row(layer: int, token: float, sentence: float) -> dict:
    """One layer row of an anisotropy result (analyses.anisotropy.LayerRow as saved)."""
    return {"layer": layer, "token": cosines(token), "sentence": cosines(sentence), "baseline_cosine": token,
            "intra_sentence_similarity": token, "intra_sentence_adjusted": 0.0}


def anisotropy(name: str, family: str, token: float, sentence: float, n_units: int = 100, spread: float = 0.01,
               seed: int = 0, **ident) -> dict:
    """An anisotropy result whose last layer's mean cosines have bootstrap replicates around the given values."""
    rng = np.random.default_rng(seed)
    block = records.to_json(stats.bootstrap_block("sentence", n_units, units_id=stats.units_id(range(n_units))))
    reps = {"layer": 1, "token_mean": (token + rng.normal(0, spread, 1000)).tolist(),
            "sentence_mean": (sentence + rng.normal(0, spread, 1000)).tolist()}
    ident.setdefault("corpus", {"n_sampled": n_units})
    return {**identity(name, family, **ident), "headline_layer": 1, "definitions": {},
            "layers": [anisotropy_row(0, 0.5, 0.5), anisotropy_row(1, token, sentence)],
            "bootstrap": {**block, "replicates": reps}}


def cloud(isoscore: float, n: int = 300) -> dict:
    """One level's IsoScore at one layer (analyses.isoscore.Cloud as saved)."""
    return {"isoscore": isoscore, "isoscore_ci": [isoscore - 0.01, isoscore + 0.01], "isoscore_plugin": None,
            "n_points": n, "n_sentences": 100, "dimension": 256, "total_variance": 1.0}


def isoscore(name: str, family: str, token: float, sentence: float, n_units: int = 100, spread: float = 0.005,
             seed: int = 0, **ident) -> dict:
    """An isoscore result whose last layer's IsoScores have bootstrap replicates around the given values."""
    rng = np.random.default_rng(seed)
    block = records.to_json(stats.bootstrap_block("sentence", n_units, units_id=stats.units_id(range(n_units))))
    reps = {"layer": 1, "token": (token + rng.normal(0, spread, 1000)).tolist(),
            "sentence": (sentence + rng.normal(0, spread, 1000)).tolist()}
    ident.setdefault("corpus", {"n_sampled": n_units})
    return {**identity(name, family, **ident), "definitions": {},
            "layers": [{"layer": 0, "token": cloud(0.5), "sentence": cloud(0.5)},
                       {"layer": 1, "token": cloud(token), "sentence": cloud(sentence)}],
            "bootstrap": {**block, "replicates": reps}}


def perplexity(name: str, recurrent: bool, nll_per_token: dict, tokens: np.ndarray, window: int = 128,
               blocks: bool = True) -> dict:
    """A perplexity result: rows per (T, o) and the per-block NLL sums the bootstrap resamples (``blocks``
    False: per-document sums, as results written before blocks existed keep them)."""
    unit = "block" if blocks else "document"
    block = records.to_json(stats.bootstrap_block(unit, len(tokens), units_id=stats.units_id(range(len(tokens)))))
    rows, documents = [], {}
    for o, per_doc in nll_per_token.items():
        nll = per_doc * tokens
        rows.append({"model": name, "recurrent": recurrent, "window": window, "overlap": o,
                     "token_perplexity": float(np.exp(nll.sum() / tokens.sum())),
                     "word_perplexity": float(np.exp(1.3 * nll.sum() / tokens.sum())),
                     "nll_per_token": float(nll.sum() / tokens.sum()), "scored_tokens": int(tokens.sum()),
                     "words": int(1.3 * tokens.sum()), "windows": len(tokens), "tokens_processed": int(tokens.sum()),
                     "flops_per_token": 3e8 + o})
        documents[str(o)] = {"nll": nll.tolist(), "tokens": tokens.tolist()}
    corpus = {"name": "default", "sha256": "aa" * 32, "split": "heldout", "documents": [f"d{i}" for i in
                                                                                       range(len(tokens))]}
    model = {"name": name, "family": "recurrent" if recurrent else "hf", "kind": "causal"}
    if recurrent:
        model["recurrence"] = {"overlap": 0}
    return {"model_name": name, "config": {"model": [name], "corpus": "default", "seed": 0, "window": window},
            "corpus": corpus, "model": model, "non_embedding_parameters": 1, "overlap_matches_training": None,
            "definitions": {}, "rows": rows,
            "bootstrap": {**block, "blocks": {"document": ["d0"] * len(tokens), "tokens": tokens.tolist()},
                          "nll": {o: d["nll"] for o, d in documents.items()}} if blocks else
            {**block, "documents": documents}}


def topics(a: str, b: str, jsd_a, jsd_b, rec_is_a: bool = True) -> dict:
    jsd_a, jsd_b = np.asarray(jsd_a, float), np.asarray(jsd_b, float)
    less = int((jsd_a < jsd_b).sum())
    statistics = {"n_contexts": len(jsd_a), "mean_jsd_a": float(jsd_a.mean()), "mean_jsd_b": float(jsd_b.mean()),
                  "median_difference": float(np.median(jsd_a - jsd_b)), "n_a_less": less,
                  "n_a_greater": int((jsd_a > jsd_b).sum()), "mean_jsd_reference": 0.3,
                  "share_a_less": less / len(jsd_a), "n_ties": 0, "sign_test_p": 0.5,
                  "sign_test_p_a_less": 0.25, "wilcoxon_p": 0.4, "wilcoxon_p_a_less": 0.2,
                  "bootstrap": records.to_json(stats.bootstrap_block("context", len(jsd_a)))}
    fam = ("recurrent", "hf") if rec_is_a else ("hf", "recurrent")
    return {"model_name": f"{a}-vs-{b}", "config": {"corpus": "default", "seed": 0},
            "corpus": {"sha256": "bb" * 32}, "model_a": {"name": a, "family": fam[0], "window": 128},
            "model_b": {"name": b, "family": fam[1], "window": 128}, "definitions": {}, "statistics": statistics,
            "topics_top_words": [], "jsd_a": jsd_a.tolist(), "jsd_b": jsd_b.tolist(), "jsd_reference": []}


def mlm_loss(name: str, fusion: str, loss_per_token: np.ndarray, seed: int = 0, steps: int = 300,
             half_dim: bool = False, blocks: bool = True) -> dict:
    """An mlm_loss result: per-block loss sums and masked tokens (same blocks and masking per seed)."""
    counts = np.random.default_rng(100 + seed).integers(30, 50, len(loss_per_token))
    sums = counts * loss_per_token
    recipe = {"arch": "mog", "width": 256, "layers": 4, "heads": 4, "intermediate": 1024, "vocab_size": 4096,
              "max_positions": 512, "half_dim": half_dim, "shared_qkv": False, "fusion": fusion,
              "corpus": "data/train-corpus", "split": "train", "tokenizer": "t", "seq_len": 320, "steps": steps,
              "batch_size": 32, "lr": 0.001, "warmup": 30, "weight_decay": 0.01, "mask_prob": 0.15, "dropout": 0.0,
              "eval_blocks": len(counts), "seed": seed}
    boot = records.to_json(stats.bootstrap_block("block", len(counts), units_id=stats.units_id(counts.tolist())))
    loss = float(sums.sum() / counts.sum())
    per_block = {"loss_sum": sums.tolist(), "masked_tokens": counts.tolist()}
    return {"model_name": name, "config": {"model": [name], "seed": 0},
            "corpus": {"corpus": "data/train-corpus", "split": "heldout", "seq_len": 320},
            "model": {"name": name, "family": "mog", "kind": "encoder"}, "recipe": recipe, "loss": loss,
            "loss_source": "held-out blocks" if blocks else "held-out, recorded", "recorded_heldout_loss": loss,
            "loss_ci": None, "blocks": per_block if blocks else None,
            "bootstrap": boot if blocks else None}
