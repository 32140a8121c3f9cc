"""The data side of the masked-LM recipe (:mod:`recipes.train`): tokenizer, blocks, batches, masking.

* :func:`train_tokenizer` / :func:`shared_tokenizer`: one WordPiece tokenizer per corpus and vocabulary size,
  trained once and shared by every run (ids renumbered canonically: the trainer's tie order varies);
* :func:`build_data`: the corpus split into the train part and the held-out part (the last 10% of every
  document), complete sentences packed into [CLS] ... [SEP] blocks of at most ``--seq-len`` ids;
* :func:`batches`, :func:`collate`, :func:`mask_tokens`, :func:`masked_batch`: seeded shuffled batches and BERT
  masking (15% of the real, non-special tokens; 80% [MASK], 10% random, 10% unchanged);
* :func:`unigram_baselines`: the loss of a model that ignores context.

    $ python -c "from recipes.mlm_data import pack_blocks; print(pack_blocks([(0, [1, 2]), (0, [3])], 3))"
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from probes.errors import ProbeError

if TYPE_CHECKING:
    from recipes.train import TrainConfig

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def train_tokenizer(texts: list[str], vocab_size: int, max_length: int):
    """A WordPiece PreTrainedTokenizerFast trained on ``texts`` (deterministic)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    # The trainer breaks ties between equally frequent merges in hash order, so the same tokens come
    # out with run-dependent ids: renumber them canonically (specials, then words, then ##pieces).
    rest = sorted((t for t in tok.get_vocab() if t not in SPECIALS), key=lambda t: (t.startswith("##"), t))
    vocab = {t: i for i, t in enumerate(list(SPECIALS) + rest)}
    tok.model = models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=max_length)


def pack_blocks(doc_sentence_ids: list[tuple[int, list[int]]], max_tokens: int) -> list[list[int]]:
    """Complete sentences of one document packed greedily into blocks of <= max_tokens ids (a longer
    sentence is cut into pieces). Input: (document index, ids) in corpus order."""
    blocks: list[list[int]] = []
    cur: list[int] = []
    cur_doc = None
    for doc, ids in doc_sentence_ids:
        if doc != cur_doc or len(cur) + len(ids) > max_tokens:
            if cur:
                blocks.append(cur)
            cur, cur_doc = [], doc
        while len(ids) > max_tokens:
            blocks.append(ids[:max_tokens])
            ids = ids[max_tokens:]
        cur = cur + ids
    if cur:
        blocks.append(cur)
    return [b for b in blocks if b]


def shared_tokenizer(folder: Path, texts: list[str], cfg: TrainConfig, corpus_id: dict):
    """The tokenizer in ``folder`` if it was trained with the same vocabulary size and (unless the
    folder was named with ``--tokenizer``) on the same corpus; else (no folder) train one on
    ``texts`` and save it there, so every run of the recipe shares it."""
    from transformers import PreTrainedTokenizerFast

    want = {"corpus_sha256": corpus_id["sha256"], "vocab_size": cfg.vocab_size, "kind": "wordpiece"}
    meta_path = folder / "tokenizer_training.json"
    if not (folder / "tokenizer.json").exists():
        tok = train_tokenizer(texts, cfg.vocab_size, cfg.max_positions)
        work = folder.with_name(f".{folder.name}.partial-{os.getpid()}")
        shutil.rmtree(work, ignore_errors=True)
        tok.save_pretrained(work)
        (work / "tokenizer_training.json").write_text(json.dumps({**want, "corpus": corpus_id}, indent=1) + "\n")
        try:
            os.replace(work, folder)  # another run may have finished first: then use its tokenizer
        except OSError:
            shutil.rmtree(work, ignore_errors=True)
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        raise ProbeError(f"tokenizer folder {folder} has no readable tokenizer_training.json") from None
    checked = [k for k in want if k != "corpus_sha256" or not cfg.tokenizer]
    if {k: meta.get(k) for k in checked} != {k: want[k] for k in checked}:
        raise ProbeError(f"tokenizer folder {folder} was trained with {({k: meta.get(k) for k in checked})}, "
                         f"not {({k: want[k] for k in checked})}: pass another --tokenizer folder")
    tok = PreTrainedTokenizerFast.from_pretrained(str(folder), local_files_only=True)
    tok.model_max_length = cfg.max_positions
    tok.training_corpus = meta.get("corpus", {"sha256": meta.get("corpus_sha256")})
    return tok


def sentence_blocks(tokenizer, corpus, seq_len: int) -> list[list[int]]:
    """[CLS] + packed complete sentences + [SEP] blocks of at most ``seq_len`` ids."""
    from probes.corpus import sentences

    sents = sentences(corpus)
    enc = tokenizer([s for _, s in sents], add_special_tokens=False, verbose=False)["input_ids"] if sents else []
    blocks = pack_blocks([(d, ids) for (d, _), ids in zip(sents, enc) if ids], seq_len - 2)
    return [[tokenizer.cls_token_id] + b + [tokenizer.sep_token_id] for b in blocks]


def build_data(cfg: TrainConfig):
    """(tokenizer, training blocks, held-out blocks (empty with --split all), corpus identity)."""
    from probes.corpus import HELD_OUT_FRACTION, corpus_split, load_corpus, sentences

    full = load_corpus(cfg.corpus)
    corpus = corpus_split(full, cfg.split)
    sents = sentences(corpus)
    if not sents:
        raise ProbeError(f"corpus {corpus.name} has no sentences to train on")
    folder = Path(cfg.tokenizer) if cfg.tokenizer else Path(cfg.out_dir) / f"wordpiece-{cfg.vocab_size}"
    tokenizer = shared_tokenizer(folder, [s for _, s in sents], cfg, full.identity())
    heldout = sentence_blocks(tokenizer, corpus_split(full, "heldout"), cfg.seq_len) if cfg.split == "train" else []
    ident = {**full.identity(), "split": cfg.split, "train_part": corpus.identity(),
             "held_out_fraction": HELD_OUT_FRACTION if cfg.split == "train" else 0.0}
    return tokenizer, sentence_blocks(tokenizer, corpus, cfg.seq_len), heldout, ident


def batches(blocks: list[list[int]], batch_size: int, seed: int):
    """Endless seeded shuffled batches of block indices (one permutation per epoch)."""
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(len(blocks))
        for b in range(0, len(order) - batch_size + 1, batch_size):
            yield order[b:b + batch_size]


def collate(blocks: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    n = max(len(b) for b in blocks)
    ids = torch.full((len(blocks), n), pad_id, dtype=torch.long)
    mask = torch.zeros((len(blocks), n), dtype=torch.long)
    for r, b in enumerate(blocks):
        ids[r, :len(b)] = torch.tensor(b)
        mask[r, :len(b)] = 1
    return ids, mask


def mask_tokens(ids: torch.Tensor, attention_mask: torch.Tensor, special_ids: list[int], mask_id: int,
                vocab_size: int, prob: float, gen: torch.Generator):
    """BERT masking. Returns (corrupted ids, selected (B, n) bool, targets at the selected positions)."""
    candidates = attention_mask.bool() & ~torch.isin(ids, torch.tensor(special_ids))
    selected = (torch.rand(ids.shape, generator=gen) < prob) & candidates
    if not selected.any():  # at least one prediction per batch
        first = candidates.flatten().nonzero()[0]
        selected.view(-1)[first] = True
    r = torch.rand(ids.shape, generator=gen)
    random_ids = torch.randint(len(SPECIALS), vocab_size, ids.shape, generator=gen)
    corrupted = torch.where(selected & (r < 0.8), torch.full_like(ids, mask_id), ids)
    corrupted = torch.where(selected & (r >= 0.8) & (r < 0.9), random_ids, corrupted)
    return corrupted, selected, ids[selected]


def unigram_baselines(blocks, heldout, specials: list[int], vocab: int) -> dict:
    """The loss of a model that ignores context: the entropy of the training tokens' unigram
    distribution (nats), and the held-out tokens' cross-entropy under it (add-one smoothed).
    Special tokens are never masked, so they are left out, as in the MLM loss."""
    def counts(bs):
        c = np.bincount(np.concatenate([np.asarray(b) for b in bs]), minlength=vocab).astype(np.float64)
        c[specials] = 0
        return c
    train = counts(blocks)
    p = train / train.sum()
    out = {"unigram_entropy": float(-(p[p > 0] * np.log(p[p > 0])).sum())}
    if heldout:
        q = (train + 1) / (train.sum() + vocab - len(specials))
        q[specials] = 1.0
        h = counts(heldout)
        out["heldout_unigram_loss"] = float(-(h * np.log(q)).sum() / h.sum())
    return out


def masked_batch(blocks, rows, pad_id, specials, tokenizer, vocab, prob, gen):
    ids, mask = collate([blocks[i] for i in rows], pad_id)
    corrupted, selected, _ = mask_tokens(ids, mask, specials, tokenizer.mask_token_id, vocab, prob, gen)
    return ids, corrupted, mask, selected
