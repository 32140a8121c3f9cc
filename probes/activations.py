"""Capture activations once, cache them on disk, and hand them to every analysis.

(Over 400 lines: extraction and the cache entry's whole life cycle, which is one protocol: lock,
chunks, resume, sharding over processes, float16 fallback, checksums, finalising; its invariants are
checked against each other here. The checksum block (``_chunk_digest`` .. ``_verify_entry``) is the
part to move out next.)

This is the only place in the suite where a model runs on texts. For each text it keeps the
hidden states of every layer, the sentence vector of every layer, the token strings and a
special-token mask, and (when asked) the attention maps. Texts are ragged, so per-token arrays
are concatenated along the token axis and ``offsets`` marks where each text starts:

    hidden[l, offsets[t]:offsets[t+1]]   # (n_t, d): text t at layer l

Batches are padded on the right and sorted by length; padding never reaches a real token (the
tests check it). Work is done in chunks of bounded memory; each finished chunk is saved with its
checksum, so an interrupted extraction resumes where it stopped (a finished chunk whose bytes
changed since is run again). The finished cache entry is assembled in a temporary folder and
renamed into place in one step, so a reader never sees half an entry; it is finalised only when
every chunk, text and token asked for was written, and it records the batch size that produced it.

One process at a time writes an entry: ``<cache>/.locks/<model>.<key>.lock`` (filelock); a second
process waits, then reads the finished entry. Every file of an entry is checksummed (sha256 per
16 MiB block, and meta.json's content) when written and checked when opened; a damaged entry is
removed with a warning and extracted again. ``PROBES_CACHE_VERIFY=quick`` checks sizes, headers,
files up to 8 blocks entirely and every 8th block of bigger ones instead of every byte (a flipped
byte in an unchecked block of ``hidden.npy`` then goes unnoticed).

Precision (probes.precision): the model runs in ``dtype`` (float32, bfloat16, float16) on ``device``
(``auto`` = cuda, else mps, else cpu); its states are cast to float32, sentence vectors are pooled
in float32, and the cache stores them as ``cache_dtype`` (float16 by default: 2 x d bytes per token
per layer). Both dtypes are part of the cache key. Read back, a float16 array is a read-only
:class:`~probes.precision.Float32View` whose every read is float32. A state that float16 cannot
hold makes the whole entry fall back to float32, with a warning and ``meta["cache_dtype_fallback"]``.
Without a cache (``cache_dir=None``) the states stay float32 in memory. After an entry is written,
one line on stdout gives its size. ``layers`` keeps the token states of some layers only (an analysis
of one layer, or of maps or sentence vectors only, caches nothing more); it is part of the key only
when given, so entries of every layer keep their keys.

Several processes (torchrun; see probes.distributed) fill one entry together: each runs its
contiguous share of the chunks into the same work folder (done.json is updated under a second lock),
rank 0 checks every chunk's checksum and finalises. Chunks are the unit of work and batches are
planned within a chunk, so the entry's bytes equal a one-process run's.

    $ python -c "import probes; a = probes.extract('minilm-l6', ['A text.', 'Another one.']); print(a)"
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import operator
import os
import shutil
import sys
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from filelock import FileLock
from tqdm.auto import tqdm

from probes import distributed
from probes.encoder import Encoder, MapSpec, Tokenized
from probes.errors import ProbeError
from probes.precision import Float32View, cache_np_dtype, dtype_name, float16_problem, float32_face, forward_dtype
from probes.registry import CheckpointSpec, get_spec

CACHE_FORMAT = 4  # bump when the layout on disk changes: older entries are re-extracted (3: checksums; 4: float16)
DEFAULT_CACHE_DIR = Path(os.environ.get("PROBES_CACHE", "out/cache"))
# memory budget of one chunk of captured states; chunks are also the unit of resuming and of sharding
# across processes. PROBES_CHUNK_BYTES changes it (smaller: finer sharding; the batches, hence the
# numbers, are planned within a chunk, so compare runs made with the same value)
CHUNK_BYTES = int(os.environ.get("PROBES_CHUNK_BYTES", 256 * 2**20))
CHECK_BLOCK = 16 * 2**20  # bytes per checksummed block of an entry's files
QUICK_STRIDE = 8  # PROBES_CACHE_VERIFY=quick checks every QUICK_STRIDE-th block (+ first, last) of big files


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
    # float32 arrays, or Float32View (read-only, float32 reads) over float16 storage; memory-mapped from the cache
    hidden: np.ndarray | Float32View  # (L+1, N, d); (len(hidden_layers), N, d) when only some layers are kept
    sentence: np.ndarray | Float32View  # (L+1, T, d); the model's sentence vector at every layer
    maps: dict[str, np.ndarray | Float32View] = field(default_factory=dict)  # name -> flat, text by text
    map_offsets: dict[str, np.ndarray] = field(default_factory=dict)  # name -> (T+1,) int64 into maps[name]
    hidden_layers: list[int] | None = None  # the layers hidden holds, in order (None: every layer 0..L)

    @property
    def n_texts(self) -> int:
        return len(self.texts)

    @property
    def n_layers(self) -> int:
        """L, the number of layers (hidden has L+1 entries: the embeddings, then each layer)."""
        return self.sentence.shape[0] - 1  # sentence vectors are kept for every layer

    def text_index(self) -> np.ndarray:
        """(N,) the text each token belongs to."""
        return np.repeat(np.arange(self.n_texts), np.diff(self.offsets))

    def layer_hidden(self, layer: int) -> np.ndarray | Float32View:
        """(N, d) every token's state at ``layer`` (0 = embeddings, -1 = last); ProbeError if the
        extraction kept only other layers (``extract(..., layers=...)``)."""
        lyr = _layer_index(layer, self.n_layers)
        if self.hidden_layers is None:
            return self.hidden[lyr]
        if lyr not in self.hidden_layers:
            raise ProbeError(f"these activations keep the states of layers {self.hidden_layers} only, not {lyr}")
        return self.hidden[self.hidden_layers.index(lyr)]

    def text_hidden(self, t: int) -> np.ndarray:
        """(L+1, n_t, d) the states of text t (only the kept layers, see ``hidden_layers``)."""
        return np.asarray(self.hidden[:, self.offsets[t]:self.offsets[t + 1]])

    def text_map(self, name: str, t: int) -> np.ndarray:
        """Text t's map ``name``: (layers, K, n_t, n_t), or (layers, K, n_t) for per-token maps.
        "attention" is the softmaxed attention; encoders may add others (see ``meta["maps"]``)."""
        if name not in self.maps:
            have = ", ".join(self.maps) or "none (captured with maps=False)"
            raise ProbeError(f"no map '{name}' in these activations; maps: {have}")
        spec = self.meta["maps"][name]
        n = int(self.offsets[t + 1] - self.offsets[t])
        flat = self.maps[name][self.map_offsets[name][t]:self.map_offsets[name][t + 1]]
        return np.asarray(flat).reshape(spec["layers"], spec["k"], *([n] * spec["token_axes"]))

    def text_attentions(self, t: int) -> np.ndarray:
        """(L, H, n_t, n_t) the attention maps of text t."""
        return self.text_map("attention", t)

    @property
    def attentions(self) -> np.ndarray | None:
        """All attention maps, flat (text t's (L, H, n_t, n_t) at map_offsets["attention"][t])."""
        return self.maps.get("attention")

    def __repr__(self) -> str:
        return (f"Activations(model={self.meta['model']['name']!r}, texts={self.n_texts}, "
                f"tokens={len(self.token_ids)}, layers={self.n_layers}+1, d={self.sentence.shape[-1]}, "
                f"maps={list(self.maps) or None})")


# ----------------------------------------------------------------------------- public entry point


def extract(model: str | Encoder, inputs: list[str] | list[list[int]], *, maps: bool = False,
            truncate: bool = False, batch_size: int = 32, cache_dir: str | os.PathLike | None = DEFAULT_CACHE_DIR,
            progress: bool = True, device: str = "cpu", corpus: dict | None = None, dtype: str | None = None,
            cache_dtype: str = "float16", device_map: str | None = None,
            layers: list[int] | tuple[int, ...] | None = None) -> Activations:
    """Activations of ``model`` (a registry name or a loaded :class:`Encoder`) on ``inputs``.

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
    (see probes.distributed). The rest: see :func:`_extract`."""
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
    store = cache_np_dtype(cache_dtype).name  # ProbeError unless float16 or float32
    settings = {"attentions": bool(maps), "truncate": bool(truncate), "dtype": dtype_name(run_dtype),
                "cache_dtype": store}
    if layers is not None:  # only then part of the key: entries of every layer keep their keys
        settings["layers"] = sorted({operator.index(x) for x in layers})
    key = cache_key(spec, inputs, settings)
    entry = Path(cache_dir) / spec.name / key if cache_dir is not None else None
    if distributed.launched():
        return _extract_sharded(model, inputs, settings, key, entry, batch_size, progress, device, run_dtype,
                                device_map)
    if entry is not None and (hit := _open_entry(entry, repair=False)) is not None:
        return hit  # finished entries are immutable: no lock needed to read one
    with entry_lock(entry, progress):  # one writer per entry; the others wait, then read its result
        if entry is not None and (hit := _open_entry(entry, repair=True)) is not None:
            return hit
        if not isinstance(model, Encoder):
            from probes import load  # here, not at the top: a cache hit never imports model code

            model = load(model, device=device, dtype=run_dtype, device_map=device_map)
        return _capture(model, inputs, settings, key, entry, batch_size, progress)


def _extract_sharded(model: str | Encoder, inputs: list, settings: dict, key: str, entry: Path | None,
                     batch_size: int, progress: bool, device: str, run_dtype, device_map: str | None) -> Activations:
    """:func:`_extract` in one of several processes started by torchrun. Rank 0 holds the entry's
    lock and decides (hit or not) for all; on a miss every rank loads the model and fills its share
    of the chunks (:func:`_capture`); rank 0 finalises. Every rank returns the finished entry."""
    from probes.cli import resolve_device

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
        hit = _open_entry(entry, repair=True) if main else None
        if not distributed.broadcast(hit is not None):
            if not isinstance(model, Encoder):
                from probes import load

                model = load(model, device=device, dtype=run_dtype)
            hit = _capture(model, inputs, settings, key, entry, batch_size, progress)
        distributed.barrier()  # rank 0 has finalised the entry
    return hit if main else read_entry(entry, full=False)  # rank 0 checked every byte


def _kept_layers(layers: list[int] | None, L: int) -> list[int] | None:
    """The sorted distinct layer indices in 0..L that ``layers`` names (-1 = L), or None for all."""
    if layers is None:
        return None
    return sorted({_layer_index(x, L, f"layer {x} of layers {layers}") for x in layers})


def _layer_index(layer: int, L: int, what: str = "") -> int:
    """``layer`` as an index in 0..L (negative counts from the end: -1 = L); ProbeError if out of range."""
    index = layer + L + 1 if layer < 0 else layer
    if not 0 <= index <= L:
        raise ProbeError(f"{what or f'layer {layer}'} is out of range for a model with {L} layers (0..{L}, or -1)")
    return index


def _check_batch_size(batch_size) -> int:
    """batch_size as an int >= 1; ProbeError otherwise (a batch size < 1 would run no batch at all)."""
    try:
        value = operator.index(batch_size)
    except TypeError:
        raise ProbeError(f"batch size must be a whole number >= 1, not {batch_size!r}") from None
    if isinstance(batch_size, bool) or value < 1:
        raise ProbeError(f"batch size must be a whole number >= 1, not {batch_size!r}")
    return value


def entry_lock(entry: Path | None, progress: bool, wait: bool = True):
    """An exclusive lock on one cache entry (``<cache>/.locks/<model>.<key>.lock``, a file that stays:
    removing lock files races): the process that holds it is the only one that extracts, resumes,
    repairs, replaces or removes that entry. ``wait=False``: TimeoutError at once if it is held."""
    if entry is None:
        return contextlib.nullcontext()
    lock = FileLock(_lock_path(entry))

    @contextlib.contextmanager
    def held():
        try:
            lock.acquire(timeout=0)
        except TimeoutError:  # filelock.Timeout subclasses TimeoutError
            if not wait:
                raise
            if progress:
                print(f"waiting for another process that is extracting {entry} ...", file=sys.stderr, flush=True)
            lock.acquire()
        try:
            yield
        finally:
            lock.release()

    return held()


def _open_entry(entry: Path, repair: bool) -> Activations | None:
    """The verified entry, or None when it is absent or damaged. With ``repair`` (only under the
    entry's lock) a damaged entry is removed with a warning, so that it is extracted again."""
    if not (entry / "meta.json").exists():
        return None
    try:
        return read_entry(entry)
    except (OSError, ValueError, KeyError, TypeError, EOFError, SyntaxError) as e:  # EOFError: an emptied .npy
        if repair:
            warnings.warn(f"activation cache {entry} is unreadable or damaged ({e}); removed, extracting again",
                          stacklevel=3)
            shutil.rmtree(entry, ignore_errors=True)
        return None


def cache_key(spec: CheckpointSpec, inputs: list[str] | list[list[int]], settings: dict) -> str:
    """Hash of model identity + inputs + capture settings: equal keys mean equal activations."""
    h = hashlib.sha256()
    for t in inputs:
        h.update(t.encode("utf-8") + b"\0" if isinstance(t, str) else b"ids:" + np.asarray(t, "<i8").tobytes() + b"\0")
    blob = {"format": CACHE_FORMAT, "model": spec.name, "fingerprint": spec.fingerprint(),
            "sentence": spec.sentence, "special_tokens": spec.special_tokens,
            "texts_sha256": h.hexdigest(), **settings}
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:24]


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
    store = torch.float16 if dest["hidden"].dtype == np.float16 else torch.float32
    map_offsets = {m: np.concatenate([[0], np.cumsum(_map_sizes(spec, lengths))]) for m, spec in maps.items()}
    written = np.zeros(len(toks), dtype=bool)
    for idx in batch_plan(lengths, batch_size, encoder.padding_safe):
        _run_batch(encoder, idx, lengths, offsets, all_ids, all_special, maps, map_offsets, store, dest, keep)
        written[idx] = True
        bar.update(len(idx))
    if not written.all():  # never let unwritten (zero-filled) rows reach a cache entry
        raise RuntimeError(f"{int((~written).sum())} of {len(toks)} texts of a chunk got no states "
                           f"(batch size {batch_size}); the cache entry is not finalised")


@torch.inference_mode()  # the encoders return inference tensors; pooling works on them in place
def _run_batch(encoder: Encoder, idx: np.ndarray, lengths: np.ndarray, offsets: np.ndarray, all_ids: np.ndarray,
               all_special: np.ndarray, maps: dict[str, MapSpec], map_offsets: dict, store: torch.dtype,
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
    if store == torch.float16:
        for what, x in (("a hidden state", real), ("a sentence vector", s),
                        *((f"map {m}", v) for m, v in batch_maps.items())):
            if (why := float16_problem(x.numpy(), what)) is not None:
                raise _NotFloat16(why)
    # one scatter into the chunk's rows (rounded once, by torch; torch's copy uses every thread)
    torch.from_numpy(dest["hidden"]).index_copy_(1, torch.from_numpy(dst), real.to(store))
    torch.from_numpy(dest["sentence"]).index_copy_(1, torch.from_numpy(idx), s.to(store))
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
    only after it is flushed, so a rerun after an interruption skips the finished chunks."""
    toks, cut = _prepare(encoder, inputs, settings["truncate"])
    texts = inputs if isinstance(inputs[0], str) else [encoder.tokenizer.decode(i) for i in inputs]
    L, d = encoder.num_layers, encoder.hidden_size
    maps = _capture_maps(encoder, settings["attentions"])
    lengths = np.array([len(t.ids) for t in toks], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    map_offsets = {m: np.concatenate([[0], np.cumsum(_map_sizes(spec, lengths))]) for m, spec in maps.items()}
    keep = _kept_layers(settings.get("layers"), L)  # None: every layer
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
    lock = FileLock(_lock_path(entry, ".done")) if shared else None  # done.json's read-modify-write
    while True:
        arrays, done = (_open_shared_work if shared else _open_work)(work, key, shapes, state)
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
        arrays, done = _open_work(work, key, shapes, state)
        _fill(encoder, toks, maps, chunks, offsets, map_offsets, arrays, done, work, key, state, batch_size,
              progress=False, keep=keep)
    check_complete(done, len(chunks), len(toks), int(offsets[-1]))
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
    small = {"offsets": acts.offsets, "token_ids": acts.token_ids, "special": acts.special,
             **{f"map.{m}.offsets": o for m, o in map_offsets.items()}}
    for name, arr in small.items():
        np.save(work / f"{name}.npy", arr, allow_pickle=False)
    doc = {"meta": acts.meta, "texts": acts.texts, "tokens": acts.tokens}
    doc["checksums"] = {"algorithm": "sha256", "block_bytes": CHECK_BLOCK, "doc": _doc_digest(doc),
                        "files": {p.name: _file_blocks(p) for p in sorted(work.glob("*.npy"))}}
    (work / "meta.json").write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    (work / "done.json").unlink()
    del arrays, acts
    shutil.rmtree(entry, ignore_errors=True)
    os.replace(work, entry)  # the entry appears complete, in one step
    if progress:
        itemsize = np.dtype(state["dtype"]).itemsize
        print(f"cache entry {entry}: {human_bytes(entry_bytes(entry))} ({state['dtype']}; "
              f"{itemsize * d} bytes per token per layer = {itemsize} x d)", flush=True)
    return read_entry(entry)


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
                if done[c].get("sha256") == _chunk_digest(dest) and all(done[c].get(k) == v for k, v in rec.items()):
                    bar.update(len(rng))
                    continue
                warnings.warn(f"chunk {c} of the interrupted extraction {work} is damaged; running it again",
                              stacklevel=4)
                del done[c]
            _run_chunk(encoder, [toks[i] for i in rng], maps, batch_size, bar, dest, keep)
            done[c] = {**rec, "batch_size": batch_size}
            if work is not None:
                for arr in arrays.values():
                    arr.flush()  # np.memmap (open_memmap makes one even of an empty array)
                done[c]["sha256"] = _chunk_digest(dest)
                _save_done(work, key, state, done, c, lock)


def _save_done(work: Path, key: str, state: dict, done: dict, c: int, lock: FileLock | None) -> None:
    """Record the finished chunk ``c`` in ``work/done.json``; with ``lock`` (several writers), merged
    into the records the other processes wrote there."""
    if lock is None:
        _atomic_json(work / "done.json", {"key": key, **state, "chunks": {str(k): v for k, v in sorted(done.items())}})
        return
    with lock:
        doc = json.loads((work / "done.json").read_text())
        doc["chunks"][str(c)] = done[c]
        _atomic_json(work / "done.json", doc)


def _lock_path(entry: Path, suffix: str = "") -> Path:
    locks = entry.parent.parent / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    return locks / f"{entry.parent.name}.{entry.name}{suffix}.lock"


def entry_bytes(entry: Path) -> int:
    """Bytes on disk of the files of one cache entry."""
    return sum(p.stat().st_size for p in Path(entry).iterdir() if p.is_file())


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _open_work(work: Path | None, key: str, shapes: dict, state: dict) -> tuple[dict, dict]:
    """Output arrays of dtype ``state["dtype"]``: in memory without a cache; else memory-mapped files
    in ``work``, reused (with their records of finished chunks: {chunk: {texts, tokens, batch_size,
    sha256}}) when an earlier run with the same key was interrupted; ``state`` then takes that run's
    dtype (float32 after a fallback) and fallback reason."""
    if work is None:
        return {k: np.empty(s, np.float32) for k, s in shapes.items()}, {}
    done = {}
    path = work / "done.json"
    if path.exists():
        try:
            doc = json.loads(path.read_text())
            dtype = np.dtype(doc.get("dtype", "float32"))
            if doc["key"] == key and all((a := np.load(work / f"{k}.npy", mmap_mode="r")).shape == s
                                         and a.dtype == dtype for k, s in shapes.items()):
                done = {int(c): dict(r) for c, r in doc["chunks"].items()}
                state.update(dtype=dtype.name, fallback=doc.get("fallback"))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, SyntaxError):
            done = {}
    if not done:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        arrays = {k: np.lib.format.open_memmap(work / f"{k}.npy", "w+", np.dtype(state["dtype"]), s)
                  for k, s in shapes.items()}
        _atomic_json(path, {"key": key, **state, "chunks": {}})
        return arrays, done
    return {k: np.load(work / f"{k}.npy", mmap_mode="r+") for k in shapes}, done


def _open_shared_work(work: Path, key: str, shapes: dict, state: dict) -> tuple[dict, dict]:
    """:func:`_open_work` for several processes: rank 0 creates (or resumes) the work folder; every
    rank then gets rank 0's dtype, fallback and finished chunks, and memory-maps the same files."""
    arrays, done = _open_work(work, key, shapes, state) if distributed.is_main() else ({}, {})
    got, done = distributed.broadcast((dict(state), done))
    state.update(got)
    if not distributed.is_main():
        arrays = {k: np.load(work / f"{k}.npy", mmap_mode="r+") for k in shapes}
    return arrays, done


def _atomic_json(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)


def check_complete(done: dict, n_chunks: int, n_texts: int, n_tokens: int) -> None:
    """Refuse to finalise unless every chunk is done and the chunks hold exactly the texts and
    tokens asked for (a zero-filled entry must never look valid)."""
    texts, tokens = sum(r["texts"] for r in done.values()), sum(r["tokens"] for r in done.values())
    if sorted(done) != list(range(n_chunks)) or texts != n_texts or tokens != n_tokens:
        raise RuntimeError(f"extraction incomplete: {len(done)} of {n_chunks} chunks, {texts} of {n_texts} texts, "
                           f"{tokens} of {n_tokens} tokens written; the cache entry is not finalised")


def _chunk_digest(dest: dict) -> str:
    """sha256 over one chunk's slices of the output arrays (each contiguous per leading index)."""
    h = hashlib.sha256()
    for name in sorted(dest):
        arr = dest[name]
        for part in (arr if arr.ndim > 1 else [arr]):  # hidden[l, a:b], sentence[l, a:b]: contiguous rows
            h.update(np.ascontiguousarray(part).data)
    return h.hexdigest()


def _file_blocks(path: Path) -> dict:
    """{"bytes": size, "blocks": [sha256 of each CHECK_BLOCK bytes of the file, header included]}."""
    blocks = []
    with open(path, "rb") as f:
        for data in iter(lambda: f.read(CHECK_BLOCK), b""):
            blocks.append(hashlib.sha256(data).hexdigest()[:32])
    return {"bytes": path.stat().st_size, "blocks": blocks}


def _doc_digest(doc: dict) -> str:
    """sha256 of meta.json's content other than the checksums themselves."""
    body = {k: doc[k] for k in ("meta", "texts", "tokens")}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def verify_mode() -> str:
    """How much of an entry is checked when it is opened: ``PROBES_CACHE_VERIFY`` = full (default,
    every byte) or quick (sizes, headers, small arrays, and every QUICK_STRIDE-th block of big ones)."""
    mode = os.environ.get("PROBES_CACHE_VERIFY", "full").strip().lower() or "full"
    if mode not in ("full", "quick"):
        raise ProbeError(f"PROBES_CACHE_VERIFY must be 'full' or 'quick', not {mode!r}")
    return mode


def _verify_entry(entry: Path, doc: dict, full: bool) -> None:
    """ValueError unless the entry's files match the checksums recorded when it was written."""
    sums = doc.get("checksums")
    if not isinstance(sums, dict) or sums.get("algorithm") != "sha256":
        raise ValueError("the entry has no checksums")
    if sums.get("doc") != _doc_digest(doc):
        raise ValueError("meta.json does not match its checksum")
    block, files = int(sums["block_bytes"]), sums["files"]
    expected = {"offsets", "token_ids", "special", "hidden", "sentence",
                *(f"map.{m}{x}" for m in doc["meta"].get("maps", {}) for x in ("", ".offsets"))}
    if set(files) != {f"{n}.npy" for n in expected}:
        raise ValueError("the checksummed files are not the entry's arrays")
    buf = bytearray(block)
    for name, rec in files.items():
        path, blocks = entry / name, rec["blocks"]
        if not path.exists():
            raise ValueError(f"{name} is missing")
        if path.stat().st_size != rec["bytes"]:
            raise ValueError(f"{name} has {path.stat().st_size} bytes, not {rec['bytes']}")
        pick = range(len(blocks))
        if not full and len(blocks) > QUICK_STRIDE:
            pick = sorted({*range(0, len(blocks), QUICK_STRIDE), len(blocks) - 1})
        with open(path, "rb") as f:
            for i in pick:
                f.seek(i * block)
                n = f.readinto(buf)
                if hashlib.sha256(memoryview(buf)[:n]).hexdigest()[:32] != blocks[i]:
                    raise ValueError(f"{name} does not match its checksum (bytes {i * block}..{i * block + n})")


# ----------------------------------------------------------------------------- the cache on disk

def read_entry(entry: Path, full: bool | None = None) -> Activations:
    """Load a finished cache entry (big arrays memory-mapped) after checking it against the checksums
    written with it; ValueError if anything is off. ``full``: check every byte (None: as
    PROBES_CACHE_VERIFY says; False: the quick check)."""
    doc = json.loads((entry / "meta.json").read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not isinstance(doc.get("meta"), dict):
        raise ValueError("meta.json does not describe a cache entry")
    meta = doc["meta"]
    if meta.get("format") != CACHE_FORMAT:
        raise ValueError(f"cache format {meta.get('format')} != {CACHE_FORMAT}")
    _verify_entry(entry, doc, full=verify_mode() == "full" if full is None else full)

    def load(name: str, mmap: bool = False) -> np.ndarray:
        path = entry / f"{name}.npy"
        if not path.exists():
            raise ValueError(f"{name}.npy is missing")
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)

    maps = meta.get("maps", {})
    stored = np.dtype(meta.get("cache_dtype", "float32"))
    big = {"hidden": load("hidden", mmap=True), "sentence": load("sentence", mmap=stored != np.float32),
           **{f"map.{m}": load(f"map.{m}", mmap=True) for m in maps}}
    if any(a.dtype != stored for a in big.values()):
        raise ValueError(f"the arrays are not {stored}, as meta.json says")
    big = {k: float32_face(a) for k, a in big.items()}  # float16 storage: read-only float32 views
    acts = Activations(meta=meta, texts=doc["texts"], tokens=doc["tokens"], offsets=load("offsets"),
                       token_ids=load("token_ids"), special=load("special"), hidden=big["hidden"],
                       sentence=big["sentence"], maps={m: big[f"map.{m}"] for m in maps},
                       map_offsets={m: load(f"map.{m}.offsets") for m in maps},
                       hidden_layers=meta.get("hidden_layers"))
    if acts.hidden.shape[1] != len(acts.token_ids) or len(acts.offsets) != len(acts.texts) + 1:
        raise ValueError("array shapes do not agree")
    if any(len(acts.maps[m]) != acts.map_offsets[m][-1] for m in maps):
        raise ValueError("map sizes do not agree")
    return acts
