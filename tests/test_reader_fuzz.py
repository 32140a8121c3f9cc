"""The model-file readers on crafted files: every one ends in the readers' FormatError (a ProbeError) or reads,
within a time limit, never in another exception or a hang.

Valid tiny files of the three packed formats (ONNX, E5S1, GGUF) are written with tests/panel_files.py's writers;
each is then cut at many points, has bytes flipped, has huge or negative counts planted over its header, and the
cases a crafted file is known to try are built by hand: alignment 0, arrays nested 50,000 deep, dimensions whose
int64 product wraps to 0, bad UTF-8, 0 heads, 2^31-1 or negative layers, 2 MB of 0xFF as one varint, tensors that
share bytes. Each reader runs under a SIGALRM timer, so a hang fails the test instead of stalling it.
"""

from __future__ import annotations

import signal
import struct
import time

import numpy as np
import pytest
from panel_files import (
    BERT_VOCAB,
    NOMIC_CFG,
    UNIGRAM_PIECES,
    UNIGRAM_SCORES,
    UNIGRAM_SPECIALS,
    _gstr,
    _pb,
    _pbv,
    _vint,
    nomic_gguf_parts,
    pack_gguf,
    phantom,
    write_e5s1,
    write_onnx,
)

from probes.errors import ProbeError
from probes.models import converters as cv
from probes.models import gguf_reader as gr

LIMIT_S = 5.0  # per file: a hang, not a slow machine (each file here reads in milliseconds)
E5_CFG = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
          "vocab_size": len(UNIGRAM_PIECES) + 3, "max_position_embeddings": 16, "type_vocab_size": 2}
TOKENS = [phantom(t) for t in BERT_VOCAB]


# ---------------------------------------------------------------- the readers, as scripts/fetch_models.py calls them

def read_onnx(data: bytes) -> None:
    cv.onnx_bert_config(cv.onnx_bert_state(*cv.read_onnx(data)))


def read_e5(data: bytes) -> None:
    cv.e5_bert_state(cv.read_e5s1(data))


def read_gguf(data: bytes) -> None:
    gguf = gr.read_gguf(data)
    tokens = gr.gguf_tokens(gguf.meta)
    gr.nomic_bert_config(gguf.meta, len(tokens))
    gr.nomic_bert_state(gguf.tensors)
    gr.gguf_bert_vocab(tokens)


READERS = {"onnx": read_onnx, "e5s1": read_e5, "gguf": read_gguf}


class Hang(Exception):
    pass


def outcome(reader, data: bytes) -> str:
    """"read", "refused: <line>", or what went wrong ("hang", "<exception>: ...") within LIMIT_S."""
    def alarm(*_):
        raise Hang

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, LIMIT_S)
    try:
        reader(data)
        return "read"
    except ProbeError as e:
        return f"refused: {e}" if "\n" not in str(e) else f"a refusal of several lines: {e!r}"
    except Hang:
        return f"hang (over {LIMIT_S} s)"
    except Exception as e:  # noqa: BLE001 - the failure the test reports
        return f"{type(e).__name__}: {e}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ---------------------------------------------------------------- valid tiny files

def bert_state(seed: int = 0) -> dict[str, np.ndarray]:
    """A BertModel state (no pooler) of E5_CFG's shapes, random, named as transformers names it."""
    rng = np.random.default_rng(seed)
    tensors = {n: rng.normal(0, 0.05, s).astype(np.float32) for n, s in cv.e5_shapes(E5_CFG).items()}
    return cv.e5_bert_state(cv.E5File(1, E5_CFG, [], [], {}, {}, tensors))


def nomic_state(seed: int = 0) -> dict[str, np.ndarray]:
    """A NomicBertModel state of NOMIC_CFG's shapes, random (matrices exact in float16)."""
    rng = np.random.default_rng(seed)
    h, ff, V = NOMIC_CFG["hidden_size"], NOMIC_CFG["intermediate_size"], len(BERT_VOCAB)
    shapes = {"embeddings.word_embeddings.weight": (V, h), "embeddings.token_type_embeddings.weight": (2, h),
              "embeddings.LayerNorm.weight": (h,), "embeddings.LayerNorm.bias": (h,)}
    for i in range(NOMIC_CFG["num_hidden_layers"]):
        for p in ("q", "k", "v", "o"):
            shapes[f"layers.{i}.self_attn.{p}_proj.weight"] = (h, h)
        shapes.update({f"layers.{i}.mlp.gate_proj.weight": (ff, h), f"layers.{i}.mlp.up_proj.weight": (ff, h),
                       f"layers.{i}.mlp.down_proj.weight": (h, ff)})
        for norm in ("post_attention_layernorm", "post_mlp_layernorm"):
            shapes[f"layers.{i}.{norm}.weight"] = shapes[f"layers.{i}.{norm}.bias"] = (h,)
    return {n: rng.normal(0, 0.05, s).astype(np.float16).astype(np.float32) for n, s in shapes.items()}


def valid_onnx() -> bytes:
    return write_onnx(bert_state())


def valid_e5() -> bytes:
    return write_e5s1(E5_CFG, UNIGRAM_PIECES, UNIGRAM_SCORES, UNIGRAM_SPECIALS, bert_state())


def valid_gguf() -> bytes:
    return pack_gguf(*nomic_gguf_parts(NOMIC_CFG, TOKENS, nomic_state()))


VALID = {"onnx": valid_onnx, "e5s1": valid_e5, "gguf": valid_gguf}


# ---------------------------------------------------------------- derived files

def derived(data: bytes, seed: int) -> list[tuple[str, bytes]]:
    """Truncations at many points, flipped bytes, and huge / negative / zero counts planted at header offsets."""
    rng = np.random.default_rng(seed)
    n = len(data)
    cuts = sorted({*range(0, min(n, 96)), *np.linspace(96, n - 1, 60).astype(int).tolist(), n - 1})
    out = [(f"cut-{c}", data[:c]) for c in cuts if c < n]
    head = min(n, 2048)  # where the counts, lengths and offsets live
    for p in rng.integers(0, head, 80).tolist() + rng.integers(0, n, 20).tolist():
        flipped = bytearray(data)
        flipped[p] ^= int(rng.integers(1, 256))
        out.append((f"flip-{p}", bytes(flipped)))
    plants = {"ff8": b"\xff" * 8, "2^63": struct.pack("<Q", 1 << 63), "2^31-1": struct.pack("<i", 2**31 - 1),
              "-1": struct.pack("<i", -1), "0": b"\0" * 4}
    for p in range(4, min(n, 200), 4):
        for label, value in plants.items():
            planted = data[:p] + value + data[p + len(value):]
            out.append((f"plant-{label}-at-{p}", planted[:n]))
    return out


@pytest.mark.parametrize("fmt", ["onnx", "e5s1", "gguf"])
def test_readers_refuse_or_read_every_derived_file_in_time(fmt):
    reader, data = READERS[fmt], VALID[fmt]()
    assert outcome(reader, data) == "read"  # the valid file reads
    start = time.perf_counter()
    cases = derived(data, seed=len(fmt))
    bad = [(name, got) for name, got in ((name, outcome(reader, d)) for name, d in cases)
           if got != "read" and not got.startswith("refused: ")]
    assert not bad, bad[:5]
    assert len(cases) > 300 and time.perf_counter() - start < 10 * LIMIT_S


# The words of each hand-made case's refusal: refused for the reason it was built for, not by an earlier check.
REASONS = {
    "gguf-2^32-1-dims": "dimension count", "gguf-2^63-values": "more than the file holds",
    "gguf-2^64-1-tensors": "more than the file holds", "gguf-align-0": "alignment is 0",
    "gguf-align-3": "not a power of two", "gguf-align-string": "alignment is '32'",
    "gguf-array-2^63": "does not fit", "gguf-dim-2^64-1": "a dimension of", "gguf-dims-overflow-to-0": "a dimension of",
    "gguf-eps-nan": "expected a finite number", "gguf-eps-string": "expected a finite number",
    "gguf-foreign-tensor": "not part of a nomic-bert", "gguf-heads-0": "head_count is 0",
    "gguf-heads-not-dividing": "not a multiple of head_count", "gguf-key-bad-utf8": "key is not valid UTF-8",
    "gguf-layer-number-huge": "no layer number", "gguf-layer-number-not-a-number": "no layer number",
    "gguf-layers-2^31-1": "block_count is 2147483647", "gguf-nested-arrays-50k": "nested more than",
    "gguf-no-block-count": "lacks nomic-bert.block_count", "gguf-past-the-end": "past the end",
    "gguf-qkv-not-three": "three stacked", "gguf-quantised": "quantised type 2", "gguf-shared-bytes": "share bytes",
    "gguf-string-2^63": "truncated", "gguf-strings-2^62": "does not fit", "gguf-tokens-not-strings": "list of strings",
    "gguf-unknown-value-type": "unknown GGUF value type", "gguf-value-bad-utf8": "not valid UTF-8",
    "e5-block-size-16": "block size 16", "e5-bos-outside": "bos id is 999", "e5-ff-2^31-1": "feed-forward size",
    "e5-heads-0": "head count is 0", "e5-heads-negative": "head count is -2", "e5-hidden-0": "hidden size is 0",
    "e5-hidden-33": "hidden 33", "e5-layers-0": "layer count is 0", "e5-layers-2^31-1": "layer count is 2147483647",
    "e5-layers-negative": "layer count is -1", "e5-norm-bytes-2^32-1": "truncated",
    "e5-norm-count-2^31-1": "normalisation-map size", "e5-offsets-backwards": "offsets do not run forward",
    "e5-piece-bad-utf8": "piece 9 is not valid UTF-8", "e5-piece-bytes-2^63": "truncated",
    "e5-pieces-2^31-1": "piece count is 2147483647", "e5-pieces-negative": "piece count is -1",
    "e5-positions-2^31-1": "position count", "e5-tensor-dtype-7": "unknown dtype 7",
    "e5-tensor-name-bad-utf8": "tensor name is not valid UTF-8", "e5-tensor-past-the-end": "do not fit the file",
    "e5-tensor-twice": "comes twice", "e5-tensors-2^31-1": "tensor count is 2147483647",
    "e5-tensors-negative": "tensor count is -1", "e5-tensors-share-bytes": "share bytes",
    "e5-unk-negative": "unk id is -1", "e5-vocab-negative": "vocabulary size is -5",
    "onnx-1000-dims": "more than 8 dimensions", "onnx-data-type-99": "data type 99",
    "onnx-dim-minus-1": "18446744073709551615", "onnx-dims-overflow-to-0": "4294967296",
    "onnx-dtype-as-bytes": "data type has protobuf wire type 2", "onnx-embeddings-1d": "not a table",
    "onnx-external-data": "external file", "onnx-float-data-as-varint": "float_data",
    "onnx-init-as-varint": "an initializer has protobuf wire type 0", "onnx-layer-2^31-1": "2147483646",
    "onnx-layer-gap": "not numbered 0..n-1", "onnx-length-2^62": "bytes wanted",
    "onnx-length-varint-ff": "longer than 10 bytes", "onnx-name-as-varint-2^60": "name has protobuf wire type 0",
    "onnx-name-bad-utf8": "name is not valid UTF-8", "onnx-no-graph": "0 graphs",
    "onnx-node-input-as-varint": "wire type 0", "onnx-not-bert": "not a BERT export",
    "onnx-op-bad-utf8": "op_type is not valid UTF-8", "onnx-raw-not-whole-floats": "5 raw bytes",
    "onnx-two-graphs": "2 graphs", "onnx-values-not-the-shape": "2 values for the shape [3]",
    "onnx-varint-ff-2M": "longer than 10 bytes", "onnx-varint-over-64-bits": "larger than 64 bits",
    "onnx-wire-type-3": "wire type 3",
}


def refused_for_its_reason(case: str, got: str) -> None:
    assert got.startswith("refused: ") and REASONS[case] in got, (case, got)


# ---------------------------------------------------------------- hand-made cases: GGUF

def gguf_raw(kv, infos: list[bytes], data: bytes = b"", n_kv: int | None = None, n_tensors: int | None = None) -> bytes:
    out = b"GGUF" + struct.pack("<IQQ", 3, len(infos) if n_tensors is None else n_tensors,
                                len(kv) if n_kv is None else n_kv)
    out += b"".join(_gstr(k) + struct.pack("<I", t) + v for k, t, v in kv) + b"".join(infos)
    return out + b"\0" * (-len(out) % 32) + data


def info(name: str, dims: list[int], ttype: int = 0, off: int = 0, n_dims: int | None = None) -> bytes:
    return (_gstr(name) + struct.pack("<I", len(dims) if n_dims is None else n_dims)
            + struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", ttype, off))


def gguf_meta(**change) -> list:
    """The valid file's metadata, with keys replaced (value = (type, bytes)) or dropped (value None)."""
    kv, _ = nomic_gguf_parts(NOMIC_CFG, TOKENS, nomic_state())
    return [(k, t, v) for k, t, v in kv if k not in change] + [(k, *v) for k, v in change.items() if v is not None]


def gguf_tensors(**change) -> bytes:
    """The valid file with some tensors replaced (by an array) or renamed (by a new name)."""
    kv, tensors = nomic_gguf_parts(NOMIC_CFG, TOKENS, nomic_state())
    for name, new in change.items():
        name = name.replace("__", ".")
        if isinstance(new, str):
            tensors[new] = tensors.pop(name)
        else:
            tensors[name] = new
    return pack_gguf(kv, tensors)


U32, NESTED = (lambda v: (4, struct.pack("<I", v))), struct.pack("<IQ", 9, 1) * 50_000 + struct.pack("<IQ", 4, 0)
GGUF_CASES = {
    "gguf-align-0": lambda: gguf_raw(gguf_meta(**{"general.alignment": U32(0)}), []),
    "gguf-align-string": lambda: gguf_raw(gguf_meta(**{"general.alignment": (8, _gstr("32"))}), []),
    "gguf-align-3": lambda: gguf_raw(gguf_meta(**{"general.alignment": U32(3)}), []),
    "gguf-nested-arrays-50k": lambda: gguf_raw([("x", 9, NESTED)], []),
    "gguf-dims-overflow-to-0": lambda: gguf_raw(gguf_meta(), [info("token_embd.weight", [2**32, 2**32])]),
    "gguf-dim-2^64-1": lambda: gguf_raw(gguf_meta(), [info("token_embd.weight", [2**64 - 1])]),
    "gguf-2^32-1-dims": lambda: gguf_raw(gguf_meta(), [info("token_embd.weight", [1], n_dims=2**32 - 1)]),
    "gguf-quantised": lambda: gguf_raw(gguf_meta(), [info("token_embd.weight", [32], ttype=2)], b"\0" * 64),
    "gguf-past-the-end": lambda: gguf_raw(gguf_meta(), [info("token_embd.weight", [16], off=64)], b"\0" * 64),
    "gguf-shared-bytes": lambda: gguf_raw(gguf_meta(), [info("a", [8]), info("b", [8], off=16)], b"\0" * 64),
    "gguf-key-bad-utf8": lambda: gguf_raw([], [], n_kv=1)[:24] + struct.pack("<Q", 2) + b"\xff\xfe"
    + struct.pack("<I", 4) + b"\0" * 4,
    "gguf-value-bad-utf8": lambda: gguf_raw([("k", 8, struct.pack("<Q", 2) + b"\xc3\x28")], []),
    "gguf-2^63-values": lambda: gguf_raw([], [], n_kv=2**63),
    "gguf-2^64-1-tensors": lambda: gguf_raw([], [], n_tensors=2**64 - 1),
    "gguf-array-2^63": lambda: gguf_raw([("k", 9, struct.pack("<IQ", 4, 2**63))], []),
    "gguf-strings-2^62": lambda: gguf_raw([("k", 9, struct.pack("<IQ", 8, 2**62))], []),
    "gguf-string-2^63": lambda: gguf_raw([("k", 8, struct.pack("<Q", 2**63))], []),
    "gguf-unknown-value-type": lambda: gguf_raw([("k", 13, b"\0" * 8)], []),
    "gguf-tokens-not-strings": lambda: gguf_raw(gguf_meta(**{"tokenizer.ggml.tokens":
                                                             (9, struct.pack("<IQI", 4, 1, 7))}), []),
    "gguf-no-block-count": lambda: gguf_raw(gguf_meta(**{"nomic-bert.block_count": None}), []),
    "gguf-layers-2^31-1": lambda: gguf_raw(gguf_meta(**{"nomic-bert.block_count": U32(2**31 - 1)}), []),
    "gguf-heads-0": lambda: gguf_raw(gguf_meta(**{"nomic-bert.attention.head_count": U32(0)}), []),
    "gguf-heads-not-dividing": lambda: gguf_raw(gguf_meta(**{"nomic-bert.attention.head_count": U32(5)}), []),
    "gguf-eps-nan": lambda: gguf_raw(gguf_meta(**{"nomic-bert.attention.layer_norm_epsilon":
                                                  (6, struct.pack("<f", float("nan")))}), []),
    "gguf-eps-string": lambda: gguf_raw(gguf_meta(**{"nomic-bert.attention.layer_norm_epsilon": (8, _gstr("x"))}), []),
    "gguf-layer-number-huge": lambda: gguf_tensors(blk__0__ffn_up__weight="blk.99999999999.ffn_up.weight"),
    "gguf-layer-number-not-a-number": lambda: gguf_tensors(blk__0__ffn_up__weight="blk.x.ffn_up.weight"),
    "gguf-qkv-not-three": lambda: gguf_tensors(blk__0__attn_qkv__weight=np.zeros((4, 32), np.float32)),
    "gguf-foreign-tensor": lambda: gguf_tensors(blk__0__ffn_up__weight="output.weight"),
}


@pytest.mark.parametrize("case", sorted(GGUF_CASES))
def test_crafted_gguf_is_refused(case):
    refused_for_its_reason(case, outcome(read_gguf, GGUF_CASES[case]()))


# ---------------------------------------------------------------- hand-made cases: E5S1

def e5(cfg=None, specials=UNIGRAM_SPECIALS) -> bytes:
    """An E5S1 file of E5_CFG's tensors whose header says ``cfg`` (and ``specials``)."""
    return write_e5s1({**E5_CFG, **(cfg or {})}, UNIGRAM_PIECES, UNIGRAM_SCORES, specials, bert_state())


def e5_patch(data: bytes, at: int, value: bytes) -> bytes:
    return data[:at] + value + data[at + len(value):]


def e5_norm_at(data: bytes) -> int:
    """The offset of the normalisation map's count (after the pieces' offsets, scores and bytes)."""
    n = len(UNIGRAM_PIECES)
    return 72 + 4 * (n + 1) + 4 * n + sum(len(p.encode()) for p in UNIGRAM_PIECES)


def e5_entry(data: bytes, name: str) -> int:
    """The offset of tensor ``name``'s (dtype, values, offset, bytes) in the directory."""
    return data.index(struct.pack("<H", len(name)) + name.encode()) + 2 + len(name)


def e5_dir_edit(field: str, value: int, name: str = "emb.ln.b", other: str = "emb.ln.w") -> bytes:
    data = valid_e5()
    p = e5_entry(data, name)
    if field == "dtype":
        return e5_patch(data, p, struct.pack("<B", value))
    if field == "off":
        return e5_patch(data, p + 5, struct.pack("<Q", value))
    if field == "same-offset":  # point ``name`` at ``other``'s bytes
        q = e5_entry(data, other)
        return e5_patch(data, p + 5, data[q + 5:q + 13])
    raise AssertionError(field)


E5_CASES = {
    "e5-heads-0": lambda: e5({"num_attention_heads": 0}),
    "e5-heads-negative": lambda: e5({"num_attention_heads": -2}),
    "e5-layers-2^31-1": lambda: e5({"num_hidden_layers": 2**31 - 1}),
    "e5-layers-negative": lambda: e5({"num_hidden_layers": -1}),
    "e5-layers-0": lambda: e5({"num_hidden_layers": 0}),
    "e5-vocab-negative": lambda: e5({"vocab_size": -5}),
    "e5-hidden-0": lambda: e5({"hidden_size": 0}),
    "e5-hidden-33": lambda: e5({"hidden_size": 33}),
    "e5-ff-2^31-1": lambda: e5({"intermediate_size": 2**31 - 1}),
    "e5-positions-2^31-1": lambda: e5({"max_position_embeddings": 2**31 - 1}),
    "e5-piece-bad-utf8": lambda: valid_e5().replace("\u2581guitar".encode(), b"\xff\xfe\xfd" + b"guitar", 1),
    "e5-pieces-negative": lambda: e5_patch(valid_e5(), 44, struct.pack("<i", -1)),
    "e5-pieces-2^31-1": lambda: e5_patch(valid_e5(), 44, struct.pack("<i", 2**31 - 1)),
    "e5-bos-outside": lambda: e5(specials={**UNIGRAM_SPECIALS, "bos": 999}),
    "e5-unk-negative": lambda: e5(specials={**UNIGRAM_SPECIALS, "unk": -1}),
    "e5-piece-bytes-2^63": lambda: e5_patch(valid_e5(), 64, struct.pack("<Q", 2**63)),
    "e5-offsets-backwards": lambda: e5_patch(valid_e5(), 76, struct.pack("<I", 2**31)),
    "e5-norm-count-2^31-1": lambda: e5_patch(valid_e5(), e5_norm_at(valid_e5()), struct.pack("<i", 2**31 - 1)),
    "e5-norm-bytes-2^32-1": lambda: e5_patch(valid_e5(), e5_norm_at(valid_e5()) + 4, struct.pack("<I", 2**32 - 1)),
    "e5-tensors-2^31-1": lambda: e5_patch(valid_e5(), e5_norm_at(valid_e5()) + 8 + 9, struct.pack("<i", 2**31 - 1)),
    "e5-tensors-negative": lambda: e5_patch(valid_e5(), e5_norm_at(valid_e5()) + 8 + 9, struct.pack("<i", -1)),
    "e5-tensor-dtype-7": lambda: e5_dir_edit("dtype", 7),
    "e5-tensor-past-the-end": lambda: e5_dir_edit("off", 2**63),
    "e5-tensors-share-bytes": lambda: e5_dir_edit("same-offset", 0),
    "e5-tensor-name-bad-utf8": lambda: valid_e5().replace(b"emb.ln.b", b"emb.ln\xff\xfe", 1),
    "e5-tensor-twice": lambda: valid_e5().replace(b"emb.ln.b", b"emb.ln.w", 1),
    "e5-block-size-16": lambda: valid_e5()[:40] + struct.pack("<i", 16) + valid_e5()[44:],
}


@pytest.mark.parametrize("case", sorted(E5_CASES))
def test_crafted_e5s1_is_refused(case):
    refused_for_its_reason(case, outcome(read_e5, E5_CASES[case]()))


# ---------------------------------------------------------------- hand-made cases: ONNX

def onnx_tensor(name: bytes = b"t", dims=(2,), dtype: int = 1, raw: bytes = b"\0" * 8) -> bytes:
    return _pb(1, b"".join(_vint(d) for d in dims)) + _pbv(2, dtype) + _pb(8, name) + _pb(9, raw)


def onnx_model(graph: bytes) -> bytes:
    return _pbv(1, 8) + _pb(2, b"pytorch") + _pb(7, graph)


def onnx_init(tensor: bytes) -> bytes:
    return onnx_model(_pb(5, tensor))


def onnx_state_edit(**rename) -> bytes:
    state = bert_state()
    for old, new in rename.items():
        state[new] = state.pop(old.replace("__", "."))
    return write_onnx(state)


ONNX_CASES = {
    "onnx-varint-ff-2M": lambda: b"\xff" * 2_000_000,
    "onnx-length-varint-ff": lambda: onnx_model(b"\x0a" + b"\xff" * 200_000),
    "onnx-varint-over-64-bits": lambda: b"\x08" + b"\xff" * 9 + b"\x7f",
    "onnx-length-2^62": lambda: b"\x3a" + _vint(2**62) + b"\0" * 16,
    "onnx-wire-type-3": lambda: b"\x0b" + b"\0" * 8,
    "onnx-no-graph": lambda: _pbv(1, 8),
    "onnx-two-graphs": lambda: onnx_model(b"") + _pb(7, b""),
    "onnx-dims-overflow-to-0": lambda: onnx_init(onnx_tensor(dims=(2**32, 2**32), raw=b"")),
    "onnx-dim-minus-1": lambda: onnx_init(onnx_tensor(dims=(2**64 - 1,))),
    "onnx-1000-dims": lambda: onnx_init(onnx_tensor(dims=(1,) * 1000, raw=b"\0" * 4)),
    "onnx-name-bad-utf8": lambda: onnx_init(onnx_tensor(name=b"\xff\xfe")),
    "onnx-op-bad-utf8": lambda: onnx_model(_pb(1, _pb(4, b"\xc3\x28"))),
    "onnx-name-as-varint-2^60": lambda: onnx_init(_pbv(8, 2**60)),
    "onnx-node-input-as-varint": lambda: onnx_model(_pb(1, _pbv(1, 2**60))),
    "onnx-init-as-varint": lambda: onnx_model(_pbv(5, 3)),
    "onnx-raw-not-whole-floats": lambda: onnx_init(onnx_tensor(raw=b"\0" * 5)),
    "onnx-float-data-as-varint": lambda: onnx_init(_pb(1, _vint(1)) + _pbv(2, 1) + _pbv(4, 7)),
    "onnx-data-type-99": lambda: onnx_init(onnx_tensor(dtype=99)),
    "onnx-dtype-as-bytes": lambda: onnx_init(_pb(2, b"\x01")),
    "onnx-external-data": lambda: onnx_init(onnx_tensor() + _pbv(14, 1)),
    "onnx-values-not-the-shape": lambda: onnx_init(onnx_tensor(dims=(3,))),
    "onnx-layer-2^31-1": lambda: onnx_state_edit(encoder__layer__1__output__dense__bias=
                                                 "encoder.layer.2147483646.output.dense.bias"),
    "onnx-layer-gap": lambda: onnx_state_edit(**{f"encoder__layer__1__{k.replace('.', '__')}": f"encoder.layer.5.{k}"
                                                 for k in cv.E5_TO_BERT.values()}),
    "onnx-embeddings-1d": lambda: write_onnx({**bert_state(), "embeddings.word_embeddings.weight": np.zeros(32)}),
    "onnx-not-bert": lambda: onnx_init(onnx_tensor()),
}


@pytest.mark.parametrize("case", sorted(ONNX_CASES))
def test_crafted_onnx_is_refused(case):
    refused_for_its_reason(case, outcome(read_onnx, ONNX_CASES[case]()))


def test_two_megabytes_of_ff_are_refused_at_once():
    data = b"\xff" * 2_000_000
    start = time.perf_counter()
    with pytest.raises(cv.FormatError, match="longer than 10 bytes"):
        cv.read_onnx(data)
    assert time.perf_counter() - start < 5  # a hang guard: reading it byte by byte takes minutes


def test_format_error_is_a_probe_error():
    assert issubclass(cv.FormatError, ProbeError) and issubclass(cv.FormatError, ValueError)
    with pytest.raises(ProbeError, match="layer count is -1"):
        cv.read_e5s1(e5({"num_hidden_layers": -1}))
