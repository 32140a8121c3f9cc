"""Speed: forward time versus sequence length, S-LSTM against a Transformer (S-LSTM paper §6, Table 5, Fig. 5)

Every model runs one forward pass (the final layer's states, as the paper's "inference") over a
batch of ``--batch`` random token sequences of each length, side by side in one process: for each
length, every model is warmed up once, then each repeat times every model once, the start order
rotating from repeat to repeat. A timed sample of a fast forward repeats it until the sample lasts
``--min-time`` seconds (and divides), so short lengths are not lost in timer noise; Python's garbage
collector runs once per length and is off while timing (as ``timeit`` does). One intra-op thread
by default: on a machine shared with other jobs, torch's thread pool waits for descheduled threads
at every operation and timings scatter by a factor of 5; ``--threads 0`` uses torch's default. Reported per
model and length: the median over the repeats (and min / max), tokens per second, and the speed-up
against the reference model measured in the same run (reference time / model time; > 1 = faster).

* Slope: least-squares fit of log t = a + b log n on the lengths >= ``--fit-min-length`` (the
  short end is dominated by fixed per-call overhead, not by the O(n) / O(n^2) terms): b = 1 is
  linear, b = 2 quadratic. Local slopes between consecutive lengths are reported too.
* Crossover: the shortest measured length from which a model is faster than the reference at
  every longer measured length, and the length where log(t_model / t_ref) crosses 0 by linear
  interpolation in log n between the two measured lengths that bracket it.

Models: ``slstm``, ``bert``, ``albert`` are built at random initialisation from configs of the same
``--width`` / ``--layers`` (``--heads``, ``--intermediate`` for the Transformers; position embeddings
sized for the longest length); any other name is a checkpoints.yaml entry (lengths beyond its
limit are skipped and say so). The random-init Transformers use PyTorch's scaled-dot-product
attention (the fastest kernel available to them; the result records it); registry models run as
the suite loads them (Hugging Face models with eager attention). Timings never include
tokenisation.

    $ python -m analyses.speed [--lengths 64 --lengths 128 ...] [--repeats 3] [--width 256 --layers 4]
          [--batch 1] [--model slstm --model bert] [--out out]

Writes out/results/speed/<model>.json (+ .csv) per model and out/figures/speed.{png,pdf} (time vs
length, log-log, with the fitted slopes; speed-up against the reference) and
out/figures/speed-slopes.{png,pdf} (local slopes). Timings depend on the machine and its load:
the result records both, and unlike the other analyses two runs are not byte-identical.
"""

from __future__ import annotations

import gc
import math
import os
import platform
import statistics
import time
from dataclasses import dataclass

import numpy as np
import torch

from analyses.common import (
    arg,
    config_dict,
    parse_config,
    read_results,
    run_main,
    save_drawings,
    write_result,
)
from probes.errors import ProbeError

RANDOM_MODELS = ("slstm", "bert", "albert")
DEFAULT_LENGTHS = [64, 128, 256, 512, 1024, 2048, 4096, 8192]


@dataclass
class Config:
    """Forward time versus sequence length: the S-LSTM against a Transformer of the same width and depth."""

    model: list[str] = arg(["slstm", "bert"], "slstm | bert | albert (random init at --width/--layers) or "
                                              "checkpoints.yaml names")
    reference: str = arg("", "model the speed-ups are measured against (default: the last --model)")
    lengths: list[int] = arg(DEFAULT_LENGTHS, "sequence lengths in tokens")
    batch: int = arg(1, "sequences per forward pass")
    width: int = arg(256, "hidden size of the random-init models")
    layers: int = arg(4, "S-LSTM steps / Transformer layers of the random-init models")
    heads: int = arg(4, "attention heads of the random-init Transformers")
    intermediate: int = arg(1024, "feed-forward size of the random-init Transformers")
    vocab_size: int = arg(4096, "vocabulary of the random-init models")
    repeats: int = arg(5, "timed samples per model and length (median reported)")
    warmup: int = arg(1, "untimed forwards per model and length first")
    min_time: float = arg(0.2, "a timed sample repeats a fast forward until it lasts this many seconds")
    fit_min_length: int = arg(512, "fit the log-log slope on lengths >= this")
    threads: int = arg(1, "torch intra-op threads (1: steady timings on a shared machine; 0 = torch's default)")
    seed: int = arg(0, "seed of the random weights and token ids")
    device: str = arg("cpu", "torch device")
    out: str = arg("out", "output root: results/ and figures/ go below it")


# ----------------------------------------------------------------------------- statistics


def loglog_slope(lengths, times) -> tuple[float, float]:
    """(slope b, intercept a) of the least-squares fit log t = a + b log n (natural logs)."""
    x, y = np.log(np.asarray(lengths, float)), np.log(np.asarray(times, float))
    if len(x) < 2:
        raise ProbeError("a slope needs at least two lengths")
    b, a = np.polyfit(x, y, 1)
    return float(b), float(a)


def local_slopes(lengths, times) -> list[float]:
    """d log t / d log n between consecutive lengths."""
    n, t = np.log(np.asarray(lengths, float)), np.log(np.asarray(times, float))
    return (np.diff(t) / np.diff(n)).tolist()


def crossover(lengths, model_times, ref_times) -> dict:
    """Where the model becomes (and stays) faster than the reference.

    ``from_length``: the shortest measured length from which the model is faster at every longer
    measured length (None if it is slower at the longest); ``interpolated``: the length where
    log(t_model / t_ref) crosses 0 between the measured lengths bracketing from_length (log-log
    interpolation; equal to the first length if it is faster everywhere)."""
    n = np.asarray(lengths, float)
    r = np.log(np.asarray(model_times, float) / np.asarray(ref_times, float))  # < 0: model faster
    if r[-1] >= 0:
        return {"from_length": None, "interpolated": None, "faster_everywhere": False,
                "note": "slower than the reference at the longest length"}
    k = len(r) - 1
    while k > 0 and r[k - 1] < 0:
        k -= 1
    if k == 0:
        return {"from_length": int(n[0]), "interpolated": float(n[0]), "faster_everywhere": True,
                "note": "faster at every measured length"}
    x0, x1 = math.log(n[k - 1]), math.log(n[k])
    x = x0 + (x1 - x0) * r[k - 1] / (r[k - 1] - r[k])
    return {"from_length": int(n[k]), "interpolated": float(math.exp(x)), "faster_everywhere": False,
            "note": f"faster from {int(n[k])} tokens on (slower at {int(n[k - 1])})"}


# ----------------------------------------------------------------------------- models


@dataclass
class Runner:
    """One model ready to time: fn(ids, mask) runs a forward; max_length limits the lengths."""

    name: str
    fn: object
    max_length: int
    info: dict


def _random_slstm(cfg: Config, max_len: int) -> Runner:
    from probes.slstm import SLSTM, SLSTMConfig, count_parameters

    scfg = SLSTMConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.width, num_layers=cfg.layers,
                       max_positions=max_len)
    model = SLSTM(scfg).eval().to(cfg.device)
    fn = lambda ids, mask: model(ids, mask, all_steps=False).hidden
    return Runner("slstm", fn, max_len, {"source": "random init", "architecture": "S-LSTM", **scfg.to_dict(),
                                         "parameters": count_parameters(model)})


def _random_transformer(cfg: Config, kind: str, max_len: int) -> Runner:
    import transformers
    from transformers import AlbertConfig, AlbertModel, BertConfig, BertModel

    transformers.logging.set_verbosity_error()
    common = dict(vocab_size=cfg.vocab_size, hidden_size=cfg.width, num_hidden_layers=cfg.layers,
                  num_attention_heads=cfg.heads, intermediate_size=cfg.intermediate,
                  max_position_embeddings=max_len)
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


def _registry_model(name: str, cfg: Config) -> Runner:
    import probes
    from probes.slstm_encoder import SLSTMEncoder

    enc = probes.load(name, device=cfg.device)
    if isinstance(enc, SLSTMEncoder):
        fn = lambda ids, mask: enc.model(ids, mask, all_steps=False).hidden
    elif hasattr(enc, "model"):
        fn = lambda ids, mask: enc.model(input_ids=ids, attention_mask=mask).last_hidden_state
    else:
        fn = lambda ids, mask: enc.forward(ids, mask).hidden
    info = {"source": "checkpoints.yaml", **enc.describe()}
    return Runner(name, fn, enc.max_length, info)


def build_runner(name: str, cfg: Config) -> Runner:
    torch.manual_seed(cfg.seed)
    max_len = max(cfg.lengths)
    if name == "slstm":
        return _random_slstm(cfg, max_len)
    if name in ("bert", "albert"):
        return _random_transformer(cfg, name, max_len)
    return _registry_model(name, cfg)


# ----------------------------------------------------------------------------- timing


def _sample(fn, ids, mask, loops: int) -> float:
    t0 = time.perf_counter()
    for _ in range(loops):
        fn(ids, mask)
    return (time.perf_counter() - t0) / loops


def time_models(runners: list[Runner], cfg: Config, progress: bool = True) -> dict[str, dict[int, dict]]:
    """{model: {length: {"samples": [...], "loops": k}}}; interleaved within each length."""
    from tqdm.auto import tqdm

    gen = torch.Generator().manual_seed(cfg.seed)
    out: dict[str, dict[int, dict]] = {r.name: {} for r in runners}
    with torch.inference_mode(), tqdm(total=len(cfg.lengths), desc="speed", unit="length",
                                      disable=not progress) as bar:
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
            gc.collect()  # once per length; the garbage collector is off while timing (as timeit does)
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
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    info = {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "usable_cpus": cpus, "torch": torch.__version__, "torch_threads": torch.get_num_threads()}
    if hasattr(os, "getloadavg"):
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return info


# ----------------------------------------------------------------------------- compute


def compute(cfg: Config | None = None, progress: bool = True) -> dict[str, dict]:
    """Time every model; returns {model: JSON-ready result}."""
    cfg = cfg or Config()
    if not cfg.model:
        raise ProbeError("no models to time")
    if len(set(cfg.model)) != len(cfg.model):
        raise ProbeError("each --model may appear once")
    if not cfg.lengths or min(cfg.lengths) < 1 or cfg.repeats < 1 or cfg.batch < 1:
        raise ProbeError("--lengths must be positive, --repeats and --batch at least 1")
    cfg.lengths = sorted(set(int(n) for n in cfg.lengths))
    reference = cfg.reference or cfg.model[-1]
    if reference not in cfg.model:
        raise ProbeError(f"--reference {reference!r} is not one of the --model names {cfg.model}")
    threads = torch.get_num_threads()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    try:
        before = machine()
        runners = [build_runner(name, cfg) for name in cfg.model]
        raw = time_models(runners, cfg, progress)
        after = machine()
    finally:
        torch.set_num_threads(threads)
    ref = {n: statistics.median(v["samples"]) for n, v in raw[reference].items() if "samples" in v}
    results = {}
    for r in runners:
        rows = []
        for n in cfg.lengths:
            entry = raw[r.name][n]
            if "samples" not in entry:
                rows.append({"length": n, "skipped": entry["skipped"]})
                continue
            med = statistics.median(entry["samples"])
            rows.append({"length": n, "median_s": med, "min_s": min(entry["samples"]), "max_s": max(entry["samples"]),
                         "samples_s": entry["samples"], "loops_per_sample": entry["loops"],
                         "tokens_per_s": cfg.batch * n / med,
                         "speedup_vs_reference": ref[n] / med if n in ref else None})
        timed = [row for row in rows if "median_s" in row]
        fit = [row for row in timed if row["length"] >= cfg.fit_min_length]
        slope = intercept = None
        if len(fit) >= 2:
            slope, intercept = loglog_slope([x["length"] for x in fit], [x["median_s"] for x in fit])
        both = [row for row in timed if row["length"] in ref]
        cross = None
        if r.name != reference and both:
            cross = crossover([x["length"] for x in both], [x["median_s"] for x in both],
                              [ref[x["length"]] for x in both])
        results[r.name] = {
            "model_name": r.name,
            "config": config_dict(cfg),
            "model": r.info,
            "reference": reference,
            "reference_median_s": {str(n): t for n, t in ref.items()},
            "definitions": {
                "time": f"seconds per forward pass over a batch of {cfg.batch} random sequences of n tokens "
                        "(final layer only, no tokenisation), median over the repeats",
                "speedup_vs_reference": f"median time of {reference} / median time of this model, same run",
                "slope": f"least-squares log-log fit on lengths >= {cfg.fit_min_length}",
                "fit_lengths": [x["length"] for x in fit],
                "order": "per length: warm-up of every model, then repeats with the start order rotating",
            },
            "slope": slope, "intercept": intercept,
            "local_slopes": local_slopes([x["length"] for x in timed], [x["median_s"] for x in timed])
            if len(timed) >= 2 else [],
            "crossover": cross,
            "rows": rows,
            "machine": {"before": before, "after": after},
        }
    return results


def table_rows(result: dict) -> list[dict]:
    """One CSV row per length."""
    keys = ("length", "median_s", "min_s", "max_s", "loops_per_sample", "tokens_per_s", "speedup_vs_reference")
    return [{k: row.get(k) for k in keys} for row in result["rows"]]


# ----------------------------------------------------------------------------- plots


def _timed(res: dict) -> tuple[np.ndarray, np.ndarray]:
    rows = [r for r in res["rows"] if "median_s" in r]
    return np.array([r["length"] for r in rows], float), np.array([r["median_s"] for r in rows], float)


def plot(results: list[dict], axes=None):
    """Fig. 5-style: time vs length (log-log, fitted slopes) and the speed-up against the reference."""
    import matplotlib.pyplot as plt

    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    fig = axes[0].figure
    ax, bx = axes
    compared = False
    for i, res in enumerate(results):
        n, t = _timed(res)
        label = res["model_name"] + (f" (slope {res['slope']:.2f})" if res["slope"] is not None else "")
        ax.plot(n, t, marker="o", ms=4, color=f"C{i}", label=label)
        if res["slope"] is not None:
            fit = n[n >= res["config"]["fit_min_length"]]
            ax.plot(fit, np.exp(res["intercept"]) * fit ** res["slope"], color=f"C{i}", lw=0.8, ls="--")
        if res["model_name"] != res["reference"]:
            s = np.array([r["speedup_vs_reference"] for r in res["rows"] if "median_s" in r], float)
            bx.plot(n, s, marker="o", ms=4, color=f"C{i}", label=f"{res['model_name']} vs {res['reference']}")
            compared = True
            cross = res.get("crossover") or {}
            if cross.get("interpolated"):
                bx.axvline(cross["interpolated"], color=f"C{i}", lw=0.8, ls=":")
                bx.text(cross["interpolated"], 1.0, f" {cross['interpolated']:.0f}", color=f"C{i}", fontsize=7,
                        va="bottom")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length n (tokens)")
    ax.set_ylabel("seconds per forward pass")
    ax.set_title("forward time (dashed: log-log fit)", fontsize=9)
    ax.legend(fontsize=7)
    bx.axhline(1.0, color="0.4", lw=0.8)
    bx.set_xscale("log", base=2)
    bx.set_xlabel("sequence length n (tokens)")
    bx.set_ylabel("speed-up (reference time / model time)")
    bx.set_title("speed-up against the reference (> 1: faster)", fontsize=9)
    if compared:
        bx.legend(fontsize=7)
    return fig


def plot_slopes(results: list[dict], ax=None):
    """Local slopes d log t / d log n between consecutive lengths (1 = linear, 2 = quadratic)."""
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(5, 3.4), constrained_layout=True)
    fig = ax.figure
    for i, res in enumerate(results):
        n, _ = _timed(res)
        if len(n) < 2:
            continue
        mid = np.sqrt(n[1:] * n[:-1])
        ax.plot(mid, res["local_slopes"], marker="o", ms=4, color=f"C{i}", label=res["model_name"])
    for y in (1, 2):
        ax.axhline(y, color="0.5", lw=0.6, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length n (geometric midpoint of the interval)")
    ax.set_ylabel("local slope d log t / d log n")
    ax.set_title("growth of the forward time (1 = linear, 2 = quadratic)", fontsize=9)
    ax.legend(fontsize=7)
    return fig


def figures(results: list[dict], out: str) -> list:
    return save_drawings(results, out, (("speed", plot), ("speed-slopes", plot_slopes)))


# ----------------------------------------------------------------------------- CLI


def summary(results: dict[str, dict]) -> list[str]:
    lines = []
    for name, res in results.items():
        slope = "n/a" if res["slope"] is None else f"{res['slope']:.2f}"
        line = f"{name}: slope {slope} on n >= {res['config']['fit_min_length']}"
        if res["crossover"] is not None:
            c = res["crossover"]
            line += (f"; faster than {res['reference']} from n = {c['from_length']} "
                     f"(interpolated {c['interpolated']:.0f})" if c["from_length"] else f"; {c['note']}")
        lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__.split("\n\n")[0])
    results = compute(cfg)
    for name, res in results.items():
        json_path, _ = write_result(cfg.out, "speed", name, res, table_rows(res))
        print(f"{name}: wrote {json_path}")
    print("\n".join(summary(results)))
    paths = figures(read_results(cfg.out, "speed", list(results)), cfg.out)
    print("figures: " + ", ".join(str(p) for p in paths))


if __name__ == "__main__":
    run_main(main)
