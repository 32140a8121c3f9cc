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

import dataclasses
import math
import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from analyses import common, records, stats, style
from analyses.analysis import Analysis, Figure
from analyses.common import Identity, settings_used
from analyses.inputs import TimedConfig, Timing
from analyses.records import omitted
from probes.capture.timing import TimingConfig, machine, time_models
from probes.config import arg
from probes.errors import ProbeError

RANDOM_MODELS = ("slstm", "bert", "albert")
DEFAULT_LENGTHS = [64, 128, 256, 512, 1024, 2048, 4096, 8192]


@dataclass
class Config(TimedConfig):
    """Forward time versus sequence length: the S-LSTM against a Transformer of the same width and depth."""

    model: list[str] = arg(["slstm", "bert"], "slstm | bert | albert (random init at --width/--layers) or "
                                              "checkpoints.yaml names")
    reference: str = arg("", "model the speed-ups are measured against (default: the last --model)")
    lengths: list[int] = arg(DEFAULT_LENGTHS, "sequence lengths in tokens", min=1)
    batch: int = arg(1, "sequences per forward pass", min=1)
    width: int = arg(256, "hidden size of the random-init models", min=1)
    layers: int = arg(4, "S-LSTM steps / Transformer layers of the random-init models", min=1)
    heads: int = arg(4, "attention heads of the random-init Transformers", min=1)
    intermediate: int = arg(1024, "feed-forward size of the random-init Transformers", min=1)
    vocab_size: int = arg(4096, "vocabulary of the random-init models", min=6)
    repeats: int = arg(5, "timed samples per model and length (median reported)", min=1)
    warmup: int = arg(1, "untimed forwards per model and length first", min=0)
    min_time: float = arg(0.2, "a timed sample repeats a fast forward until it lasts this many seconds", min=0.0)
    fit_min_length: int = arg(512, "fit the log-log slope on lengths >= this", min=1)
    threads: int = arg(1, "torch intra-op threads (1: steady timings on a shared machine; 0 = torch's default)",
                       min=0)

    def timing(self) -> TimingConfig:
        """What probes.capture.timing reads (--seed: the random weights and token ids)."""
        return TimingConfig(**{f: getattr(self, f) for f in TimingConfig.__dataclass_fields__})


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


@dataclass
class Crossover:
    """Where a model becomes (and stays) faster than the reference (:func:`crossover`)."""

    from_length: int | None  # the shortest measured length from which it is faster at every longer one
    interpolated: float | None  # the length where log(t_model / t_ref) crosses 0 (log-log interpolation)
    faster_everywhere: bool
    note: str  # in words


@dataclass
class LengthRow:
    """One length's timings (seconds per forward pass); a length beyond the model's limit is skipped (``skipped``:
    why; saved as ``{"length", "skipped"}`` alone)."""

    length: int
    skipped: str | None = None  # why the length was not timed; None: timed
    median_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    samples_s: list[float] | None = None
    loops_per_sample: int | None = None
    tokens_per_s: float | None = None
    speedup_vs_reference: float | None = None  # None: the reference did not time this length

    def to_json(self) -> dict[str, Any]:
        if self.skipped is not None:
            return {"length": self.length, "skipped": self.skipped}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "skipped"}


class ReferenceTimes:
    """The reference's median seconds per timed length; saved as ``{"<length>": seconds}``."""

    def __init__(self, seconds: dict[int, float] | None = None):
        self.seconds: dict[int, float] = dict(seconds or {})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReferenceTimes) and self.seconds == other.seconds

    def __repr__(self) -> str:
        return f"ReferenceTimes({self.seconds})"

    def to_json(self) -> dict[str, float]:
        return {str(n): t for n, t in self.seconds.items()}

    @classmethod
    def from_json(cls, doc: Any, where: str = "reference_median_s") -> ReferenceTimes:
        if not isinstance(doc, dict):
            raise records.Malformed(f"{where}: a mapping of length to seconds, not {type(doc).__name__}")
        return cls({int(n): float(t) for n, t in doc.items()})


@dataclass
class MachineState:
    """The machine and its load at one moment (:func:`probes.capture.timing.machine`)."""

    platform: str
    processor: str | None = omitted()
    usable_cpus: int | None = omitted()
    torch: str | None = omitted()
    torch_threads: int | None = omitted()
    load_average: list[float] | None = omitted()


@dataclass
class Machine:
    """The machine before and after the timings."""

    before: MachineState | None = omitted()
    after: MachineState | None = omitted()


def crossover(lengths, model_times, ref_times) -> Crossover:
    """Where the model becomes (and stays) faster than the reference.

    ``from_length``: the shortest measured length from which the model is faster at every longer
    measured length (None if it is slower at the longest); ``interpolated``: the length where
    log(t_model / t_ref) crosses 0 between the measured lengths bracketing from_length (log-log
    interpolation; equal to the first length if it is faster everywhere)."""
    n = np.asarray(lengths, float)
    r = np.log(np.asarray(model_times, float) / np.asarray(ref_times, float))  # < 0: model faster
    if r[-1] >= 0:
        return Crossover(from_length=None, interpolated=None, faster_everywhere=False,
                         note="slower than the reference at the longest length")
    k = len(r) - 1
    while k > 0 and r[k - 1] < 0:
        k -= 1
    if k == 0:
        return Crossover(from_length=int(n[0]), interpolated=float(n[0]), faster_everywhere=True,
                         note="faster at every measured length")
    x0, x1 = math.log(n[k - 1]), math.log(n[k])
    x = x0 + (x1 - x0) * r[k - 1] / (r[k - 1] - r[k])
    return Crossover(from_length=int(n[k]), interpolated=float(math.exp(x)), faster_everywhere=False,
                     note=f"faster from {int(n[k])} tokens on (slower at {int(n[k - 1])})")


# ----------------------------------------------------------------------------- compute


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """One model's timings: the saved document's keys, in order. The identity's model says how the model
    was built (random init: architecture and sizes; else its description)."""

    reference: str  # the model the speed-ups are measured against
    reference_median_s: ReferenceTimes  # length -> the reference's median seconds
    definitions: records.Definitions  # prose only: nothing reads numbers from it
    fit_lengths: list[int]  # lengths the log-log slope is fitted on
    slope: float | None  # b of log t = a + b log n (None: fewer than two fitted lengths)
    intercept: float | None  # a
    local_slopes: list[float]  # d log t / d log n between consecutive timed lengths
    crossover: Crossover | None  # where the model becomes and stays faster than the reference (None: the reference)
    rows: list[LengthRow]  # per length: median_s, min_s, max_s, samples_s, loops_per_sample, tokens_per_s,
    #                        speedup_vs_reference; or the length and why it was skipped beyond the model's limit
    machine: Machine  # before / after: platform and load

    def headline_numbers(self) -> dict[str, stats.Sample]:
        return {"log-log slope": stats.Sample(self.slope)}

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws first: the median forward time at each timed length."""
        return common.as_floats(row.median_s for row in self.timed_rows())

    def headline(self) -> dict[str, str]:
        out = {"log-log slope": "n/a" if self.slope is None else f"{self.slope:.2f}"}
        if self.crossover is not None:
            out[f"against {self.reference}"] = self.crossover.note
        return out

    def timed_rows(self) -> list[LengthRow]:
        """The rows of the lengths that were timed (not skipped)."""
        return [row for row in self.rows if row.skipped is None]

    @style.drawing
    def plot(self, ax=None, **kwargs):
        """The headline panel on one Axes (a new figure when None), like a scikit-learn Display: forward time
        against length (log-log) with the fitted slope (dashed). ``kwargs`` (``color=``, ``label=``,
        ``marker=``, ``linewidth=`` ...) go to the timing line; without ``color=`` the next colour of the Axes'
        cycle; the label (default: the model and its slope) enters the legend, so results drawn on one Axes
        overlay. Fonts and colours follow the caller's rcParams. Returns the Axes."""
        ax = style.one_axes(ax, (4.2, 3.2))
        _time_panel(ax, [style.on_axes(ax, self, kwargs, _time_label(self))], title=False)
        return style.finish(ax, title="dashed: log-log fit")

    def family(self) -> str | None:
        """The model's family: a registry model's as checkpoints.yaml gives it; a random-init model is
        named by its family (one of RANDOM_MODELS)."""
        if self.model.source == "random init" and self.model_name in RANDOM_MODELS:
            return self.model_name
        return self.model.family or None


def check_config(cfg: Config) -> None:
    """What ``arg(min=)`` cannot say, before any model is built."""
    if not cfg.lengths:
        raise ProbeError("give at least one --lengths")
    reference = cfg.reference or cfg.model[-1]
    if reference not in cfg.model:
        raise ProbeError(f"--reference {reference!r} is not one of the --model names {cfg.model}")


def compute(cfg: Config | None = None, *, runners: list, progress: bool = True) -> dict[str, Result]:
    """Time every model's runner, interleaved; returns {model: Result}. The one analysis whose compute
    gives one Result per model: the models are timed together, each against the same reference."""
    cfg = cfg or Config()
    names = [r.name for r in runners]
    if not names:
        raise ProbeError("no models to time")
    if len(set(names)) != len(names):
        raise ProbeError("each --model may appear once")
    cfg.lengths = sorted(set(int(n) for n in cfg.lengths))
    reference = cfg.reference or names[-1]
    if reference not in names:
        raise ProbeError(f"--reference {reference!r} is not one of the --model names {names}")
    threads = torch.get_num_threads()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    try:
        before = machine()
        raw = time_models(runners, cfg.timing(), progress)
        after = machine()
    finally:
        torch.set_num_threads(threads)
    ref = {n: statistics.median(v["samples"]) for n, v in raw[reference].items() if "samples" in v}
    results = {}
    for r in runners:
        rows, timed = [], []  # every length's row; (length, median seconds) of the timed ones
        for n in cfg.lengths:
            entry = raw[r.name][n]
            if "samples" not in entry:
                rows.append(LengthRow(length=n, skipped=entry["skipped"]))
                continue
            med = statistics.median(entry["samples"])
            rows.append(LengthRow(length=n, median_s=med, min_s=min(entry["samples"]), max_s=max(entry["samples"]),
                                  samples_s=entry["samples"], loops_per_sample=entry["loops"],
                                  tokens_per_s=cfg.batch * n / med,
                                  speedup_vs_reference=ref[n] / med if n in ref else None))
            timed.append((n, med))
        fit = [(n, t) for n, t in timed if n >= cfg.fit_min_length]
        slope = intercept = None
        if len(fit) >= 2:
            slope, intercept = loglog_slope([n for n, _ in fit], [t for _, t in fit])
        both = [(n, t) for n, t in timed if n in ref]
        cross = None
        if r.name != reference and both:
            cross = crossover([n for n, _ in both], [t for _, t in both], [ref[n] for n, _ in both])
        results[r.name] = Result(
            identity=Identity(model_name=r.name, config=settings_used(cfg, requested=r.name), model=r.info),
            reference=reference,
            reference_median_s=ReferenceTimes(ref),
            definitions=records.Definitions({
                "time": f"seconds per forward pass over a batch of {cfg.batch} random sequences of n tokens "
                        "(final layer only, no tokenisation), median over the repeats",
                "speedup_vs_reference": f"median time of {reference} / median time of this model, same run",
                "slope": f"least-squares log-log fit on lengths >= {cfg.fit_min_length}",
                "order": "per length: warm-up of every model, then repeats with the start order rotating",
            }),
            fit_lengths=[n for n, _ in fit],
            slope=slope, intercept=intercept,
            local_slopes=local_slopes([n for n, _ in timed], [t for _, t in timed]) if len(timed) >= 2 else [],
            crossover=cross,
            rows=rows,
            machine=Machine(before=records.from_json(MachineState, before, "machine.before"),
                            after=records.from_json(MachineState, after, "machine.after")),
        )
    return results


def table_rows(result: Result) -> list[dict]:
    """One CSV row per length (a skipped length has empty timings)."""
    keys = ("length", "median_s", "min_s", "max_s", "loops_per_sample", "tokens_per_s", "speedup_vs_reference")
    return [{k: getattr(row, k) for k in keys} for row in result.rows]


# ----------------------------------------------------------------------------- plots


def _timed(res: Result) -> tuple[np.ndarray, np.ndarray]:
    rows = res.timed_rows()
    return np.array([r.length for r in rows], float), np.array([r.median_s for r in rows], float)


def _time_label(res: Result) -> str:
    return res.model_name + (f" (slope {res.slope:.2f})" if res.slope is not None else "")


def _time_panel(ax, drawn: list[style.Drawn], title: bool = True) -> None:
    """Forward time against length (log-log) on ``ax``, one line per result (dashed: the fit)."""
    for d in drawn:
        res = d.result
        n, t = _timed(res)
        ax.plot(n, t, **d.line(marker="o", ms=4))
        if res.slope is not None and res.intercept is not None:  # fitted together
            fit = n[n >= res.config["fit_min_length"]]
            ax.plot(fit, np.exp(res.intercept) * fit ** res.slope, lw=0.8, ls="--", **d.quiet)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length n (tokens)")
    ax.set_ylabel("time per forward pass (s)")
    if title:
        ax.set_title("forward time (dashed: log-log fit)")
        ax.legend()


@style.drawing
def plot(results: list[Result], fig=None):
    """Fig. 5-style: time vs length (log-log, fitted slopes) and the speed-up against the reference;
    one colour per model. ``fig``: a Figure or SubFigure to draw into (default: a new figure). Returns
    the figure."""
    fig = style.new_figure(fig, (10, 3.8))
    ax, bx = fig.subplots(1, 2)
    drawn = [d._replace(kw={**d.kw, "label": _time_label(d.result), "linestyle": "-"})
             for d in style.in_figure(results)]
    _time_panel(ax, drawn)
    compared = False
    for d in drawn:
        res, c = d.result, d.color
        n, _ = _timed(res)
        if res.model_name != res.reference:
            s = np.array([r.speedup_vs_reference for r in res.timed_rows()], float)
            bx.plot(n, s, marker="o", ms=4, color=c, label=f"{res.model_name} vs {res.reference}")
            compared = True
            x = None if res.crossover is None else res.crossover.interpolated  # None: never overtakes
            if x is not None:
                bx.axvline(x, color=c, lw=0.8, ls=":")
                bx.text(x, 1.0, f" {x:.0f}", color=c, fontsize="small", va="bottom")
    bx.axhline(1.0, color="0.4", lw=0.8)
    bx.set_xscale("log", base=2)
    bx.set_xlabel("sequence length n (tokens)")
    bx.set_ylabel("speed-up (reference time / model time)")
    bx.set_title("speed-up against the reference (> 1: faster)")
    if compared:
        bx.legend()
    return fig


@style.drawing
def plot_slopes(results: list[Result], fig=None):
    """Local slopes d log t / d log n between consecutive lengths (1 = linear, 2 = quadratic).
    ``fig``: a Figure or SubFigure to draw into (default: a new figure). Returns the figure."""
    fig = style.new_figure(fig, (5, 3.4))
    ax = fig.subplots()
    colors = style.figure_colors([r.model_name for r in results])
    for res in results:
        n, _ = _timed(res)
        if len(n) < 2:
            continue
        mid = np.sqrt(n[1:] * n[:-1])
        ax.plot(mid, res.local_slopes, marker="o", ms=4, color=colors[res.model_name], label=res.model_name)
    for y in (1, 2):
        ax.axhline(y, color="0.5", lw=0.6, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length n (tokens; geometric midpoint of the interval)")
    ax.set_ylabel("local slope d log t / d log n")
    ax.set_title("growth of the forward time (1 = linear, 2 = quadratic)")
    ax.legend()
    return fig


def summary(results: dict[str, Result]) -> list[str]:
    """One line per model: its slope and where it overtakes the reference."""
    lines = []
    for name, res in results.items():
        slope = "n/a" if res.slope is None else f"{res.slope:.2f}"
        line = f"{name}: slope {slope} on n >= {res.config['fit_min_length']}"
        if res.crossover is not None:
            c = res.crossover
            line += (f"; faster than {res.reference} from n = {c.from_length} "
                     f"(interpolated {c.interpolated:.0f})" if c.from_length else f"; {c.note}")
        lines.append(line)
    return lines


def summarise(results: list[Result]) -> str:
    """The command line's summary lines (see :func:`summary`)."""
    return "".join(line + "\n" for line in summary({r.model_name: r for r in results}))


ANALYSIS = Analysis(
    name="speed",
    # one unit: every model built for timing (random-init architectures by name) and timed together
    inputs=Timing(random_models=RANDOM_MODELS),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows, check=check_config, summary=summarise,
    figures=(
        Figure("speed", plot, "Forward time against sequence length (log-log, with the fitted slopes) and the "
               "speed-up against the reference model, measured side by side (S-LSTM paper Table 5, Fig. 5)."),
        Figure("speed-slopes", plot_slopes, "Local slopes d log t / d log n between consecutive lengths: 1 = "
               "linear, 2 = quadratic growth of the forward time."),
    ),
    deterministic=False,  # timings
    example=("--model", "slstm", "--model", "bert", "--width", "16", "--layers", "1", "--heads", "2",
             "--intermediate", "32", "--vocab-size", "64", "--lengths", "8", "--lengths", "16", "--repeats", "1",
             "--warmup", "0", "--min-time", "0"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line

if __name__ == "__main__":
    ANALYSIS.main()
