"""Any analysis along checkpoint series: its headline number against the training step, one line per model.

    $ python -m analyses.series anisotropy --series out/train/series/bert-small-seed3 \\
          --series out/train/series/slstm-small-seed3 -- --n-sentences 300
    $ python -m analyses.series perplexity --series 'hf:EleutherAI/pythia-70m@step1000,step8000,step64000' \\
          -- --max-tokens 4000

A series (:mod:`probes.series`) is a folder of step checkpoints, as the suite's recipes write them with
``--snapshots`` (or as Hugging Face's Trainer writes ``checkpoint-N/``), or a hub model at several revisions.
Every point is registered under ``<series>.step-<step>`` for the run (the entries are written to
``<out>/series/<analysis>.points.yaml``, which names the folder or revision behind each), and the analysis runs
once over all the points with the options given after ``--`` (``--model``, ``--out`` and ``--no-figures`` are set
here), writing each point's result to ``<out>/results/<analysis>/`` as any run does and sharing the activation
cache under ``<out>/cache``. Then each point's :meth:`~analyses.common.AnalysisResult.headline_numbers`
(``--statistic``; default: the analysis's first) is collected into :class:`SeriesResult`, saved as
``<out>/series/<analysis>.json``, and drawn against the step on a log scale (:meth:`SeriesResult.plot`), with
each point's 95% bootstrap interval where the result keeps per-unit values:
``<out>/figures/series-<analysis>.{png,pdf}``.

An analysis of a pair of models (similarity, topics) takes two series and runs on the two checkpoints of each
step both have: one line, A against B. A series needs two or more checkpoints.

Each point's number is read from the result file that records exactly that point (:class:`Recorded`): its
registry name (a pair's result: the two names it records for A and B, in that order) and, where the file records
them, its weights (sha256 of the folder's weight files, or the hub revision); never a file whose name merely
contains the point's name, and never a file left from other weights under the same name.

From Python: ``analyses.series.run("anisotropy", ["out/train/series/bert-small-seed3"], n_sentences=300)``
returns the :class:`SeriesResult` (settings as the analysis's Config fields).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from analyses import style
from analyses.common import arg, parse_config, read_result, run_main
from analyses.model_info import ModelInfo, ModelPair
from probes.errors import ProbeError
from probes.io import atomic_write, read_json, strict_json
from probes.series import Series, registry_file, resolve

PAIR_KINDS = ("pair", "lm_pair")  # inputs of two models: similarity, topics


@dataclass
class Config:
    """Run an analysis on every checkpoint of one or more series and draw its headline number against the step; the
    analysis's own options follow ``--`` (e.g. ``-- --n-sentences 300``)."""

    analysis: str = arg("anisotropy", "the analysis (a name of analyses.ANALYSES)", positional=True)
    series: list[str] = arg([], "a series: a folder of step checkpoints, or hf:org/name@rev1,rev2,...")
    like: list[str] = arg([], "the registry entry each --series is a run of, in the same order (default: the name "
                              "the recipe recorded in each snapshot.json, where it is registered)")
    statistic: str = arg("", "which of the analysis's headline numbers to draw (default: its first)")
    reuse: bool = arg(False, "do not run again a checkpoint whose result this command wrote from the same weights "
                             "and options")
    out: str = arg("out/series", "output root: results/, cache/, series/ and figures/ go under it")
    figures: bool = arg(True, "draw the figure (--no-figures: only the numbers)")


@dataclass
class SeriesPoint:
    step: int
    value: float | None
    interval: list[float] | None  # the 95% bootstrap interval where the result keeps per-unit values
    model: str  # the point's registry name (its result file's name)
    tokens: int | None = None


@dataclass
class SeriesLine:
    name: str  # the series (or "A vs B" for a pair)
    points: list[SeriesPoint]


@dataclass
class SeriesResult:
    """An analysis's headline number along checkpoint series."""

    analysis: str
    statistic: str
    lines: list[SeriesLine]
    sources: dict = field(default_factory=dict)  # point name -> the folder or hub revision it was loaded from
    settings: list[str] = field(default_factory=list)  # the analysis's own options, as given

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, doc: dict) -> SeriesResult:
        lines = [SeriesLine(x["name"], [SeriesPoint(**p) for p in x["points"]]) for x in doc["lines"]]
        return cls(doc["analysis"], doc["statistic"], lines, doc.get("sources", {}), doc.get("settings", []))

    @style.drawing
    def plot(self, ax=None, **kwargs):
        """The statistic against the training step (log scale), one line per series with its interval band where
        the points have one. ``kwargs`` go to every line (``marker=``, ``linewidth=`` ...); colours follow the
        Axes' cycle, labels the series, fonts and colours the caller's rcParams. Returns the Axes."""
        ax = style.one_axes(ax, (3.8, 2.9))
        for line in self.lines:
            pts = [p for p in line.points if p.value is not None]
            if not pts:
                continue
            x = np.array([max(p.step, 1) for p in pts], dtype=float)
            y = np.array([p.value for p in pts], dtype=float)
            drawn = ax.plot(x, y, marker=kwargs.pop("marker", "o"), markersize=3, label=line.name, **kwargs)[0]
            if all(p.interval is not None for p in pts):
                lo, hi = np.array([p.interval for p in pts], dtype=float).T
                ax.fill_between(x, lo, hi, color=drawn.get_color(), alpha=0.2, linewidth=0)
        from matplotlib.ticker import FuncFormatter, NullLocator

        ax.set_xscale("log")
        steps = sorted({max(p.step, 1) for line in self.lines for p in line.points if p.value is not None})
        if 0 < len(steps) <= 12:  # the checkpoints' own steps as the ticks
            ax.set_xticks(steps, [f"{s:g}" for s in steps])
            ax.xaxis.set_minor_locator(NullLocator())
        else:
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # numbers, not powers of ten
        ax.set_xlabel("training step")
        ax.set_ylabel(textwrap.fill(self.statistic, 32))  # a long statistic in lines, not cut at the figure's edge
        return style.finish(ax)


# ----------------------------------------------------------------------------- running


def _kind(analysis: str):
    import analyses

    try:
        return analyses.get(analysis)
    except KeyError as e:
        raise ProbeError(str(e.args[0])) from None


def _point_value(result, statistic: str) -> tuple[float | None, list[float] | None]:
    numbers = result.headline_numbers()
    if statistic not in numbers:
        raise ProbeError(f"{result.model_name} has no headline number {statistic!r}; it has: {', '.join(numbers)}")
    s = numbers[statistic]
    value = None if s.point is None or not np.isfinite(s.point) else float(s.point)
    return value, s.interval() if value is not None and s.replicates is not None else None


def saved_results(out: Path, analysis: str) -> list:
    from analyses import get

    cls = get(analysis).Result
    return [cls.from_json(read_result(p)) for p in sorted((out / "results" / analysis).glob("*.json"))]


def _identity(point) -> str:
    """What a point's result was computed from: its weights' sha256 (a folder) or its hub revision."""
    from probes.checkpoints.identity import weights_sha

    return point.source if point.source.startswith("hf:") else weights_sha(Path(point.source))


MODEL_FIELDS = ("model", "model_a", "model_b", "out")  # what the series sets in each run's Config


def settings_config(declared, options: list[str], settings: dict):
    """The analysis's typed Config for a series: its command-line ``options`` (the words after ``--``), parsed
    once, with ``settings`` (Config fields from Python) on top; the models and ``out`` are the series' own."""
    names = {f.name for f in dataclasses.fields(declared.Config)}
    for key in settings:
        if key not in names or key in MODEL_FIELDS:
            raise ProbeError(f"{declared.name} has no setting {key!r} to give along a series")
    for flag in ("--model", "--model-a", "--model-b", "--out"):
        if any(o == flag or o.startswith(flag + "=") for o in options):
            raise ProbeError(f"{flag} is set by the series (each point's name; --out of the series): leave it out")
    return declared.config(parse_config(declared.Config, list(options)) if options else None, **settings)


def _settings_record(cfg) -> dict:
    """The settings of a run as compared for ``reuse`` (its Config's values, less what each run sets)."""
    from analyses.common import config_dict

    return {k: v for k, v in config_dict(cfg).items() if k not in MODEL_FIELDS}


def run(analysis: str, series: list, like: list[str] | None = None, *, statistic: str = "",
        out: str | os.PathLike = "out/series", options: list[str] | None = None, reuse: bool = False,
        **settings) -> SeriesResult:
    """Run ``analysis`` along every series in ``series`` (see the module docstring); ``options``: the
    analysis's command-line options (parsed once into its Config), ``settings``: Config fields
    (``n_sentences=300``) on top of them. Each point runs through the analysis's own run of a typed Config
    (:func:`analyses.data.run_config`) with the points' registry entries handed over as resolved specs, so
    nothing is turned back into command-line words and no registry goes through the environment. ``reuse``:
    a point (a pair of points) whose result this function wrote before, from the same weights and settings, is
    not run again (``<out>/series/<analysis>.done.json`` records each run's weights and settings)."""
    from analyses.data import run_config
    from probes.checkpoints.registry import read_registry

    declared = _kind(analysis)
    options = list(options or [])
    cfg = settings_config(declared, options, settings)
    given = options + [f"{k}={v!r}" for k, v in settings.items()]  # as the caller gave them (the series' record)
    if not series:
        raise ProbeError("give at least one --series")
    like = list(like or [])
    if like and len(like) != len(series):
        raise ProbeError(f"--like names {len(like)} entries for {len(series)} series: give one per series, in order")
    made: list[Series] = [resolve(s, like[i] if like else None) for i, s in enumerate(series)]
    for x in made:
        if len(x.points) < 2:
            raise ProbeError(f"series {x.name}: one checkpoint (step {x.points[0].step}); a series needs two or more "
                             f"checkpoints")
    pair = declared.inputs.kind in PAIR_KINDS
    if pair and len(made) != 2:
        raise ProbeError(f"{analysis} compares two models: give exactly two --series (A, then B)")
    out = Path(out)
    # the points' entries, written where the series' record names them, and read back as resolved specs
    specs = read_registry(registry_file(made, out / "series" / f"{analysis}.points.yaml"))
    done_path = out / "series" / f"{analysis}.done.json"
    done = read_json(done_path, "series record") if reuse and done_path.is_file() else {}
    used = strict_json(_settings_record(cfg))

    def todo(*points) -> bool:
        key = "|".join(p.name for p in points)
        return done.get(key) != {"weights": [_identity(p) for p in points], "settings": used}

    def record(*points) -> None:
        done["|".join(p.name for p in points)] = {"weights": [_identity(p) for p in points], "settings": used}
        atomic_write(done_path, (strict_json(done) + "\n").encode("utf-8"))

    def run_on(*points) -> None:
        names = [p.name for p in points]
        models = (dict(model_a=names[0], model_b=names[-1]) if hasattr(cfg, "model_a") else dict(model=names))
        run_config(declared, dataclasses.replace(cfg, **models, out=str(out), figures=False),
                   {p.name: specs[p.name] for p in points})

    if pair:
        a, b = made
        steps = sorted({p.step for p in a.points} & {p.step for p in b.points})
        if not steps:
            raise ProbeError(f"series {a.name} and {b.name} have no step in common")
        for s in steps:
            pa, pb = (next(p for p in x.points if p.step == s) for x in (a, b))
            if todo(pa, pb):
                run_on(pa, pb)
                record(pa, pb)
    else:
        points = [p for x in made for p in x.points if todo(p)]
        if points:
            run_on(*points)
            for p in points:
                record(p)
    found = saved_results(out, analysis)
    return collect(analysis, made, found, statistic, given, pair, cfg)


@dataclass(frozen=True)
class Recorded:
    """Which models a result file says it was computed from: each model's name exactly as the file records it
    (a pair's two, A then B) and, where the file records one, what identifies its weights (the sha256 of a
    folder's weight files, or ``hf:org/name@revision``)."""

    names: tuple[str, ...]
    weights: tuple[str | None, ...]

    @classmethod
    def of(cls, result, pair: bool) -> Recorded | None:
        """What ``result`` records (None: a file that names no model in the expected place)."""
        model = result.identity.model
        if not pair:
            return cls((result.model_name,), (_weights(model),)) if isinstance(model, ModelInfo) else None
        if not isinstance(model, ModelPair) or not all(m.name for m in model.sides):
            return None
        return cls(tuple(m.name for m in model.sides), tuple(_weights(m) for m in model.sides))

    def matches(self, points: tuple, identities: tuple[str, ...]) -> bool:
        """Whether these are the points' exact names and, where recorded, weights."""
        return self.names == tuple(p.name for p in points) and all(
            w is None or w == i for w, i in zip(self.weights, identities))


def _weights(model: ModelInfo) -> str | None:
    """What a result's model description records of its weights (see :class:`Recorded`)."""
    fp = model.fingerprint
    if not isinstance(fp, dict):
        return None
    if model.weights_sha256 is not None:
        return model.weights_sha256
    if isinstance(fp.get("hub"), str) and isinstance(fp.get("revision"), str):
        return f"hf:{fp['hub']}@{fp['revision']}"
    return None


def _settings_agree(result, cfg) -> bool:
    """Whether ``result``'s recorded settings are those of ``cfg`` (the fields both name, other than the
    models and what the inputs decide): tells apart two results of one pair that differ in a setting that names
    their files (similarity's unit)."""
    from analyses.common import SAMPLE_FIELDS, config_dict

    wanted = config_dict(cfg)
    recorded = result.config if isinstance(result.config, dict) else {}
    skip = {"model", "model_a", "model_b", "dtype", "cache_dtype", "batch_size", *SAMPLE_FIELDS}
    return all(recorded[k] == v for k, v in wanted.items() if k in recorded and k not in skip)


def collect(analysis: str, made: list[Series], found: list, statistic: str, options: list[str],
             pair: bool, cfg=None) -> SeriesResult:
    """The series' numbers, each point's read from the one result in ``found`` that records exactly that point
    (:class:`Recorded`; where two do, the one whose settings are ``cfg``'s: the analysis's defaults when None);
    ``options``: the analysis's settings as given, recorded."""
    cfg = cfg if cfg is not None else _kind(analysis).config()
    recorded = [(r, Recorded.of(r, pair)) for r in found]
    identities: dict[str, str] = {}

    def of(*points):  # the result computed from exactly these points (a pair: A's, then B's)
        for p in points:
            if p.name not in identities:
                identities[p.name] = _identity(p)
        ids = tuple(identities[p.name] for p in points)
        hits = [r for r, rec in recorded if rec is not None and rec.matches(points, ids)]
        if len(hits) > 1:
            hits = [r for r in hits if _settings_agree(r, cfg)]
        shown = " and ".join(p.name for p in points)
        if not hits:
            raise ProbeError(f"no {analysis} result for {shown}")
        if len(hits) > 1:
            raise ProbeError(f"{len(hits)} {analysis} results of {shown} with these settings: use another --out")
        return hits[0]

    groups = [[(p, of(p)) for p in x.points] for x in made] if not pair else \
        [[(pa, of(pa, pb)) for pa in made[0].points for pb in made[1].points if pa.step == pb.step]]
    first = groups[0][0][1].headline_numbers()
    if not first:
        raise ProbeError(f"{analysis} results have no headline number to draw along a series")
    statistic = statistic or next(iter(first))
    names = [x.name for x in made] if not pair else [f"{made[0].name} vs {made[1].name}"]
    lines = []
    for name, group in zip(names, groups):
        pts = []
        for p, r in group:
            value, interval = _point_value(r, statistic)
            pts.append(SeriesPoint(p.step, value, interval, p.name, p.tokens))
        lines.append(SeriesLine(name, pts))
    sources = {p.name: p.source for x in made for p in x.points}
    return SeriesResult(analysis, statistic, lines, sources, options)


def save(result: SeriesResult, out: str | os.PathLike, figures: bool = True) -> list[Path]:
    """Write ``<out>/series/<analysis>.json`` (atomically) and, with ``figures``, the figure."""
    out = Path(out)
    path = out / "series" / f"{result.analysis}.json"
    atomic_write(path, (strict_json(result.to_json()) + "\n").encode("utf-8"))
    written = [path]
    if figures:
        import matplotlib.pyplot as plt

        from analyses.common import save_figure
        from analyses.style import theme

        with theme():
            ax = result.plot()
            written += save_figure(ax.figure, out, f"series-{result.analysis}")
        plt.close(ax.figure)
    return written


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    own, options = (args[:args.index("--")], args[args.index("--") + 1:]) if "--" in args else (args, [])
    cfg = parse_config(Config, own, __doc__.split("\n\n")[0])
    result = run(cfg.analysis, cfg.series, cfg.like, statistic=cfg.statistic, out=cfg.out, options=options,
                 reuse=cfg.reuse)
    for line in result.lines:
        values = ", ".join(f"{p.step}: {'n/a' if p.value is None else f'{p.value:.4g}'}" for p in line.points)
        print(f"{line.name} ({result.statistic}): {values}")
    for path in save(result, cfg.out, cfg.figures):
        print(f"wrote {path}")


if __name__ == "__main__":
    run_main(main)
