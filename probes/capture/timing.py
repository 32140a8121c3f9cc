"""Timing forward passes: the models the speed analysis compares, and the interleaved timing loop.

Models run only in ``probes/``: ``analyses.speed`` names models and lengths and gets timings back.
:func:`build_runner` gives a :class:`Runner` (a forward function and its length limit) for a
random-init ``slstm`` / ``bert`` / ``albert`` of a given size or a checkpoints.yaml entry;
:func:`time_models` times every runner at every length, interleaved (see ``analyses.speed`` for
the protocol: warm-up, samples of at least ``min_time`` seconds, rotating start order, garbage
collector off while timing). ``cfg`` is a :class:`TimingConfig` (``analyses.speed.Config.timing()``).

    >>> cfg = TimingConfig(lengths=[8, 16], width=32, intermediate=64, repeats=2, min_time=0.01)  # tiny and quick
    >>> runners = [build_runner(n, cfg) for n in ("slstm", "bert")]
    >>> raw = time_models(runners, cfg)       # {model: {length: {"samples": [...], "loops": k}}}
    >>> sorted(raw), sorted(raw["bert"])
    (['bert', 'slstm'], [8, 16])
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import platform
import time
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class TimingConfig:
    """What building and timing the models reads: sizes of the random-init models, the lengths and the
    timing protocol (see analyses.speed for each field's meaning)."""

    lengths: list[int]  # sequence lengths in tokens
    batch: int = 1  # sequences per forward pass
    width: int = 256
    layers: int = 4
    heads: int = 4
    intermediate: int = 1024
    vocab_size: int = 4096
    repeats: int = 5
    warmup: int = 1
    min_time: float = 0.2
    seed: int = 0
    device: str = "cpu"


@dataclass
class Runner:
    """One model ready to time: fn(ids, mask) runs a forward; max_length limits the lengths."""

    name: str
    fn: object
    max_length: int
    info: dict


def random_slstm(cfg: TimingConfig, max_len: int) -> Runner:
    """A random-init S-LSTM of ``cfg.width`` x ``cfg.layers`` steps; times the final step only."""
    from probes.models.slstm import SLSTM, SLSTMConfig, count_parameters

    scfg = SLSTMConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.width, num_layers=cfg.layers,
                       max_positions=max_len)
    model = SLSTM(scfg).eval().to(cfg.device)
    fn = lambda ids, mask: model(ids, mask, all_steps=False).hidden
    return Runner("slstm", fn, max_len, {"source": "random init", "architecture": "S-LSTM", **scfg.to_dict(),
                                         "parameters": count_parameters(model)})


def random_transformer(cfg: TimingConfig, kind: str, max_len: int) -> Runner:
    """A random-init BERT / ALBERT (PyTorch's scaled-dot-product attention) of the same size."""
    from transformers import AlbertConfig, AlbertModel, BertConfig, BertModel

    common: dict[str, Any] = dict(vocab_size=cfg.vocab_size, hidden_size=cfg.width, num_hidden_layers=cfg.layers,
                                  num_attention_heads=cfg.heads, intermediate_size=cfg.intermediate,
                                  max_position_embeddings=max_len)  # the config fields both families have
    model: BertModel | AlbertModel
    if kind == "bert":
        model = BertModel(BertConfig(**common), add_pooling_layer=False)
    else:
        model = AlbertModel(AlbertConfig(embedding_size=min(128, cfg.width), num_hidden_groups=1, **common),
                            add_pooling_layer=False)
    model = model.eval().to(cfg.device)
    attn = getattr(model.config, "_attn_implementation", None)
    fn = lambda ids, mask: model(input_ids=ids, attention_mask=mask).last_hidden_state
    info = {"source": "random init", "architecture": type(model).__name__, **common, "attention": attn,
            "parameters": sum(p.numel() for p in model.parameters())}
    return Runner(kind, fn, max_len, info)


def registry_runner(name, cfg: TimingConfig) -> Runner:
    """A checkpoints.yaml entry as the suite loads it; times the forward to the final layer."""
    from probes.checkpoints.loaders import load
    from probes.models.slstm_encoder import SLSTMEncoder

    enc = load(name, device=cfg.device)
    if isinstance(enc, SLSTMEncoder):
        fn = lambda ids, mask: enc.model(ids, mask, all_steps=False).hidden
    elif hasattr(enc, "model"):
        fn = lambda ids, mask: enc.model(input_ids=ids, attention_mask=mask).last_hidden_state
    else:
        fn = lambda ids, mask: enc.forward(ids, mask).hidden
    info = {"source": "checkpoints.yaml", **enc.describe()}
    return Runner(getattr(name, "name", name), fn, enc.max_length, info)


def build_runner(name, cfg: TimingConfig) -> Runner:
    """``slstm`` / ``bert`` / ``albert``: random init from ``cfg`` (width, layers, heads,
    intermediate, vocab_size, lengths, device, seed); any other name (or a resolved CheckpointSpec):
    a checkpoints.yaml entry."""
    torch.manual_seed(cfg.seed)
    max_len = max(cfg.lengths)
    if name == "slstm":
        return random_slstm(cfg, max_len)
    if name in ("bert", "albert"):
        return random_transformer(cfg, name, max_len)
    return registry_runner(name, cfg)


# ----------------------------------------------------------------------------- timing


@contextlib.contextmanager
def frozen_heap():
    """Collect garbage once, then freeze what lives (the models, the libraries: nobody's garbage) for the block, so
    that the collections a timing loop runs between its samples walk only what the timed calls made."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _sample(fn, ids, mask, loops: int) -> float:
    t0 = time.perf_counter()
    for _ in range(loops):
        fn(ids, mask)
    return (time.perf_counter() - t0) / loops


def time_models(runners: list[Runner], cfg: TimingConfig, progress: bool = True) -> dict[str, dict[int, dict]]:
    """{model: {length: {"samples": [...], "loops": k}}}; interleaved within each length."""
    from probes.config import progress_bar

    gen = torch.Generator().manual_seed(cfg.seed)
    out: dict[str, dict[int, dict]] = {r.name: {} for r in runners}
    with frozen_heap(), torch.inference_mode(), progress_bar(progress, total=len(cfg.lengths), desc="speed",
                                                             unit="length") as bar:
        for n in cfg.lengths:
            ids = torch.randint(5, cfg.vocab_size, (cfg.batch, n), generator=gen).to(cfg.device)
            mask = torch.ones_like(ids)
            live = [r for r in runners if n <= r.max_length]
            for r in runners:
                if r not in live:
                    out[r.name][n] = {"skipped": f"longer than the model's limit ({r.max_length})"}
            loops = {}
            for r in live:  # warm-up, and how many forwards one sample needs to last min_time
                t = min(_sample(r.fn, ids, mask, 1) for _ in range(max(cfg.warmup, 1)))
                loops[r.name] = max(1, math.ceil(cfg.min_time / max(t, 1e-9)))
                out[r.name][n] = {"samples": [], "loops": loops[r.name]}
            gc.collect()  # once per length; the collector is off while timing (as timeit does)
            gc.disable()
            try:
                for rep in range(cfg.repeats):
                    k = rep % len(live) if live else 0
                    for r in live[k:] + live[:k]:
                        out[r.name][n]["samples"].append(_sample(r.fn, ids, mask, loops[r.name]))
            finally:
                gc.enable()
            bar.update(1)
    return out


def machine() -> dict:
    """The machine and its load: timings mean nothing without them."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    info: dict[str, Any] = {"platform": platform.platform(),
                            "processor": platform.processor() or platform.machine(), "usable_cpus": cpus,
                            "torch": torch.__version__, "torch_threads": torch.get_num_threads()}
    if hasattr(os, "getloadavg"):
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return info
