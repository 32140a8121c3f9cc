"""Per-block held-out MLM loss of a trained checkpoint: the units of the MLM-loss bootstrap.

``recipes.train`` scores the first ``eval_blocks`` held-out blocks with a fixed masking seed (seed + 1)
and records one mean (``heldout_loss`` in train_config.json). This script re-runs that evaluation on
the saved weights (same data, blocks, masking, batches of 32 and autocast as the record says) and
writes, beside the model, ``heldout_blocks.csv``: one row per held-out block with its summed
cross-entropy over the masked tokens (nats) and the number of masked tokens. Two models trained on
the same data, tokenizer and seed score the same blocks and positions: ``python -m analyses.mlm_loss``
reads the file into a result (results/mlm_loss/<model>.json), and the claim table compares such results
paired over blocks (ratio bootstrap: sum of losses / sum of masked tokens).

The saved weights are float16 (the recipe's default), so the total differs from the recorded
``heldout_loss`` by the rounding of the weights (printed for each folder).

    $ python scripts/heldout_blocks.py checkpoints/mog-small-sum checkpoints/mog-small-wg [--threads 1] [--corpus DIR]

The record's masked-token count must match (same blocks and positions) or the script stops.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import functools
import io
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from probes.io import atomic_write  # noqa: E402
from recipes.mlm_data import SPECIALS, masked_batch, sentence_blocks, shared_tokenizer  # noqa: E402
from recipes.train import ARCHS, EVAL_BATCH, TrainConfig  # noqa: E402

FILE = "heldout_blocks.csv"


def load_model(folder: Path, arch: str):
    """The saved masked-LM (with its head) of one recipe folder, float32, in eval mode."""
    if arch == "slstm":
        from probes.models.slstm import load_pretrained
        model = load_pretrained(folder)
    elif arch == "mog":
        from probes.models.mog import load_pretrained
        model = load_pretrained(folder)
    elif arch == "bert":
        from transformers import BertForMaskedLM
        model = BertForMaskedLM.from_pretrained(folder)
    elif arch == "albert":
        from transformers import AlbertForMaskedLM
        model = AlbertForMaskedLM.from_pretrained(folder)
    else:
        raise SystemExit(f"{folder}: unknown arch {arch!r}")
    return model.float().eval()


def heldout_data(cfg: TrainConfig):
    """(tokenizer, held-out blocks) as recipes.mlm_data.MLMData.load makes them, without tokenizing the
    training part (the recipe's tokenizer folder must exist). Folders of one recipe's data (the snapshots of a run,
    the seeds of a comparison) share them: they are made once per process."""
    folder = cfg.tokenizer_folder(cfg.out_dir)
    return _heldout_data(cfg.corpus, str(folder.resolve()), cfg.vocab_size, cfg.max_positions, cfg.tokenizer,
                         cfg.seq_len)


@functools.lru_cache(maxsize=4)
def _heldout_data(corpus: str, tokenizer_folder: str, vocab_size: int, max_positions: int, named_tokenizer,
                  seq_len: int):
    from probes.corpus import corpus_split, load_corpus

    full = load_corpus(corpus)
    folder = Path(tokenizer_folder)
    if not (folder / "tokenizer.json").exists():
        raise SystemExit(f"no tokenizer in {folder}: the recipe's shared tokenizer is needed")
    tokenizer, _ = shared_tokenizer(folder, [], full.identity(), vocab_size, max_positions,
                                    same_corpus=not named_tokenizer)
    return tokenizer, sentence_blocks(tokenizer, corpus_split(full, "heldout"), seq_len)


def train_config(folder: Path, corpus: str | None = None) -> tuple[TrainConfig, dict]:
    """The recipe's resolved config from the folder's record (``corpus``: another copy of its corpus)."""
    doc = json.loads((folder / "train_config.json").read_text(encoding="utf-8"))
    known = set(TrainConfig.__dataclass_fields__)
    settings = {k: v for k, v in doc["config"].items() if k in known}
    if corpus:
        settings["corpus"] = corpus
    return TrainConfig(**settings), doc


@torch.no_grad()
def block_losses(model, arch_name: str, blocks, cfg: TrainConfig, tokenizer, amp: str | None):
    """(loss sums (n,), masked tokens (n,)) per held-out block, as recipes.train.heldout_loss scores them."""
    arch = ARCHS[arch_name]
    specials = [tokenizer.convert_tokens_to_ids(t) for t in SPECIALS]
    use = blocks[:cfg.eval_blocks] if cfg.eval_blocks else blocks
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    sums, counts = np.zeros(len(use)), np.zeros(len(use), dtype=np.int64)
    autocast = (torch.autocast("cpu", dtype=getattr(torch, amp)) if amp and amp not in ("float32", "none")
                else contextlib.nullcontext())
    for b in range(0, len(use), EVAL_BATCH):
        rows = list(range(b, min(b + EVAL_BATCH, len(use))))
        ids, corrupted, mask, selected = masked_batch(use, rows, tokenizer, specials, cfg.mask_prob, gen)
        if not int(selected.sum()):
            continue
        n = int(mask.sum(1).max())
        sel = selected[:, :n]
        with autocast:
            logits = arch.masked_logits(model, corrupted[:, :n], mask[:, :n], sel)
        loss = F.cross_entropy(logits.float(), ids[:, :n][sel], reduction="none").double().numpy()
        row_of = sel.nonzero()[:, 0].numpy()
        sums[b:b + len(rows)] += np.bincount(row_of, weights=loss, minlength=len(rows))
        counts[b:b + len(rows)] += np.bincount(row_of, minlength=len(rows))
    return sums, counts


def write_heldout_blocks(folder: Path, corpus: str | None = None) -> dict:
    """Score ``folder``'s held-out blocks as its recipe did and write ``heldout_blocks.csv`` beside the model;
    returns what was written and how it compares with the training record."""
    cfg, doc = train_config(folder, corpus)
    if cfg.split != "train":
        raise SystemExit(f"{folder}: trained on --split {cfg.split}: it has no held-out part")
    t0 = time.perf_counter()
    tokenizer, heldout = heldout_data(cfg)
    model = load_model(folder, cfg.arch)
    amp = doc.get("amp") or (cfg.amp if cfg.amp not in ("auto",) else None)
    sums, counts = block_losses(model, cfg.arch, heldout, cfg, tokenizer, amp)
    if doc.get("heldout_masked_tokens") not in (None, int(counts.sum())):
        raise SystemExit(f"{folder}: {int(counts.sum())} masked held-out tokens, the record says "
                         f"{doc['heldout_masked_tokens']}: not the data it was trained on")
    table = io.StringIO()
    w = csv.writer(table, lineterminator="\n")
    w.writerow(["block", "loss_sum", "masked_tokens"])
    w.writerows((i, f"{s:.6f}", int(c)) for i, (s, c) in enumerate(zip(sums, counts)))
    atomic_write(folder / FILE, table.getvalue().encode("utf-8"))
    total = float(sums.sum() / max(counts.sum(), 1))
    return {"folder": str(folder), "blocks": len(sums), "masked_tokens": int(counts.sum()), "loss": total,
            "recorded_loss": doc.get("heldout_loss"), "recorded_masked_tokens": doc.get("heldout_masked_tokens"),
            "seconds": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="+", type=Path, help="recipe checkpoint folders (with train_config.json)")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--corpus", default=None, help="the training corpus, where it is not at the recorded path")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    for folder in args.folders:
        print(json.dumps(write_heldout_blocks(folder, args.corpus)), flush=True)


if __name__ == "__main__":
    main()
