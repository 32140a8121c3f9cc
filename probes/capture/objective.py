"""A model's own training objective on texts, per text, under interventions: what removing a property costs it.

* an encoder: the masked-LM loss. In each text a seeded ``mask_prob`` share of the non-special tokens (at least
  one) is replaced by the mask token, all at once (no 80/10/10 rule: an evaluation, not training), and the loss is
  the cross-entropy of the model's MLM head at those positions. The masked positions depend only on the text's
  token ids, the share and the seed, so every condition (clean, edited) scores the same positions;
* a causal LM: the next-token loss over every position of each text (the model's special tokens included as
  context, as the capture adds them).

:meth:`Objective.divergence` scores texts twice, batch by batch, without and with some interventions: both
losses and the KL divergence of the clean predicted distribution from the edited one at every scored position
(what an edit such as an SAE spliced into a layer costs the model, :mod:`analyses.sae.splice`).

Every score runs under the interventions of the enclosing :func:`probes.intervention.intervening` blocks (as the
capture does), then those it is given, and :meth:`Objective.describe` records them.

:func:`load_objective` gives the model with its head: a registry entry's folder must hold the head's weights
(``AutoModelForMaskedLM`` / ``AutoModelForCausalLM``, or the S-LSTM's and Graph-Transformer's own MLM heads);
a seeded ``random:`` entry gets its seeded head. The encoder part always has exactly the weights the capture's
encoder has (they are copied from it), so a property found in the captured states is removed from the states
this model computes. A model object is scored with its own head (``BertForMaskedLM``, ``GPT2LMHeadModel``); a
bare encoder (``BertModel``) has none, and :class:`NoObjective` says so.

Texts are tokenized as the capture tokenizes them and batched as the capture batches them: sorted by length and
right-padded, or, for a model that is not padding-safe (ConvBERT), only texts of one length together.

    $ python -c "from probes.capture.objective import load_objective; o = load_objective('tiny-bert'); \\
    >   print(o.kind, o.score(['The cat sat on the mat.']))"
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import torch

from probes.errors import ProbeError
from probes.models.encoder import Tokenizer

MASKED, NEXT = "masked-LM", "next-token"


class NoObjective(ProbeError):
    """The model has no head to score its own objective with (the message says why and what to give)."""


@dataclass
class Objective:
    """A model with its head (``model``), the suite's tokenizer of its encoder, and which loss it is trained on."""

    name: str
    kind: str  # MASKED or NEXT
    model: torch.nn.Module  # its forward takes input_ids and attention_mask and returns logits (or .logits)
    tokenizer: Tokenizer  # the capture's tokenization
    mask_id: int | None = None  # the mask token (masked-LM)
    device: torch.device = torch.device("cpu")
    padding_safe: bool = True  # False: texts share a batch only with texts of their length

    def describe(self, mask_prob: float, seed: int, interventions=()) -> dict:
        """What a result records of the scoring: the objective, its masking, and the interventions every score
        runs under (those of the enclosing :func:`probes.intervention.intervening` blocks, then ``interventions``),
        when there are any."""
        from probes.intervention import active, as_interventions, describe

        out: dict[str, object] = {"objective": self.kind, "model_head": type(self.model).__name__}
        edits = active() + as_interventions(interventions)
        if edits:
            out["intervention"] = describe(edits)
        if self.kind == MASKED:
            out.update(mask_prob=mask_prob, mask_seed=seed, mask_token_id=self.mask_id,
                       masking="a seeded share of each text's non-special tokens (at least one), all replaced by "
                               "the mask token; loss at those positions")
        else:
            out["scored"] = "every next token of each text (the first token is context only)"
        return out

    @torch.inference_mode()
    def score(self, texts: list[str], interventions=(), mask_prob: float = 0.15, seed: int = 0,
              batch_size: int = 32) -> tuple[np.ndarray, np.ndarray]:
        """(loss sums (T,), scored tokens (T,)) in nats, each text's summed cross-entropy and its count, with the
        interventions of the enclosing :func:`probes.intervention.intervening` blocks and then ``interventions``
        (probes.intervention) editing the forward passes, as every other forward pass of the suite."""
        from probes.intervention import active, as_interventions, hooked
        from probes.models.hf import eval_mode

        toks = self.tokenizer.tokenize(list(texts))
        sums, counts = np.zeros(len(toks)), np.zeros(len(toks), np.int64)
        with hooked(self.model, active() + as_interventions(interventions)), eval_mode(self.model):
            for b in self._scored_batches(toks, mask_prob, seed, batch_size):
                logits = self._scored_logits(b)
                sums[b.idx] = _nll_sums(logits, b)
                counts[b.idx] = b.keep.sum(1).cpu().numpy()
        if not np.isfinite(sums).all():
            raise ProbeError(f"model '{self.name}': its {self.kind} loss is not finite on some texts")
        return sums, counts

    @torch.inference_mode()
    def divergence(self, texts: list[str], interventions, mask_prob: float = 0.15, seed: int = 0,
                   batch_size: int = 32) -> Divergence:
        """The loss with and without ``interventions``, and how far they move the model's predicted distribution,
        per text (:class:`Divergence`). "Clean" runs under the enclosing
        :func:`probes.intervention.intervening` blocks only, "edited" under those and ``interventions``; both
        score the same positions (the same masks), batch by batch."""
        from probes.intervention import active, as_interventions, hooked
        from probes.models.hf import eval_mode

        toks = self.tokenizer.tokenize(list(texts))
        T = len(toks)
        out = Divergence(np.zeros(T), np.zeros(T), np.zeros(T), np.zeros(T, np.int64))
        outer, edits = active(), active() + as_interventions(interventions)
        with eval_mode(self.model):
            for b in self._scored_batches(toks, mask_prob, seed, batch_size):
                with hooked(self.model, outer):
                    clean = self._scored_logits(b).float()
                with hooked(self.model, edits):
                    edited = self._scored_logits(b).float()
                out.clean[b.idx], out.edited[b.idx] = _nll_sums(clean, b), _nll_sums(edited, b)
                p, q = torch.log_softmax(clean.double(), -1), torch.log_softmax(edited.double(), -1)
                kl = (p.exp() * (p - q)).sum(-1)  # KL(clean || edited) per position, float64
                out.kl[b.idx] = torch.where(b.keep, kl, 0.0).sum(1).cpu().numpy()
                out.counts[b.idx] = b.keep.sum(1).cpu().numpy()
        if not (np.isfinite(out.clean).all() and np.isfinite(out.edited).all() and np.isfinite(out.kl).all()):
            raise ProbeError(f"model '{self.name}': its {self.kind} loss or divergence is not finite on some texts")
        return out

    def _scored_batches(self, toks, mask_prob: float, seed: int, batch_size: int):
        """The batches of tokenized texts ``toks`` as the model is scored on them (:class:`_Scored`)."""
        for idx in self._batches(np.array([len(t.ids) for t in toks]), batch_size):
            n = max(len(toks[i].ids) for i in idx)
            ids = torch.full((len(idx), n), int(self.tokenizer.pad_id))
            real = torch.zeros((len(idx), n), dtype=torch.bool)
            where = torch.zeros((len(idx), n), dtype=torch.bool)
            for r, i in enumerate(idx):
                k = len(toks[i].ids)
                ids[r, :k], real[r, :k] = torch.tensor(toks[i].ids), True
                if self.kind == MASKED:
                    where[r, :k] = torch.from_numpy(mask_positions(toks[i].ids, toks[i].special, mask_prob, seed))
            ids, real, where = ids.to(self.device), real.to(self.device), where.to(self.device)
            if self.kind == MASKED:
                assert self.mask_id is not None, "a masked-LM objective has a mask token"
                yield _Scored(idx, ids.masked_fill(where, self.mask_id), real, ids, where)
            else:
                yield _Scored(idx, ids, real, ids[:, 1:], real[:, 1:])

    def _scored_logits(self, b: _Scored) -> torch.Tensor:
        """(B, n', V) the logits that predict ``b.target`` (a causal LM's last position predicts nothing)."""
        logits = self._logits(b.inputs, b.real)
        return logits if self.kind == MASKED else logits[:, :-1]

    def _batches(self, lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
        """Text indices by length: right-padded batches, or batches of equal length only for a model that is not
        padding-safe (the capture's rule, probes.capture.extract.batch_plan)."""
        from probes.capture.extract import batch_plan

        return batch_plan(lengths, batch_size, self.padding_safe)

    def _logits(self, ids: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=ids, attention_mask=real.long())
        return out if isinstance(out, torch.Tensor) else out.logits


@dataclass
class Divergence:
    """Per text (T,): the loss sums without and with the interventions (nats), the sum over scored positions of
    KL(clean || edited) of the predicted distributions (nats), and the scored positions."""

    clean: np.ndarray
    edited: np.ndarray
    kl: np.ndarray
    counts: np.ndarray


@dataclass
class _Scored:
    """One batch as scored: its texts' indices, the model's input ids (masked for a masked LM) and attention
    mask, and the target ids with the positions scored (both aligned with :meth:`Objective._scored_logits`)."""

    idx: np.ndarray
    inputs: torch.Tensor
    real: torch.Tensor
    target: torch.Tensor
    keep: torch.Tensor


def _nll_sums(logits: torch.Tensor, b: _Scored) -> np.ndarray:
    """(B,) each row's summed cross-entropy at its scored positions, float64."""
    nll = torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), b.target, reduction="none")
    return torch.where(b.keep, nll, 0.0).sum(1).double().cpu().numpy()


def mask_positions(ids: list[int], special: list[bool], share: float, seed: int) -> np.ndarray:
    """(n,) bool: the positions masked in a text, a seeded ``share`` of its non-special tokens (at least one; none
    when it has none). Depends only on the ids, the share and the seed."""
    real = np.flatnonzero(~np.asarray(special, bool))
    out = np.zeros(len(ids), bool)
    if not len(real):
        return out
    k = max(1, int(round(share * len(real))))
    rng = np.random.default_rng([int(seed), zlib.crc32(np.asarray(ids, "<i8").tobytes())])
    out[rng.choice(real, size=k, replace=False)] = True
    return out


def load_objective(model, tokenizer=None, name: str | None = None, device: str = "cpu") -> Objective:
    """The :class:`Objective` of ``model``: a registry name, a folder, ``hf:`` id, or a loaded transformers model
    with its head and ``tokenizer=``. :class:`NoObjective` (one line) when there is no head to score with."""
    from probes.models.user import is_model_object

    if is_model_object(model):
        return _object_objective(model, tokenizer, name)
    from probes.checkpoints.loaders import load
    from probes.checkpoints.names import get_spec

    spec = get_spec(model)
    encoder = load(spec, device=device)
    head = _head_of(spec, encoder, device)
    parts = [getattr(head, a, None) for a in ("slstm", "mog", "base_model")] + [head]
    base = next(m for m in parts if isinstance(m, torch.nn.Module))  # the head model's encoder part
    _copy_weights(spec.name, encoder.model, base)
    kind = NEXT if spec.kind == "causal" else MASKED
    return Objective(spec.name, kind, head.eval(), encoder.tokenizer, _mask_id(spec.name, encoder.tokenizer, kind),
                     encoder.device, encoder.padding_safe)


def _head_of(spec, encoder, device) -> torch.nn.Module:
    """The model of registry entry ``spec`` with its head, float32 on ``device``."""
    from probes.errors import CheckpointError

    try:
        if spec.kind == "causal":
            from probes.models.lm import load_lm

            return load_lm(spec.name, device).base  # a recurrent model's single window is its causal LM
        if spec.family in ("slstm", "mog"):
            return _native_head(spec, encoder).to(device)
        if spec.family in ("hf", "mog-lens"):
            from transformers import AutoModelForMaskedLM

            from probes.models.hf import hf_tokenizer, load_hf_model

            return load_hf_model(spec, AutoModelForMaskedLM, hf_tokenizer(spec), dtype=torch.float32)[0].to(device)
    except CheckpointError as e:
        raise NoObjective(f"model '{spec.name}' has no masked-LM head to score its objective with: "
                          f"{' '.join(str(e).split())}") from None
    raise NoObjective(f"model '{spec.name}' (family {spec.family}) has no objective this suite scores")


def _native_head(spec, encoder) -> torch.nn.Module:
    """The S-LSTM's or Graph-Transformer's MLM model: its folder's saved head, or a seeded one (random entries)."""
    if spec.family == "slstm":
        from probes.models.slstm import SLSTMForMaskedLM as Head
        from probes.models.slstm import load_pretrained
    else:
        from probes.models.mog import MoGForMaskedLM as Head  # type: ignore[assignment]
        from probes.models.mog import load_pretrained  # type: ignore[assignment]
    if spec.source_type == "random":
        torch.manual_seed(int(spec.source.get("seed", 0)))
        return Head(encoder.model.config)
    folder = spec.local_path()
    if folder is None or not (folder / "config.json").is_file():
        raise NoObjective(f"model '{spec.name}': no saved masked-LM model in its folder to score its objective with")
    return load_pretrained(folder).float()


def _copy_weights(name: str, source: torch.nn.Module, base: torch.nn.Module) -> None:
    """Give the head model's encoder part ``base`` exactly the weights of the captured encoder ``source``."""
    missing, unexpected = base.load_state_dict(source.state_dict(), strict=False)
    unexpected = [k for k in unexpected if not k.startswith("pooler.")]  # the base model's pooler: never run here
    if missing or unexpected:
        raise ProbeError(f"model '{name}': its masked-LM model's encoder does not match the captured encoder "
                         f"(missing {missing[:3]}, unexpected {unexpected[:3]})")


def _mask_id(name: str, tokenizer, kind: str) -> int | None:
    if kind != MASKED:
        return None
    mask = getattr(getattr(tokenizer, "tokenizer", None), "mask_token_id", None)
    if mask is None:
        raise NoObjective(f"model '{name}': its tokenizer has no mask token, so its masked-LM loss cannot be scored")
    return int(mask)


def _object_objective(model, tokenizer, name: str | None) -> Objective:
    """A caller's transformers model with its head (masked-LM or causal)."""
    from probes.models.user import object_spec, wrap_encoder

    spec = object_spec(model, tokenizer, name)
    head = getattr(model, "get_output_embeddings", lambda: None)()
    if head is None or getattr(model, "base_model", model) is model:
        raise NoObjective(f"a {type(model).__name__} has no language-model head: give the model with its head "
                          "(AutoModelForMaskedLM for an encoder, AutoModelForCausalLM for a causal LM) to score "
                          "its objective")
    encoder = wrap_encoder(model, tokenizer, name=name)
    kind = NEXT if spec.kind == "causal" else MASKED
    device = next(model.parameters()).device
    return Objective(spec.name, kind, model, encoder.tokenizer, _mask_id(spec.name, encoder.tokenizer, kind), device,
                     encoder.padding_safe)
