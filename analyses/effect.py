"""The effect of an edit of a model's states on an analysis's headline number, with a paired bootstrap interval.

:func:`run` computes the analysis twice on the same inputs, once on the model as it is (clean) and once under the
intervention (edited), and, with a control, a third time under the control edit. Each run's headline number is a
statistic of per-unit values (sentences, blocks of scored tokens), and the units are the same in every run (the
same texts, tokenized alike), so the difference is bootstrapped PAIRED: resample b draws the same units, with the
same multiplicities, for every run (one matrix of multinomial counts W (resamples, units) for all of them,
:func:`analyses.stats.resample_weights`), and replicate b of the difference is replicate b of the edited run minus
replicate b of the clean run. What the units share (their own difficulty, their length) cancels in the difference,
so the interval is that of the edit's effect, not of the spread of the units. An edit that changes nothing gives a
difference of exactly 0 with the interval [0, 0].

Intervals are percentile intervals read at the expanded level (:func:`analyses.blocks.expanded_level`): the
t interval's width, which a few tens of units need (tests/test_effect.py simulates 200 draws of paired per-unit
values and counts how often the interval covers the true difference).

Supported analyses (their headline numbers, as ``Result.headline_numbers()`` names them; ``statistic=`` picks one,
default the first):

* ``perplexity``: "token perplexity, T=.., o=.." per (window, overlap); units: the blocks of consecutive scored
  tokens of the analysis's block bootstrap; each resample is exp(resampled NLL sum / resampled token count);
* ``anisotropy``: "token cosine, last layer" and "sentence cosine, last layer" (the mean pairwise cosine of the
  sampled tokens' / the sentences' last-layer states); units: sentences; each resample is the mean cosine over
  the pairs among the resampled sentences (:func:`analyses.stats.pairwise_cosine_replicates`).

Any other analysis is refused in one line: its headline number is not kept as per-unit values that two runs can
resample alike.

Control (``control=``): an Intervention (or a list) of one's own, or ``"random"``: the same kind of edit at the
same layer, drawn with ``seed``, that has the edit's size but no chosen direction: for an :class:`Erase` (or a
``ProjectOut``) of rank r an orthogonal projection out of a random r-dimensional subspace (Gaussian rows; around the
edit's bias), for an :class:`AddVector` a random direction of the same norm (``|scale| * ||vector||``). A Patch or a
Function has no rank or norm to match: ``control="random"`` is refused for them.

Cost: two runs of the analysis (three with a control), each the analysis's own forward passes. A causal-LM
analysis loads its model once and scores under each edit in turn.

    from analyses import effect
    e = effect.run("perplexity", "tiny-gpt2", texts, intervention=iv, control="random", overlap=[0])
    e.difference.value, e.difference.low, e.difference.high        # edited - clean and its interval
    e.to_frame(); effect.plot(e)

From the command line, the edit's arrays on disk (:class:`Config`; docs/interventions.md has a worked example),
writing ``<out>/effects/<analysis>/<name>.json`` and its figure; bad input is one ``error:`` line, exit 2:

    $ python -m analyses.effect --model tiny-gpt2 --layer 1 --edit add --arrays v.npy --scale 4 \
          [--analysis perplexity|anisotropy] [--texts FILE] [--control random|none] [--option overlap=0] [--out out]
"""

from __future__ import annotations

import dataclasses
import json
import os
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analyses import stats
from analyses.blocks import expanded_level
from analyses.edited import in_words
from analyses.effect_result import EffectResult, Estimate, plot
from analyses.jsonable import jsonable
from probes.capture.store import USER_CACHE, UserCache
from probes.config import OutConfig, SeedConfig, arg, check_values, parse_config, run_main
from probes.errors import ProbeError
from probes.intervention import AddVector, Erase, Intervention, ProjectOut, as_interventions, intervening
from probes.io import atomic_text

__all__ = ["Config", "EffectResult", "Estimate", "main", "paired_difference", "plot", "random_control", "run",
           "save"]

RUNS = ("clean", "edited", "control")
CONTROL_STREAM = 7  # the control's draw: its own stream of the seed (never the bootstrap's counts)


@dataclass(frozen=True, eq=False)
class Units:
    """One run's headline number as a statistic of its units: the point value, the replicates under resample
    weights ``W`` (b, n) -> (b,), and which units (``pairing``, :func:`analyses.stats.pairing`: equal for two runs
    on the same units)."""

    point: float
    replicates: Callable[[np.ndarray], np.ndarray]
    n_units: int
    unit: str
    pairing: tuple | None


# ----------------------------------------------------------------------------- the paired bootstrap


def estimates(points: Sequence[float], replicates: Callable[[np.ndarray], np.ndarray], n_units: int, *,
              resamples: int = stats.RESAMPLES, seed: int = stats.SEED,
              level: float = stats.LEVEL) -> list[Estimate]:
    """Each of k numbers with its paired percentile interval at the expanded level: ``points`` (k,), and
    ``replicates(W)`` -> (b, k) the k statistics of resample weights W (b, n_units). Every number is resampled with
    the same weights (:func:`analyses.stats.blockwise_replicates`), so a difference of runs' replicates taken
    inside ``replicates`` is paired."""
    reps = stats.blockwise_replicates(replicates, int(n_units), int(resamples), int(seed))  # (B, k)
    ivs = stats.interval(reps, expanded_level(level, n_units))  # (2, k)
    return [Estimate(float(p), float(lo), float(hi)) for p, lo, hi in zip(points, ivs[0], ivs[1])]


def paired_difference(clean, edited, *, resamples: int = stats.RESAMPLES, seed: int = stats.SEED,
                      level: float = stats.LEVEL) -> Estimate:
    """The mean over units of ``edited - clean`` (per-unit values (n,) of the two runs, unit u in both) with its
    paired bootstrap interval (the units resampled alike for both runs)."""
    a, b = np.asarray(clean, np.float64), np.asarray(edited, np.float64)
    if a.ndim != 1 or a.shape != b.shape or not len(a):
        raise ProbeError(f"paired values are one per unit in both runs: shapes {a.shape} and {b.shape}")

    def diff(W: np.ndarray) -> np.ndarray:
        return (stats.mean_replicates(b, W) - stats.mean_replicates(a, W))[:, None]

    return estimates([float(b.mean() - a.mean())], diff, len(a), resamples=resamples, seed=seed, level=level)[0]


# ----------------------------------------------------------------------------- each analysis's units


def _perplexity_units(result, statistic: str, cfg, **inputs: Any) -> Units:
    window, overlap = next(m for m in result.measured() if statistic == f"token perplexity, T={m[0]}, o={m[1]}")
    sums = result.block_sums(overlap)  # per block: its NLL sum and its scored tokens
    if sums is None:
        raise ProbeError(f"this perplexity result keeps no per-block NLL at overlap {overlap}")
    nll, tokens = sums
    return Units(result.token_perplexity(window, overlap).point,
                 lambda W: np.exp(stats.ratio_replicates(nll, tokens, W)), len(nll), "block",
                 stats.pairing(result.bootstrap))


def _anisotropy_units(result, statistic: str, cfg, *, acts, **inputs: Any) -> Units:
    from analyses.anisotropy import draw_sample

    last, n = acts.n_layers, acts.n_texts
    level = statistic.split(" ")[0]  # token / sentence
    if level == "token":
        sample = draw_sample(acts, cfg)  # the analysis's own draw (its seed): the tokens its headline pairs
        X, unit_of = np.asarray(acts.layer_hidden(last, rows=sample.tokens)), acts.text_index()[sample.tokens]
    else:
        X, unit_of = np.asarray(acts.sentence[last]), np.arange(n)
    sums = stats.grouped_unit_sums(X, unit_of, n)
    return Units(result.last_layer_mean(level).point, lambda W: stats.pairwise_cosine_replicates(*sums, W), n,
                 "sentence", stats.pairing(result.bootstrap))


SUPPORTED: dict[str, Callable[..., Units]] = {"perplexity": _perplexity_units, "anisotropy": _anisotropy_units}


# ----------------------------------------------------------------------------- the control


def random_control(intervention: Intervention, seed: int = stats.SEED) -> tuple[Intervention, str]:
    """A random edit of the same size as ``intervention``'s, at its layer (see the module docstring), and what it
    is in words."""
    edit = intervention.edit
    rng = np.random.default_rng([int(seed), CONTROL_STREAM])
    if type(edit) is Erase:
        basis = rng.standard_normal((edit.rank, edit.width))
        return Intervention(intervention.layer, ProjectOut(basis, edit.bias)), "random same-rank subspace"
    if type(edit) is AddVector:
        norm = abs(edit.scale) * float(np.linalg.norm(edit.vector))
        u = rng.standard_normal(edit.width)
        return (Intervention(intervention.layer, AddVector(norm * u / np.linalg.norm(u))),
                "random vector of the same norm")
    raise ProbeError(f"control='random' matches an Erase/ProjectOut's rank or an AddVector's norm; a "
                     f"{type(edit).__name__} has neither: give control= an Intervention of your own")


def _control(control: Any, edits: tuple[Intervention, ...], seed: int) -> tuple[tuple[Intervention, ...], str]:
    if control is None:
        return (), ""
    if isinstance(control, str):
        if control != "random":
            raise ProbeError(f"control= takes 'random', an Intervention (or a list of them) or None, not {control!r}")
        if len(edits) != 1:
            raise ProbeError(f"control='random' draws a control for one intervention, and {len(edits)} were given: "
                             "give control= an Intervention of your own")
        iv, kind = random_control(edits[0], seed)
        return (iv,), kind
    return as_interventions(control), "given"


# ----------------------------------------------------------------------------- the call


def run(analysis: str, model: Any, texts: Any = None, *, intervention: Any, control: Any = None,
        seed: int = stats.SEED, resamples: int = stats.RESAMPLES, level: float = stats.LEVEL, statistic: str = "",
        tokenizer: Any = None, name: str | None = None,
        cache_dir: str | os.PathLike | UserCache | None = USER_CACHE, **analysis_options: Any) -> EffectResult:
    """The effect of ``intervention`` on ``analysis``'s headline number ``statistic`` (default: its first) for
    ``model`` on ``texts``: the clean and edited runs' values and their paired difference (edited - clean) with
    bootstrap intervals over the analysis's units; with ``control`` ("random" or an Intervention) also the
    control run's and its differences. ``seed``: the analysis's seed (where its settings have one), the
    bootstrap's and the random control's; ``analysis_options``: the analysis's settings (as for
    ``<analysis>.run``); ``model``, ``texts``, ``tokenizer``, ``name``, ``cache_dir``: as for ``<analysis>.run``.
    Supported analyses: perplexity and anisotropy (see the module docstring); any other is one error line."""
    from analyses import get

    if analysis not in SUPPORTED:
        raise ProbeError(f"effect supports {', '.join(SUPPORTED)}; {analysis!r} keeps no per-unit values of its "
                         "headline number that a clean and an edited run can resample alike")
    edits = as_interventions(intervention)
    if not edits:
        raise ProbeError("effect needs intervention=: the edit whose effect it measures")
    if int(resamples) < 1 or not 0 < level < 1:
        raise ProbeError(f"resamples must be at least 1 and level in (0, 1), not {resamples} and {level}")
    controls, control_kind = _control(control, edits, seed)
    A = get(analysis)
    if "seed" in {f.name for f in dataclasses.fields(A.Config)}:
        analysis_options.setdefault("seed", int(seed))
    cfg = A.inputs.with_corpus(A.config(None, **analysis_options), texts)
    if A.check is not None:
        A.check(cfg)
    where = {"tokenizer": tokenizer, "name": name, "cache_dir": cache_dir}
    shared = A.inputs.from_python(model, texts, cfg, **where) if A.inputs.kind == "lm" else None  # loaded once
    arms = [(), edits] + ([controls] if controls else [])
    results, units = [], []
    for arm in arms:
        with intervening(arm):
            inputs = shared if shared is not None else A.inputs.from_python(model, texts, cfg, **where)
            result = A.compute(cfg, **inputs)
            results.append(result)
            chosen = _statistic(result, statistic, analysis)
            units.append(SUPPORTED[analysis](result, chosen, cfg, **inputs))
            del inputs
    if units[0].pairing is None or len({u.pairing for u in units}) != 1 or len({u.n_units for u in units}) != 1:
        raise ProbeError(f"the clean and edited runs of {analysis} were computed on different units: their "
                         "difference cannot be paired")
    n = units[0].n_units

    def statistics(W: np.ndarray) -> np.ndarray:  # (b, k): each run, then each paired difference
        r = [u.replicates(W) for u in units]
        diffs = [r[1] - r[0]] + ([r[2] - r[0], r[1] - r[2]] if len(r) == 3 else [])
        return np.stack(r + diffs, 1)

    p = [u.point for u in units]
    points = p + [p[1] - p[0]] + ([p[2] - p[0], p[1] - p[2]] if len(p) == 3 else [])
    est = estimates(points, statistics, n, resamples=resamples, seed=seed, level=level)
    with_control = len(units) == 3
    return EffectResult(
        analysis=analysis, statistic=chosen, model=results[0].model_name, edit=results[1].edit,
        edit_description=in_words(results[1].identity.edits), control_edit=results[2].edit if with_control else "",
        control_kind=control_kind, unit=units[0].unit, n_units=n, resamples=int(resamples), seed=int(seed),
        level=float(level), interval_level=expanded_level(level, n), clean=est[0], edited=est[1],
        difference=est[3 if with_control else 2], control=est[2] if with_control else None,
        control_difference=est[4] if with_control else None, beyond_control=est[5] if with_control else None,
        runs=tuple(results))


def _statistic(result, statistic: str, analysis: str) -> str:
    names = list(result.headline_numbers())
    if not names:
        raise ProbeError(f"this {analysis} result has no headline number")
    if statistic and statistic not in names:
        raise ProbeError(f"{analysis} has no headline number {statistic!r}; it has: {', '.join(names)}")
    return statistic or names[0]


# ----------------------------------------------------------------------------- the command line

EDITS = ("add", "project-out", "erase")


@dataclass
class Config(OutConfig, SeedConfig):
    """The effect of an edit of a model's states on an analysis's headline number: the clean and the edited run on
    the same units, their paired difference with a bootstrap interval, and a random control of the edit's size."""

    analysis: str = arg("perplexity", "the analysis whose headline number is compared", choices=tuple(SUPPORTED))
    model: str = arg("tiny-gpt2", "the model: a checkpoints.yaml name, a model folder or hf:org/name")
    texts: str = arg("", "a UTF-8 file of texts, one per line (empty: the analysis's corpus, --option corpus=...)")
    layer: int = arg(-1, "the layer edited: 0 = the embeddings, l = layer l's output, -1 = the last")
    edit: str = arg("add", "add: add scale x a vector (steering); project-out: remove the span of some rows; "
                           "erase: x - ((x - bias) right^T) left^T (LEACE's form)", choices=EDITS)
    arrays: str = arg("", "the edit's arrays: a .npy file (add: the vector (d,); project-out: the rows (r, d)) or "
                          "a .npz file with left (d, r), right (r, d) and optionally bias (d,) (erase)")
    scale: float = arg(1.0, "add: the vector's multiplier")
    control: str = arg("random", "random: a random edit of the same rank (erase, project-out) or norm (add) at the "
                                 "same layer, drawn with the seed; none: no control run", choices=("random", "none"))
    statistic: str = arg("", "the headline number compared (empty: the analysis's first)")
    resamples: int = arg(stats.RESAMPLES, "bootstrap resamples", min=1)
    level: float = arg(stats.LEVEL, "the intervals' nominal level", min=0.5, max=0.999)
    option: list[str] = arg([], "a setting of the analysis as KEY=VALUE (a list: comma-separated), e.g. "
                                "overlap=0, window=64, n_documents=2, max_tokens=200, n_sentences=40")


def read_edit(cfg: Config) -> Intervention:
    """The intervention ``cfg`` describes; one ProbeError line for a missing or malformed arrays file."""
    path = Path(cfg.arrays).expanduser()
    if not cfg.arrays or not path.is_file():
        raise ProbeError(f"--arrays {cfg.arrays or '(none)'}: no such file (the {cfg.edit} edit's arrays: "
                         f"{'a .npz file' if cfg.edit == 'erase' else 'a .npy file'})")
    try:
        loaded = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise ProbeError(f"--arrays {cfg.arrays}: not a numpy file ({' '.join(str(e).split())[:80]})") from None
    if cfg.edit == "erase":
        if not hasattr(loaded, "files") or not {"left", "right"} <= set(loaded.files):
            raise ProbeError(f"--arrays {cfg.arrays}: an erase takes a .npz file with arrays left and right (and "
                             "optionally bias)")
        bias = loaded[BIAS] if BIAS in loaded.files else None
        return Intervention(cfg.layer, Erase(loaded[LEFT], loaded[RIGHT], bias))
    if hasattr(loaded, "files"):
        raise ProbeError(f"--arrays {cfg.arrays}: {cfg.edit} takes one array in a .npy file, not a .npz archive")
    edit = AddVector(loaded, cfg.scale) if cfg.edit == "add" else ProjectOut(loaded)
    return Intervention(cfg.layer, edit)


LEFT, RIGHT, BIAS = "left", "right", "bias"  # an erase's arrays in its .npz file


def analysis_options(analysis: str, options: list[str]) -> dict[str, Any]:
    """``--option KEY=VALUE`` settings as the analysis's Config types them; one ProbeError line for an unknown
    key or a value of the wrong type."""
    from analyses import get

    A = get(analysis)
    hints = typing.get_type_hints(A.Config)
    known = {f.name for f in dataclasses.fields(A.Config)} - {"model", "out", "figures", "seed"}
    out: dict[str, Any] = {}
    for text in options:
        key, eq, value = text.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or key not in known:
            raise ProbeError(f"--option {text!r}: {analysis} takes KEY=VALUE, KEY one of {', '.join(sorted(known))}")
        tp = hints[key]
        many = typing.get_origin(tp) is list
        base = typing.get_args(tp)[0] if many else tp
        try:
            items = [_typed(base, v.strip()) for v in value.split(",")] if many else _typed(base, value.strip())
        except ValueError:
            raise ProbeError(f"--option {text!r}: {key} takes {getattr(base, '__name__', base)}") from None
        out[key] = items
    return out


def _typed(tp: Any, text: str) -> Any:
    if tp is bool:
        if text.lower() not in ("true", "false", "1", "0"):
            raise ValueError(text)
        return text.lower() in ("true", "1")
    return tp(text) if tp in (int, float, str) else text


def read_texts(path: str) -> list[str] | None:
    """The texts of ``--texts`` (one a line, blank lines skipped); None for the analysis's corpus."""
    if not path:
        return None
    texts = [line.strip() for line in Path(path).expanduser().read_text(encoding="utf-8").splitlines()]
    texts = [t for t in texts if t]
    if not texts:
        raise ProbeError(f"--texts {path}: no text in it (one text a line)")
    return texts


def save(result: EffectResult, out: str | os.PathLike, figures: bool = True) -> list[Path]:
    """Write ``result`` to ``<out>/effects/<analysis>/<name>.json`` (atomically) and, with ``figures``, its figure
    to ``<out>/figures/effect-<analysis>-<name>.{png,pdf}``; the paths written."""
    from analyses import common  # its save_figure, looked up when called

    path = Path(out) / "effects" / result.analysis / f"{result.name()}.json"
    atomic_text(path, json.dumps(jsonable(result.to_json()), indent=1, allow_nan=False) + "\n")
    paths = [path]
    if figures:
        import matplotlib.pyplot as plt

        ax = plot(result)
        paths += common.save_figure(ax.figure, out, f"effect-{result.analysis}-{result.name()}")
        plt.close(ax.figure)
    return paths


def _main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv)
    check_values(cfg)
    iv = read_edit(cfg)
    result = run(cfg.analysis, cfg.model, read_texts(cfg.texts), intervention=iv,
                 control=None if cfg.control == "none" else "random", seed=cfg.seed, resamples=cfg.resamples,
                 level=cfg.level, statistic=cfg.statistic, cache_dir=Path(cfg.out) / "cache",
                 **analysis_options(cfg.analysis, cfg.option))
    for path in save(result, cfg.out, cfg.figures):
        print(f"wrote {path}")
    print(repr(result))


def main(argv: list[str] | None = None) -> None:
    """``python -m analyses.effect``: bad input is one ``error:`` line and exit status 2."""
    run_main(_main, argv)


if __name__ == "__main__":
    main()
