"""Checks of a Hugging Face model folder before anything is loaded from it.

A folder (``--model path/to/folder``, a registry ``path:`` or ``package:`` entry) is refused with one line that names
the folder and what is wrong, before transformers reads a weight:

- ``config.json`` asks for custom code (``auto_map``): never run, and the plain ``model_type`` class would be a
  different model than the one the folder describes;
- a position count (``max_position_embeddings``, ``n_positions``, ...) or a size field is not a positive integer
  within a sane bound (a config saying 10^12 positions made transformers try to allocate 128 TB);
- no tokenizer files (transformers would build a tokenizer of five special tokens from config.json alone, and every
  word would become ``[UNK]``);
- no weight file, a shard its index names is missing, or a safetensors header that is not one (unknown dtype,
  negative shape, data outside the file), or a position table shorter than the config's positions.

Which weights the architecture needs is checked when the model is loaded, from transformers' own loading report
(:func:`weight_problems`): a missing weight (other than a pooler, which no analysis reads) or an unexpected weight
inside the model's own modules is an error, never a random initialisation with the warning silenced. Weights of a
head the base model does not have (``cls.predictions.*`` of a masked-LM checkpoint) are not the model analysed and
are ignored.

    $ python -c "from probes.checkpoints.folder import check_folder; check_folder('x', 'checkpoints/bert-small')"
"""

from __future__ import annotations

import math
import struct
from pathlib import Path

from probes.errors import CheckpointError
from probes.io import loads_json

# files any of which gives transformers a real vocabulary (fast tokenizer, WordPiece, BPE, SentencePiece)
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
POSITION_FIELDS = ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "seq_length", "max_positions")
SIZE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
               "n_embd", "n_layer", "n_head", "embedding_size", "num_key_value_heads",
               # DistilBERT's names, the suite's S-LSTM and Graph-Transformer configs, ALBERT, ConvBERT
               "dim", "n_layers", "n_heads", "hidden_dim", "head_dim", "num_layers", "num_heads", "num_hidden_groups",
               "conv_kernel_size")
MAX_POSITIONS = 1 << 24  # 16.7 million: above every released model's context
MAX_SIZE = 1 << 24  # a width, depth, head count or vocabulary beyond this is no checkpoint one can load
SAFETENSORS_DTYPES = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "I64", "I32", "I16", "I8", "U8", "BOOL"}
POSITION_TABLES = ("position_embeddings.weight", "wpe.weight", "embed_positions.weight")
IGNORED_MISSING = ("pooler.",)  # BertModel's pooler: in no masked-LM checkpoint, read by no analysis


def read_config(name: str, path: Path) -> dict:
    """The JSON object of a config file ``path`` of model ``name``; one CheckpointError line when it cannot be read
    or is not an object."""
    try:
        cfg = loads_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CheckpointError(f"model '{name}': cannot read {path}: {e}") from None
    if not isinstance(cfg, dict):
        raise CheckpointError(f"model '{name}': {path} is not a JSON object")
    return cfg


def check_folder(name: str, folder: str | Path, cfg: dict | None = None) -> None:
    """One-line CheckpointError unless ``folder`` is a loadable model folder (see the module docstring)."""
    folder = Path(folder)
    if cfg is None:
        cfg = read_config(name, folder / "config.json")
    elif not isinstance(cfg, dict):
        raise CheckpointError(f"model '{name}': {folder / 'config.json'} is not a JSON object")
    check_config(name, folder / "config.json", cfg)
    check_tokenizer_files(name, folder)
    check_weight_files(name, folder, cfg)


def check_config(name: str, where: str | Path, cfg: dict) -> None:
    """Custom code, position counts and sizes of a config dict (a folder's config.json, or the fields of a
    registry ``random:`` source); ``where`` names it in the error."""
    if cfg.get("auto_map"):
        raise CheckpointError(f"model '{name}': {where} asks for custom code (auto_map), which is never run; the "
                              f"plain '{cfg.get('model_type')}' class would not be the model the folder describes")
    for fields, bound, what in ((POSITION_FIELDS, MAX_POSITIONS, "positions"), (SIZE_FIELDS, MAX_SIZE, "size")):
        for key in fields:
            value = cfg.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= bound:
                raise CheckpointError(f"model '{name}': {where}: {key} = {value!r} is not a {what} count from 1 to "
                                      f"{bound:,}")
    if (bad := _not_finite(cfg)) is not None:  # JSON's NaN / Infinity: every state would be NaN
        raise CheckpointError(f"model '{name}': {where}: {bad[0]} = {bad[1]!r} is not a finite number")
    for key, value in cfg.items():
        if key.endswith(("_eps", "_epsilon")) or key in ("eps", "epsilon"):  # layer_norm_eps, rms_norm_eps, ...
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise CheckpointError(f"model '{name}': {where}: {key} = {value!r} is not a number >= 0 (a "
                                      "normalisation's epsilon)")


def _not_finite(doc, where: str = "") -> tuple[str, float] | None:
    """(the field's path, its value) of the first NaN or infinite number in a config, or None."""
    if isinstance(doc, float) and not math.isfinite(doc):
        return where.lstrip("."), doc
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        if (found := _not_finite(v, f"{where}.{k}" if isinstance(k, str) else f"{where}[{k}]")) is not None:
            return found
    return None


def check_tokenizer_files(name: str, folder: Path) -> None:
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        raise CheckpointError(f"model '{name}': {folder} has no tokenizer files (one of {', '.join(TOKENIZER_FILES)}); "
                              f"without them every word would be [UNK]: save the tokenizer beside the model "
                              f"(tokenizer.save_pretrained)")


def check_weight_files(name: str, folder: Path, cfg: dict) -> None:
    """A weight file (or every shard of an index) is present; safetensors headers are sane."""
    present = [f for f in WEIGHT_FILES if (folder / f).is_file()]
    if not present:
        raise CheckpointError(f"model '{name}': {folder} has no weight file (one of {', '.join(WEIGHT_FILES)})")
    files = []
    for f in present:
        if f.endswith(".index.json"):
            try:
                index = loads_json((folder / f).read_text(encoding="utf-8"))
                shards = sorted(set(index["weight_map"].values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
                raise CheckpointError(f"model '{name}': {folder / f} is not a weight index ({e})") from None
            for shard in shards:
                path = (folder / str(shard)).resolve()
                if path.parent != folder.resolve() or not path.is_file():
                    raise CheckpointError(f"model '{name}': {folder / f} names the shard {shard!r}, which is not "
                                          f"a file in {folder}")
                files.append(path)
        else:
            files.append(folder / f)
    positions = max([cfg[k] for k in POSITION_FIELDS if isinstance(cfg.get(k), int)], default=None)
    for path in files:
        if path.suffix == ".safetensors":
            for key, (_dtype, shape) in safetensors_header(name, path).items():
                if positions and key.endswith(POSITION_TABLES) and shape and shape[0] < positions:
                    raise CheckpointError(f"model '{name}': {path.parent / 'config.json'} says {positions} positions "
                                          f"but {path} holds {shape[0]} ({key})")


def safetensors_header(name: str, path: Path) -> dict[str, tuple[str, list[int]]]:
    """{tensor: (dtype, shape)} from a safetensors file's header (no tensor is read); one-line error unless the
    header is well formed: known dtypes, shapes of non-negative integers, data inside the file."""
    size = path.stat().st_size
    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > size - 8 or n > 1 << 30:
                raise ValueError(f"header of {n} bytes in a file of {size}")
            header = loads_json(f.read(n))
        if not isinstance(header, dict):
            raise ValueError("the header is not a JSON object")
        out = {}
        for key, rec in header.items():
            if key == "__metadata__":
                continue
            dtype, shape, (a, b) = rec["dtype"], rec["shape"], rec["data_offsets"]
            if dtype not in SAFETENSORS_DTYPES:
                raise ValueError(f"{key} has the unknown dtype {dtype!r}")
            if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
                raise ValueError(f"{key} has the shape {shape}")
            if not (isinstance(a, int) and isinstance(b, int) and 0 <= a <= b <= size - 8 - n):
                raise ValueError(f"{key} lies outside the file")
            if math.prod(shape) and b == a:
                raise ValueError(f"{key} has no data")
            out[key] = (dtype, list(shape))
    except (OSError, ValueError, KeyError, TypeError, struct.error) as e:
        raise CheckpointError(f"model '{name}': {path} is not a readable safetensors file ({e})") from None
    if not out:
        raise CheckpointError(f"model '{name}': {path} holds no tensors")
    return out


def weight_problems(model, info: dict) -> str | None:
    """What transformers' loading report (``output_loading_info=True``) says is wrong with the weights on disk
    for ``model``, in words; None when nothing is. A missing weight (other than IGNORED_MISSING) would be
    randomly initialised, an unexpected weight inside the model's own modules means the config does not
    describe the checkpoint, a mismatched one has another shape."""
    own = {n for n, _ in model.named_children()}
    missing = sorted(k for k in info.get("missing_keys", ()) if not any(p in k for p in IGNORED_MISSING))
    unexpected = sorted(k for k in info.get("unexpected_keys", ()) if k.split(".")[0] in own)
    mismatched = sorted(str(k[0] if isinstance(k, (tuple, list)) else k) for k in info.get("mismatched_keys", ()))
    parts = []
    for what, keys in (("missing", missing), ("unexpected", unexpected), ("of another shape", mismatched)):
        if keys:
            more = f" and {len(keys) - 3} more" if len(keys) > 3 else ""
            parts.append(f"{len(keys)} weights {what} ({', '.join(keys[:3])}{more})")
    if info.get("error_msgs"):
        parts.append(str(info["error_msgs"][0]).splitlines()[0])
    return "; ".join(parts) or None


def check_vocab(name: str, tokenizer, model) -> None:
    """One line when ``tokenizer`` can give ids beyond ``model``'s embedding table (a tokenizer of another model:
    the first such id would end the run with an IndexError deep in the forward pass). ``model``: a transformers
    model, or the suite's S-LSTM or Graph-Transformer (``embed_tokens``); ``tokenizer``: a transformers
    tokenizer, or the suite's wrapper of one or of a SentencePiece model."""
    embeddings = (model.get_input_embeddings() if hasattr(model, "get_input_embeddings")
                  else getattr(model, "embed_tokens", None))
    rows = getattr(embeddings, "num_embeddings", None)
    if not isinstance(rows, int):
        return
    ids, tokens = id_range(tokenizer)
    if ids > rows:
        count = f" ({tokens:,} tokens)" if tokens is not None else ""
        raise CheckpointError(f"model '{name}': its tokenizer has ids up to {ids - 1:,}{count} but the model's "
                              f"embedding table has {rows:,} rows: use the tokenizer the model was trained with (or a "
                              f"model whose vocab_size covers this tokenizer)")


def fast_vocabulary(tokenizer) -> bool:
    """Whether ``tokenizer``'s ``get_vocab()`` and ``len()`` are transformers' own for a fast tokenizer: its backend's
    vocabulary with the added tokens (held by the backend's serialisation) and the number of distinct tokens in it,
    not a subclass's override."""
    from transformers import PreTrainedTokenizerFast

    cls = type(tokenizer)
    return (getattr(cls, "get_vocab", None) is PreTrainedTokenizerFast.get_vocab
            and getattr(cls, "__len__", None) is PreTrainedTokenizerFast.__len__)


def only_special_tokens(tokenizer) -> bool:
    """Whether every token of ``tokenizer`` is one of its special tokens (every word would be [UNK]). A fast
    tokenizer with more tokens than special ones has an ordinary one: told by its size, without copying out its
    vocabulary (10 ms for 30,000 tokens)."""
    special = set(getattr(tokenizer, "all_special_tokens", ()))
    if fast_vocabulary(tokenizer) and len(tokenizer) > len(special):
        return False
    return all(t in special for t in tokenizer.get_vocab())


def id_range(tokenizer) -> tuple[int, int | None]:
    """(one more than the largest id ``tokenizer`` gives, its number of tokens where known): a transformers
    tokenizer's vocabulary with added tokens; the suite's SentencePiece tokenizer's pieces after its id offset
    (fairseq's convention: the special ids lie below it); (0, None) for anything else."""
    inner = getattr(tokenizer, "tokenizer", None)  # the suite's HFTokenizer wraps a transformers tokenizer
    if hasattr(inner, "get_vocab"):
        tokenizer = inner
    if hasattr(tokenizer, "get_vocab"):
        return max(tokenizer.get_vocab().values(), default=-1) + 1, len(tokenizer)
    sp, offset = getattr(tokenizer, "sp", None), getattr(tokenizer, "offset", None)
    if sp is not None and isinstance(offset, int):
        pieces = int(sp.get_piece_size())
        return offset + pieces, pieces
    return 0, None
