"""The data side of the masked-LM recipe (:mod:`recipes.train`): tokenizer, blocks, batches, masking.

* :class:`MLMData`: the config group of the data (corpus, split, vocabulary size, tokenizer folder, block length,
  masking share), which ``recipes.train.TrainConfig`` composes; :meth:`MLMData.load` gives an :class:`MLMDataset`;
* :func:`train_tokenizer` / :func:`shared_tokenizer`: one WordPiece tokenizer per corpus and vocabulary size,
  trained once and shared by every run (ids renumbered canonically: the trainer's tie order varies);
* :meth:`MLMData.load`: the corpus split into the train part and the held-out part (the last 10% of every
  document), complete sentences packed into [CLS] ... [SEP] blocks of at most ``--seq-len`` ids;
* :func:`batches`, :func:`collate`, :func:`mask_tokens`, :func:`masked_batch`: seeded shuffled batches and BERT
  masking (15% of the real, non-special tokens; 80% [MASK], 10% random, 10% unchanged);
* :func:`unigram_baselines`: the loss of a model that ignores context.

    $ python -c "from recipes.mlm_data import pack_blocks; print(pack_blocks([(0, [1, 2]), (0, [3])], 3))"
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from probes.config import arg
from probes.errors import ProbeError
from probes.io import write_folder

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclass
class MLMData:
    """The masked-LM data: which corpus and part train, the shared tokenizer, the blocks and the masking."""

    corpus: str = arg("default", "training corpus: 'default' (embedded), a folder of .txt, a .txt or a .jsonl")
    split: str = arg("train", "which part of every document trains: train (all but the held-out last 10%, which "
                              "gives the held-out loss) or all (the first checkpoints' setting)",
                     choices=("train", "all"))
    vocab_size: int = arg(4096, "WordPiece vocabulary size (specials included)", min=8)
    tokenizer: str = arg("", "tokenizer folder shared by all runs (default: <out-dir>/wordpiece-<vocab-size>, "
                             "loaded if it exists, else trained on --corpus and saved there); a folder named "
                             "here may have been trained on another corpus (its corpus is recorded)")
    seq_len: int = arg(320, "longest training block, [CLS] and [SEP] included (320: 300-token windows in range)",
                       min=8)
    mask_prob: float = arg(0.15, "share of real, non-special tokens selected for prediction", min=0.0, max=1.0)

    def tokenizer_folder(self, out_dir: str | Path) -> Path:
        """The tokenizer folder: ``--tokenizer``, else ``<out_dir>/wordpiece-<vocab_size>``."""
        return Path(self.tokenizer) if self.tokenizer else Path(out_dir) / f"wordpiece-{self.vocab_size}"

    def load(self, out_dir: str | Path, max_length: int) -> MLMDataset:
        """The tokenizer (shared, see :func:`shared_tokenizer`; ``max_length``: the model's positions), the
        training blocks, the held-out blocks (none with ``--split all``) and the corpus identity."""
        from probes.corpus import HELD_OUT_FRACTION, corpus_split, load_corpus, sentences

        full = load_corpus(self.corpus)
        corpus = corpus_split(full, self.split)
        sents = sentences(corpus)
        if not sents:
            raise ProbeError(f"corpus {corpus.name} has no sentences to train on")
        tokenizer, trained_on = shared_tokenizer(self.tokenizer_folder(out_dir), [s for _, s in sents],
                                                 full.identity(), self.vocab_size, max_length,
                                                 same_corpus=not self.tokenizer)
        heldout = sentence_blocks(tokenizer, corpus_split(full, "heldout"), self.seq_len) \
            if self.split == "train" else []
        ident = {**full.identity(), "split": self.split, "train_part": corpus.identity(),
                 "held_out_fraction": HELD_OUT_FRACTION if self.split == "train" else 0.0}
        return MLMDataset(tokenizer, sentence_blocks(tokenizer, corpus, self.seq_len), heldout, ident, trained_on)


@dataclass
class MLMDataset:
    """What :meth:`MLMData.load` gives: the tokenizer, the blocks of token ids, and where they came from."""

    tokenizer: PreTrainedTokenizerFast
    blocks: list[list[int]]  # training blocks, [CLS] ... [SEP]
    heldout: list[list[int]]  # held-out blocks (empty with --split all)
    corpus: dict  # the corpus identity, split and train part
    tokenizer_corpus: dict  # the corpus the tokenizer was trained on

    @property
    def vocab(self) -> int:
        return len(self.tokenizer)

    @property
    def specials(self) -> list[int]:
        """The ids of SPECIALS (never masked, left out of the unigram baselines)."""
        return [self.tokenizer.convert_tokens_to_ids(t) for t in SPECIALS]  # type: ignore[misc]  # one id per token


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


def shared_tokenizer(folder: Path, texts: list[str], corpus_id: dict, vocab_size: int, max_length: int,
                     same_corpus: bool = True):
    """(tokenizer, the corpus it was trained on): the tokenizer in ``folder`` if it was trained with the same
    vocabulary size and (``same_corpus``: the folder was not named with ``--tokenizer``) on the same corpus; else
    (no folder) one trained on ``texts`` and saved there, so every run of the recipe shares it."""
    from transformers import PreTrainedTokenizerFast

    want = {"corpus_sha256": corpus_id["sha256"], "vocab_size": vocab_size, "kind": "wordpiece"}
    meta_path = folder / "tokenizer_training.json"
    if not (folder / "tokenizer.json").exists():  # another run that finished first is not replaced
        tok = train_tokenizer(texts, vocab_size, max_length)

        def write(work: Path) -> None:
            tok.save_pretrained(work)
            (work / "tokenizer_training.json").write_text(json.dumps({**want, "corpus": corpus_id}, indent=1) + "\n")

        write_folder(folder, write)
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        raise ProbeError(f"tokenizer folder {folder} has no readable tokenizer_training.json") from None
    checked = [k for k in want if k != "corpus_sha256" or same_corpus]
    if {k: meta.get(k) for k in checked} != {k: want[k] for k in checked}:
        raise ProbeError(f"tokenizer folder {folder} was trained with {({k: meta.get(k) for k in checked})}, "
                         f"not {({k: want[k] for k in checked})}: pass another --tokenizer folder")
    tok = PreTrainedTokenizerFast.from_pretrained(str(folder), local_files_only=True)
    tok.model_max_length = max_length
    return tok, meta.get("corpus", {"sha256": meta.get("corpus_sha256")})


def sentence_blocks(tokenizer, corpus, seq_len: int) -> list[list[int]]:
    """[CLS] + packed complete sentences + [SEP] blocks of at most ``seq_len`` ids."""
    from probes.corpus import sentences

    sents = sentences(corpus)
    enc = tokenizer([s for _, s in sents], add_special_tokens=False, verbose=False)["input_ids"] if sents else []
    blocks = pack_blocks([(d, ids) for (d, _), ids in zip(sents, enc) if ids], seq_len - 2)
    return [[tokenizer.cls_token_id] + b + [tokenizer.sep_token_id] for b in blocks]


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
                vocab_size: int, prob: float, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking of ``ids`` (B, n). Returns (corrupted ids (B, n), selected (B, n) bool)."""
    candidates = attention_mask.bool() & ~torch.isin(ids, torch.tensor(special_ids))
    selected = (torch.rand(ids.shape, generator=gen) < prob) & candidates
    if not selected.any():  # at least one prediction per batch
        first = candidates.flatten().nonzero()[0]
        selected.view(-1)[first] = True
    r = torch.rand(ids.shape, generator=gen)
    random_ids = torch.randint(len(SPECIALS), vocab_size, ids.shape, generator=gen)
    corrupted = torch.where(selected & (r < 0.8), torch.full_like(ids, mask_id), ids)
    corrupted = torch.where(selected & (r >= 0.8) & (r < 0.9), random_ids, corrupted)
    return corrupted, selected


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


def masked_batch(blocks: list[list[int]], rows, tokenizer, specials: list[int], prob: float,
                 gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids, corrupted ids, attention mask, selected), each (B, n), of ``blocks[rows]`` padded with the
    tokenizer's [PAD] and BERT-masked with ``gen`` (random replacements drawn from the whole vocabulary)."""
    ids, mask = collate([blocks[i] for i in rows], tokenizer.pad_token_id)
    corrupted, selected = mask_tokens(ids, mask, specials, tokenizer.mask_token_id, len(tokenizer), prob, gen)
    return ids, corrupted, mask, selected
