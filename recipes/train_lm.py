"""The suite's recipe for the small GPT-2 models of the recurrence paper's experiments, on this CPU.

Three stages, each seeded and deterministic on one machine (CPU, float32), each written
atomically (:func:`probes.io.write_folder`) as a Hugging Face folder: ``config.json``,
``model.safetensors`` (float16 storage; loaded back as float32), tokenizer files,
``training_config.json`` (the resolved settings + data identity + wall time) and ``loss.csv``:

1. ``pretrain``: a byte-level BPE tokenizer (``tokenizers``, 4,096 entries) trained on the train
   part of the default corpus (the first 90% of every book; the last 10% is held out for the
   evaluations, see :func:`probes.corpus.split_text`), then a small GPT-2 (4 layers, 128 wide, 4 heads,
   128 positions) trained by causal LM on random 128-token windows of that text.
2. ``finetune``: the pretrained model fine-tuned on book-length sequences: each example is ``k``
   consecutive windows of T tokens (overlap o) from one book; every window scores the tokens
   it predicts that earlier windows of the sequence did not (as in analyses.perplexity).
3. ``finetune --recurrent``: the same data, steps, seed and loss, with the recurrence module of
   :mod:`probes.models.recurrent` (h_prev from window i-1 inserted at layer l_ins of window i),
   trained end to end by backpropagation through the k windows.

    $ python -m recipes.train_lm all        # = the three commands below, with their defaults
    $ python -m recipes.train_lm pretrain --out out/train/gpt2-small-pretrained
    $ python -m recipes.train_lm finetune --init out/train/gpt2-small-pretrained --out out/checkpoints/gpt2-small-base
    $ python -m recipes.train_lm finetune --init out/train/gpt2-small-pretrained --recurrent \\
          --out out/checkpoints/gpt2-small-recurrent

An existing output folder is replaced only with ``--overwrite`` (and only if this recipe wrote it), so the
committed pair in ``checkpoints/`` is retrained only by naming it: ``--out checkpoints/gpt2-small-base
--overwrite`` (as ``scripts/train_small_models.py`` does).

The defaults are the first checkpoints' sizes (the default corpus, 300 steps per stage). The committed
pair has 10x those tokens on ``data/train-corpus``, bfloat16 autocast, run by
``scripts/train_small_models.py --gpt2-scale 10``, which records each stage's exact command
(``checkpoints/README-gpt2.md``).

The baseline and the recurrent model see exactly the same sequences in the same order (same
seed) for the same number of steps; only h_prev differs. The recurrence module's parameters get
their own learning rate (``--recurrence-lr``): they start from scratch, the transformer does not.
"""

from __future__ import annotations

import csv
import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from probes.capture import distributed
from probes.capture.windows import check_window, plan, run_windows
from probes.config import arg, build_parser, config_from_namespace, run_main
from probes.errors import ProbeError
from probes.io import write_folder
from recipes.loop import (
    Loop,
    ScaleConfig,
    check_output,
    provenance,
    run_command,
    setup_processes,
    state_dir,
    warmup_cosine,
    write_snapshot,
)

EOS = "<|endoftext|>"


# ----------------------------------------------------------------------------- configs


@dataclass
class PretrainConfig(ScaleConfig):
    """Stage 1: a byte-level BPE tokenizer and a small GPT-2 trained by causal LM."""

    out: str = arg("out/train/gpt2-small-pretrained", "output folder")
    corpus: str = arg("default", "training corpus (its train part): 'default', a folder of .txt, a .txt or a .jsonl")
    seed: int = arg(0, "seed for initialisation and data order", min=0, max=2**32 - 1)
    vocab_size: int = arg(4096, "BPE vocabulary size", min=257)
    n_layer: int = arg(4, "Transformer layers", min=1)
    n_embd: int = arg(128, "hidden size", min=1)
    n_head: int = arg(4, "attention heads", min=1)
    n_positions: int = arg(128, "positions = training window", min=2)
    steps: int = arg(300, "optimiser steps", min=1)
    batch_size: int = arg(16, "windows per step", min=1)
    lr: float = arg(2e-3, "peak learning rate", min=0.0)
    warmup: int = arg(30, "linear warm-up steps (then cosine decay)", min=1)
    weight_decay: float = arg(0.01, "AdamW weight decay", min=0.0)
    min_lr_ratio: float = arg(0.1, "final learning rate / peak", min=0.0, max=1.0)
    threads: int = arg(2, "torch intra-op threads", min=1)
    progress: bool = arg(True, "show a progress bar")


@dataclass
class FinetuneConfig(ScaleConfig):
    """Stages 2-3: fine-tuning on book sequences of k windows, with or without the recurrence."""

    init: str = arg("out/train/gpt2-small-pretrained", "the pretrained folder (stage 1)")
    out: str = arg("out/checkpoints/gpt2-small-base", "output folder")
    recurrent: bool = arg(False, "add the recurrence module (h_prev from the previous window)")
    corpus: str = arg("default", "training corpus (its train part): 'default', a folder of .txt, a .txt or a .jsonl")
    seed: int = arg(0, "seed for the recurrence's initialisation and the data order", min=0, max=2**32 - 1)
    window: int = arg(128, "window T in tokens", min=1)
    overlap: int = arg(0, "overlap o between windows (training and evaluation use the same)", min=0)
    windows_per_sequence: int = arg(4, "k: backpropagation through k consecutive windows", min=1)
    steps: int = arg(300, "optimiser steps", min=1)
    batch_size: int = arg(4, "sequences per step", min=1)
    lr: float = arg(5e-4, "learning rate of the transformer (both models)", min=0.0)
    recurrence_lr: float = arg(2e-3, "learning rate of the recurrence module (recurrent model only)", min=0.0)
    warmup: int = arg(20, "linear warm-up steps (then cosine decay)", min=1)
    weight_decay: float = arg(0.01, "AdamW weight decay", min=0.0)
    l_ins: int = arg(2, "layer whose attention gets the h_prev slot", min=0)
    ffn_hidden: list[int] = arg([200, 200, 200], "hidden sizes of the recurrence FFN", min=1)
    threads: int = arg(2, "torch intra-op threads", min=1)
    progress: bool = arg(True, "show a progress bar")


@dataclass
class AllConfig:
    """The three stages with their defaults."""

    work: str = arg("out/train/gpt2-small-pretrained", "folder of the pretrained model (stage 1)")
    base_out: str = arg("out/checkpoints/gpt2-small-base", "folder of the fine-tuned baseline")
    recurrent_out: str = arg("out/checkpoints/gpt2-small-recurrent", "folder of the fine-tuned recurrent model")
    overwrite: bool = arg(False, "replace existing folders this recipe wrote (without it, an existing output "
                                 "folder is an error)")


# ----------------------------------------------------------------------------- helpers


def _train_texts(corpus: str) -> tuple[list[tuple[str, str]], dict]:
    from probes.corpus import HELD_OUT_FRACTION, corpus_split, load_corpus

    full = load_corpus(corpus)
    train = corpus_split(full, "train")
    ident = {**full.identity(), "train_part": train.identity(), "held_out_fraction": HELD_OUT_FRACTION}
    return [(d.name, d.text) for d in train.documents], ident


def train_tokenizer(texts: list[str], vocab_size: int, max_length: int):
    """A byte-level BPE tokenizer trained on ``texts``, as a transformers PreTrainedTokenizerFast."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=EOS, eos_token=EOS, unk_token=EOS,
                                   model_max_length=max_length, clean_up_tokenization_spaces=False)


def _save_hf(model, tokenizer, folder: Path) -> None:
    """Weights as float16 safetensors; config.json says float32 so loaders compute in float32."""
    import copy

    half = copy.deepcopy(model).to(torch.float16)
    half.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    cfg_path = folder / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["dtype"] = "float32"  # stored as float16 (see training_config.json), computed in float32
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def _write_loss_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


# ----------------------------------------------------------------------------- stage 1: pretraining


def _shared_tokenizer(state_dir: Path, is_main: bool, make):
    """The run's tokenizer: trained once by rank 0 (``make()``) and kept in the state folder, so a
    resumed run and every process use the very same one (BPE's tie order may vary between runs)."""
    from transformers import PreTrainedTokenizerFast

    folder = state_dir / "tokenizer"
    if is_main and not (folder / "tokenizer.json").exists():
        write_folder(folder, make().save_pretrained)
    if distributed.launched():
        distributed.barrier()
    return PreTrainedTokenizerFast.from_pretrained(str(folder), local_files_only=True)


def _loss_rows(loop: Loop, step: int, value: float, tokens: int, t0: float) -> None:
    loop.rows.append({"step": step, "loss": round(value, 5), "lr": loop.opt.param_groups[0]["lr"],
                      "tokens": tokens, "elapsed_s": round(time.time() - t0, 1)})


def pretrain(cfg: PretrainConfig) -> Path:
    from tqdm.auto import tqdm
    from transformers import GPT2Config, GPT2LMHeadModel

    check_output(cfg.out, "recipes.train_lm", cfg)  # never over another folder, nor unasked
    torch.set_num_threads(cfg.threads)
    rank, _, _ = setup_processes(cfg.device)
    t0 = time.time()
    docs, corpus_id = _train_texts(cfg.corpus)
    folder = state_dir(cfg.out)
    if not cfg.resume and rank == 0:
        shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _shared_tokenizer(folder, rank == 0,
                                  lambda: train_tokenizer([t for _, t in docs], cfg.vocab_size, cfg.n_positions))
    eos = tokenizer.convert_tokens_to_ids(EOS)
    stream = []
    for _, text in docs:  # books in corpus order, each followed by <|endoftext|>
        stream.extend(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
        stream.append(eos)
    data = torch.tensor(stream, dtype=torch.long)
    torch.manual_seed(cfg.seed)
    mcfg = GPT2Config(vocab_size=len(tokenizer), n_positions=cfg.n_positions, n_embd=cfg.n_embd,
                      n_layer=cfg.n_layer, n_head=cfg.n_head, bos_token_id=eos, eos_token_id=eos,
                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel._from_config(mcfg, attn_implementation="sdpa")
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(cfg.warmup, cfg.steps, cfg.min_lr_ratio))
    loop = Loop(model, opt, sched, config=cfg, steps=cfg.steps, clip=1.0, state_dir=folder)
    gen = torch.Generator().manual_seed(cfg.seed)
    extra = loop.restore()
    if extra:
        gen.set_state(extra["rng"])
        t0 -= extra["elapsed_s"]
    rows: Any  # a micro-batch's slice in the loop below, then the loss rows written
    micro = loop.micro_slices(cfg.batch_size)
    T = cfg.n_positions
    bar = tqdm(range(loop.start_step, cfg.steps), desc="pretrain", unit="step", initial=loop.start_step,
               total=cfg.steps, disable=not cfg.progress or not loop.is_main)
    for step in bar:
        starts = torch.randint(0, len(data) - T - 1, (cfg.batch_size,), generator=gen)
        batch = torch.stack([data[s:s + T + 1] for s in starts.tolist()])
        local = 0.0
        for rows in micro:
            x = batch[rows].to(loop.device)
            with loop.autocast():
                logits = model(input_ids=x[:, :-1]).logits
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                                                     x[:, 1:].reshape(-1))
            local += loop.backward(loss * (x.shape[0] / cfg.batch_size))
        value = loop.step(local)
        _loss_rows(loop, step + 1, value, (step + 1) * cfg.batch_size * T, t0)
        bar.set_postfix(loss=f"{value:.3f}")
        loop.after_step(step + 1, lambda: {"rng": gen.get_state(), "elapsed_s": time.time() - t0})
    model.eval()
    rows = loop.rows
    info = {"stage": "pretrain", "config": asdict(cfg), "corpus": corpus_id, "train_tokens": len(data),
            "parameters": sum(p.numel() for p in model.parameters()), "storage_dtype": "float16",
            "compute_dtype": loop.compute_dtype, "processes": loop.world, "device": loop.device,
            "final_loss_mean_last_20": float(np.mean([r["loss"] for r in rows[-20:]])),
            "wall_time_s": round(time.time() - t0, 1), "command": run_command("recipes.train_lm"),
            "provenance": provenance()}

    def write(tmp: Path):
        _save_hf(model, tokenizer, tmp)
        _write_loss_csv(tmp / "loss.csv", rows)
        (tmp / "training_config.json").write_text(json.dumps(info, indent=1) + "\n")

    return _finish(loop, model, Path(cfg.out), write,
                   f"pretrain: {len(data)} training tokens, final loss {info['final_loss_mean_last_20']:.3f}, "
                   f"{info['wall_time_s']:.0f} s -> {cfg.out}")


def _finish(loop: Loop, model, out: Path, write, message: str) -> Path:
    """Rank 0 writes the stage's folder (``write(tmp)``, atomically) and says ``message``; every rank
    then removes the state and leaves the process group."""
    if loop.is_main:
        model.cpu()
        write_folder(out, write)
        print(message)
    loop.finish()
    return out


# ----------------------------------------------------------------------------- stage 2: fine-tuning


def sequence_loss(model, batch: torch.Tensor, T: int, o: int, k: int, recurrent: bool) -> torch.Tensor:
    """Mean next-token loss over k consecutive windows (window i starts at i*(T-o)); window 0
    scores all its T predictions, later windows only the T-o new ones (:mod:`probes.capture.windows`).
    With ``recurrent``, h_prev flows from each window to the next (BPTT through all k)."""
    total: Any  # 0.0, then the summed loss (a tensor)
    total, count = 0.0, 0
    windows = plan(T + (k - 1) * (T - o) + 1, T, o)
    assert len(windows) == k and batch.shape[1] >= T + (k - 1) * (T - o) + 1
    for w, logits in run_windows(model, recurrent, batch, windows, T, o):
        lg = logits[:, w.first:]
        targets = batch[:, w.start + 1 + w.first:w.start + w.n_inputs + 1]
        total = total + torch.nn.functional.cross_entropy(
            lg.reshape(-1, lg.size(-1)), targets.reshape(-1), reduction="sum")
        count += lg.shape[0] * lg.shape[1]
    return total / count


def finetune(cfg: FinetuneConfig) -> Path:
    from tqdm.auto import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    check_output(cfg.out, "recipes.train_lm", cfg)  # never over another folder, nor unasked

    from probes.models.recurrent import RecurrenceConfig, RecurrentLM

    torch.set_num_threads(cfg.threads)
    T, o, k = cfg.window, cfg.overlap, cfg.windows_per_sequence
    check_window(T, o)
    t0 = time.time()
    init = Path(cfg.init)
    if not (init / "config.json").exists():
        raise ProbeError(f"no pretrained model in {init}: run `python -m recipes.train_lm pretrain` first")
    tokenizer = AutoTokenizer.from_pretrained(init)
    torch.manual_seed(cfg.seed)
    lm = AutoModelForCausalLM.from_pretrained(init, dtype=torch.float32, attn_implementation="eager")
    if T > lm.config.n_positions:
        raise ProbeError(f"window {T} is longer than the model's {lm.config.n_positions} positions")
    docs, corpus_id = _train_texts(cfg.corpus)
    books = [torch.tensor(tokenizer(t, add_special_tokens=False, verbose=False)["input_ids"]) for _, t in docs]
    span = T + (k - 1) * (T - o) + 1  # inputs of k windows + the last target
    books = [b for b in books if len(b) > span]
    weights = torch.tensor([len(b) - span for b in books], dtype=torch.float64)
    model: Any  # the recurrent LM around the base, or the base LM itself
    if cfg.recurrent:
        rcfg = RecurrenceConfig(l_ins=cfg.l_ins, ffn_hidden=list(cfg.ffn_hidden), window=T, overlap=o)
        torch.manual_seed(cfg.seed + 1)
        model = RecurrentLM(lm, rcfg, fast=True)  # fast: sdpa kernels in training (same maths as eager)
        groups = [{"params": list(model.lm.parameters()), "lr": cfg.lr},
                  {"params": list(model.recurrence.parameters()), "lr": cfg.recurrence_lr}]
    else:
        model = lm
        model.set_attn_implementation("sdpa")
        groups = [{"params": list(model.parameters()), "lr": cfg.lr}]
    model.train()
    opt = torch.optim.AdamW(groups, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(cfg.warmup, cfg.steps, 0.1))
    loop = Loop(model, opt, sched, config=cfg, steps=cfg.steps, clip=1.0, state_dir=state_dir(cfg.out))
    gen = torch.Generator().manual_seed(cfg.seed)  # same sequences for both models
    extra = loop.restore()
    if extra:
        gen.set_state(extra["rng"])
        t0 -= extra["elapsed_s"]
    init_training = json.loads((init / "training_config.json").read_text()) \
        if (init / "training_config.json").exists() else None

    def record() -> dict:
        """The folder's training_config.json after the steps done so far."""
        rows = loop.rows
        return {"stage": "finetune-recurrent" if cfg.recurrent else "finetune", "config": asdict(cfg),
                "init": str(init), "init_training": init_training, "corpus": corpus_id, "sequence_tokens": span,
                "storage_dtype": "float16", "compute_dtype": loop.compute_dtype, "processes": loop.world,
                "device": loop.device, "parameters": sum(p.numel() for p in model.parameters()),
                "steps_done": len(rows), "final_loss_mean_last_20": float(np.mean([r["loss"] for r in rows[-20:]])),
                "wall_time_s": round(time.time() - t0, 1), "command": run_command("recipes.train_lm"),
                "provenance": provenance()}

    def write(tmp: Path, info: dict) -> None:
        """The model folder: the transformer as float16 safetensors with eager attention in its config (the
        attention it trains with is put back after), the recurrence module, loss.csv, training_config.json."""
        base = model.lm if cfg.recurrent else model
        training_attention = base.config._attn_implementation
        base.set_attn_implementation("eager")
        _save_hf(base, tokenizer, tmp)
        base.set_attn_implementation(training_attention)
        if cfg.recurrent:
            model.save_recurrence(tmp)
        _write_loss_csv(tmp / "loss.csv", loop.rows)
        (tmp / "training_config.json").write_text(json.dumps(info, indent=1) + "\n")

    micro = loop.micro_slices(cfg.batch_size)
    bar = tqdm(range(loop.start_step, cfg.steps), desc="finetune" + (" (recurrent)" if cfg.recurrent else ""),
               unit="step", initial=loop.start_step, total=cfg.steps, disable=not cfg.progress or not loop.is_main)
    batch: Any  # the spans drawn, then their stacked tensor
    for step in bar:
        which = torch.multinomial(weights, cfg.batch_size, replacement=True, generator=gen).tolist()
        batch = []
        for b in which:
            s = int(torch.randint(0, len(books[b]) - span, (1,), generator=gen))
            batch.append(books[b][s:s + span])
        batch = torch.stack(batch)
        local = 0.0
        for rows in micro:  # every sequence scores the same number of tokens: weight by rows
            with loop.autocast():
                loss = sequence_loss(model, batch[rows].to(loop.device), T, o, k, cfg.recurrent)
            local += loop.backward(loss * ((rows.stop - rows.start) / cfg.batch_size))
        value = loop.step(local)
        _loss_rows(loop, step + 1, value, (step + 1) * cfg.batch_size * (span - 1), t0)
        bar.set_postfix(loss=f"{value:.3f}")
        if cfg.snapshots:
            was_training = model.training
            model.eval()
            write_snapshot(loop, step + 1, cfg.out, lambda tmp: write(tmp, record()),
                           {"name": Path(cfg.out).name, "seed": cfg.seed, "recipe": "recipes.train_lm finetune",
                            "tokens": loop.rows[-1]["tokens"]})
            model.train(was_training)
        loop.after_step(step + 1, lambda: {"rng": gen.get_state(), "elapsed_s": time.time() - t0})
    model.eval()
    info = record()
    return _finish(loop, model, Path(cfg.out), lambda tmp: write(tmp, info),
                   f"finetune{' (recurrent)' if cfg.recurrent else ''}: final loss "
                   f"{info['final_loss_mean_last_20']:.3f}, {info['wall_time_s']:.0f} s -> {cfg.out}")


# ----------------------------------------------------------------------------- CLI


@dataclass
class _NoFields:
    """The top level: only the stage."""


def main(argv: list[str] | None = None) -> None:
    parser = build_parser(_NoFields, __doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    stages = {"pretrain": (PretrainConfig, "tokenizer + small GPT-2 by causal LM"),
              "finetune": (FinetuneConfig, "fine-tune on book sequences, with or without recurrence"),
              "all": (AllConfig, "pretrain, then fine-tune without and with recurrence (the defaults)")}
    for stage, (cls, help_text) in stages.items():
        build_parser(cls, parser=sub.add_parser(stage, help=help_text, description=help_text))
    ns = vars(parser.parse_args(argv))
    stage = ns.pop("stage")
    cfg = config_from_namespace(stages[stage][0], ns)
    if stage == "pretrain":
        pretrain(cfg)
    elif stage == "finetune":
        finetune(cfg)
    else:
        pretrain(PretrainConfig(out=cfg.work, overwrite=cfg.overwrite))
        finetune(FinetuneConfig(init=cfg.work, out=cfg.base_out, overwrite=cfg.overwrite))
        finetune(FinetuneConfig(init=cfg.work, out=cfg.recurrent_out, recurrent=True, overwrite=cfg.overwrite))


if __name__ == "__main__":
    run_main(main)
