"""Capture activations once, cache them on disk, and hand them to every analysis.

This is the only place in the suite where a model runs on texts. For each text it keeps the
hidden states of every layer, the sentence vector of every layer, the token strings and a
special-token mask, and (when asked) the attention maps. Texts are ragged, so per-token arrays
are concatenated along the token axis and ``offsets`` marks where each text starts:

    hidden[l, offsets[t]:offsets[t+1]]   # (n_t, d): text t at layer l

Batches are padded on the right and sorted by length; padding never reaches a real token (the
tests check it). Work is done in chunks of bounded memory; each finished chunk is saved, so an
interrupted extraction resumes where it stopped. The finished cache entry is assembled in a
temporary folder and renamed into place in one step, so a reader never sees half an entry.

    $ python -c "import probes; a = probes.extract('minilm-l6', ['A text.', 'Another one.']); print(a)"
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from probes.encoder import Encoder, Tokenized
from probes.errors import ProbeError
from probes.registry import CheckpointSpec, get_spec

CACHE_FORMAT = 1
DEFAULT_CACHE_DIR = Path(os.environ.get("PROBES_CACHE", "out/cache"))
CHUNK_BYTES = 256 * 2**20  # memory budget of one chunk of captured states


@dataclass
class Activations:
    """Every layer's states for a list of texts, on CPU, as numpy arrays.

    Token axis N = total tokens over all texts (special tokens included, padding never).
    """

    meta: dict  # model description, capture settings, cache key
    texts: list[str]  # (T,)
    tokens: list[list[str]]  # (T, n_t) token strings
    offsets: np.ndarray  # (T+1,) int64; text t owns tokens offsets[t]:offsets[t+1]
    token_ids: np.ndarray  # (N,) int64
    special: np.ndarray  # (N,) bool, True for special tokens
    hidden: np.ndarray  # (L+1, N, d) float32; memory-mapped when read from the cache
    sentence: np.ndarray  # (L+1, T, d) float32; the model's sentence vector at every layer
    attentions: np.ndarray | None = None  # flat float32; text t's (L, H, n_t, n_t) at attn_offsets[t]
    attn_offsets: np.ndarray | None = None  # (T+1,) int64

    @property
    def n_texts(self) -> int:
        return len(self.texts)

    @property
    def n_layers(self) -> int:
        """L, the number of layers (hidden has L+1 entries: the embeddings, then each layer)."""
        return self.hidden.shape[0] - 1

    def text_index(self) -> np.ndarray:
        """(N,) the text each token belongs to."""
        return np.repeat(np.arange(self.n_texts), np.diff(self.offsets))

    def text_hidden(self, t: int) -> np.ndarray:
        """(L+1, n_t, d) the states of text t."""
        return np.asarray(self.hidden[:, self.offsets[t]:self.offsets[t + 1]])

    def text_attentions(self, t: int) -> np.ndarray:
        """(L, H, n_t, n_t) the attention maps of text t."""
        if self.attentions is None:
            raise ProbeError("these activations were captured without attention maps (attentions=False)")
        n = int(self.offsets[t + 1] - self.offsets[t])
        flat = self.attentions[self.attn_offsets[t]:self.attn_offsets[t + 1]]
        return np.asarray(flat).reshape(self.n_layers, -1, n, n)

    def __repr__(self) -> str:
        return (f"Activations(model={self.meta['model']['name']!r}, texts={self.n_texts}, "
                f"tokens={len(self.token_ids)}, layers={self.n_layers}+1, d={self.hidden.shape[-1]}, "
                f"attentions={self.attentions is not None})")


# ----------------------------------------------------------------------------- public entry point


def extract(model: str | Encoder, texts: list[str], *, attentions: bool = False, truncate: bool = False,
            batch_size: int = 32, cache_dir: str | os.PathLike | None = DEFAULT_CACHE_DIR,
            progress: bool = True, device: str = "cpu") -> Activations:
    """Activations of ``model`` (a registry name or a loaded :class:`Encoder`) on ``texts``.

    A cache hit returns at once without loading the model. ``truncate=False`` makes a text longer
    than the model's limit an error; ``truncate=True`` cuts it (keeping a final special token),
    warns, and records which texts were cut. ``cache_dir=None`` disables the cache.
    """
    texts = list(texts)
    if not texts:
        raise ProbeError("no texts to encode: the text list is empty")
    spec = model.spec if isinstance(model, Encoder) else get_spec(model)
    settings = {"attentions": bool(attentions), "truncate": bool(truncate)}
    key = cache_key(spec, texts, settings)
    entry = Path(cache_dir) / spec.name / key if cache_dir is not None else None
    if entry is not None and (entry / "meta.json").exists():
        try:
            return _read_entry(entry)
        except (OSError, ValueError, KeyError, EOFError) as e:  # EOFError: an emptied .npy
            warnings.warn(f"activation cache {entry} is unreadable ({e}); extracting again", stacklevel=2)
            shutil.rmtree(entry, ignore_errors=True)
    if not isinstance(model, Encoder):
        from probes import load  # here, not at the top: a cache hit never imports model code

        model = load(model, device=device)
    return _capture(model, texts, settings, key, entry, batch_size, progress)


def cache_key(spec: CheckpointSpec, texts: list[str], settings: dict) -> str:
    """Hash of model identity + texts + capture settings: equal keys mean equal activations."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8") + b"\0")
    blob = {"format": CACHE_FORMAT, "model": spec.name, "fingerprint": spec.fingerprint(),
            "sentence": spec.sentence, "special_tokens": spec.special_tokens,
            "texts_sha256": h.hexdigest(), **settings}
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:24]


# ----------------------------------------------------------------------------- capture


def _prepare(encoder: Encoder, texts: list[str], truncate: bool) -> tuple[list[Tokenized], list[int]]:
    """Tokenize, then enforce the length limit (error, or truncate and record)."""
    toks = encoder.tokenize(texts)
    cut = []
    for i, tk in enumerate(toks):
        if len(tk.ids) == 0:
            raise ProbeError(f"text {i} gives no tokens for model '{encoder.name}' (empty text?)")
        if len(tk.ids) <= encoder.max_length:
            continue
        if not truncate:
            raise ProbeError(
                f"text {i} is {len(tk.ids)} tokens long, longer than model '{encoder.name}' allows "
                f"({encoder.max_length}); shorten it or capture with truncate=True (--truncate)")
        keep = encoder.max_length - 1 if tk.special[-1] else encoder.max_length
        sel = list(range(keep)) + ([len(tk.ids) - 1] if tk.special[-1] else [])
        toks[i] = Tokenized([tk.ids[j] for j in sel], [tk.special[j] for j in sel], [tk.tokens[j] for j in sel])
        cut.append(i)
    if cut:
        warnings.warn(f"{len(cut)} of {len(texts)} texts were longer than {encoder.max_length} tokens "
                      f"and were truncated (recorded in the activations' meta)", stacklevel=3)
    return toks, cut


def _chunks(lengths: list[int], per_token_bytes: int, attentions_bytes) -> list[range]:
    """Consecutive ranges of texts whose captured states fit in CHUNK_BYTES (at least one text each)."""
    out, start, used = [], 0, 0
    for i, n in enumerate(lengths):
        cost = n * per_token_bytes + attentions_bytes(n)
        if i > start and used + cost > CHUNK_BYTES:
            out.append(range(start, i))
            start, used = i, 0
        used += cost
    out.append(range(start, len(lengths)))
    return out


def _sentence_vectors(encoder: Encoder, hidden: torch.Tensor, mask: torch.Tensor, special: torch.Tensor,
                      lengths: torch.Tensor, model_sentence: torch.Tensor | None) -> torch.Tensor:
    """(L+1, B, d) sentence vector per layer. hidden (L+1, B, n, d); mask, special (B, n) bool."""
    kind = encoder.spec.sentence
    if kind == "g":
        if model_sentence is None:
            raise ProbeError(f"model '{encoder.name}' is registered with sentence: g but returns no sentence node")
        return model_sentence
    if kind == "cls":
        return hidden[:, :, 0]
    if kind == "last":
        return hidden[:, torch.arange(hidden.shape[1]), lengths - 1]
    keep = mask & ~special  # mean over real, non-special tokens; all real tokens if a text has none
    keep = torch.where(keep.any(1, keepdim=True), keep, mask).to(hidden.dtype)
    return (hidden * keep[None, :, :, None]).sum(2) / keep.sum(1)[None, :, None]


def _run_chunk(encoder: Encoder, toks: list[Tokenized], attentions: bool, batch_size: int, bar) -> dict:
    """Run the texts of one chunk; returns numpy arrays in the chunk's text order."""
    L1, d = encoder.num_layers + 1, encoder.hidden_size
    lengths = np.array([len(t.ids) for t in toks])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    hidden = np.empty((L1, offsets[-1], d), np.float32)
    sentence = np.empty((L1, len(toks), d), np.float32)
    att_sizes = encoder.num_layers * _heads(encoder) * lengths**2 if attentions else np.zeros_like(lengths)
    att_offsets = np.concatenate([[0], np.cumsum(att_sizes)])
    att = np.empty(att_offsets[-1], np.float32) if attentions else None
    order = np.argsort(lengths, kind="stable")  # similar lengths together: little padding
    for b in range(0, len(order), batch_size):
        idx = order[b:b + batch_size]
        n = int(lengths[idx].max())
        ids = torch.full((len(idx), n), encoder.pad_id, dtype=torch.long)
        mask = torch.zeros((len(idx), n), dtype=torch.bool)
        special = torch.zeros((len(idx), n), dtype=torch.bool)
        for r, i in enumerate(idx):
            ids[r, :lengths[i]] = torch.tensor(toks[i].ids)
            mask[r, :lengths[i]] = True
            special[r, :lengths[i]] = torch.tensor(toks[i].special)
        out = encoder.forward(ids, mask.long(), attentions=attentions)
        h = out.hidden.float().cpu()  # (L+1, B, n, d)
        s = _sentence_vectors(encoder, h, mask, special, torch.as_tensor(lengths[idx]),
                              None if out.sentence is None else out.sentence.float().cpu())
        for r, i in enumerate(idx):
            hidden[:, offsets[i]:offsets[i + 1]] = h[:, r, :lengths[i]].numpy()
            sentence[:, i] = s[:, r].numpy()
            if attentions:
                a = out.attentions[:, r, :, :lengths[i], :lengths[i]].float().cpu()  # (L, H, n_i, n_i)
                att[att_offsets[i]:att_offsets[i + 1]] = a.reshape(-1).numpy()
        bar.update(len(idx))
    return {"hidden": hidden, "sentence": sentence, **({"attentions": att} if attentions else {})}


def _heads(encoder: Encoder) -> int:
    cfg = getattr(getattr(encoder, "model", None), "config", None)
    return int(getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_head", 1))


def _capture(encoder: Encoder, texts: list[str], settings: dict, key: str, entry: Path | None,
             batch_size: int, progress: bool) -> Activations:
    """Run the model chunk by chunk, writing straight into the (memory-mapped) output arrays.

    With a cache, the arrays live in ``<entry>.partial/`` and a chunk is listed in ``done.json``
    only after it is flushed, so a rerun after an interruption skips the finished chunks."""
    toks, cut = _prepare(encoder, texts, settings["truncate"])
    L, d, heads = encoder.num_layers, encoder.hidden_size, _heads(encoder)
    lengths = np.array([len(t.ids) for t in toks], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    att_sizes = L * heads * lengths**2 if settings["attentions"] else np.zeros_like(lengths)
    att_offsets = np.concatenate([[0], np.cumsum(att_sizes)])
    shapes = {"hidden": (L + 1, int(offsets[-1]), d), "sentence": (L + 1, len(texts), d)}
    if settings["attentions"]:
        shapes["attentions"] = (int(att_offsets[-1]),)
    chunks = _chunks(lengths.tolist(), 4 * (L + 1) * d, lambda n: 4 * L * heads * n * n * settings["attentions"])
    work = entry.with_name(entry.name + ".partial") if entry is not None else None
    arrays, done = _open_work(work, key, shapes)
    with tqdm(total=len(texts), desc=f"extract {encoder.name}", unit="text", disable=not progress) as bar:
        for c, rng in enumerate(chunks):
            if c in done:  # finished by an earlier, interrupted run
                bar.update(len(rng))
                continue
            part = _run_chunk(encoder, [toks[i] for i in rng], settings["attentions"], batch_size, bar)
            a, b = rng.start, rng.stop
            arrays["hidden"][:, offsets[a]:offsets[b]] = part["hidden"]
            arrays["sentence"][:, a:b] = part["sentence"]
            if settings["attentions"]:
                arrays["attentions"][att_offsets[a]:att_offsets[b]] = part["attentions"]
            if work is not None:
                for arr in arrays.values():
                    arr.flush()
                done.add(c)
                _atomic_json(work / "done.json", {"key": key, "done": sorted(done)})
    meta = {
        "format": CACHE_FORMAT, "key": key, "model": encoder.describe(), **settings,
        "n_texts": len(texts), "n_tokens": int(offsets[-1]), "truncated_texts": cut,
        "padding": "right, masked; sorted by length within chunks", "batch_size": batch_size,
        "torch": torch.__version__,
    }
    acts = Activations(
        meta=meta, texts=texts, tokens=[t.tokens for t in toks], offsets=offsets,
        token_ids=np.array([i for t in toks for i in t.ids], dtype=np.int64),
        special=np.array([s for t in toks for s in t.special], dtype=bool),
        hidden=arrays["hidden"], sentence=arrays["sentence"], attentions=arrays.get("attentions"),
        attn_offsets=att_offsets if settings["attentions"] else None,
    )
    if work is None:
        return acts
    for name in _SMALL:
        if getattr(acts, name) is not None:
            np.save(work / f"{name}.npy", getattr(acts, name), allow_pickle=False)
    doc = {"meta": acts.meta, "texts": acts.texts, "tokens": acts.tokens}
    (work / "meta.json").write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    (work / "done.json").unlink()
    del arrays, acts
    shutil.rmtree(entry, ignore_errors=True)
    os.replace(work, entry)  # the entry appears complete, in one step
    return _read_entry(entry)


def _open_work(work: Path | None, key: str, shapes: dict) -> tuple[dict, set]:
    """Output arrays: in memory without a cache; else memory-mapped files in ``work``, reused
    (with their list of finished chunks) when an earlier run with the same key was interrupted."""
    if work is None:
        return {k: np.empty(s, np.float32) for k, s in shapes.items()}, set()
    done = set()
    state = work / "done.json"
    if state.exists():
        try:
            doc = json.loads(state.read_text())
            if doc["key"] == key and all(np.load(work / f"{k}.npy", mmap_mode="r").shape == s
                                         for k, s in shapes.items()):
                done = set(doc["done"])
        except (OSError, ValueError, KeyError):
            done = set()
    if not done:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        arrays = {k: np.lib.format.open_memmap(work / f"{k}.npy", "w+", np.float32, s) for k, s in shapes.items()}
        _atomic_json(state, {"key": key, "done": []})
        return arrays, done
    return {k: np.load(work / f"{k}.npy", mmap_mode="r+") for k in shapes}, done


def _atomic_json(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- the cache on disk

_SMALL = ("offsets", "token_ids", "special", "attn_offsets")
_ARRAYS = _SMALL + ("hidden", "sentence", "attentions")


def _read_entry(entry: Path) -> Activations:
    doc = json.loads((entry / "meta.json").read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not isinstance(doc.get("meta"), dict):
        raise ValueError("meta.json does not describe a cache entry")
    if doc["meta"].get("format") != CACHE_FORMAT:
        raise ValueError(f"cache format {doc['meta'].get('format')} != {CACHE_FORMAT}")
    optional = () if doc["meta"].get("attentions") else ("attentions", "attn_offsets")
    arrays = {}
    for name in _ARRAYS:
        path = entry / f"{name}.npy"
        if name not in optional and not path.exists():
            raise ValueError(f"{name}.npy is missing")
        big = name in ("hidden", "attentions")
        arrays[name] = np.load(path, mmap_mode="r" if big else None, allow_pickle=False) if path.exists() else None
    acts = Activations(meta=doc["meta"], texts=doc["texts"], tokens=doc["tokens"], **arrays)
    if acts.hidden.shape[1] != len(acts.token_ids) or len(acts.offsets) != len(acts.texts) + 1:
        raise ValueError("array shapes do not agree")
    return acts
