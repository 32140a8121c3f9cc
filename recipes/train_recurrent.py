"""Fine-tune the recurrence module of :mod:`probes.models.recurrent` on a real pretrained causal LM.

Two modes, one loop (seeded, deterministic on one machine, resumable):

* ``--mode frozen`` (fits a CPU): every base parameter is frozen; only the recurrence module
  (Eq. 1's layer weights + the FFN, ~0.3 M parameters for SmolLM2-135M) is trained. Each example
  is k consecutive windows of T tokens (overlap o) of one book; h_prev flows from window i to
  window i+1 and the gradient flows back through all k windows (truncated backpropagation
  through k windows: the first window of an example starts without h_prev, as every document
  does at evaluation). The first window's loss does not depend on any trained parameter (no
  h_prev enters it), so it runs without gradients and is not part of the loss; the loss is the
  mean next-token loss of windows 2..k over the targets each scores (:mod:`probes.capture.windows`).
* ``--mode full`` (a GPU, ``--device cuda``): the paper's setting: the whole model and the module
  are trained (module at ``--recurrence-lr``, base at ``--lr``), loss over all k windows.
  ``--mode full --baseline`` fine-tunes the base alone on exactly the same sequences, steps and
  loss (the paper's baseline: the same fine-tuning budget without recurrence).

Which baseline is fair. In frozen mode no base parameter changes, so the fair baseline is the base
model unchanged: the two differ only by h_prev. A base fine-tuned with the same budget would
also have adapted its weights to the corpus (domain adaptation), which the frozen recurrent model
cannot do, and would measure that instead of the recurrence. The loop logs, every
``--base-loss-every`` steps, the unchanged base's loss on the same targets (``base_loss`` in
loss.csv), and ``analyses.perplexity --model smollm2-135m --model smollm2-135m-recurrent`` compares
the two on held-out text. One caveat, stated with the results: a module can also lower the loss
with an h_prev that ignores the previous window (a learned constant key/value acts like a
one-token soft prompt); ``training_config.json`` records the loss with h_prev taken from ANOTHER
example of the batch (``shuffled_loss``, every ``--base-loss-every`` steps) to separate the two.
In full mode the fair baseline is ``--baseline`` with the same settings.

Outputs (one folder, written atomically): frozen mode: ``recurrence.json`` +
``recurrence.safetensors`` only (the base stays where its registry entry points; a registry entry
names it with ``base:``, see checkpoints.yaml); full mode: the fine-tuned model folder
(``config.json``, ``model.safetensors`` float32, tokenizer files) plus the two recurrence files
(none with ``--baseline``). Always ``loss.csv`` (step, loss, base_loss, shuffled_loss, lr, tokens,
elapsed_s) and ``training_config.json`` (the exact command, the resolved config, the base's
fingerprint, corpus identity, wall time, package versions).

Scale and resuming come from :mod:`recipes.loop`, as in the other recipes: ``--device``,
``--amp`` (bfloat16 autocast on CUDA), ``--grad-accum``, torchrun processes (each draws the whole
batch and keeps its rows; a micro-batch's loss is weighted by its share of the batch's scored
targets, so padding does not tilt the mean). The state is saved every ``--save-every`` steps and at
``--max-minutes`` (then exit 75); the same command resumes it (``--no-resume`` starts over), with
the result of an uninterrupted run: each step's data is drawn from seed and step alone. In frozen
mode the state holds only the module's parameters, not a copy of the base. It lives in
``.<out>.state/`` beside the output folder and is removed once the final folder is written. The output
goes to ``out/checkpoints/<model>-recurrent`` unless ``--out`` names a folder; an existing output folder is
replaced only with ``--overwrite`` (and only if this recipe wrote it).

    $ python -m recipes.train_recurrent --model smollm2-135m --mode frozen --window 128 --overlap 0 \\
          --windows-per-sequence 3 --steps 60 --warmup 10 --batch-size 2 --threads 1 --save-every 10 \\
          --out checkpoints/smollm2-135m-recurrent --overwrite     # the committed module
    $ python -m recipes.train_recurrent ... --max-minutes 9     # a piece; the same command continues
    $ python -m recipes.train_recurrent --model smollm2-135m --mode full --device cuda --steps 2000 \\
          --out out/train/smollm2-135m-recurrent-full
    $ python -m recipes.train_recurrent --model smollm2-135m --mode full --baseline --device cuda \\
          --steps 2000 --out out/train/smollm2-135m-base-full
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from probes.capture.windows import check_window, plan
from probes.config import arg, check_device, parse_config, run_main
from probes.errors import ProbeError
from probes.io import write_folder
from recipes.loop import Loop, ScaleConfig, check_output, provenance, run_command, state_dir, warmup_cosine


@dataclass
class Config(ScaleConfig):
    """Train the recurrence module on a pretrained causal LM: frozen base (CPU) or full fine-tuning (GPU)."""

    model: str = arg("smollm2-135m", "the base causal LM (a checkpoints.yaml name: Llama, Gemma-3 or GPT-2 family)")
    out: str = arg("", "output folder (default: out/checkpoints/<model>-recurrent)")
    mode: str = arg("frozen", "frozen: train only the recurrence module; full: the whole model too",
                    choices=["frozen", "full"])
    baseline: bool = arg(False, "full mode: fine-tune the base WITHOUT recurrence (the fair baseline of full mode)")
    corpus: str = arg("default", "training corpus (its train part): 'default', a folder of .txt, a .txt or a .jsonl")
    seed: int = arg(0, "seed of the module's initialisation and of the data draw", min=0, max=2**31 - 1)
    window: int = arg(128, "window T in tokens", min=2)
    overlap: int = arg(0, "overlap o between consecutive windows", min=0)
    windows_per_sequence: int = arg(3, "k: consecutive windows per example; backpropagation through all k", min=2)
    steps: int = arg(60, "optimiser steps", min=1)
    batch_size: int = arg(2, "examples (sequences of k windows) per step", min=1)
    lr: float = arg(2e-5, "learning rate of the base model (full mode)", min=0.0)
    recurrence_lr: float = arg(1e-3, "learning rate of the recurrence module", min=0.0)
    warmup: int = arg(10, "linear warm-up steps (then cosine decay to 0.1 x)", min=1)
    weight_decay: float = arg(0.0, "AdamW weight decay", min=0.0)
    clip: float = arg(1.0, "gradient norm clipping", min=0.0)
    l_ins: int = arg(2, "1-based layer whose attention gets the h_prev slot", min=1)
    ffn_hidden: list[int] = arg([200, 200, 200], "hidden sizes of the recurrence FFN", min=1)
    base_loss_every: int = arg(10, "every N steps also log the unchanged base's and the shuffled-h_prev loss "
                                   "on the same targets (0: never)", min=0)
    save_every: int = arg(20, "write the resumable state every N steps (0 = only when pausing)", min=0)
    threads: int = arg(2, "torch intra-op threads (CPU)", min=1)

    def out_path(self) -> Path:
        return Path(self.out or f"out/checkpoints/{self.model}-recurrent")


# ----------------------------------------------------------------------------- data


def train_books(lm, corpus: str, span: int) -> tuple[list[torch.Tensor], dict]:
    """Token ids of every train-part document long enough for one example, and the corpus identity."""
    from probes.corpus import HELD_OUT_FRACTION, corpus_split, load_corpus

    full = load_corpus(corpus)
    train = corpus_split(full, "train")
    books = [torch.tensor(lm.encode(d.text), dtype=torch.long) for d in train.documents]
    ident = {**full.identity(), "train_part": train.identity(), "held_out_fraction": HELD_OUT_FRACTION}
    usable = [b for b in books if len(b) >= 2]
    if not usable:
        raise ProbeError(f"corpus {corpus!r}: no train document has two tokens")
    ident["documents_used"] = len(usable)
    ident["tokens"] = int(sum(len(b) for b in usable))
    return usable, ident


def draw_batch(books: list[torch.Tensor], span: int, batch_size: int, seed: int, step: int,
               pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids (B, span), mask (B, span)) for optimiser step ``step``, drawn from ``seed`` and ``step``
    alone (so a resumed run draws the same data): a book with probability proportional to its
    length, a uniform start; a book shorter than ``span`` is used whole, right-padded (mask 0)."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
    weights = torch.tensor([float(len(b)) for b in books], dtype=torch.float64)
    which = torch.multinomial(weights, batch_size, replacement=True, generator=gen).tolist()
    ids = torch.full((batch_size, span), pad_id, dtype=torch.long)
    mask = torch.zeros(batch_size, span, dtype=torch.long)
    for row, b in enumerate(which):
        book = books[b]
        n = min(span, len(book))
        s = int(torch.randint(0, len(book) - n + 1, (1,), generator=gen))
        ids[row, :n], mask[row, :n] = book[s:s + n], 1
    return ids, mask


# ----------------------------------------------------------------------------- the loss


def _target_slice(w) -> slice:
    """The columns of a sequence holding the targets window ``w`` scores."""
    return slice(w.start + 1 + w.first, w.start + w.n_inputs + 1)


def _window_nll(logits: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor, w) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum of NLL, number of targets) of the targets window ``w`` scores, real tokens only."""
    lg = logits[:, w.first:w.n_inputs]
    targets, keep = ids[:, _target_slice(w)], mask[:, _target_slice(w)].bool()
    nll = torch.nn.functional.cross_entropy(lg.reshape(-1, lg.size(-1)).float(), targets.reshape(-1),
                                            reduction="none").view_as(targets)
    return (nll * keep).sum(), keep.sum()


def sequence_loss(model, ids: torch.Tensor, mask: torch.Tensor, T: int, o: int, *, recurrent: bool,
                  frozen: bool, h_order: torch.Tensor | None = None) -> tuple[torch.Tensor, int]:
    """(mean next-token loss, targets) of k consecutive windows over ``ids`` (B, span), padding
    (mask 0) excluded. ``recurrent``: h_prev flows from each window to the next, gradients through
    all of them. ``frozen``: the first window (no h_prev, so no trained parameter in it) runs without
    gradients and only windows 2..k are scored. ``h_order`` (B,): window i+1 of row r gets the
    h_prev of row ``h_order[r]`` (a shuffle control); None = its own. A plain model (``recurrent``
    False) is a transformers causal LM run on each window alone."""
    windows = plan(ids.shape[1], T, o)
    total, count, h = ids.new_zeros((), dtype=torch.float32), 0, None
    for i, w in enumerate(windows):
        x, m = ids[:, w.start:w.start + w.n_inputs], mask[:, w.start:w.start + w.n_inputs]
        last = i + 1 == len(windows)
        scored = not (frozen and i == 0)
        if recurrent:
            hp = h if h is None or h_order is None else h[h_order]
            ctx = torch.no_grad() if frozen and i == 0 else contextlib.nullcontext()
            with ctx:
                out = model(x, h_prev=hp, attention_mask=m, need_state=False)
            if not last:
                h = model.recurrence(out.hidden_states, T - o, m)  # with gradients: Eq. 1 + FFN
            logits = out.logits
        else:
            if not scored:
                continue
            logits = model(input_ids=x, attention_mask=m).logits
        if scored:
            s, c = _window_nll(logits, ids, mask, w)
            total, count = total + s, count + int(c)
    return total / max(count, 1), count


# ----------------------------------------------------------------------------- training


def build(cfg: Config):
    """(LM (probes.models.lm), model to train, recurrent?) for ``cfg``: the base loaded by its registry
    name, wrapped with a fresh recurrence module (seeded) unless ``--baseline``."""
    from probes.models.lm import load_lm
    from probes.models.recurrent import RecurrenceConfig, RecurrentLM

    lm = load_lm(cfg.model, device=check_device(cfg.device))
    if lm.recurrent:
        raise ProbeError(f"--model {cfg.model} already has a recurrence module: name its base model")
    if cfg.window > lm.max_positions:
        raise ProbeError(f"window {cfg.window} is longer than model '{cfg.model}' allows ({lm.max_positions})")
    base: Any = lm.model  # a transformers causal LM
    if cfg.baseline:
        base.set_attn_implementation("sdpa")
        return lm, base, False
    rcfg = RecurrenceConfig(window=cfg.window, overlap=cfg.overlap, l_ins=cfg.l_ins, ffn_hidden=list(cfg.ffn_hidden))
    torch.manual_seed(cfg.seed + 1)
    model = RecurrentLM(base, rcfg, fast=True).to(check_device(cfg.device))  # fast: sdpa kernels (same maths as eager)
    model.freeze_base(cfg.mode == "frozen")
    return lm, model, True


def train(cfg: Config) -> Path:
    from tqdm.auto import tqdm

    check_output(cfg.out_path(), "recipes.train_recurrent", cfg)  # never over another folder, nor unasked

    if cfg.baseline and cfg.mode != "full":
        raise ProbeError("--baseline needs --mode full (in frozen mode the baseline is the base model unchanged)")
    T, o, k = cfg.window, cfg.overlap, cfg.windows_per_sequence
    check_window(T, o)
    torch.set_num_threads(cfg.threads)
    t0 = time.time()
    lm, model, recurrent = build(cfg)
    frozen = cfg.mode == "frozen"
    span = T + (k - 1) * (T - o) + 1
    books, corpus_id = train_books(lm, cfg.corpus, span)
    pad_id = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else 0
    if recurrent:
        groups = [{"params": list(model.recurrence.parameters()), "lr": cfg.recurrence_lr}]
        if not frozen:
            groups.insert(0, {"params": list(model.lm.parameters()), "lr": cfg.lr})
    else:
        groups = [{"params": list(model.parameters()), "lr": cfg.lr}]
    opt = torch.optim.AdamW(groups, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(cfg.warmup, cfg.steps, 0.1))
    loop = Loop(model, opt, sched, config=cfg, steps=cfg.steps, clip=cfg.clip, state_dir=state_dir(cfg.out_path()),
                trained_only=frozen)
    wall_before = loop.restore().get("elapsed_s", 0.0)
    model.train() if not frozen else model.eval()  # frozen: the base stays in eval mode (no dropout anywhere)
    micro = loop.micro_slices(cfg.batch_size)
    t_run = time.time()

    def elapsed() -> float:  # training seconds over every piece of the run
        return wall_before + time.time() - t_run

    what = cfg.mode + (", baseline" if cfg.baseline else "")
    bar = tqdm(range(loop.start_step, cfg.steps), desc=f"train_recurrent ({what})", unit="step",
               initial=loop.start_step, total=cfg.steps, disable=not loop.is_main)
    for step in bar:
        ids, mask = draw_batch(books, span, cfg.batch_size, cfg.seed, step, pad_id)
        n_all = scored_targets(mask, T, o, frozen)
        local = 0.0
        for rows in micro:  # each micro-batch's mean, weighted by its share of the batch's scored targets
            with loop.autocast():
                loss, n = sequence_loss(model, ids[rows].to(loop.device), mask[rows].to(loop.device), T, o,
                                        recurrent=recurrent, frozen=frozen)
            local += loop.backward(loss * (n / max(n_all, 1)))
        value = loop.step(local)
        row = {"step": step + 1, "loss": round(value, 5), "base_loss": "", "shuffled_loss": "",
               "lr": opt.param_groups[-1]["lr"], "tokens": (step + 1) * cfg.batch_size * (span - 1),
               "elapsed_s": round(elapsed(), 1)}
        if recurrent and frozen and cfg.base_loss_every and (step + 1) % cfg.base_loss_every == 0 and loop.is_main:
            with loop.autocast():
                row["base_loss"], row["shuffled_loss"] = _controls(model, ids.to(loop.device),
                                                                   mask.to(loop.device), T, o)
        loop.rows.append(row)
        bar.set_postfix(loss=f"{value:.3f}")
        loop.after_step(step + 1, lambda: {"elapsed_s": elapsed()})
    if loop.is_main:
        model.cpu()
        _write_output(cfg, lm, model, recurrent, loop, corpus_id, span, elapsed(), time.time() - t0)
    loop.finish()
    return cfg.out_path()


def scored_targets(mask: torch.Tensor, T: int, o: int, frozen: bool) -> int:
    """How many targets :func:`sequence_loss` scores over ``mask`` (B, span): real tokens only,
    without the first window in frozen mode."""
    count = 0
    for i, w in enumerate(plan(mask.shape[1], T, o)):
        if not (frozen and i == 0):
            count += int(mask[:, _target_slice(w)].sum())
    return count


@torch.no_grad()
def _controls(model, ids, mask, T, o) -> tuple[float, float | str]:
    """(unchanged base's loss, loss with h_prev from another example) on the same targets."""
    base, _ = sequence_loss(model.lm, ids, mask, T, o, recurrent=False, frozen=True)
    B = ids.shape[0]
    if B < 2:
        return round(base.item(), 5), ""
    shuffled, _ = sequence_loss(model, ids, mask, T, o, recurrent=True, frozen=True,
                                h_order=torch.roll(torch.arange(B), 1))
    return round(base.item(), 5), round(shuffled.item(), 5)


def _mean_last(rows: list[dict], key: str, n: int) -> float | None:
    vals = [r[key] for r in rows if r[key] != ""][-n:]
    return float(np.mean(vals)) if vals else None


def _write_output(cfg: Config, lm, model, recurrent: bool, loop: Loop, corpus_id: dict, span: int,
                  train_wall: float, total_wall: float) -> None:
    rows = loop.rows
    n_trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    info = {
        "recipe": "recipes.train_recurrent", "mode": cfg.mode, "baseline": cfg.baseline,
        "command": run_command("recipes.train_recurrent"),
        "config": asdict(cfg), "base_model": lm.describe(),
        "corpus": corpus_id, "sequence_tokens": span, "trained_parameters": n_trained,
        "compute_dtype": loop.compute_dtype,
        "processes": loop.world, "device": loop.device,
        "final_loss_mean_last_20": _mean_last(rows, "loss", 20),
        "base_loss_mean_last_5_logged": _mean_last(rows, "base_loss", 5),
        "shuffled_loss_mean_last_5_logged": _mean_last(rows, "shuffled_loss", 5),
        "fair_baseline": ("the base model unchanged (no base parameter is trained); base_loss in loss.csv is its "
                          "loss on the same targets" if cfg.mode == "frozen" else
                          "the same recipe with --baseline (same sequences, steps and loss, no recurrence)"),
        "wall_time_s": round(train_wall, 1), "wall_time_with_loading_s": round(total_wall, 1),
        "provenance": provenance(),
    }

    def write(tmp: Path):
        if cfg.mode == "full":
            base = model.lm if recurrent else model
            base.set_attn_implementation("eager")
            base.save_pretrained(tmp, safe_serialization=True)
            lm.tokenizer.save_pretrained(tmp)
        if recurrent:
            model.save_recurrence(tmp)
        with open(tmp / "loss.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
        (tmp / "training_config.json").write_text(json.dumps(info, indent=1) + "\n")

    write_folder(cfg.out_path(), write)
    print(f"train_recurrent ({cfg.mode}): final loss {info['final_loss_mean_last_20']:.4f}"
          + (f", base {info['base_loss_mean_last_5_logged']:.4f}" if info["base_loss_mean_last_5_logged"] else "")
          + f", {train_wall:.0f} s -> {cfg.out_path()}")


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__.split("\n\n")[0])
    if cfg.overlap >= cfg.window:
        raise ProbeError(f"overlap {cfg.overlap} must be in [0, window) = [0, {cfg.window})")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    train(cfg)


if __name__ == "__main__":
    run_main(main)
