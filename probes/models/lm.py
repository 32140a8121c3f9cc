"""Causal language models WITH their head, for the analyses that score or generate text.

The ``hf`` loader (:mod:`probes.models.hf`) builds ``AutoModel`` without an LM head, which is right for
representation analyses. Perplexity and topic propagation need next-token logits, so this module
loads the same registry names with ``AutoModelForCausalLM`` (``trust_remote_code=False``,
``attn_implementation="eager"``, float32), and loads the ``recurrent`` family: a causal LM plus
the recurrence module of :mod:`probes.models.recurrent` (GPT-2, Llama and Gemma-3 families).

    >>> from probes.models.lm import load_lm
    >>> from probes.capture.windows import windowed_nll, greedy_windowed
    >>> lm = load_lm("tiny-gpt2-recurrent")   # an LM: .model, .tokenizer, .window, .recurrent ("gpt2-small-recurrent")
    >>> lm.recurrent
    True
    >>> ids = lm.encode("It is a truth universally acknowledged, that a single man in possession of a good fortune")
    >>> windowed_nll(lm, ids, T=8, o=0)["nll"].shape == (len(ids) - 1,)   # per-target NLL, windowed execution
    True
    >>> greedy_windowed(lm, torch.tensor([ids[:8]]), 5, T=8, o=0).shape   # (1, 5) greedy tokens
    torch.Size([1, 5])

A causal LM runs for an analysis only in :mod:`probes.capture.windows`: ``windowed_nll`` scores a document
and ``greedy_windowed`` generates, both by its window rule;
:meth:`LM.sizes` gives what a FLOP count needs. ``analyses.perplexity`` and ``analyses.topics``
consume their outputs.

Registry entries of family ``recurrent`` (``kind: causal``) come in two forms:

* ``source: {path: <folder>}``: the folder holds a Hugging Face causal LM (``config.json``,
  ``model.safetensors``, tokenizer files) plus ``recurrence.json`` (a
  :class:`probes.models.recurrent.RecurrenceConfig`) and ``recurrence.safetensors`` (its weights);
  ``recipes.train_lm`` writes such folders.
* ``base: <entry>`` plus ``source: {path: <folder>}``: a module-only entry (``recipes.train_recurrent
  --mode frozen``): the folder holds only ``recurrence.json`` and ``recurrence.safetensors`` (and the
  training log); the causal LM and its tokenizer are the ``base`` entry's (an ``hf`` causal LM, e.g.
  ``smollm2-135m`` in models/, fetched by ``make models``). If the folder's ``training_config.json``
  records the base's weight sha256, the base must still have it (else one-line error: the module
  was trained on other weights).
* ``source: {random: {...}, tokenizer: <entry>, seed: S}`` plus ``recurrence: {...}``: a seeded
  random model for tests. Its transformer is built exactly like the ``hf`` random entry with the
  same config and seed, so ``tiny-gpt2-recurrent``'s first window equals ``tiny-gpt2``.

The train / held-out split of a corpus lives in :mod:`probes.corpus` (:func:`probes.corpus.corpus_split`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch

from probes.checkpoints.names import get_spec
from probes.checkpoints.registry import CheckpointSpec
from probes.errors import CheckpointError
from probes.io import read_json
from probes.models.forward import current
from probes.models.hf import has_final_norm

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from probes.models.recurrent import RecurrentLM

# ----------------------------------------------------------------------------- loading


@dataclass
class LM:
    """A causal LM ready to score and generate: plain (``recurrent`` False) or recurrent GPT-2."""

    spec: CheckpointSpec
    model: PreTrainedModel | RecurrentLM  # a transformers causal LM, or a recurrent one around it
    tokenizer: PreTrainedTokenizerBase
    fingerprint: dict
    recurrent: bool

    @property
    def name(self) -> str:
        return self.spec.name

    @contextlib.contextmanager
    def running(self):
        """The context every forward pass of an analysis runs in: eval mode (dropout off), each module's train/eval
        flag restored on exit, so a caller's model object is left as it came in (a model the suite loaded is in
        eval mode for good); transformers' recording hooks behind the caller's, so a hooked layer's recorded hidden
        state is its changed output (:func:`~probes.models.encoder.recording_after_changing_hooks`); the
        interventions of the enclosing :func:`probes.intervention.intervening` blocks edit its layers' states
        (:mod:`probes.models.forward`)."""
        from probes.models.encoder import recording_after_changing_hooks
        from probes.models.hf import eval_mode

        edits = current()
        hooks = edits.hooked(self) if edits is not None else contextlib.nullcontext()
        with hooks, recording_after_changing_hooks(self.model), eval_mode(self.model):
            yield

    @property
    def base(self):
        """The transformers causal LM (inside the recurrent wrapper for recurrent models)."""
        return self.model.lm if self.recurrent else self.model

    @property
    def max_positions(self) -> int:
        cfg = self.base.config
        return int(getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None) or 1024)

    @property
    def window(self) -> int:
        """The default evaluation window T: the recurrence's training window, else the longest input."""
        return self.model.config.window if self.recurrent else self.max_positions

    @property
    def device(self) -> torch.device:
        return next(self.base.parameters()).device

    def encode(self, text: str) -> list[int]:
        """Token ids of running text, without special tokens (the whole text at once, newlines kept)."""
        return self.tokenizer(text, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(list(ids))  # type: ignore[return-value]  # one list of ids: one str

    def sizes(self) -> dict:
        """What a FLOP count needs: non-embedding parameters, layers, width, and the recurrence
        module's FFN parameters (0 for a plain model)."""
        cfg = self.base.config
        ffn = 0
        if self.recurrent:
            rec = cast("RecurrentLM", self.model).recurrence
            ffn = sum(p.numel() for p in rec.ffn.parameters())
        return {"non_embedding_parameters": non_embedding_parameters(self.base), "n_layer": cfg.num_hidden_layers,
                "d_model": cfg.hidden_size, "recurrence_ffn_parameters": ffn}

    def describe(self) -> dict:
        cfg = self.base.config
        out = {"name": self.spec.name, "family": self.spec.family, "kind": self.spec.kind,
               "source": self.spec.source, "fingerprint": self.fingerprint,
               "model_type": cfg.model_type, "num_layers": cfg.num_hidden_layers, "hidden_size": cfg.hidden_size,
               "max_positions": self.max_positions, "vocab_size": cfg.vocab_size,
               "final_norm_on_last_hidden": has_final_norm(getattr(self.base, self.base.base_model_prefix)),
               "parameters": sum(p.numel() for p in self.model.parameters())}
        if self.recurrent:
            out["recurrence"] = self.model.config.to_dict()
        edits = current()
        recorded = edits.describe() if edits is not None else []
        if recorded:  # what the analyses' forward passes run under (and what the tuned lens's key holds)
            out["intervention"] = recorded
        return out


def need_causal(spec: CheckpointSpec) -> None:
    """Fail with one line unless registry entry ``spec`` is a causal LM (checked before any work)."""
    if spec.family not in ("hf", "recurrent") or spec.kind != "causal":
        raise CheckpointError(
            f"model '{spec.name}' is not a causal language model (family {spec.family}, kind {spec.kind}): "
            "perplexity and generation need a causal LM with its head, e.g. gpt2-small-base, "
            "gpt2-small-recurrent, smollm2-135m, gemma3-270m, tiny-gpt2 or gpt2")


def _causal_lm(spec: CheckpointSpec, tokenizer):
    """(transformers causal LM, fingerprint) of an hf-style source, float32, eager."""
    from transformers import AutoModelForCausalLM

    from probes.models.hf import load_hf_model

    try:
        return load_hf_model(spec, AutoModelForCausalLM, tokenizer, dtype=torch.float32)
    except CheckpointError as e:
        raise CheckpointError(" ".join(str(e).split())) from None  # one line


def weights_spec(spec: CheckpointSpec) -> CheckpointSpec:
    """The spec whose transformer weights and tokenizer entry ``spec`` uses: itself, or, for a
    module-only recurrent entry (``base: <entry>``), its base entry under ``spec``'s name."""
    import dataclasses

    base = spec.extra.get("base")
    if base is None:
        return spec
    b = get_spec(str(base))
    if b.family != "hf" or b.kind != "causal" or "base" in b.extra:
        raise CheckpointError(f"model '{spec.name}': its base '{base}' must be a plain causal LM entry "
                              f"(family hf, kind causal), not family {b.family}, kind {b.kind}")
    return dataclasses.replace(b, name=spec.name, description=spec.description)


def load_lm(name, device: str | torch.device = "cpu", tokenizer=None, model_name: str | None = None) -> LM:
    """Load registry entry ``name`` as a causal LM with its head (plain or recurrent), in eval mode.
    ``name`` may also be a loaded transformers causal LM given with its ``tokenizer=`` (named
    ``model_name``, see :mod:`probes.models.user`); it stays on its own device and in the train/eval mode it
    came in: the suite's forward passes run in eval mode (:meth:`LM.running`) and restore it after."""
    from probes.models.hf import hf_tokenizer
    from probes.models.user import is_model_object, object_spec

    if is_model_object(name):  # a loaded transformers causal LM with its head
        spec: CheckpointSpec = object_spec(name, tokenizer, model_name)
        if spec.kind != "causal" or getattr(name, "get_output_embeddings", lambda: None)() is None:
            raise CheckpointError(f"{type(name).__name__} is not a causal language model with its head: perplexity "
                                  "and generation need one (e.g. AutoModelForCausalLM)")
        return LM(spec, name, tokenizer, spec.fingerprint(), False)
    spec = get_spec(name)
    need_causal(spec)
    wspec = weights_spec(spec)
    tokenizer = hf_tokenizer(wspec)
    model, fingerprint = _causal_lm(wspec, tokenizer)
    if wspec is not spec:  # module-only entry: the base's weights + this folder's module
        fingerprint = {"base": spec.extra["base"], **fingerprint,
                       "recurrence_weights_sha256": spec.fingerprint()["weights_sha256"]}
    if spec.family == "recurrent":
        model = _recurrent(spec, model, fingerprint)
    return LM(spec, model.to(device).eval(), tokenizer, fingerprint, spec.family == "recurrent")


def _recurrent(spec: CheckpointSpec, lm, fingerprint: dict | None = None):
    from probes.models.recurrent import RecurrenceConfig, RecurrentLM

    if spec.source_type == "random":
        if "recurrence" not in spec.extra:
            raise CheckpointError(f"model '{spec.name}': a random recurrent entry needs a 'recurrence' field")
        cfg = RecurrenceConfig.from_dict(dict(spec.extra["recurrence"]))
        torch.manual_seed(int(spec.source.get("seed", 0)) + 1)
        return RecurrentLM(lm, cfg)
    folder = spec.local_path()
    if folder is None:
        raise CheckpointError(f"model '{spec.name}': a recurrent model needs a path or random source")
    cfg_path, weights = folder / "recurrence.json", folder / "recurrence.safetensors"
    for p in (cfg_path, weights):
        if not p.exists():
            raise CheckpointError(f"model '{spec.name}': {p} is missing (not a recurrent checkpoint folder)")
    cfg = RecurrenceConfig.from_dict(read_json(cfg_path, "recurrence config"))
    trained = folder / "training_config.json"
    if "base" in spec.extra and trained.exists() and fingerprint is not None:
        want = read_json(trained, "training record").get("base_model", {}).get("fingerprint", {}).get("weights_sha256")
        if want and want != fingerprint.get("weights_sha256"):
            raise CheckpointError(f"model '{spec.name}': its recurrence module was trained on base weights "
                                  f"{want[:12]}..., but '{spec.extra['base']}' now has "
                                  f"{str(fingerprint.get('weights_sha256'))[:12]}... (re-fetch the base or retrain)")
    return RecurrentLM.with_weights(lm, cfg, weights)


def load_recurrent_encoder(spec: CheckpointSpec, device: str | torch.device = "cpu",
                           dtype: torch.dtype = torch.float32):
    """The ``recurrent`` family behind :class:`probes.models.encoder.Encoder`: a single window (no h_prev),
    i.e. exactly the fine-tuned transformer, so every representation analysis runs on it."""
    from probes.models.hf import HFEncoder, hf_tokenizer

    spec = weights_spec(spec)  # a module-only entry: one window without h_prev IS its base
    tokenizer = hf_tokenizer(spec)
    lm, fingerprint = _causal_lm(spec, tokenizer)
    base = getattr(lm, lm.base_model_prefix)  # GPT2LMHeadModel.transformer: the AutoModel part
    return HFEncoder(spec, base.to(device=device, dtype=dtype), tokenizer, fingerprint)


def load_recurrent_tokenizer(spec: CheckpointSpec):
    from probes.models.hf import load_hf_tokenizer

    return load_hf_tokenizer(weights_spec(spec))


def non_embedding_parameters(model) -> int:
    """Parameters of a causal LM minus its input/position embeddings and an untied output matrix."""
    skip: set[int] = set()
    emb = model.get_input_embeddings()
    skip.update(id(p) for p in emb.parameters())
    out = model.get_output_embeddings()
    if out is not None:
        skip.update(id(p) for p in out.parameters())
    for name, mod in model.named_modules():
        if name.endswith(("wpe", "position_embeddings", "embed_positions")):
            skip.update(id(p) for p in mod.parameters())
    seen, total = set(), 0
    for p in model.parameters():
        if id(p) not in skip and id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total
