"""Masked-LM pre-training of the S-LSTM and its Transformer baselines on the same data (S-LSTM paper §7).

One recipe, four architectures of the same width and depth, trained with the same tokenizer,
data order, masking, steps, batch and optimiser, as the paper does for its fair comparison:

* ``slstm``: :class:`probes.models.slstm.SLSTMForMaskedLM` (one block shared by ``--layers`` steps);
* ``bert``: ``transformers.BertForMaskedLM`` from a config (``--layers`` independent layers);
* ``albert``: ``transformers.AlbertForMaskedLM`` from a config (one layer shared ``--layers`` times,
  factorised embeddings of ``--albert-embedding``);
* ``mog``: :class:`probes.models.mog.MoGForMaskedLM`, the Graph-Transformer (``--fusion``, ``--half-dim``,
  ``--shared-qkv``; ``--heads`` and ``--intermediate`` as for bert).

Data: the corpus (default: the embedded one) split into sentences; complete sentences of a
document are packed into blocks of at most ``--seq-len`` tokens including [CLS] ... [SEP]
(fairseq's ``--sample-break-mode complete``; a longer sentence is cut into pieces), shuffled with
the seed each epoch (the data side lives in :mod:`recipes.mlm_data`). Masking (BERT): 15% of the real,
non-special tokens; of those 80% [MASK], 10% a random token, 10% unchanged; the loss is the cross-entropy
at the masked positions only.
No next-sentence objective (as the paper, following RoBERTa). Optimiser: AdamW (betas 0.9/0.98,
eps 1e-6, weight decay on matrices only), linear warm-up then linear decay to 0, gradient
clipping at 1.0.

Tokenizer: WordPiece (lower-cased, BERT normalisation and pre-tokenisation, [PAD] [UNK] [CLS]
[SEP] [MASK]) trained with the ``tokenizers`` library on the same corpus, ids renumbered
canonically (the trainer's tie order varies from run to run). The first run saves it in
``<out-dir>/wordpiece-<vocab-size>/`` (with the corpus hash it was trained on) and every later
run loads it from there, so all the models share one tokenizer; each checkpoint folder gets a
copy (Hugging Face ``PreTrainedTokenizerFast`` files).

Output: ``<out-dir>/<name>/`` (``out/checkpoints/<arch>-small/`` by default), written complete or not at
all (:func:`probes.io.write_folder`): ``model.safetensors`` (weights in ``--dtype``, float16 by default:
the loaders cast to float32), ``config.json`` (the S-LSTM's or the Hugging Face config), the tokenizer
files, ``train_config.json`` (the resolved config + the outcome) and ``train_log.csv`` (loss every
``--log-every`` steps). The Hugging Face folders load with ``AutoModel`` (registry family ``hf``),
the S-LSTM folder with ``probes.models.slstm_encoder`` (family ``slstm``). ``--name`` is one folder name
(no ``/``, no ``..``). Before training starts, an existing non-empty ``<out-dir>/<name>/`` is refused
unless this recipe wrote it (its ``train_config.json``) AND ``--overwrite`` is given, so a quick run
never replaces the committed ``checkpoints/`` models: retraining those names the folder and the flag
(``scripts/train_small_models.py`` does, with the committed models' settings).

    $ python -m recipes.train --arch slstm      # -> out/checkpoints/slstm-small/
    $ python -m recipes.train --arch bert --out-dir checkpoints --overwrite   # replaces checkpoints/bert-small/
    $ python -m recipes.train --arch mog --fusion weight-gate --half-dim --name mog-small

A new architecture (e.g. a causal GPT-2 recipe) adds an entry to :data:`ARCHS`.
"""

from __future__ import annotations

import csv
import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from probes.capture import distributed
from probes.config import arg, parse_config, run_main
from probes.errors import ProbeError
from probes.io import write_folder
from probes.models.slstm import SLSTMConfig, SLSTMForMaskedLM, count_parameters, save_pretrained
from recipes.loop import Loop, ScaleConfig, check_name, check_output, run_command, state_dir, write_snapshot
from recipes.mlm_data import MLMData, MLMDataset, batches, masked_batch, unigram_baselines

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

EVAL_BATCH = 32  # held-out blocks scored per forward pass (a memory bound only: the mean does not depend on it)


@dataclass
class TrainConfig(MLMData, ScaleConfig):
    """Masked-LM pre-training of the S-LSTM / BERT-style / ALBERT-style / Graph-Transformer models on the same data."""

    arch: str = arg("slstm", "architecture: slstm | bert | albert | mog", choices=("slstm", "bert", "albert", "mog"))
    name: str = arg("", "checkpoint folder name (default: <arch>-small)")
    out_dir: str = arg("out/checkpoints", "folder that receives <name>/ (relative to the current directory; the "
                                          "committed models are retrained with --out-dir checkpoints --overwrite)")
    width: int = arg(256, "hidden size d of every model", min=1)
    layers: int = arg(4, "S-LSTM recurrent steps / Transformer layers", min=1)
    heads: int = arg(4, "attention heads (bert, albert, mog)", min=1)
    intermediate: int = arg(1024, "feed-forward size (bert, albert, mog)", min=1)
    albert_embedding: int = arg(128, "ALBERT's factorised embedding size", min=1)
    fusion: str = arg("weight-gate", "Graph-Transformer fusion (mog)", choices=("sum", "weight-gate", "self-gate"))
    half_dim: bool = arg(False, "Graph-Transformer (mog): attentions of half width (probes.models.mog reading 5)")
    shared_qkv: bool = arg(False, "Graph-Transformer (mog): high- and middle-order attention share W_Q, W_K, W_V")
    max_positions: int = arg(512, "position embeddings (longest input the model accepts)", min=8)
    batch_size: int = arg(6, "blocks per step", min=1)
    steps: int = arg(150, "optimiser steps", min=1)
    lr: float = arg(1e-3, "peak learning rate", min=0.0)
    warmup: int = arg(15, "linear warm-up steps (then linear decay to 0)", min=0)
    weight_decay: float = arg(0.01, "AdamW weight decay (matrices only)", min=0.0)
    clip: float = arg(1.0, "gradient-norm clipping (0 = off)", min=0.0)
    dropout: float = arg(0.0, "dropout of every model (the released S-LSTMs use 0.0)", min=0.0, max=1.0)
    seed: int = arg(0, "seed for initialisation, data order and masking", min=0, max=2**32 - 1)
    log_every: int = arg(1, "write the loss to train_log.csv every this many steps", min=1)
    eval_every: int = arg(0, "held-out MLM loss every this many steps (0 = only at the end; needs --split train)",
                          min=0)
    eval_blocks: int = arg(512, "held-out blocks scored by each evaluation (0 = all); fixed masking seed", min=0)
    dtype: str = arg("float16", "dtype of the saved weights (float16 keeps checkpoints small; loaders cast to float32)",
                     choices=("float16", "bfloat16", "float32"))
    threads: int = arg(1, "torch intra-op threads (0 = torch's default); the count changes float rounding", min=0)
    progress: bool = arg(True, "show a progress bar")


# ----------------------------------------------------------------------------- architectures


@dataclass
class Arch:
    """How to build one architecture, compute masked logits, and save it."""

    build: Callable  # (cfg, vocab_size, pad_id) -> nn.Module
    masked_logits: Callable  # (model, ids, mask, selected) -> (M, V)
    save: Callable  # (model, folder, cfg) -> None


def _build_slstm(cfg: TrainConfig, vocab_size: int, pad_id: int):
    return SLSTMForMaskedLM(SLSTMConfig(vocab_size=vocab_size, hidden_size=cfg.width, num_layers=cfg.layers,
                                        max_positions=cfg.max_positions, dropout=cfg.dropout, pad_id=pad_id))


def _save_slstm(model, folder: Path, cfg: TrainConfig) -> None:
    save_pretrained(model, folder, dtype=cfg.dtype)


def _build_bert(cfg: TrainConfig, vocab_size: int, pad_id: int):
    from transformers import BertConfig, BertForMaskedLM

    conf = BertConfig(vocab_size=vocab_size, hidden_size=cfg.width, num_hidden_layers=cfg.layers,
                      num_attention_heads=cfg.heads, intermediate_size=cfg.intermediate,
                      max_position_embeddings=cfg.max_positions, hidden_dropout_prob=cfg.dropout,
                      attention_probs_dropout_prob=cfg.dropout, pad_token_id=pad_id)
    return BertForMaskedLM(conf)


def _build_albert(cfg: TrainConfig, vocab_size: int, pad_id: int):
    from transformers import AlbertConfig, AlbertForMaskedLM

    conf = AlbertConfig(vocab_size=vocab_size, embedding_size=cfg.albert_embedding, hidden_size=cfg.width,
                        num_hidden_layers=cfg.layers, num_hidden_groups=1, num_attention_heads=cfg.heads,
                        intermediate_size=cfg.intermediate, max_position_embeddings=cfg.max_positions,
                        hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.dropout,
                        classifier_dropout_prob=cfg.dropout, pad_token_id=pad_id, bos_token_id=None,
                        eos_token_id=None)
    return AlbertForMaskedLM(conf)


def _hf_logits(base: str, head: str):
    def logits(model, ids, mask, selected):
        seq = getattr(model, base)(input_ids=ids, attention_mask=mask).last_hidden_state
        return getattr(model, head)(seq[selected])
    return logits


def _save_hf(model, folder: Path, cfg: TrainConfig) -> None:
    """save_pretrained (float32 config), then the safetensors file rewritten in cfg.dtype."""
    from safetensors.torch import load_file, save_file

    model.save_pretrained(folder)
    path = folder / "model.safetensors"
    sd = load_file(str(path))
    save_file({k: v.to(getattr(torch, cfg.dtype)).contiguous() for k, v in sd.items()}, str(path),
              metadata={"format": "pt"})


def _build_mog(cfg: TrainConfig, vocab_size: int, pad_id: int):
    from probes.models.mog import MoGConfig, MoGForMaskedLM

    try:
        conf = MoGConfig(vocab_size=vocab_size, hidden_size=cfg.width, num_layers=cfg.layers,
                         num_heads=cfg.heads, intermediate_size=cfg.intermediate, fusion=cfg.fusion,
                         shared_qkv=cfg.shared_qkv, half_dim=cfg.half_dim,
                         max_positions=cfg.max_positions, dropout=cfg.dropout, pad_id=pad_id)
    except ValueError as e:
        raise ProbeError(f"--arch mog: {e}") from None
    return MoGForMaskedLM(conf)


def _save_mog(model, folder: Path, cfg: TrainConfig) -> None:
    from probes.models.mog import save_pretrained as save_mog

    save_mog(model, folder, dtype=cfg.dtype)


ARCHS: dict[str, Arch] = {
    "slstm": Arch(_build_slstm, lambda m, ids, mask, sel: m(ids, mask, masked_positions=sel), _save_slstm),
    "bert": Arch(_build_bert, _hf_logits("bert", "cls"), _save_hf),
    "albert": Arch(_build_albert, _hf_logits("albert", "predictions"), _save_hf),
    "mog": Arch(_build_mog, lambda m, ids, mask, sel: m(ids, mask, masked_positions=sel), _save_mog),
}


# ----------------------------------------------------------------------------- training


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _optimizer(model, cfg: TrainConfig):
    params = list({id(p): p for p in model.parameters() if p.requires_grad}.values())
    decay = [p for p in params if p.dim() >= 2]
    rest = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.98), eps=1e-6)
    warm = max(cfg.warmup, 1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (cfg.steps - s) / max(cfg.steps - warm, 1))))
    return opt, sched


def train(cfg: TrainConfig) -> Path:
    """Train one model and save it to ``<out_dir>/<name>/``; returns that folder. With
    ``--max-minutes`` the run may stop early (:class:`recipes.loop.Paused`, exit 75) with its state
    in ``<out_dir>/.<name>.state/``; the same call resumes it."""
    if cfg.arch not in ARCHS:
        raise ProbeError(f"unknown --arch {cfg.arch!r}: this recipe trains {', '.join(ARCHS)}")
    if cfg.seq_len > cfg.max_positions or cfg.seq_len < 8:
        raise ProbeError(f"--seq-len {cfg.seq_len} must be between 8 and --max-positions ({cfg.max_positions})")
    if cfg.dtype not in ("float16", "bfloat16", "float32"):
        raise ProbeError(f"--dtype must be float16, bfloat16 or float32, not {cfg.dtype!r}")
    if cfg.eval_every and cfg.split != "train":
        raise ProbeError("--eval-every needs --split train (the held-out part is what it scores)")
    if cfg.arch != "slstm" and cfg.width % cfg.heads:  # before the tokenizer and data are prepared
        raise ProbeError(f"--width {cfg.width} is not a multiple of --heads {cfg.heads} (each head gets width / heads "
                         f"dimensions)")
    name = cfg.name or f"{cfg.arch}-small"
    check_name(name)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    dest = Path(cfg.out_dir) / name
    check_output(dest, "recipes.train", cfg)  # before training: never over another folder, nor unasked
    outcome = _train(cfg, state_dir(dest))
    if outcome.loop.is_main:
        record = {"config": asdict(cfg), "name": name, "command": run_command("recipes.train"), **outcome.summary}

        def write(work: Path) -> None:
            _write_folder(outcome, work, cfg)
            (work / "train_config.json").write_text(json.dumps(record, indent=1) + "\n")

        write_folder(dest, write)
    outcome.loop.finish()
    return dest


@dataclass
class TrainOutcome:
    """What a training run leaves for its folder: the loop (model, loss log), the architecture, the tokenizer,
    and the summary numbers ``train_config.json`` records beside the config."""

    loop: Loop
    arch: Arch
    tokenizer: PreTrainedTokenizerFast
    summary: dict


def _micro_loss(loop: Loop, arch: Arch, ids, corrupted, mask, selected, rows: slice, denominator: int):
    """Summed cross-entropy of one micro-batch's masked tokens / the global batch's masked tokens."""
    n = int(mask[rows].sum(1).max())  # trim the padding the other rows needed
    dev = loop.device
    sel = selected[rows, :n]
    with loop.autocast():
        logits = arch.masked_logits(loop.model, corrupted[rows, :n].to(dev), mask[rows, :n].to(dev), sel.to(dev))
    targets = ids[rows, :n][sel].to(dev)
    return F.cross_entropy(logits.float(), targets, reduction="sum") / denominator


@torch.no_grad()
def heldout_loss(loop: Loop, arch: Arch, data: MLMDataset, cfg: TrainConfig) -> tuple[float, int]:
    """Mean MLM loss over the masked tokens of ``cfg.eval_blocks`` held-out blocks (all with 0), masked
    with a fixed seed (seed + 1) so every evaluation of every model scores the same positions."""
    if not data.heldout:
        return float("nan"), 0
    use = data.heldout[:cfg.eval_blocks] if cfg.eval_blocks else data.heldout
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    was_training = loop.model.training
    loop.model.eval()
    total, count = 0.0, 0
    for b in range(0, len(use), EVAL_BATCH):
        rows = list(range(b, min(b + EVAL_BATCH, len(use))))
        ids, corrupted, mask, selected = masked_batch(use, rows, data.tokenizer, data.specials, cfg.mask_prob, gen)
        m = int(selected.sum())
        total += float(_micro_loss(loop, arch, ids, corrupted, mask, selected, slice(None), 1)) if m else 0.0
        count += m
    loop.model.train(was_training)
    return total / max(count, 1), count


def _train(cfg: TrainConfig, state_dir: Path) -> TrainOutcome:
    t_start = time.perf_counter()
    data = cfg.load(cfg.out_dir, cfg.max_positions)
    blocks, heldout, tokenizer, specials = data.blocks, data.heldout, data.tokenizer, data.specials
    if len(blocks) < cfg.batch_size:
        raise ProbeError(f"the corpus gives only {len(blocks)} training blocks; lower --batch-size")
    arch = ARCHS[cfg.arch]
    vocab = data.vocab
    seed_everything(cfg.seed)
    model = arch.build(cfg, vocab, tokenizer.pad_token_id)
    model.train()
    opt, sched = _optimizer(model, cfg)
    loop = Loop(model, opt, sched, config=cfg, steps=cfg.steps, clip=cfg.clip, state_dir=state_dir)
    gen = torch.Generator().manual_seed(cfg.seed)
    extra = loop.restore()
    if extra:
        gen.set_state(extra["mask_rng"])
    order = batches(blocks, cfg.batch_size, cfg.seed)
    for _ in range(loop.start_step):  # the data order is a pure function of the seed: skip what was seen
        next(order)
    micro = loop.micro_slices(cfg.batch_size)
    t0 = time.perf_counter() - float(extra.get("seconds", 0.0))
    window = []
    bar = tqdm(range(loop.start_step + 1, cfg.steps + 1), desc=f"train {cfg.arch}", unit="step",
               disable=not cfg.progress or not loop.is_main, initial=loop.start_step, total=cfg.steps)
    for step in bar:
        ids, corrupted, mask, selected = masked_batch(blocks, next(order), tokenizer, specials, cfg.mask_prob, gen)
        denominator = int(selected.sum())
        local = sum(loop.backward(_micro_loss(loop, arch, ids, corrupted, mask, selected, rows, denominator))
                    for rows in micro)
        value = loop.step(local)
        window.append(value)
        tokens = int(mask.sum()) + (loop.rows[-1]["tokens"] if loop.rows else 0)
        # the loss as the log shows it (5 decimals): the summary's means are of these values
        row = {"step": step, "loss": round(value, 5), "loss_mean": None, "lr": sched.get_last_lr()[0],
               "masked_tokens": denominator, "tokens": tokens, "seconds": None, "heldout_loss": None}
        if step % cfg.log_every == 0 or step == cfg.steps:
            row["loss_mean"] = float(np.mean(window))
            window = []
            bar.set_postfix(loss=f"{value:.3f}")
        if heldout and cfg.eval_every and step % cfg.eval_every == 0 and step < cfg.steps:
            row["heldout_loss"] = heldout_loss(loop, arch, data, cfg)[0]
        if _logged(row):
            row["seconds"] = time.perf_counter() - t0
        loop.rows.append(row)
        _snapshot(loop, arch, data, cfg, step)
        loop.after_step(step, lambda: {"mask_rng": gen.get_state(), "seconds": time.perf_counter() - t0})
    losses = [r["loss"] for r in loop.rows]
    train_seconds = time.perf_counter() - t0
    k = max(1, len(losses) // 6)  # first / last sixth of the steps
    final_eval = heldout_loss(loop, arch, data, cfg) if heldout else (float("nan"), 0)
    if heldout:
        loop.rows[-1]["heldout_loss"] = final_eval[0]
    summary = {
        "arch": cfg.arch, "parameters": count_parameters(model), "vocab_size": vocab,
        "first_loss": losses[0], "first_loss_mean": float(np.mean(losses[:k])),
        "last_loss_mean": float(np.mean(losses[-k:])), "loss_mean_over": k, "final_loss": losses[-1],
        "heldout_loss": final_eval[0] if heldout else None, "heldout_masked_tokens": final_eval[1],
        "heldout_blocks": min(len(heldout), cfg.eval_blocks or len(heldout)),
        **unigram_baselines(blocks, heldout, specials, vocab),
        "train_seconds": round(train_seconds, 1), "total_seconds": round(time.perf_counter() - t_start, 1),
        "tokens_seen": loop.rows[-1]["tokens"], "training_blocks": len(blocks), "corpus": data.corpus,
        "tokenizer_corpus": data.tokenizer_corpus, "weights_dtype": cfg.dtype, "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(), "uniform_loss": math.log(vocab), "processes": loop.world,
        "device": loop.device, "amp": loop.amp,
    }
    return TrainOutcome(loop, arch, tokenizer, summary)


def _snapshot(loop: Loop, arch: Arch, data: MLMDataset, cfg: TrainConfig, step: int) -> None:
    """``--snapshots``: the model after ``step`` as a complete folder of this recipe (weights, tokenizer, the log so
    far) whose ``train_config.json`` records the held-out loss at that step, so that ``analyses.mlm_loss`` and
    ``scripts/heldout_blocks.py`` read a snapshot as they read the final folder."""
    name = cfg.name or f"{cfg.arch}-small"

    def write(work: Path) -> None:
        loss, masked = heldout_loss(loop, arch, data, cfg) if data.heldout else (float("nan"), 0)
        record = {"config": asdict(cfg), "name": name, "command": run_command("recipes.train"), "arch": cfg.arch,
                  "parameters": count_parameters(loop.model), "vocab_size": data.vocab,
                  "heldout_loss": loss if data.heldout else None, "heldout_masked_tokens": masked,
                  "heldout_blocks": min(len(data.heldout), cfg.eval_blocks or len(data.heldout)),
                  "tokens_seen": loop.rows[-1]["tokens"], "training_blocks": len(data.blocks), "corpus": data.corpus,
                  "tokenizer_corpus": data.tokenizer_corpus, "weights_dtype": cfg.dtype, "torch": torch.__version__,
                  "torch_threads": torch.get_num_threads(), "device": loop.device, "amp": loop.amp, "step": step}
        _write_folder(TrainOutcome(loop, arch, data.tokenizer, {}), work, cfg)
        (work / "train_config.json").write_text(json.dumps(record, indent=1) + "\n")

    write_snapshot(loop, step, Path(cfg.out_dir) / name, write,
                   {"name": name, "seed": cfg.seed, "recipe": "recipes.train", "tokens": loop.rows[-1]["tokens"]})


def _logged(row: dict) -> bool:
    """Whether a step's row goes into train_log.csv: every --log-every steps, the last step, and every evaluation."""
    return row["loss_mean"] is not None or row["heldout_loss"] is not None


# train_log.csv's columns and how each number is written
LOG_FORMATS = {"step": "d", "loss": ".5f", "loss_mean": ".5f", "lr": ".3e", "masked_tokens": "d", "tokens": "d",
               "seconds": ".1f", "heldout_loss": ".5f"}


def _write_folder(outcome: TrainOutcome, work: Path, cfg: TrainConfig) -> None:
    with open(work / "train_log.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(LOG_FORMATS)
        for r in outcome.loop.rows:
            if _logged(r):
                writer.writerow("" if r[k] is None else format(r[k], spec) for k, spec in LOG_FORMATS.items())
    model = outcome.loop.model
    device, was_training = next(model.parameters()).device, model.training
    model.eval().cpu()
    outcome.arch.save(model, work, cfg)
    model.to(device).train(was_training)
    outcome.tokenizer.save_pretrained(work)


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(TrainConfig, argv, __doc__.split("\n\n")[0])
    dest = train(cfg)
    if not distributed.is_main():
        return
    info = json.loads((dest / "train_config.json").read_text())
    print(f"{cfg.arch}: wrote {dest} ({info['parameters']:,} parameters); MLM loss "
          f"{info['first_loss_mean']:.3f} -> {info['last_loss_mean']:.3f} (mean of {info['loss_mean_over']} steps) "
          f"in {info['train_seconds']:.0f} s")


if __name__ == "__main__":
    run_main(main)
