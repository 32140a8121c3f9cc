"""One loader for every Hugging Face Auto-loadable encoder or causal LM.

BERT, RoBERTa, ALBERT, ConvBERT, DistilBERT, MPNet, GPT-2, Llama, ... all go through
``AutoModel`` with ``attn_implementation="eager"`` (other attention kernels return no attention
maps) and ``trust_remote_code=False``. Hub checkpoints are read from the local cache first; if
they are not there and the hub cannot be reached, loading fails with one clear line instead of
minutes of retries.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import warnings
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

from probes.checkpoints.folder import check_folder, check_vocab, only_special_tokens, weight_problems
from probes.checkpoints.loaders import check_device_map
from probes.checkpoints.names import hub_reachable, hub_unreachable
from probes.checkpoints.registry import CheckpointSpec
from probes.errors import CheckpointError, ProbeError
from probes.models.encoder import Encoder, EncoderOutput, LayerStates, MapSpec, Tokenized, Tokenizer, submodules

# attributes of a base model that hold a final norm applied after the last layer only (GPT-2, GPT-J,
# Bloom: ln_f; Llama, Mistral: norm; OPT: final_layer_norm). BERT-style post-LN models have none:
# every layer's output, the last included, ends with the same kind of LayerNorm.
FINAL_NORMS = ("ln_f", "norm", "final_layer_norm", "final_layernorm")


def has_final_norm(model) -> bool:
    """Whether ``model``'s last hidden state (as transformers returns it) includes a final norm."""
    inner = getattr(model, "decoder", model)  # OPT keeps its layers under .decoder
    return any(isinstance(getattr(inner, n, None), torch.nn.Module) for n in FINAL_NORMS)


def _from_pretrained(loader, spec: CheckpointSpec, **kwargs):
    """``loader.from_pretrained`` for package, path and hub sources, with clear errors."""
    common = {"trust_remote_code": False, **kwargs}
    if spec.source_type in ("package", "path"):
        folder = spec.folder()
        check_folder(spec.name, folder)  # config, tokenizer and weight files, before transformers runs
        try:
            with warnings.catch_warnings():  # the pickle refusal below says it in one line
                warnings.filterwarnings("ignore", message=".*pickle.*", category=UserWarning)
                return loader.from_pretrained(str(folder), local_files_only=True, **common)
        except pickle.UnpicklingError:  # torch.load(weights_only=True) refused a pickled weight file
            raise CheckpointError(_unpickling_problem(spec.name, folder)) from None
        except (OSError, ValueError, RuntimeError) as e:  # RuntimeError: weights of another shape than config.json
            raise CheckpointError(f"model '{spec.name}': cannot load {folder}: {_first_line(e)}") from None
    hub_id = spec.source["hub"]
    try:  # local cache first: no network needed once downloaded
        return loader.from_pretrained(hub_id, revision=spec.revision, local_files_only=True, **common)
    except (OSError, ValueError):
        pass
    if not hub_reachable():
        raise CheckpointError(hub_unreachable(spec.extra.get("requested", spec.name), hub_id))
    try:
        return loader.from_pretrained(hub_id, revision=spec.revision, **common)
    except (OSError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"model '{spec.name}': cannot load '{hub_id}' from the hub: {_first_line(e)}") from None


def _first_line(e: Exception) -> str:
    return " ".join(str(e).split("\n")[:2]).strip()


def _unpickling_problem(name: str, folder: Path) -> str:
    """One line for a pickled weight file that torch refused: corrupt bytes, or a pickle asking for code."""
    from probes.models.slstm_import import REFUSED, pickle_damage

    pickled = sorted(p for p in folder.rglob("*") if p.suffix in (".bin", ".pt", ".pth") and p.is_file())
    for path in pickled:
        if (damage := pickle_damage(path)) is not None:
            return f"model '{name}': {path}: not a readable torch checkpoint (corrupt: {damage})"
    return f"model '{name}': {folder}: {REFUSED}"


def _max_length(cfg, tokenizer) -> int:
    """The longest input (special tokens included) that both the positions and the tokenizer allow."""
    limits = [getattr(cfg, k) for k in ("max_position_embeddings", "n_positions") if getattr(cfg, k, None)]
    if cfg.model_type in ("roberta", "xlm-roberta", "camembert", "mpnet"):  # positions start after the pad index
        pad = 1 if cfg.model_type == "mpnet" else cfg.pad_token_id  # MPNetEmbeddings fixes padding_idx = 1
        limits = [m - pad - 1 for m in limits]
    tok_max = getattr(tokenizer, "model_max_length", None)
    if tok_max and tok_max < 1_000_000:
        limits.append(tok_max)
    return min(limits) if limits else 512


class HFTokenizer(Tokenizer):
    """A Hugging Face tokenizer behind the :class:`Tokenizer` interface."""

    def __init__(self, spec: CheckpointSpec, tokenizer, max_length: int):
        self.spec, self.tokenizer, self.max_length = spec, tokenizer, max_length
        self.n_special = tokenizer.num_special_tokens_to_add(pair=False) if spec.special_tokens else 0
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        # checkpoints.yaml `prefix:` (path sources; nomic-embed's task prefix): its tokens go after the leading
        # special tokens of every text and count as special (context, not words: out of means and word units)
        self.prefix_ids = self.encode(str(spec.extra["prefix"])) if spec.extra.get("prefix") else []
        self.n_special += len(self.prefix_ids)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def tokenize(self, texts: list[str]) -> list[Tokenized]:
        enc = self.tokenizer(list(texts), add_special_tokens=self.spec.special_tokens, truncation=False,
                             return_special_tokens_mask=True, return_attention_mask=False, verbose=False)
        out = []
        for k, (ids, sp) in enumerate(zip(enc["input_ids"], enc["special_tokens_mask"])):
            if self.prefix_ids:
                at = next((i for i, s in enumerate(sp) if not s), len(sp) // 2)  # an empty text: [CLS] | [SEP]
                ids, sp = ids[:at] + self.prefix_ids + ids[at:], sp[:at] + [1] * len(self.prefix_ids) + sp[at:]
            # a fast tokenizer's encoding holds the token strings already (the vocabulary's, as convert_ids_to_tokens)
            tokens = enc.tokens(k) if enc.is_fast and not self.prefix_ids else self.tokenizer.convert_ids_to_tokens(ids)
            out.append(Tokenized(ids=ids, special=[bool(s) for s in sp], tokens=tokens))
        return out

    def tokenize_ids(self, ids_list: list[list[int]]) -> list[Tokenized]:
        prefix, suffix = self._special_frame()
        out = []
        for ids in ids_list:
            ids = prefix + [int(i) for i in ids] + suffix
            special = [True] * len(prefix) + [False] * (len(ids) - len(prefix) - len(suffix)) + [True] * len(suffix)
            out.append(Tokenized(ids=ids, special=special, tokens=self.tokenizer.convert_ids_to_tokens(ids)))
        return out

    def _special_frame(self) -> tuple[list[int], list[int]]:
        """The special ids the tokenizer puts before and after one sequence ([CLS], [SEP] for BERT)."""
        if not self.spec.special_tokens:
            return [], []
        probe = self.tokenize(["a"])[0]  # [specials before] a [specials after]
        first = probe.special.index(False)
        last = len(probe.special) - probe.special[::-1].index(False)
        return probe.ids[:first], probe.ids[last:]


class HFEncoder(Encoder):
    """A Hugging Face model + tokenizer behind the :class:`Encoder` interface."""

    def __init__(self, spec: CheckpointSpec, model: torch.nn.Module, tokenizer, fingerprint: dict, own: bool = True):
        """``own``: a model the suite loaded, put in eval mode for good; otherwise (a caller's object) each
        forward pass runs in eval mode and the caller's train/eval flags are restored after it."""
        self.spec, self.model, self.fingerprint = spec, model.eval() if own else model, fingerprint
        cfg: Any = model.config  # a transformers config (its fields depend on the architecture)
        self.num_layers = cfg.num_hidden_layers
        self.hidden_size = cfg.hidden_size
        self.num_heads = max(1, cfg.num_attention_heads // getattr(cfg, "head_ratio", 1))  # ConvBERT: rest are conv
        self.tokenizer = HFTokenizer(spec, tokenizer, _max_length(cfg, tokenizer))
        self.max_length = self.tokenizer.max_length
        self.pad_id = self.tokenizer.pad_id
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.extra_maps = _map_capture(self.model)  # None unless the architecture has maps besides attention
        self.padding_safe = getattr(self.extra_maps, "padding_safe", True)  # False: batch equal lengths only
        self.final_norm_on_last_hidden = has_final_norm(self.model)

    def map_specs(self) -> dict[str, MapSpec]:
        return self.extra_maps.specs() if self.extra_maps is not None else {}

    @torch.inference_mode()
    def forward(self, input_ids, attention_mask, maps=False) -> EncoderOutput:
        input_ids, attention_mask = input_ids.to(self.device), attention_mask.to(self.device)
        run = lambda: self.model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                                 output_attentions=maps, return_dict=True)
        captured = {}
        with eval_mode(self.model), eager_attention(self.spec.name, self.model, maps):
            if maps and self.extra_maps is not None:
                with self.extra_maps.capture(attention_mask) as captured:  # forward hooks fill `captured`
                    out = run()
            else:
                out = run()
        hidden, att_layers = self._outputs(out, maps)
        # with a device map each layer's output stays on that layer's device: gathered on the first
        here = lambda xs: [x.to(self.device) for x in xs] if self.device_map else xs
        att = torch.stack(here(att_layers)) if maps else None
        return EncoderOutput(hidden=LayerStates(here(hidden)), attentions=att,  # no copy of every layer
                             maps={k: v.to(self.device) for k, v in captured.items()} if self.device_map else captured)


    def _outputs(self, out, maps: bool) -> tuple[list, list | None]:
        """(hidden states, attention maps) of a forward's output; one line when the model did not return them."""
        hidden = getattr(out, "hidden_states", None)
        att = getattr(out, "attentions", None) if maps else None
        kind = type(self.model).__name__
        if not hidden or any(h is None for h in hidden):
            raise ProbeError(f"model '{self.spec.name}': its forward ({kind}) returned no hidden states although "
                             f"output_hidden_states=True was passed; the suite reads every layer's states from them "
                             f"(a forward that ignores the flag, or returns a plain tensor, cannot be used)")
        if len(hidden) != self.num_layers + 1:
            raise ProbeError(f"model '{self.spec.name}': its forward ({kind}) returned {len(hidden)} hidden states for "
                             f"a config of {self.num_layers} layers (expected {self.num_layers + 1}: the embeddings "
                             f"and every layer)")
        if maps and (not att or any(a is None for a in att)):
            how = getattr(self.model.config, "_attn_implementation", None)
            raise ProbeError(f"model '{self.spec.name}': its forward ({kind}, attention {how}) returned no attention "
                             f"maps although output_attentions=True was passed: load it with "
                             f"attn_implementation=\"eager\"")
        return list(hidden), None if att is None else list(att)


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module):
    """``model`` in eval mode (dropout off) inside; every module's train/eval flag as it was after."""
    training = [m for m in submodules(model) if m.training]
    if not training:  # in eval mode already (a model the suite loaded): nothing to switch or restore
        yield
        return
    model.eval()
    try:
        yield
    finally:
        for m in training:
            m.training = True


@contextlib.contextmanager
def eager_attention(name: str, model: torch.nn.Module, wanted: bool):
    """With ``wanted`` (attention maps asked for), ``model`` runs eager attention inside: sdpa and flash kernels
    return no attention weights. A model loaded another way is switched for the call and switched back after."""
    current = getattr(getattr(model, "config", None), "_attn_implementation", None)
    switch = getattr(model, "set_attn_implementation", None)  # transformers models have it
    if not wanted or current in (None, "eager") or switch is None:
        yield
        return
    try:
        switch("eager")
    except (ValueError, TypeError, ImportError, AttributeError) as e:
        raise ProbeError(f"model '{name}': attention maps need eager attention, and its {current} attention could "
                         f"not be switched ({_first_line(e)}): load it with attn_implementation=\"eager\"") from None
    try:
        yield
    finally:
        switch(current)


# model_type -> "module:Class": captures of maps besides attention (e.g. ConvBERT's convolution kernels).
# The class is built as Class(model) and provides specs() -> {name: MapSpec} and
# capture(attention_mask), a context manager yielding the dict it fills with (L, B, K, n, n) tensors.
MAP_CAPTURES = {"convbert": "probes.models.convbert:ConvKernelCapture"}


def _map_capture(model):
    target = MAP_CAPTURES.get(model.config.model_type)
    if target is None:
        return None
    import importlib

    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)(model)


def hf_tokenizer(spec: CheckpointSpec):
    """The transformers tokenizer of an hf-style entry (a random entry names its tokenizer's entry); one line
    when it holds nothing but special tokens (a hub model without tokenizer files: every word would be [UNK])."""
    tok_spec = spec.tokenizer_spec()  # a random entry's tokenizer entry (one with files); the entry itself otherwise
    tokenizer = _from_pretrained(AutoTokenizer, tok_spec)
    if only_special_tokens(tokenizer):
        special = set(getattr(tokenizer, "all_special_tokens", ()))
        where = tok_spec.local_path() if tok_spec.source_type in ("package", "path") else tok_spec.source.get("hub")
        raise CheckpointError(f"model '{spec.name}': the tokenizer of {where} holds only its {len(special)} special "
                              f"tokens (no tokenizer files): every word would be [UNK]")
    return tokenizer


def _random_config(spec: CheckpointSpec, tokenizer):
    fields = dict(spec.source["random"])
    if not isinstance(fields.get("model_type"), str):
        raise CheckpointError(f"model '{spec.name}': its random config needs model_type: <a transformers model "
                              f"type, e.g. bert>, not {fields.get('model_type')!r}")
    try:
        return AutoConfig.for_model(fields.pop("model_type"), vocab_size=len(tokenizer), **fields)
    except (ValueError, TypeError, KeyError) as e:
        raise CheckpointError(f"model '{spec.name}': bad random config: {_first_line(e)}") from None


def load_hf_model(spec: CheckpointSpec, auto_class, tokenizer, **kwargs) -> tuple[torch.nn.Module, dict]:
    """(model, fingerprint) of an hf-style entry through ``auto_class`` (``AutoModel``,
    ``AutoModelForCausalLM``): seeded random weights, or a package / path / hub checkpoint loaded
    with ``kwargs``; eager attention either way. The one place that loads Hugging Face weights."""
    if spec.source_type == "random":
        torch.manual_seed(int(spec.source.get("seed", 0)))
        try:
            model = auto_class.from_config(_random_config(spec, tokenizer), attn_implementation="eager")
        except (ValueError, TypeError) as e:  # e.g. a width that the head count does not divide
            raise CheckpointError(f"model '{spec.name}': bad random config: {_first_line(e)}") from None
    else:
        if spec.extra.get("pooler") is False:  # checkpoints.yaml `pooler: false`: saved without one, build none
            kwargs = {**kwargs, "add_pooling_layer": False}
        with _load_report() as passed_on:
            model, info = _from_pretrained(auto_class, spec, attn_implementation="eager", output_loading_info=True,
                                           **kwargs)
            if (problem := weight_problems(model, info)) is not None:
                where = spec.local_path() if spec.source_type in ("package", "path") else f"'{spec.source['hub']}'"
                raise CheckpointError(f"model '{spec.name}': the weights in {where} do not fit its config.json: "
                                      f"{problem}; refused rather than initialised at random")
            passed_on()
        _check_finite(spec, model)
    check_vocab(spec.name, tokenizer, model)  # a tokenizer beyond the embedding table: one line, not an IndexError
    fingerprint = spec.fingerprint()
    if spec.source_type == "hub":
        fingerprint["commit"] = getattr(model.config, "_commit_hash", None)
    return model, fingerprint


def _check_finite(spec: CheckpointSpec, model: torch.nn.Module) -> None:
    """One line when a weight on disk holds NaN or inf: every state it touches would be NaN."""
    for name, p in model.named_parameters():
        if p.is_floating_point() and p.device.type != "meta" and not bool(torch.isfinite(p).all()):
            where = spec.local_path() if spec.source_type in ("package", "path") else f"'{spec.source.get('hub')}'"
            raise CheckpointError(f"model '{spec.name}': the weight {name} in {where} holds NaN or inf (a broken "
                                  f"checkpoint)")


@contextlib.contextmanager
def _load_report():
    """Hold back transformers' log records while weights load. The caller checks the loading report itself
    (:func:`~probes.checkpoints.folder.weight_problems`): a problem becomes one error line; when there is none,
    calling the yielded function passes every held record on except the load report, which then lists only head
    weights the base model does not use (``cls.predictions.*``) or its unused pooler."""
    root = logging.getLogger("transformers")
    held: list[logging.LogRecord] = []

    class Hold(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            held.append(record)

    saved, root.handlers = root.handlers, [Hold()]

    def passed_on() -> None:
        for record in held:
            if "LOAD REPORT" not in record.getMessage():
                for handler in saved:
                    handler.handle(record)

    try:
        yield passed_on
    finally:
        root.handlers = saved


def load_hf(spec: CheckpointSpec, device: str | torch.device = "cpu",
            dtype: torch.dtype = torch.float32, device_map: str | None = None) -> HFEncoder:
    """Load a registry entry of family ``hf`` onto ``device``, its weights in ``dtype``; with
    ``device_map`` (see :func:`check_device_map`) spread over the devices by accelerate instead."""
    tokenizer = hf_tokenizer(spec)
    if device_map is None:
        model, fingerprint = load_hf_model(spec, AutoModel, tokenizer)
        return HFEncoder(spec, model.to(device=device, dtype=dtype), tokenizer, fingerprint)
    check_device_map(spec, device_map)
    model, fingerprint = load_hf_model(spec, AutoModel, tokenizer, device_map=device_map, dtype=dtype)
    encoder = HFEncoder(spec, model, tokenizer, fingerprint)
    encoder.device_map = device_map
    return encoder


def load_hf_tokenizer(spec: CheckpointSpec) -> HFTokenizer:
    """Only the tokenizer (and the config, for the length limit): no weights are read."""
    tokenizer = hf_tokenizer(spec)
    cfg = _random_config(spec, tokenizer) if spec.source_type == "random" else _from_pretrained(AutoConfig, spec)
    return HFTokenizer(spec, tokenizer, _max_length(cfg, tokenizer))
