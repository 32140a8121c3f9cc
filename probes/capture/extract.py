"""Extraction: run a model on texts once and keep every layer's states (the only place a model runs on texts).

For each text it keeps the hidden states of every layer, the sentence vector of every layer, the token strings
and a special-token mask, and (when asked) the attention maps and any other maps the encoder declares, as
:class:`~probes.capture.activations.Activations`, cached on disk by :mod:`probes.capture.store`.

Batches are padded on the right and sorted by length; padding never reaches a real token (the tests check
it). Work is done in chunks of bounded memory (``PROBES_CHUNK_BYTES``), the unit of resuming and of sharding;
batches are planned within a chunk, so an entry's bytes do not depend on how many processes filled it.

Precision (probes.precision): the model runs in ``dtype`` (float32, bfloat16, float16) on ``device``
(``auto`` = cuda, else mps, else cpu); its states are cast to float32, sentence vectors are pooled
in float32, and the cache stores them as ``cache_dtype`` (float16 by default: 2 x d bytes per token
per layer). Both dtypes are part of the cache key. A state that float16 cannot hold makes the whole entry fall
back to float32, with a warning and ``meta["cache_dtype_fallback"]``. Without a cache (``cache_dir=None``) the
states stay float32 in memory. ``layers`` keeps the token states of some layers only; it is part of the key
only when given, so entries of every layer keep their keys.

Several processes (torchrun; see :mod:`probes.capture.distributed`) fill one entry together: each runs its
contiguous share of the chunks into the same work folder (done.json is updated under a second lock), rank 0
checks every chunk's checksum and finalises.

    $ python -c "import probes; a = probes.extract('minilm-l6', ['A text.', 'Another one.']); print(a)"
"""

from __future__ import annotations

import contextlib
import operator
import os
import shutil
import warnings
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from filelock import FileLock
from tqdm.auto import tqdm

from probes.capture import distributed, store
from probes.capture.activations import Activations, kept_layers
from probes.capture.store import CACHE_FORMAT, DEFAULT_CACHE_DIR, cache_key, entry_lock, open_entry, read_entry
from probes.checkpoints.names import get_spec
from probes.errors import ProbeError
from probes.models.encoder import Encoder, MapSpec, Tokenized, runtime_changes
from probes.precision import cache_np_dtype, dtype_name, float16_problem, forward_dtype

# memory budget of one chunk of captured states; chunks are also the unit of resuming and of sharding
# across processes. PROBES_CHUNK_BYTES changes it (smaller: finer sharding; the batches, hence the
# numbers, are planned within a chunk, so compare runs made with the same value)
CHUNK_BYTES = int(os.environ.get("PROBES_CHUNK_BYTES", 256 * 2**20))


def extract(model, inputs: list[str] | list[list[int]], *, maps: bool = False,
            truncate: bool = False, batch_size: int = 32, cache_dir: str | os.PathLike | None = DEFAULT_CACHE_DIR,
            progress: bool = True, device: str = "cpu", corpus: dict | None = None, dtype: str | None = None,
            cache_dtype: str = "float16", device_map: str | None = None,
            layers: list[int] | tuple[int, ...] | None = None, tokenizer=None, name: str | None = None,
            sentence: str | None = None) -> Activations:
    """Activations of ``model`` on ``inputs``: a model name (registry entry, folder, ``hf:`` id), a loaded
    :class:`Encoder`, or a loaded transformers model (encoder or causal LM) with its ``tokenizer=``.

    A model object runs where it is (its device and dtype); ``name=`` names it in the cache and in
    results (default ``<model_type>-<weights hash>``), ``sentence=`` picks its sentence vector; its
    class, config, weights and tokenizer are hashed into the cache key (:mod:`probes.models.user`).

    ``layers``: keep the token states of these layers only (0 = embeddings, -1 = last; ``()``: none,
    for an analysis that reads sentence vectors or maps only); None keeps every layer. Sentence
    vectors are kept for every layer either way. ``maps=True`` also captures the attention maps and
    any other maps the encoder declares (``Encoder.map_specs``: S-LSTM gates, ConvBERT kernels).
    ``corpus`` says where the inputs came from (``Corpus.identity()`` plus the sampling) and is
    recorded as ``meta["corpus"]``.
    ``device``: cpu, cuda, cuda:N, mps or auto; ``dtype``: the forward pass's float32 | bfloat16 |
    float16 (None: float32, or a loaded encoder's own); ``cache_dtype``: float16 | float32 storage;
    ``device_map``: "auto" (or another accelerate device map) spreads a model too big for one device
    over all of them (see :func:`probes.load`). Under torchrun the work is shared by the processes
    (see probes.capture.distributed). The rest: see :func:`_extract`."""
    from probes.models.user import is_model_object, wrap_encoder

    if is_model_object(model):
        model = wrap_encoder(model, tokenizer, name=name, sentence=sentence)
    elif tokenizer is not None or name is not None or sentence is not None:
        raise ProbeError("tokenizer=, name= and sentence= go with a model object (a loaded transformers model), "
                         f"not with {type(model).__name__} {model!r:.60}")
    acts = _extract(model, inputs, maps=maps, truncate=truncate, batch_size=batch_size,
                    cache_dir=cache_dir, progress=progress, device=device, dtype=dtype, cache_dtype=cache_dtype,
                    device_map=device_map, layers=layers)
    if corpus is not None:
        acts.meta["corpus"] = corpus
    return acts


def _extract(model: str | Encoder, inputs: list[str] | list[list[int]], *, maps: bool = False,
             truncate: bool = False, batch_size: int = 32, cache_dir: str | os.PathLike | None = DEFAULT_CACHE_DIR,
             progress: bool = True, device: str = "cpu", dtype: str | None = None,
             cache_dtype: str = "float16", device_map: str | None = None,
             layers: list[int] | tuple[int, ...] | None = None) -> Activations:
    """Activations of ``model`` (a registry name or a loaded :class:`Encoder`) on ``inputs``.

    ``inputs`` are texts, or token-id sequences without special tokens (fixed-length windows cut
    from running text); the model's special tokens are added either way. ``maps=True`` also
    captures the attention maps and any other maps the encoder declares (``Encoder.map_specs``).
    A cache hit returns at once without loading the model. ``truncate=False`` makes an input longer
    than the model's limit an error; ``truncate=True`` cuts it (keeping a final special token),
    warns, and records which inputs were cut. ``cache_dir=None`` disables the cache.
    """
    inputs = [i if isinstance(i, str) else [int(t) for t in i] for i in inputs]
    if not inputs:
        raise ProbeError("no texts to encode: the input list is empty")
    if len({isinstance(i, str) for i in inputs}) > 1:
        raise ProbeError("inputs must be all texts or all token-id lists, not a mix")
    batch_size = _check_batch_size(batch_size)
    spec = model.spec if isinstance(model, Encoder) else get_spec(model)
    run_dtype = forward_dtype(dtype)
    if isinstance(model, Encoder):
        if dtype is not None and run_dtype != model.dtype:
            raise ProbeError(f"dtype={dtype!r} was asked for, but the loaded encoder '{spec.name}' runs in "
                             f"{dtype_name(model.dtype)}; load it with probes.load(name, dtype={dtype!r})")
        run_dtype = model.dtype
    stored = cache_np_dtype(cache_dtype).name  # ProbeError unless float16 or float32
    settings = {"attentions": bool(maps), "truncate": bool(truncate), "dtype": dtype_name(run_dtype),
                "cache_dtype": stored}
    if layers is not None:  # only then part of the key: entries of every layer keep their keys
        settings["layers"] = sorted({operator.index(x) for x in layers})
    if cache_dir is not None and (why := runtime_changes(model)) is not None:  # hooks: no key can see them
        warnings.warn(f"model '{spec.name}': {why}; extracted without the activation cache", stacklevel=3)
        cache_dir = None
    key = cache_key(spec, inputs, settings)
    entry = Path(cache_dir) / spec.name / key if cache_dir is not None else None
    if distributed.launched():
        return _extract_sharded(model, inputs, settings, key, entry, batch_size, progress, device, run_dtype,
                                device_map)
    if entry is not None and (hit := open_entry(entry, repair=False)) is not None:
        return hit  # finished entries are immutable: no lock needed to read one
    with entry_lock(entry, progress):  # one writer per entry; the others wait, then read its result
        if entry is not None and (hit := open_entry(entry, repair=True)) is not None:
            return hit
        if not isinstance(model, Encoder):
            from probes.checkpoints.loaders import load  # here: a cache hit never imports model code

            model = load(model, device=device, dtype=run_dtype, device_map=device_map)
        return _capture(model, inputs, settings, key, entry, batch_size, progress)


def _extract_sharded(model: str | Encoder, inputs: list, settings: dict, key: str, entry: Path | None,
                     batch_size: int, progress: bool, device: str, run_dtype, device_map: str | None) -> Activations:
    """:func:`_extract` in one of several processes started by torchrun. Rank 0 holds the entry's
    lock and decides (hit or not) for all; on a miss every rank loads the model and fills its share
    of the chunks (:func:`_capture`); rank 0 finalises. Every rank returns the finished entry."""
    from probes.config import resolve_device

    if entry is None:
        raise ProbeError("processes started by torchrun share their work through the activation cache: "
                         "cache_dir=None is not possible there")
    if device_map is not None:
        raise ProbeError("--device-map spreads one process's model over every device; under torchrun each "
                         "process has its own device: use one or the other")
    device = distributed.local_device(resolve_device(device) if isinstance(device, str) else str(device))
    distributed.init(device)
    main = distributed.is_main()
    with entry_lock(entry, progress) if main else contextlib.nullcontext():
        hit = open_entry(entry, repair=True) if main else None
        if not distributed.broadcast(hit is not None):
            if not isinstance(model, Encoder):
                from probes.checkpoints.loaders import load

                model = load(model, device=device, dtype=run_dtype)
            hit = _capture(model, inputs, settings, key, entry, batch_size, progress)
        distributed.barrier()  # rank 0 has finalised the entry
    return hit if main else read_entry(entry, full=False)  # rank 0 checked every byte


def _check_batch_size(batch_size) -> int:
    """batch_size as an int >= 1; ProbeError otherwise (a batch size < 1 would run no batch at all)."""
    try:
        value = operator.index(batch_size)
    except TypeError:
        raise ProbeError(f"batch size must be a whole number >= 1, not {batch_size!r}") from None
    if isinstance(batch_size, bool) or value < 1:
        raise ProbeError(f"batch size must be a whole number >= 1, not {batch_size!r}")
    return value


# ----------------------------------------------------------------------------- capture


def _prepare(encoder: Encoder, inputs: list, truncate: bool) -> tuple[list[Tokenized], list[int]]:
    """Tokenize (or add special tokens to id inputs), then enforce the length limit."""
    texts = isinstance(inputs[0], str)
    toks = encoder.tokenize(inputs) if texts else encoder.tokenize_ids(inputs)
    cut = []
    for i, tk in enumerate(toks):
        if len(tk.ids) == 0:
            raise ProbeError(f"text {i} gives no tokens for model '{encoder.name}' (empty text?)")
        if len(tk.ids) <= encoder.max_length:
            continue
        if not truncate:
            raise ProbeError(
                f"text {i} is {len(tk.ids)} tokens long, longer than model '{encoder.name}' allows "
                f"({encoder.max_length}); shorten it (e.g. a lower --max-words) "
                "or call probes.extract(..., truncate=True)")
        keep = encoder.max_length - 1 if tk.special[-1] else encoder.max_length
        sel = list(range(keep)) + ([len(tk.ids) - 1] if tk.special[-1] else [])
        toks[i] = Tokenized([tk.ids[j] for j in sel], [tk.special[j] for j in sel], [tk.tokens[j] for j in sel])
        cut.append(i)
    if cut:
        warnings.warn(f"{len(cut)} of {len(inputs)} texts were longer than {encoder.max_length} tokens "
                      f"and were truncated (recorded in the activations' meta)", stacklevel=3)
    return toks, cut


def _chunks(lengths: np.ndarray, bytes_per_text: np.ndarray) -> list[range]:
    """Consecutive ranges of texts whose captured arrays fit in CHUNK_BYTES (at least one text each)."""
    out, start, used = [], 0, 0
    for i, cost in enumerate(bytes_per_text.tolist()):
        if i > start and used + cost > CHUNK_BYTES:
            out.append(range(start, i))
            start, used = i, 0
        used += cost
    out.append(range(start, len(lengths)))
    return out


def _sentence_vectors(encoder: Encoder, hidden: torch.Tensor, mask: torch.Tensor, special: torch.Tensor,
                      lengths: torch.Tensor, model_sentence: torch.Tensor | None) -> torch.Tensor:
    """(L+1, B, d) sentence vector per layer. hidden (L+1, B, n, d); mask, special (B, n) bool.
    Mean pooling zeroes ``hidden`` in place at the tokens it leaves out (the caller's copy is spent)."""
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
    keep = torch.where(keep.any(1, keepdim=True), keep, mask)
    # in place (no temporary as big as the batch), the same sum over the same positions as
    # (hidden * keep).sum(2): the states are cached byte for byte as before
    hidden.masked_fill_(~keep[None, :, :, None], 0)
    return hidden.sum(2) / keep.sum(1, dtype=hidden.dtype)[None, :, None]


def batch_plan(lengths: np.ndarray, batch_size: int, padding_safe: bool) -> list[np.ndarray]:
    """Index batches in length order (little padding). Encoders that are not padding-safe get
    batches of equal length only, so no padding is ever added."""
    order = np.argsort(lengths, kind="stable")
    if padding_safe:
        return [order[b:b + batch_size] for b in range(0, len(order), batch_size)]
    runs = np.split(order, np.flatnonzero(np.diff(lengths[order])) + 1)
    return [run[b:b + batch_size] for run in runs for b in range(0, len(run), batch_size)]


def _run_chunk(encoder: Encoder, toks: list[Tokenized], maps: dict[str, MapSpec], batch_size: int, bar,
               dest: dict, keep: list[int] | None = None) -> None:
    """Run the texts of one chunk, writing their states straight into ``dest``: the chunk's views of
    the output arrays, in the chunk's text order (no per-chunk copy):

        dest["hidden"]      # (L+1, N_chunk, d) float16/32, N_chunk = the chunk's tokens (the ``keep`` layers only)
        dest["sentence"]    # (L+1, T_chunk, d) float16/32
        dest["map.<name>"]  # flat float16/32, each text's (layers, K, n_t[, n_t]) in turn; only with maps

    Float16 output arrays: a batch with a state float16 cannot hold raises :class:`_NotFloat16`
    before anything of it is written."""
    lengths = np.array([len(t.ids) for t in toks], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    all_ids = np.fromiter((i for t in toks for i in t.ids), np.int64, int(offsets[-1]))  # the chunk's tokens, flat
    all_special = np.fromiter((s for t in toks for s in t.special), bool, int(offsets[-1]))
    store_dtype = torch.float16 if dest["hidden"].dtype == np.float16 else torch.float32
    map_offsets = {m: np.concatenate([[0], np.cumsum(_map_sizes(spec, lengths))]) for m, spec in maps.items()}
    written = np.zeros(len(toks), dtype=bool)
    for idx in batch_plan(lengths, batch_size, encoder.padding_safe):
        _run_batch(encoder, idx, lengths, offsets, all_ids, all_special, maps, map_offsets, store_dtype, dest, keep)
        written[idx] = True
        bar.update(len(idx))
    if not written.all():  # never let unwritten (zero-filled) rows reach a cache entry
        raise RuntimeError(f"{int((~written).sum())} of {len(toks)} texts of a chunk got no states "
                           f"(batch size {batch_size}); the cache entry is not finalised")


@torch.inference_mode()  # the encoders return inference tensors; pooling works on them in place
def _run_batch(encoder: Encoder, idx: np.ndarray, lengths: np.ndarray, offsets: np.ndarray, all_ids: np.ndarray,
               all_special: np.ndarray, maps: dict[str, MapSpec], map_offsets: dict, store_dtype: torch.dtype,
               dest: dict, keep: list[int] | None) -> None:
    """One batch of :func:`_run_chunk`: texts ``idx`` of the chunk (its flat ``all_ids``, ``all_special``
    at ``offsets``), run and written into ``dest``."""
    # the padded batch in one step: row r holds text idx[r]; src = each slot's token in the chunk
    n = int(lengths[idx].max())
    mask_np = np.arange(n)[None, :] < lengths[idx][:, None]  # (B, n)
    dst = (offsets[idx][:, None] + np.arange(n)[None, :])[mask_np]  # (real tokens,) row-major = text order
    ids_np = np.full((len(idx), n), encoder.pad_id, dtype=np.int64)
    ids_np[mask_np] = all_ids[dst]
    special_np = np.zeros((len(idx), n), dtype=bool)
    special_np[mask_np] = all_special[dst]
    ids, mask, special = torch.from_numpy(ids_np), torch.from_numpy(mask_np), torch.from_numpy(special_np)
    out = encoder.forward(ids, mask.long(), maps=bool(maps))
    dev = out.hidden.device
    h = out.hidden.float()  # (L+1, B, n, d) on the model's device
    kept = h if keep is None else h[keep]  # the layers whose token states are kept
    real = kept[:, mask.to(dev)].cpu()  # (layers, real tokens, d): padding dropped, texts in batch order
    s = _sentence_vectors(encoder, h, mask.to(dev), special.to(dev), torch.as_tensor(lengths[idx]).to(dev),
                          None if out.sentence is None else out.sentence.float()).cpu()
    batch_maps = {m: (out.attentions if m == "attention" else out.maps[m]).float().cpu() for m in maps}
    if store_dtype == torch.float16:
        for what, x in (("a hidden state", real), ("a sentence vector", s),
                        *((f"map {m}", v) for m, v in batch_maps.items())):
            if (why := float16_problem(x.numpy(), what)) is not None:
                raise _NotFloat16(why)
    # one scatter into the chunk's rows (rounded once, by torch; torch's copy uses every thread)
    torch.from_numpy(dest["hidden"]).index_copy_(1, torch.from_numpy(dst), real.to(store_dtype))
    torch.from_numpy(dest["sentence"]).index_copy_(1, torch.from_numpy(idx), s.to(store_dtype))
    for r, i in enumerate(idx):
        for m, spec in maps.items():
            # (layers, B, K, n[, n]) -> this text's (layers, K, n_i[, n_i]), padding cut off
            cut = batch_maps[m][:, r][(slice(None), slice(None)) + (slice(0, lengths[i]),) * spec.token_axes]
            dest[f"map.{m}"][map_offsets[m][i]:map_offsets[m][i + 1]] = cut.reshape(-1).numpy()


class _NotFloat16(Exception):
    """A captured state does not fit float16 (the message says which and why)."""


def _map_sizes(spec: MapSpec, lengths: np.ndarray) -> np.ndarray:
    """(T,) number of floats of each text's map."""
    return spec.layers * spec.k * lengths.astype(np.int64) ** spec.token_axes


def _capture_maps(encoder: Encoder, maps: bool) -> dict[str, MapSpec]:
    if not maps:
        return {}
    att = {"attention": MapSpec(encoder.num_layers, encoder.num_heads, 2, "softmaxed self-attention")}
    return {**(att if encoder.has_attention else {}), **encoder.map_specs()}


def _capture(encoder: Encoder, inputs: list, settings: dict, key: str, entry: Path | None,
             batch_size: int, progress: bool) -> Activations:
    """Run the model chunk by chunk, writing straight into the (memory-mapped) output arrays.

    With a cache, the arrays live in ``<entry>.partial/`` and a chunk is listed in ``done.json``
    only after it is flushed, so a rerun after an interruption skips the finished chunks (a single
    process's last chunk is not listed: finalising the entry follows at once)."""
    toks, cut = _prepare(encoder, inputs, settings["truncate"])
    texts = inputs if isinstance(inputs[0], str) else [encoder.tokenizer.decode(i) for i in inputs]
    L, d = encoder.num_layers, encoder.hidden_size
    maps = _capture_maps(encoder, settings["attentions"])
    lengths = np.array([len(t.ids) for t in toks], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    map_offsets = {m: np.concatenate([[0], np.cumsum(_map_sizes(spec, lengths))]) for m, spec in maps.items()}
    keep = kept_layers(settings.get("layers"), L)  # None: every layer
    shapes = {"hidden": (L + 1 if keep is None else len(keep), int(offsets[-1]), d), "sentence": (L + 1, len(toks), d),
              **{f"map.{m}": (int(o[-1]),) for m, o in map_offsets.items()}}
    per_text = 4 * (shapes["hidden"][0] * d * lengths + (L + 1) * d
                    + sum(_map_sizes(spec, lengths) for spec in maps.values()))
    chunks = _chunks(lengths, per_text)
    work = entry.with_name(entry.name + ".partial") if entry is not None else None
    # without a cache the states stay float32 in memory; float16 is a storage format
    state = {"dtype": settings["cache_dtype"] if work is not None else "float32", "fallback": None}
    if work is None:
        state["fallback"] = "no cache: the states are kept in memory as float32"
    shared = distributed.launched()  # several processes fill the same work folder, one share of chunks each
    lock = FileLock(store.lock_path(entry, ".done")) if shared else None  # done.json's read-modify-write
    while True:
        arrays, done = (store.open_shared_work if shared else store.open_work)(work, key, shapes, state)
        problem = None
        try:
            _fill(encoder, toks, maps, chunks, offsets, map_offsets, arrays, done, work, key, state, batch_size,
                  progress, only=distributed.shard(len(chunks)) if shared else None, lock=lock, keep=keep)
        except _NotFloat16 as e:
            problem = str(e)
        if shared:
            problem = next((p for p in distributed.gather(problem) if p is not None), None)
        if problem is None:
            break
        # the whole entry is stored as float32 instead, from the start
        state.update(dtype="float32", fallback=f"float16 cannot hold the states: {problem}; stored as float32")
        warnings.warn(f"{encoder.name}: {state['fallback']}", stacklevel=3)
        del arrays
        if work is not None and distributed.is_main():
            shutil.rmtree(work, ignore_errors=True)
        if shared:
            distributed.barrier()
    if shared:
        del arrays
        distributed.barrier()  # every rank's chunks are written and flushed
        if not distributed.is_main():
            return None
        # rank 0 reopens the work folder and checks every chunk against the checksum its writer
        # recorded (a chunk damaged or missing is run again here), then finalises as one process would
        arrays, done = store.open_work(work, key, shapes, state)
        _fill(encoder, toks, maps, chunks, offsets, map_offsets, arrays, done, work, key, state, batch_size,
              progress=False, keep=keep)
    store.check_complete(done, len(chunks), len(toks), int(offsets[-1]))
    sizes = sorted({done[c]["batch_size"] for c in done})
    meta = {
        "format": CACHE_FORMAT, "key": key, "model": encoder.describe(), **settings,
        "inputs": "texts" if isinstance(inputs[0], str) else "token ids (special tokens added by the model)",
        "n_texts": len(toks), "n_tokens": int(offsets[-1]), "truncated_texts": cut,
        "maps": {m: asdict(spec) for m, spec in maps.items()},
        **({"hidden_layers": keep} if keep is not None else {}),
        "padding": ("right, masked; sorted by length within chunks" if encoder.padding_safe
                    else "none: only inputs of equal length share a batch (the encoder is not padding-safe)"),
        # the batch size that produced the states (they differ by ~1e-6 between batch sizes); a list,
        # one per chunk, when a resumed extraction used several
        "batch_size": sizes[0] if len(sizes) == 1 else [done[c]["batch_size"] for c in sorted(done)],
        "torch": torch.__version__, "processes": distributed.world_size(),
        "device": str(encoder.device), **({"device_map": encoder.device_map} if encoder.device_map else {}),
        "cache_dtype_requested": settings["cache_dtype"],
        "cache_dtype": state["dtype"], **({"cache_dtype_fallback": state["fallback"]} if state["fallback"] else {}),
    }
    acts = Activations(
        meta=meta, texts=texts, tokens=[t.tokens for t in toks], offsets=offsets,
        token_ids=np.array([i for t in toks for i in t.ids], dtype=np.int64),
        special=np.array([s for t in toks for s in t.special], dtype=bool),
        hidden=arrays["hidden"], sentence=arrays["sentence"],
        maps={m: arrays[f"map.{m}"] for m in maps}, map_offsets=map_offsets, hidden_layers=keep,
    )
    if work is None:
        return acts
    store.finalise_entry(work, entry, acts, progress)
    del arrays, acts
    # the bytes were checksummed as they were written (chunk digests, then finalise_entry's file blocks):
    # reading them back to check them again buys nothing, so the entry is opened without verification
    return read_entry(entry, verify=False)


def _fill(encoder: Encoder, toks: list[Tokenized], maps: dict, chunks: list[range], offsets: np.ndarray,
          map_offsets: dict, arrays: dict, done: dict, work: Path | None, key: str, state: dict, batch_size: int,
          progress: bool, only: range | None = None, lock: FileLock | None = None,
          keep: list[int] | None = None) -> None:
    """Run every chunk not in ``done`` (a finished chunk is reused if its checksum still holds),
    flushing and recording each one in ``work/done.json``. ``only``: this process's share of the
    chunks (torchrun); ``lock``: held while done.json is updated, when several processes write it;
    ``keep``: the layers whose token states are kept (None: all)."""
    mine = range(len(chunks)) if only is None else only
    total = sum(len(chunks[c]) for c in mine)
    desc = f"extract {encoder.name}" + (f" (rank {distributed.rank()} of {distributed.world_size()})"
                                        if distributed.launched() else "")
    with tqdm(total=total, desc=desc, unit="text", disable=not progress) as bar:
        for c in mine:
            rng = chunks[c]
            a, b = rng.start, rng.stop
            dest = {"hidden": arrays["hidden"][:, offsets[a]:offsets[b]], "sentence": arrays["sentence"][:, a:b],
                    **{f"map.{m}": arrays[f"map.{m}"][o[a]:o[b]] for m, o in map_offsets.items()}}
            rec = {"texts": len(rng), "tokens": int(offsets[b] - offsets[a])}
            if c in done:  # finished by an earlier, interrupted run: reused only if its checksum still holds
                same = all(done[c].get(k) == v for k, v in rec.items())
                if same and done[c].get("sha256") == store.chunk_digest(dest):
                    bar.update(len(rng))
                    continue
                warnings.warn(f"chunk {c} of the interrupted extraction {work} is damaged; running it again",
                              stacklevel=4)
                del done[c]
            _run_chunk(encoder, [toks[i] for i in rng], maps, batch_size, bar, dest, keep)
            done[c] = {**rec, "batch_size": batch_size}
            # one process's last chunk needs no record: the entry is finalised (checksummed) right after it,
            # and an interruption before that runs this one chunk again
            if work is not None and not (only is None and c == mine[-1]):
                for arr in arrays.values():
                    arr.flush()  # np.memmap (open_memmap makes one even of an empty array)
                done[c]["sha256"] = store.chunk_digest(dest)
                store.save_done(work, key, state, done, c, lock)
