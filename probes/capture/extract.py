"""Extraction: run a model on texts once and keep every layer's states (the only place a model runs on texts).

For each text it keeps the hidden states of every layer, the sentence vector of every layer, the token strings
and a special-token mask, and (when asked) the attention maps and any other maps the encoder declares, as
:class:`~probes.capture.activations.Activations`, cached on disk by :mod:`probes.capture.store` (the Python
API's default cache is the per-user folder of :func:`~probes.capture.store.user_cache_dir`).

A capture is planned, filled and finalised: :class:`~probes.capture.plan.CapturePlan` tokenises and lays out
the arrays and the chunks; :class:`_Capture` fills the chunks (:mod:`probes.capture.batch` runs each batch,
:mod:`probes.capture.work` holds the arrays being written) and finalises the entry. Batches are padded on the
right and sorted by length; padding never reaches a real token (the tests check it). Work is done in chunks
of bounded memory (``PROBES_CHUNK_BYTES``), the unit of resuming and of sharding; batches are planned within
a chunk, so an entry's bytes do not depend on how many processes filled it.

Precision (probes.precision): the model runs in ``dtype`` (float32, bfloat16, float16) on ``device``
(``auto`` = cuda, else mps, else cpu); its states are cast to float32, sentence vectors are pooled
in float32, and the cache stores them as ``cache_dtype`` (float16 by default: 2 x d bytes per token
per layer). Both dtypes are part of the cache key. A state that float16 cannot hold (beyond +-65504, NaN,
inf, or so small that it would be stored as subnormals or zeros) makes the whole entry fall back to float32,
with a warning and ``meta["cache_dtype_fallback"]``. Without a cache (``cache_dir=None``) the states stay
float32 in memory. ``layers`` keeps the token states of some layers only; it is part of the key only when
given, so entries of every layer keep their keys.

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
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
from filelock import FileLock

from probes.capture import distributed, libraries, store
from probes.capture.activations import Activations
from probes.capture.batch import ChunkInputs, NotFloat16, run_batch
from probes.capture.plan import CapturePlan
from probes.capture.store import (
    USER_CACHE,
    UserCache,
    cache_key,
    entry_lock,
    open_entry,
    read_entry,
    usable_cache,
    user_cache_source,
)
from probes.capture.work import (
    ChunkOut,
    StoreState,
    WorkArrays,
    cache_write_errors,
    chunk_digest,
    open_shared_work,
    open_work,
    save_done,
)
from probes.checkpoints.identity import source_versions
from probes.checkpoints.names import get_spec
from probes.checkpoints.pooling import pooling_words
from probes.config import progress_bar
from probes.errors import ProbeError
from probes.intervention import active, as_interventions, describe, hooked, key_identity
from probes.models.encoder import Encoder, recording_after_changing_hooks, runtime_changes
from probes.precision import cache_np_dtype, dtype_name, forward_dtype

# memory budget of one chunk of captured states; chunks are also the unit of resuming and of sharding
# across processes. PROBES_CHUNK_BYTES changes it (smaller: finer sharding; the batches, hence the
# numbers, are planned within a chunk, so compare runs made with the same value)
CHUNK_BYTES = int(os.environ.get("PROBES_CHUNK_BYTES", 256 * 2**20))
FILES_MOVED = ("files of its folder changed between hashing them for the cache key and loading the model (a job "
               "writing into the folder?): the states may not be those of the files the key names")


def extract(model, inputs: list[str] | list[list[int]], *, maps: bool = False,
            truncate: bool = False, batch_size: int = 32,
            cache_dir: str | os.PathLike | UserCache | None = USER_CACHE, progress: bool = True,
            device: str = "cpu", corpus: dict | None = None, dtype: str | None = None,
            cache_dtype: str = "float16", device_map: str | None = None,
            layers: list[int] | tuple[int, ...] | None = None, tokenizer=None, name: str | None = None,
            sentence: str | None = None, intervention=None) -> Activations:
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
    (see probes.capture.distributed). ``intervention``: an :class:`~probes.intervention.Intervention` (or a list)
    that edits a layer's states during the forward pass, after those of any enclosing
    :func:`probes.intervention.intervening` block; the cache key and ``meta["intervention"]`` hold them. The rest:
    see :func:`_extract`."""
    from probes.models.user import is_model_object, wrap_encoder

    if is_model_object(model):
        model = wrap_encoder(model, tokenizer, name=name, sentence=sentence)
    elif tokenizer is not None or name is not None or sentence is not None:
        raise ProbeError("tokenizer=, name= and sentence= go with a model object (a loaded transformers model), "
                         f"not with {type(model).__name__} {model!r:.60}")
    acts = _extract(model, inputs, maps=maps, truncate=truncate, batch_size=batch_size,
                    cache_dir=cache_dir, progress=progress, device=device, dtype=dtype, cache_dtype=cache_dtype,
                    device_map=device_map, layers=layers, intervention=intervention)
    if corpus is not None:
        acts.meta["corpus"] = corpus
    return acts


def _extract(model: str | Encoder, inputs: list[str] | list[list[int]], *, maps: bool = False,
             truncate: bool = False, batch_size: int = 32,
             cache_dir: str | os.PathLike | UserCache | None = USER_CACHE, progress: bool = True,
             device: str = "cpu", dtype: str | None = None,
             cache_dtype: str = "float16", device_map: str | None = None,
             layers: list[int] | tuple[int, ...] | None = None, intervention=None) -> Activations:
    """Activations of ``model`` (a registry name or a loaded :class:`Encoder`) on ``inputs``.

    ``inputs`` are texts, or token-id sequences without special tokens (fixed-length windows cut
    from running text); the model's special tokens are added either way. ``maps=True`` also
    captures the attention maps and any other maps the encoder declares (``Encoder.map_specs``).
    A cache hit returns at once without loading the model. ``truncate=False`` makes an input longer
    than the model's limit an error; ``truncate=True`` cuts it (keeping a final special token),
    warns, and records which inputs were cut. ``cache_dir``: the activation cache folder (default: the
    per-user cache, :func:`~probes.capture.store.user_cache_dir`); None disables the cache. ``intervention``:
    see :func:`extract` (an intervention with a Python function runs without the cache, with one warning).
    """
    inputs = cast("list[str] | list[list[int]]", [i if isinstance(i, str) else [int(t) for t in i] for i in inputs])
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
    source = f"cache_dir={cache_dir}"  # what named the cache, for an error line that says what to change
    if isinstance(cache_dir, UserCache):  # USER_CACHE, the default
        cache_dir, source = user_cache_source()
    if cache_dir is not None and (why := runtime_changes(model)) is not None:  # hooks: no key can see them
        warnings.warn(f"model '{spec.name}': {why}; extracted without the activation cache", stacklevel=3)
        cache_dir = None
    edits = active() + as_interventions(intervention)
    if edits:  # in the key (and so in meta): an edited model's states are an entry of their own
        ident = key_identity(edits)
        settings["intervention"] = describe(edits) if ident is None else ident
        if cache_dir is not None and ident is None:
            warnings.warn(f"model '{spec.name}': an intervention runs a Python function, which no key can see; "
                          "extracted without the activation cache", stacklevel=3)
            cache_dir = None
    # the files the key hashes, as they are before it is made: the model loaded on a miss must have read the same
    versions = source_versions(spec) if cache_dir is not None and not isinstance(model, Encoder) else None
    key = cache_key(spec, inputs, settings)
    entry = Path(cache_dir) / spec.name / key if cache_dir is not None else None
    if distributed.launched():
        return _extract_sharded(model, inputs, settings, key, entry, batch_size, progress, device, run_dtype,
                                device_map, edits, versions)
    if entry is not None and (hit := open_entry(entry, repair=False)) is not None and _current(hit, entry):
        return _described(hit, spec)  # finished entries are immutable: no lock needed to read one
    if entry is not None:  # a miss writes: a folder that cannot take it is one line naming its setting
        usable_cache(entry.parent.parent, source)
    with entry_lock(entry, progress):  # one writer per entry; the others wait, then read its result
        hit = open_entry(entry, repair=True) if entry is not None else None
        if hit is not None and entry is not None and _current(hit, entry):
            return _described(hit, spec)
        if not isinstance(model, Encoder):
            from probes.checkpoints.loaders import load  # here: a cache hit never imports model code

            model = load(model, device=device, dtype=run_dtype, device_map=device_map)
            if entry is not None and model.loaded_files != versions:
                warnings.warn(f"model '{spec.name}': {FILES_MOVED}; extracted without the activation cache",
                              stacklevel=3)
                entry, hit = None, None
        if hit is not None and entry is not None:  # made under other library versions: checked before it is served
            if (served := _checked_hit(model, hit, entry, inputs, settings, key, edits)) is not None:
                return _described(served, spec)
        acts = _capture(model, inputs, settings, key, entry, batch_size, progress, edits)
        if acts is None:  # only a rank other than 0 under torchrun, which takes _extract_sharded
            raise RuntimeError("a capture outside torchrun returned no activations")
        return acts


def _extract_sharded(model: str | Encoder, inputs: list, settings: dict, key: str, entry: Path | None,
                     batch_size: int, progress: bool, device: str, run_dtype, device_map: str | None,
                     edits: tuple = (), versions: tuple | None = None) -> Activations:
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
        if hit is not None and not _current(hit, entry):  # other library versions: extracted again (no check
            shutil.rmtree(entry, ignore_errors=True)  # under torchrun: the ranks share their work through the cache)
            hit = None
        if not distributed.broadcast(hit is not None):
            if not isinstance(model, Encoder):
                from probes.checkpoints.loaders import load

                model = load(model, device=device, dtype=run_dtype)
                if model.loaded_files != versions:  # the processes share their work through the cache only
                    raise ProbeError(f"model '{model.spec.name}': {FILES_MOVED}; run again once its folder "
                                     "stays unchanged")
            hit = _capture(model, inputs, settings, key, entry, batch_size, progress, edits)
        distributed.barrier()  # rank 0 has finalised the entry
    if main and hit is not None:
        return hit
    return read_entry(entry, full=False)  # rank 0 checked every byte


def _current(hit: Activations, entry: Path) -> bool:
    """Whether a cache hit was computed by this process's library versions, or checked equal under them before
    (:mod:`probes.capture.libraries`); the activations then say which check it was."""
    if libraries.same_libraries(hit.meta):
        return True
    if (rec := libraries.checked_before(entry)) is not None:
        hit.meta["libraries_checked"] = rec
        return True
    return False


def _checked_hit(encoder: Encoder, hit: Activations, entry: Path, inputs: list, settings: dict, key: str,
                 edits: tuple) -> Activations | None:
    """``hit``, an entry computed under other library versions, once one batch of its texts run again now gives
    the same states (within :func:`~probes.capture.libraries.tolerance`); else None, the entry removed (the
    caller extracts again). Runs under the entry's lock, with the model loaded."""
    texts = _check_batch(hit.meta, CapturePlan.build(encoder, inputs, settings, CHUNK_BYTES))
    fresh = _capture(encoder, [inputs[t] for t in texts], settings, key, None, len(texts), False, edits)
    check = libraries.compare_states(hit, fresh, texts, libraries.tolerance(hit.meta.get("cache_dtype", "float32"),
                                                                            settings["dtype"]))
    made = libraries.versions_words(hit.meta.get("libraries"))
    now = libraries.versions_words(libraries.library_versions())
    if check.equal:
        hit.meta["libraries_checked"] = libraries.remember(entry, check)
        warnings.warn(f"model '{encoder.name}': cache entry {entry} was computed under {made}; under {now} "
                      f"{check.words()}: reused", stacklevel=4)
        return hit
    warnings.warn(f"model '{encoder.name}': cache entry {entry} was computed under {made}; under {now} "
                  f"{check.words()}: extracting again", stacklevel=4)
    shutil.rmtree(entry, ignore_errors=True)
    return None


def _check_batch(meta: dict, plan: CapturePlan) -> list[int]:
    """The entry's texts that :func:`_checked_hit` runs again: the longest batch of its first chunk, as the
    extraction ran it (with the batch size it recorded)."""
    size = meta.get("batch_size", 32)
    size = int(size[0] if isinstance(size, list) else size)
    a, b = plan.chunks[0].start, plan.chunks[0].stop
    batches = batch_plan(plan.lengths[a:b], size, str(meta.get("padding", "")).startswith("right"))
    return sorted(int(i) + a for i in batches[-1])


def _described(acts: Activations, spec) -> Activations:
    """``acts`` read from the cache, its model record completed with what an entry written before it was recorded
    lacks (the sentence vector's pooling in words), so that every result says it."""
    if "sentence_pooling" not in acts.meta["model"]:  # a hit of a newer entry reads no model file
        acts.meta["model"]["sentence_pooling"] = pooling_words(spec)
    return acts


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


def batch_plan(lengths: np.ndarray, batch_size: int, padding_safe: bool) -> list[np.ndarray]:
    """Index batches in length order (little padding). Encoders that are not padding-safe get
    batches of equal length only, so no padding is ever added."""
    order = np.argsort(lengths, kind="stable")
    if padding_safe:
        return [order[b:b + batch_size] for b in range(0, len(order), batch_size)]
    runs = np.split(order, np.flatnonzero(np.diff(lengths[order])) + 1)
    return [run[b:b + batch_size] for run in runs for b in range(0, len(run), batch_size)]


def _run_chunk(encoder: Encoder, chunk: ChunkInputs, dest: ChunkOut, batch_size: int, bar) -> dict[str, int]:
    """Run the texts of one chunk batch by batch, writing their states through ``dest`` (see
    probes.capture.batch); RuntimeError if a text got no states. Returns the chunk's count of states that hold
    NaN or inf, per array and layer (empty for a model whose states are all finite)."""
    written = np.zeros(len(chunk.lengths), dtype=bool)
    bad: dict[str, int] = {}
    for idx in batch_plan(chunk.lengths, batch_size, encoder.padding_safe):
        for k, v in run_batch(encoder, chunk, idx, dest).items():
            bad[k] = bad.get(k, 0) + v
        written[idx] = True
        bar.update(len(idx))
    if not written.all():  # never let unwritten rows reach a cache entry
        raise RuntimeError(f"{int((~written).sum())} of {len(written)} texts of a chunk got no states "
                           f"(batch size {batch_size}); the cache entry is not finalised")
    return bad


@dataclass
class _Capture:
    """One capture in progress: the plan, where it is written (``work``: ``<entry>.partial``, None without a
    cache) and how (``state``), and the run settings."""

    encoder: Encoder
    plan: CapturePlan
    settings: dict
    key: str
    entry: Path | None  # <cache>/<model>/<key>; None without a cache
    state: StoreState
    batch_size: int
    progress: bool

    @property
    def work(self) -> Path | None:
        """The folder the entry is written in: ``<entry>.partial``."""
        return None if self.entry is None else self.entry.with_name(self.entry.name + ".partial")

    def cached(self) -> tuple[Path, Path]:
        """(entry, work) of a capture into the cache (every capture under torchrun has one)."""
        if self.entry is None:
            raise ProbeError("a capture without a cache has no entry to write")
        return self.entry, self.entry.with_name(self.entry.name + ".partial")

    def fill(self, arrays: WorkArrays, done: dict, only: range | None = None, lock: FileLock | None = None) -> None:
        """Run every chunk not in ``done`` (a finished chunk is reused if its checksum still holds), writing
        each into ``arrays`` and recording it in ``work/done.json``. ``only``: this process's share of the
        chunks (torchrun); ``lock``: held while done.json is updated, when several processes write it."""
        chunks = self.plan.chunks
        mine = range(len(chunks)) if only is None else only
        writing = lambda: cache_write_errors(self.work) if self.work is not None else contextlib.nullcontext()
        desc = f"extract {self.encoder.name}" + (f" (rank {distributed.rank()} of {distributed.world_size()})"
                                                 if distributed.launched() else "")
        total = sum(len(chunks[c]) for c in mine)
        with progress_bar(self.progress, total=total, desc=desc, unit="text") as bar:
            for c in mine:
                spans, rec = self.plan.spans(c), self.plan.record(c)
                if c in done:  # finished by an earlier, interrupted run: reused only if its checksum still holds
                    same = all(done[c].get(k) == v for k, v in rec.items())
                    if same and done[c].get("xxh3_64") == chunk_digest(arrays.read(spans)):
                        bar.update(len(chunks[c]))
                        continue
                    warnings.warn(f"chunk {c} of the interrupted extraction {self.work} is damaged (or was recorded "
                                  "by an older version of the suite); running it again", stacklevel=4)
                    del done[c]
                dest = arrays.chunk(spans)
                bad = _run_chunk(self.encoder, ChunkInputs.of(self.plan, c), dest, self.batch_size, bar)
                dest.commit()
                done[c] = {**rec, "batch_size": self.batch_size, **({"nonfinite": bad} if bad else {})}
                # one process's last chunk needs no record: the entry is finalised (checksummed) right after it,
                # and an interruption before that runs this one chunk again
                if self.work is not None and not (only is None and c == mine[-1]):
                    with writing():
                        arrays.sync()
                    done[c]["xxh3_64"] = chunk_digest(arrays.read(spans))
                    save_done(self.work, self.key, self.state, done, c, lock)

    def fill_stored(self) -> tuple[WorkArrays, dict] | None:
        """Fill every chunk (this process's share under torchrun) in the storage dtype asked for; when float16
        cannot hold a state, warn and start again in float32 (the whole entry). Under torchrun, rank 0 then
        checks every rank's chunks and finishes any that is missing; the other ranks return None."""
        shared = distributed.launched()  # several processes fill the same work folder, one share of chunks each
        lock = FileLock(store.lock_path(self.cached()[0], ".done")) if shared else None
        while True:
            arrays, done = (open_shared_work(self.cached()[1], self.key, self.plan.shapes, self.state) if shared
                            else open_work(self.work, self.key, self.plan.shapes, self.state))
            problem = None
            try:
                self.fill(arrays, done, only=distributed.shard(len(self.plan.chunks)) if shared else None, lock=lock)
            except NotFloat16 as e:
                problem = str(e)
            except BaseException:
                arrays.close()
                raise
            if shared:
                problem = next((p for p in distributed.gather(problem) if p is not None), None)
            if problem is None:
                break
            arrays.close()
            self.state.to_float32(f"float16 cannot hold the states: {problem}; stored as float32")
            warnings.warn(f"{self.encoder.name}: {self.state.fallback}", stacklevel=4)
            if self.work is not None and distributed.is_main():
                shutil.rmtree(self.work, ignore_errors=True)
            if shared:
                distributed.barrier()
        if not shared:
            return arrays, done
        arrays.close()
        distributed.barrier()  # every rank's chunks are written and flushed
        if not distributed.is_main():
            return None
        # rank 0 reopens the work folder and checks every chunk against the checksum its writer recorded
        # (a chunk damaged or missing is run again here), then finalises as one process would
        arrays, done = open_work(self.work, self.key, self.plan.shapes, self.state)
        try:
            self.progress, progress = False, self.progress
            self.fill(arrays, done)
            self.progress = progress
        except BaseException:
            arrays.close()
            raise
        return arrays, done

    def finalise(self, arrays: WorkArrays, done: dict) -> Activations:
        """The activations of a filled capture: in memory without a cache; else the entry, finalised (renamed
        into place) and opened."""
        plan = self.plan
        try:
            store.check_complete(done, len(plan.chunks), plan.n_texts, plan.n_tokens)
            meta = plan.meta(self.encoder, self.settings, self.key, done, self.state)
            if "nonfinite_states" in meta:  # the model's own numbers: every statistic over them is undefined
                where = ", ".join(f"{k}: {v}" for k, v in meta["nonfinite_states"].items())
                warnings.warn(f"{self.encoder.name}: states that hold NaN or inf ({where}); recorded in the "
                              "activations' meta['nonfinite_states']: a statistic over them has no value",
                              stacklevel=4)
            acts = plan.activations(self.encoder, meta, arrays.result())
            if self.entry is None:
                return acts
            entry, work = self.cached()
            store.finalise_entry(work, entry, acts, self.progress, arrays.contents())
            del acts
        finally:
            arrays.close()
        # the bytes were checksummed as they were written (chunk digests, then finalise_entry's file blocks):
        # reading them back to check them again buys nothing, so the entry is opened without verification
        return read_entry(entry, verify=False)


def _capture(encoder: Encoder, inputs: list, settings: dict, key: str, entry: Path | None,
             batch_size: int, progress: bool, edits: tuple = ()) -> Activations | None:
    """Plan, fill and finalise one capture (see :class:`_Capture`). With a cache the arrays are written into
    ``<entry>.partial/`` and a chunk is listed in ``done.json`` once written, so a rerun after an interruption
    skips the finished chunks. Under torchrun the ranks other than 0 return None (they read the entry).
    ``edits``: interventions, hooked on the encoder for the capture only (ahead of transformers' recording)."""
    plan = CapturePlan.build(encoder, inputs, settings, CHUNK_BYTES)
    # without a cache the states stay float32 in memory; float16 is a storage format
    state = (StoreState(settings["cache_dtype"]) if entry is not None
             else StoreState("float32", "no cache: the states are kept in memory as float32"))
    capture = _Capture(encoder, plan, settings, key, entry, state, batch_size, progress)
    with hooked(encoder, edits), recording_after_changing_hooks(getattr(encoder, "model", None)):
        filled = capture.fill_stored()  # a hooked layer's state: its changed output
    return None if filled is None else capture.finalise(*filled)
