"""Model names outside checkpoints.yaml: ``hf:org/name[@revision]``, a model folder, and ``?sentence=``.

:func:`get_spec` hands every name that is not a registry entry to :func:`synthesise`,
so every CLI (``--model``) and ``probes.load`` / ``probes.extract`` accept them:

    $ python -m analyses.anisotropy --model hf:sentence-transformers/all-MiniLM-L6-v2@main
    $ python -m analyses.anisotropy --model path/to/saved_folder
    $ python -m analyses.anisotropy --model 'hf:bert-base-uncased?sentence=mean'   # quote: '?' globs

A :class:`~probes.checkpoints.registry.CheckpointSpec` of family ``hf`` is built from the model's ``config.json``
(read as JSON; nothing is imported or run, never ``trust_remote_code``):

- kind ``causal`` when the config says ``is_decoder``, an architecture ends in ``ForCausalLM`` /
  ``LMHeadModel``, or the model_type has a causal-LM class in transformers and no masked-LM class
  (gpt2, llama, gemma3_text, ...); kind ``encoder`` when the model_type has a masked-LM class
  (bert, roberta, albert, convbert, distilbert, mpnet, ...) or an architecture ends in an
  encoder head (``ForMaskedLM``, ``ForSequenceClassification``, ...). A bare ``XModel`` of an
  unknown type, encoder-decoder configs (T5, BART), multimodal configs (``text_config``) and
  custom code (``auto_map``) are refused with one line: register those in checkpoints.yaml.
- sentence vector: the pooling a sentence-transformers model declares, when its ``modules.json`` lists a
  ``Pooling`` module (``1_Pooling/config.json``: mean_tokens -> ``mean_all``, the mean over all tokens with
  [CLS]/[SEP], as the model was trained; cls_token -> ``cls``; lasttoken -> ``last``; a pooling the suite has no
  vector for, max or weighted means, -> ``mean``, and the results say why: :mod:`probes.checkpoints.pooling`);
  ``mean`` (the mean over non-special tokens) for a sentence-transformers model without one (``modules.json`` or
  ``sentence_bert_config.json`` beside config.json), ``cls`` (first token) for every other encoder (BERT, ALBERT,
  ConvBERT, DistilBERT, RoBERTa's ``<s>``, ...), ``last`` for causal LMs. A ``?sentence=cls|mean|mean_all|last``
  suffix overrides it (on registry names too); the suffix, not a ``--sentence`` flag, because then it rides on
  the name through every CLI, the cache key and the result file name with no CLI change, and two vectors of one
  model never share a file.
- special tokens are always added: the model's own tokenizer adds what it was trained with
  ([CLS]/[SEP] for BERT, ``<s>`` for Llama, ``<bos>`` for Gemma, nothing for GPT-2).

A folder of the suite's own architectures (``config.json`` model_type ``slstm``, the S-LSTM, or ``mog``, the
Graph-Transformer, as ``recipes.train`` and the step folders of its ``--snapshots`` write them) is no Hugging Face
model: it gets the family that loads it and the sentence vector the registry's entries of that family use
(:data:`OWN_MODEL_TYPES`), so the folder named by path gives the states a registry entry of it gives.

Names are one safe path component (they name cache and result folders): ``hf:org/name@rev`` ->
``hf--org--name--rev``; an id without an org -> ``hf--name`` (``hf--_--name--rev`` with a revision,
so it cannot collide with ``org/name``); a revision that is not a plain ``[A-Za-z0-9._-]`` word
without ``--`` (``refs/pr/1``) -> ``rev-<sha256[:10]>``; a folder -> ``dir--<folder name>--<sha256
of its absolute path>[:8]`` (the folder's name cut to 60 characters); an override appends
``--sentence-<vector>``. A name is at most 100 characters (``registry.MAX_NAME``: it names files, and a pair of
names names one too); a longer synthesised name keeps its first 89 and a hash of the whole. The original string is
kept in ``spec.extra["requested"]`` and the hub id / folder in ``spec.source`` (results record both
through ``Encoder.describe``). A name that is a registry entry always means the entry; write
``./name`` for a folder of the same name.

Hub ids read ``config.json`` from the local Hugging Face cache first; when it is not there and the
hub cannot be reached, the name fails with the same one line as the hub entries of checkpoints.yaml.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import socket
from dataclasses import replace
from pathlib import Path

from probes.checkpoints.folder import check_config, check_folder, check_weight_files, read_config
from probes.checkpoints.pooling import MODULES, Declared, declared_pooling, folder_pooling
from probes.checkpoints.registry import MAX_NAME, SENTENCE_VECTORS, CheckpointSpec, read_registry
from probes.errors import CheckpointError

HUB_HOST = "huggingface.co"
HF_PREFIX = "hf:"
HUB_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # an org or repo name (the hub also forbids '--', '..')
SAFE_REVISION = re.compile(r"[A-Za-z0-9._]+(-[A-Za-z0-9._]+)*")  # kept verbatim in the name (no '--', no '/')
SENTENCE_SUFFIX = re.compile(r"(?P<base>.+)\?sentence=(?P<sentence>[A-Za-z_]*)")
ST_MARKERS = ("modules.json", "sentence_bert_config.json")  # a sentence-transformers model folder
CAUSAL_ARCH = ("ForCausalLM", "LMHeadModel")
# the suite's own architectures: config.json model_type -> (family, sentence vector) of the registry's entries
OWN_MODEL_TYPES = {"slstm": ("slstm", "g"), "mog": ("mog", "cls")}
ENCODER_HEADS = ("ForMaskedLM", "ForPreTraining", "ForSequenceClassification", "ForTokenClassification",
                 "ForQuestionAnswering", "ForMultipleChoice")


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether huggingface.co answers (False at once under HF_HUB_OFFLINE=1)."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    try:
        socket.create_connection((HUB_HOST, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def hub_unreachable(name: str, hub_id: str) -> str:
    """The one line for a hub checkpoint that is neither cached nor downloadable."""
    return (f"model '{name}' is the hub checkpoint '{hub_id}', which is not in the local Hugging Face cache, "
            f"and {HUB_HOST} cannot be reached: run once with internet access to download it")


def synthesise(name: str, registry: dict[str, CheckpointSpec]) -> CheckpointSpec | None:
    """The spec for an ``hf:`` id, a folder, or ``<name>?sentence=<vector>``; None if ``name`` is none
    of these (the caller reports an unknown name)."""
    if not name.strip():  # Path('') is the current folder
        raise CheckpointError("model name is empty: name a checkpoints.yaml entry, hf:org/name or a model folder")
    if (m := SENTENCE_SUFFIX.fullmatch(name)) is not None:
        base, sentence = m["base"], m["sentence"]
        spec = registry.get(base) or synthesise(base, registry)
        if spec is None:
            return None
        return _override(spec, sentence, name)
    if name.startswith(HF_PREFIX):
        return _hub_spec(name)
    path = Path(name).expanduser()
    try:
        is_dir = path.is_dir()
    except OSError as e:  # a name too long for the file system, ...
        shown = name if len(name) <= 60 else f"{name[:40]}... ({len(name)} characters)"
        raise CheckpointError(f"model '{shown}': not a registry name, and not a folder: {e.strerror}") from None
    if is_dir:
        return _registered_folder(path, registry) or _folder_spec(name, path)
    if os.sep in name or "/" in name or name.startswith((".", "~")):
        raise CheckpointError(f"model '{name}': no such folder (a model folder holds config.json and weights)")
    return None


def _override(spec: CheckpointSpec, sentence: str, requested: str) -> CheckpointSpec:
    if sentence not in SENTENCE_VECTORS or (sentence == "g") != (spec.sentence == "g"):
        allowed = "g" if spec.sentence == "g" else ", ".join(v for v in SENTENCE_VECTORS if v != "g")
        raise CheckpointError(f"model '{requested}': sentence vector must be one of {allowed}, not {sentence!r}")
    if sentence == spec.sentence:
        return spec  # same vector, same name: shares the cache entry and result file
    return replace(spec, name=fit_name(f"{spec.name}--sentence-{sentence}"), sentence=sentence,
                   extra={**spec.extra, "requested": requested})


def fit_name(name: str) -> str:
    """``name`` if it is at most MAX_NAME characters, else its first part and a hash of the whole (still unique)."""
    if len(name) <= MAX_NAME:
        return name
    return f"{name[:MAX_NAME - 11]}-{hashlib.sha256(name.encode()).hexdigest()[:10]}"


def hub_name(hub_id: str, revision: str | None) -> str:
    """``org/name`` + revision -> a safe path component (see the module docstring)."""
    org, _, repo = hub_id.rpartition("/")
    parts = [org] if org else (["_"] if revision is not None else [])
    parts.append(repo)
    if revision is not None:
        plain = SAFE_REVISION.fullmatch(revision) and not revision.startswith(("sentence-", "rev-"))
        parts.append(revision if plain else "rev-" + hashlib.sha256(revision.encode()).hexdigest()[:10])
    return fit_name("--".join(["hf", *parts]))


def _hub_spec(name: str) -> CheckpointSpec:
    hub_id, _, after_at = name[len(HF_PREFIX):].partition("@")
    revision = after_at or None
    parts = hub_id.split("/")
    if not (1 <= len(parts) <= 2 and all(HUB_PART.fullmatch(p) and "--" not in p and ".." not in p
                                         and len(p) <= 96 for p in parts)) or (name.count("@") > 1):
        raise CheckpointError(f"model '{name}': not a Hugging Face id: write hf:org/name or hf:org/name@revision")
    files = _hub_files(name, hub_id, revision)
    cfg = _read_config(name, files["config.json"])
    kind, sentence = infer(name, cfg, any(files.get(m) for m in ST_MARKERS))
    declared = declared_pooling(name, files[MODULES], lambda rel: _hub_file(name, hub_id, rel, revision))
    return CheckpointSpec(name=hub_name(hub_id, revision), family="hf", kind=kind, source={"hub": hub_id},
                          sentence=_declared_or(sentence, declared), special_tokens=True, revision=revision,
                          description=f"{name} ({cfg.get('model_type')}), kind and sentence vector from its config"
                                      + (" and its Pooling module" if declared and declared.vector else ""),
                          extra={"requested": name})


def _hub_files(name: str, hub_id: str, revision: str | None) -> dict[str, Path | None]:
    """config.json (required) and the sentence-transformers markers: from the local cache, else (when
    the hub answers) downloaded; a marker the hub lacks is remembered by huggingface_hub's cache, so the
    answer is the same offline and online."""
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    files: dict[str, Path | None] = {}
    unknown = []
    for f in ("config.json", *ST_MARKERS):
        cached = try_to_load_from_cache(hub_id, f, revision=revision)  # a path, None, or "known absent"
        files[f] = Path(cached) if isinstance(cached, str) else None
        if cached is None:  # neither cached nor known to be absent
            unknown.append(f)
    online = bool(unknown) and hub_reachable()
    if files["config.json"] is None and not online:
        raise CheckpointError(hub_unreachable(name, hub_id))
    if online:
        for f in unknown:
            try:
                files[f] = Path(hf_hub_download(hub_id, f, revision=revision))
            except (OSError, ValueError):  # no such file (remembered as absent), gated model, ...
                files[f] = None
        if files["config.json"] is None:
            raise CheckpointError(f"model '{name}': the hub has no config.json for '{hub_id}' at revision "
                                  f"{revision or 'main'} (no such model or revision, or a gated model)")
    return files


def _hub_file(name: str, hub_id: str, filename: str, revision: str | None) -> Path | None:
    """One more file of a hub model (the Pooling module's config): from the local cache, else downloaded when the
    hub answers; None when the hub has none. Neither cached nor reachable is one line (offline, the sentence
    vector would otherwise differ from the one chosen online)."""
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    cached = try_to_load_from_cache(hub_id, filename, revision=revision)
    if isinstance(cached, str):
        return Path(cached)
    if cached is not None:  # known to be absent
        return None
    if not hub_reachable():
        raise CheckpointError(f"model '{name}': its {filename} (the sentence-transformers pooling) is not in the "
                              f"local Hugging Face cache, and {HUB_HOST} cannot be reached: run once with internet "
                              f"access to download it")
    try:
        return Path(hf_hub_download(hub_id, filename, revision=revision))
    except (OSError, ValueError):
        return None


def _declared_or(sentence: str, declared: Declared | None) -> str:
    """The vector of the pooling the model declares where the suite has one, else the rule's ``sentence``."""
    return declared.vector if declared is not None and declared.vector is not None else sentence


def _registered_folder(path: Path, registry: dict[str, CheckpointSpec]) -> CheckpointSpec | None:
    """The registry entry (built-in or the user's) whose ``path`` source is this folder, if one is: a folder
    named by path and by an entry is one model (one name, one cache entry, one result file)."""
    path = path.resolve()
    for spec in registry.values():
        if spec.source_type == "path" and not {"base", "prefix"} & set(spec.extra):
            if (spec.root / Path(str(spec.source["path"])).expanduser()).resolve() == path:
                return spec
    return None


def _folder_spec(name: str, path: Path) -> CheckpointSpec:
    path = path.resolve()
    cfg = _read_config(name, path / "config.json")
    if str(cfg.get("model_type")) in OWN_MODEL_TYPES:
        return _own_folder_spec(name, path, cfg)
    kind, sentence = infer(name, cfg, any((path / m).is_file() for m in ST_MARKERS))
    declared = folder_pooling(name, path)  # a sentence-transformers folder's Pooling module
    check_folder(name, path, cfg)  # tokenizer and weight files, positions: before anything runs
    return CheckpointSpec(name=_folder_name(path), family="hf", kind=kind, source={"path": str(path)},
                          sentence=_declared_or(sentence, declared), special_tokens=True,
                          description=f"folder {path} ({cfg.get('model_type')}), kind and sentence vector from "
                                      f"its config" + (" and its Pooling module" if declared and declared.vector
                                                       else ""), extra={"requested": name})


def _folder_name(path: Path) -> str:
    """``dir--<folder name>--<sha256 of its absolute path>[:8]`` (see the module docstring)."""
    label = re.sub(r"[^A-Za-z0-9._-]", "_", path.name).strip(".-")[:60].strip(".-") or "_"
    return f"dir--{label}--{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"


def _own_folder_spec(name: str, path: Path, cfg: dict) -> CheckpointSpec:
    """The spec of a folder of the suite's own S-LSTM or Graph-Transformer: the family and sentence vector of the
    registry's entries of that model_type; its loader reads the folder's config, weights and tokenizer."""
    family, sentence = OWN_MODEL_TYPES[str(cfg["model_type"])]
    own_tokenizer = cfg.get("tokenizer")  # an imported S-LSTM names its SentencePiece model here
    if isinstance(own_tokenizer, dict) and (path / str(own_tokenizer.get("file", ""))).is_file():
        check_config(name, path / "config.json", cfg)
        check_weight_files(name, path, cfg)
    else:
        check_folder(name, path, cfg)  # tokenizer and weight files, sizes: before anything runs
    return CheckpointSpec(name=_folder_name(path), family=family, kind="encoder", source={"path": str(path)},
                          sentence=sentence, special_tokens=True,
                          description=f"folder {path} (the suite's {cfg['model_type']}), family {family}",
                          extra={"requested": name})


def _read_config(name: str, path: Path | None) -> dict:
    if path is None or not path.is_file():
        raise CheckpointError(f"model '{name}': {path.parent if path else 'it'} has no config.json "
                              f"(not a Hugging Face model folder)")
    return read_config(name, path)


def infer(name: str, cfg: dict, sentence_transformers: bool) -> tuple[str, str]:
    """(kind, sentence vector) from a config.json dict (rules in the module docstring)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    model_type = str(cfg.get("model_type", ""))
    archs = [str(a) for a in cfg.get("architectures") or []]
    if cfg.get("is_encoder_decoder"):
        raise CheckpointError(f"model '{name}': {model_type or 'this'} is an encoder-decoder model; only encoders "
                              f"and causal LMs are supported")
    if "text_config" in cfg:
        raise CheckpointError(f"model '{name}': {model_type} is a multimodal model; point at its text model instead")
    if cfg.get("auto_map"):  # even of a known model_type: the plain class would not be the model described
        raise CheckpointError(f"model '{name}': its config asks for custom code (auto_map), which is never run")
    masked, causal = model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES, model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    if cfg.get("is_decoder") or any(a.endswith(CAUSAL_ARCH) for a in archs) or (causal and not masked):
        return "causal", "last"  # a causal head, or a type that has a causal LM class and no masked LM class
    if masked or any(a.endswith(ENCODER_HEADS) for a in archs):
        return "encoder", "mean" if sentence_transformers else "cls"
    raise CheckpointError(f"model '{name}': cannot tell from its config (model_type {model_type!r}, architectures "
                          f"{archs}) whether it is an encoder or a causal LM: register it in checkpoints.yaml")


def get_spec(name: str | CheckpointSpec) -> CheckpointSpec:
    """The spec registered under ``name``, else one synthesised for ``hf:org/name[@revision]``, a model
    folder or ``<name>?sentence=<vector>`` (see :mod:`probes.checkpoints.names`); a clear error otherwise.
    A spec already resolved is returned as it is (a CLI resolves each name once and passes the spec down)."""
    if isinstance(name, CheckpointSpec):
        return name
    specs = read_registry()
    if name in specs:
        return specs[name]
    if (spec := synthesise(name, specs)) is not None:
        return spec
    close = difflib.get_close_matches(name, list(specs), n=3, cutoff=0.75)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    known = ", ".join(sorted(specs)[:80]) + (f" and {len(specs) - 80} more" if len(specs) > 80 else "")
    raise CheckpointError(f"unknown model '{name}'{hint}: checkpoints.yaml has {known}; or name any Hugging Face "
                          f"model as hf:org/name[@revision], or a model folder by its path")
