"""Held-out masked-LM loss of a trained checkpoint, per held-out block (Graph-Transformer paper Table 2).

Reads what the suite's training recipe left beside a model (no model runs here): its training record
``train_config.json`` (the recipe's settings and the recorded held-out loss) and, where
``scripts/heldout_blocks.py`` has re-scored the held-out part, ``heldout_blocks.csv`` (per block: the
summed cross-entropy over its masked tokens, in nats, and the number of masked tokens).

* ``loss``: the held-out loss per masked token, sum of the blocks' losses / sum of their masked tokens;
  with its interval from a block bootstrap over runs of consecutive held-out blocks (in text order), as long
  as they can be while leaving at least 20 runs, read at the expanded level (ratio bootstrap; the rule of
  :mod:`analyses.blocks`: neighbouring held-out blocks' losses are correlated, 0.18-0.21 at lags of 1 to 20
  blocks for mog-small-wg, so single blocks would give too narrow an interval). Two models trained on the same
  data, tokenizer and seed score the same blocks at the same masked positions, so their results resample
  alike and a comparison of them is paired over the same runs.
* Without ``heldout_blocks.csv`` the loss is the recorded held-out loss (``loss_source`` "held-out,
  recorded"), or, when the recipe measured none, the mean training loss of the last steps ("training,
  last steps"); such a result has no per-block values, so a claim reads it as a point value.
* ``recipe``: the training settings the record holds (architecture, fusion, data, steps, rate, seed).

    $ python -m analyses.mlm_loss --model mog-small-wg --model mog-small-sum [--out out]

Writes out/results/mlm_loss/<model>.json (+ .csv: one row per block) and out/figures/mlm-loss.{png,pdf}
(each model's loss with its interval, by fusion). The claim table and its forest plot
(:mod:`analyses.summary.claims`) show the paired comparison of Table 2.
"""

from __future__ import annotations

import csv
import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from analyses import blocks as block_bootstrap
from analyses import common, stats, style
from analyses.analysis import Analysis, Figure
from analyses.common import Identity, settings_used
from analyses.inputs import Inputs, resolve_spec
from analyses.model_info import ModelInfo
from probes.capture.store import USER_CACHE
from probes.config import ModelsConfig, OutConfig, SeedConfig
from probes.errors import ProbeError
from probes.io import loads_json

RECORD, BLOCKS = "train_config.json", "heldout_blocks.csv"
# what a comparison of two trained models needs to be equal (besides the fusion and the seed it compares):
ARCHITECTURE = ("arch", "width", "layers", "heads", "intermediate", "vocab_size", "max_positions", "half_dim",
                "shared_qkv")
TRAINING = ("corpus", "split", "tokenizer", "seq_len", "steps", "batch_size", "lr", "warmup", "weight_decay",
            "mask_prob", "dropout", "eval_blocks")


@dataclass
class Config(OutConfig, SeedConfig, ModelsConfig):
    """Held-out masked-LM loss of trained checkpoints, per held-out block, from their training records (--seed:
    the bootstrap's)."""

    device: ClassVar[str] = "cpu"  # nothing runs on a device: files are read


@dataclasses.dataclass(frozen=True)
class TrainingRecords(Inputs):
    """What the training recipe left in a model's folder: ``{"spec", "record", "blocks"}`` (:func:`load_inputs`)."""

    kind: ClassVar[str] = "training record"
    Config: ClassVar[type] = Config

    def check_model(self, spec, cfg) -> None:
        folder = spec.local_path()
        if folder is None or not (folder / RECORD).is_file():
            raise ProbeError(f"model '{spec.name}' has no training record ({RECORD} in its folder): the held-out "
                             "MLM loss is read from what the suite's training recipe wrote")

    def load(self, unit: tuple, cfg) -> dict:
        return load_inputs(unit[0], cfg)

    def from_python(self, model, texts, cfg, *, tokenizer=None, name=None, cache_dir=USER_CACHE) -> dict:
        if texts is not None or tokenizer is not None or name is not None:
            raise ProbeError("mlm_loss reads a trained model's folder: give the model's name, no texts")
        return load_inputs(model, cfg)


@dataclass
class Recipe:
    """The training settings of a model's train_config.json that its loss depends on (None: the record lacks it):
    the architecture (:data:`ARCHITECTURE`), the fusion, the data and schedule (:data:`TRAINING`), the seed and the
    precision."""

    arch: str | None = None
    width: int | None = None
    layers: int | None = None
    heads: int | None = None
    intermediate: int | None = None
    vocab_size: int | None = None
    max_positions: int | None = None
    half_dim: bool | None = None
    shared_qkv: bool | None = None
    fusion: str | None = None
    corpus: str | None = None
    split: Any = None
    tokenizer: str | None = None
    seq_len: int | None = None
    steps: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    warmup: int | None = None
    weight_decay: float | None = None
    mask_prob: float | None = None
    dropout: float | None = None
    eval_blocks: int | None = None
    seed: int | None = None
    amp: Any = None
    dtype: str | None = None

    def architecture(self) -> tuple:
        """The settings of :data:`ARCHITECTURE`, in its order: equal for two models of one shape."""
        return tuple(getattr(self, k) for k in ARCHITECTURE)

    def training(self) -> dict[str, Any]:
        """The settings of :data:`TRAINING` (data and schedule): equal for two models trained alike."""
        return {k: getattr(self, k) for k in TRAINING}


# the comparison's settings are the recipe's fields: a name spelt otherwise fails here, at import
assert {*ARCHITECTURE, *TRAINING} <= {f.name for f in dataclasses.fields(Recipe)}, "ARCHITECTURE/TRAINING: not Recipe"


@dataclass
class HeldoutBlocks:
    """Per held-out block (n,): its summed masked-LM loss (nats) and its masked tokens."""

    loss_sum: list[float]
    masked_tokens: list[int]


@dataclass(repr=False)
class Result(common.AnalysisResult):
    """One trained model's held-out MLM loss: the saved document's keys, in order."""

    recipe: Recipe  # the training settings of train_config.json (arch, fusion, width, layers, ..., seed)
    loss: float  # nats per masked token
    loss_source: str  # "held-out blocks" | "held-out, recorded" | "training, last steps"
    recorded_heldout_loss: float | None  # what the recipe recorded (float32 weights; the blocks: saved weights)
    loss_ci: list[float] | None  # bootstrap interval over blocks (None without per-block values)
    blocks: HeldoutBlocks | None  # per held-out block; None without the file
    # analyses.blocks.bootstrap over runs of blocks (runs: each run's first block;
    #                                units_id: the masked-token counts)
    bootstrap: stats.Bootstrap | None = None

    def headline_numbers(self) -> dict[str, stats.Sample]:
        return {"held-out MLM loss": self.heldout_loss()}

    def plotted_values(self) -> np.ndarray:
        """What :meth:`plot` draws first: the held-out loss (one point)."""
        return np.array([self.loss], float)

    def headline(self) -> dict[str, str]:
        ci = "" if self.loss_ci is None else f" [{self.loss_ci[0]:.3f}, {self.loss_ci[1]:.3f}]"
        return {"held-out MLM loss": f"{self.loss:.3f}{ci} nats per masked token ({self.loss_source})",
                "fusion": str(self.recipe.fusion)}

    @style.drawing
    def plot(self, ax=None, **kwargs):
        """The held-out MLM loss with its 95% bootstrap interval over blocks on one Axes (a new figure when
        None), like a scikit-learn Display: a point (hollow: a recorded loss without per-block values) on the
        next free row of the Axes, so results drawn on one Axes stack one row each. ``kwargs`` (``color=``,
        ``label=``, ``marker=``, ``markersize=``, ``capsize=`` ...) go to ``ax.errorbar``; without ``color=``
        the next colour of the Axes' cycle; the label (default: the model and its fusion) enters the legend.
        Fonts and colours follow the caller's rcParams. Returns the Axes."""
        from matplotlib.container import ErrorbarContainer

        ax = style.one_axes(ax, (4.2, 2.4))
        row = sum(isinstance(c, ErrorbarContainer) for c in ax.containers)  # the rows already drawn
        label = f"{style.display_name(self.model_name)} ({self.recipe.fusion})"
        _loss_point(ax, style.on_axes(ax, self, kwargs, label), -row)
        ax.set_yticks([])
        ax.set_ylim(-row - 0.7, 0.7)
        ax.set_xlabel("held-out MLM loss (nats per masked token)")
        return style.finish(ax, title="95% bootstrap interval over blocks")

    def heldout_loss(self) -> stats.Sample:
        """The loss per masked token with its bootstrap replicates over held-out blocks (ratio bootstrap;
        the point value alone without per-block values)."""
        if self.blocks is None or self.bootstrap is None:
            return stats.Sample(self.loss)
        return stats.Sample.of_ratio(self.loss, self.blocks.loss_sum, self.blocks.masked_tokens, self.bootstrap)


def read_blocks(path) -> tuple[np.ndarray, np.ndarray]:
    """(loss sums (n,), masked tokens (n,)) of a heldout_blocks.csv; one ProbeError line for a bad file."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        sums = np.array([float(r["loss_sum"]) for r in rows])
        counts = np.array([int(r["masked_tokens"]) for r in rows], dtype=np.int64)
    except (OSError, KeyError, TypeError, ValueError) as e:
        raise ProbeError(f"{path} is not a held-out blocks file ({type(e).__name__}: {e}); "
                         "rewrite it with scripts/heldout_blocks.py") from None
    if not len(rows) or not np.isfinite(sums).all() or (sums < 0).any() or (counts < 0).any() or not counts.sum():
        raise ProbeError(f"{path} holds no blocks with masked tokens, or a loss that is negative or not finite")
    return sums, counts


def load_inputs(model, cfg: Config) -> dict:
    """``{"record": ..., "blocks": (sums, counts) or None, "spec": ...}``: the model folder's training record
    and per-block held-out losses."""
    spec = resolve_spec(model)
    TrainingRecords().check_model(spec, cfg)
    folder = spec.local_path()
    try:
        record = loads_json((folder / RECORD).read_text(encoding="utf-8"))
        record["config"]["arch"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ProbeError(f"{folder / RECORD} is not a training record ({type(e).__name__}: {e})") from None
    blocks = read_blocks(folder / BLOCKS) if (folder / BLOCKS).is_file() else None
    if blocks is not None and record.get("heldout_masked_tokens") not in (None, int(blocks[1].sum())):
        raise ProbeError(f"{folder / BLOCKS} counts {int(blocks[1].sum())} masked tokens, the training record "
                         f"{record['heldout_masked_tokens']}: it scored other blocks; rewrite it with "
                         "scripts/heldout_blocks.py")
    return {"spec": spec, "record": record, "blocks": blocks}


def compute(cfg: Config | None = None, *, spec, record: dict, blocks) -> Result:
    """The held-out loss of one trained model, with its interval over blocks where the blocks were scored."""
    cfg = cfg or Config()
    rc = record["config"]
    recipe = Recipe(**{f.name: rc.get(f.name) for f in dataclasses.fields(Recipe)})
    evaluation = {"corpus": rc.get("corpus"), "split": "heldout", "tokenizer": rc.get("tokenizer"),
                  "seq_len": rc.get("seq_len"), "eval_blocks": rc.get("eval_blocks"), "mask_prob": rc.get("mask_prob")}
    held = record.get("heldout_loss")
    loss_ci = boot = per_block = None
    if blocks is not None:
        sums, counts = blocks
        loss, source = float(sums.sum() / counts.sum()), "held-out blocks"
        run = block_bootstrap.block_length([len(sums)])  # held-out blocks per resampled run (analyses.blocks)
        runs = block_bootstrap.runs([len(sums)], run)
        boot = block_bootstrap.bootstrap("block", len(runs), run, "held-out blocks", seed=cfg.seed,
                                         units_id=stats.units_id(counts.tolist()), runs=runs)
        W = stats.resample_weights(len(runs), boot.resamples, cfg.seed)
        rep = stats.ratio_replicates(stats.grouped(sums, boot), stats.grouped(counts, boot), W)
        loss_ci = stats.interval(rep, stats.interval_level(boot)).tolist()
        per_block = HeldoutBlocks(loss_sum=sums.tolist(), masked_tokens=counts.tolist())
        evaluation.update(n_blocks=len(sums), masked_tokens=int(counts.sum()))
    elif held is not None:
        loss, source = float(held), "held-out, recorded"
    else:
        loss, source = float(record["last_loss_mean"]), "training, last steps"
    model = {"name": spec.name, "family": spec.family, "kind": spec.kind, "source": spec.source,
             "fingerprint": spec.fingerprint(), "parameters": record.get("parameters")}
    identity = Identity(model_name=spec.name, config=settings_used(cfg, requested=spec.name),
                        model=ModelInfo.from_json(model),
                        corpus=evaluation)
    return Result(identity=identity, recipe=recipe, loss=loss, loss_source=source,
                  recorded_heldout_loss=None if held is None else float(held), loss_ci=loss_ci, blocks=per_block,
                  bootstrap=boot)


def table_rows(result: Result) -> list[dict]:
    """One row per held-out block (or one row with the loss where no blocks were scored)."""
    if result.blocks is None:
        return [{"model": result.model_name, "loss": result.loss, "loss_source": result.loss_source}]
    return [{"model": result.model_name, "block": i, "loss_sum": s, "masked_tokens": c}
            for i, (s, c) in enumerate(zip(result.blocks.loss_sum, result.blocks.masked_tokens))]


def _loss_point(ax, drawn: style.Drawn, y: float) -> None:
    """One result's loss at height ``y`` with its interval (a hollow marker without one)."""
    res = drawn.result
    ci = res.loss_ci
    xerr = None if ci is None else [[res.loss - ci[0]], [ci[1] - res.loss]]
    kw = drawn.line(ls="none", marker="o", ms=5, capsize=3)
    if ci is None:
        kw.setdefault("markerfacecolor", "white")
    ax.errorbar([res.loss], [y], xerr=xerr, **kw)


@style.drawing
def plot(results: list[Result], fig=None):
    """Each model's held-out MLM loss with its 95% bootstrap interval over blocks (a hollow dot: a recorded
    loss without per-block values), one row per model, coloured by model. ``fig``: a Figure or SubFigure to
    draw into (default: a new figure). Returns the figure."""
    fig = style.new_figure(fig, (5, 0.45 * len(results) + 1.2))
    ax = fig.subplots()
    drawn = style.in_figure(results)
    for y, d in enumerate(reversed(drawn)):
        _loss_point(ax, d._replace(kw={"color": d.color}), y)
    ax.set_yticks(range(len(results)), [f"{r.model_name} ({r.recipe.fusion})" for r in reversed(results)])
    ax.set_xlabel("held-out MLM loss (nats per masked token; 95% bootstrap interval over blocks)")
    ax.set_title("held-out masked-LM loss (Graph-Transformer Table 2)")
    return fig


ANALYSIS = Analysis(
    name="mlm_loss",
    inputs=TrainingRecords(),
    Config=Config, Result=Result, compute=compute, table_rows=table_rows,
    figures=(Figure("mlm-loss", plot, "Held-out masked-LM loss of each trained model with its 95% bootstrap "
                    "interval over held-out blocks (Graph-Transformer Table 2's comparison of fusions: lower is "
                    "better; a hollow dot is a recorded loss without per-block values)."),),
    example=("--model", "mog-small-wg"),
)
run, main = ANALYSIS.run, ANALYSIS.main  # the Python call and the command line

if __name__ == "__main__":
    ANALYSIS.main()
