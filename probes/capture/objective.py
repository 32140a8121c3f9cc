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
right-padded, or, for a model that is not padding-safe (ConvBERT), only texts of one length together. The head
runs on the scored positions' final states only and the cross-entropy on their logits in rows (M, V): a scoring
costs the model's forward pass, not its head at every position (benchmarks/bench_causal.py).

    $ python -c "from probes.capture.objective import load_objective; o = load_objective('tiny-bert'); \\
    >   print(o.kind, o.score(['The cat sat on the mat.']))"
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

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
    _rows: bool = field(default=True, init=False, repr=False, compare=False)  # the head on the scored states only
    _last: tuple | None = field(default=None, init=False, repr=False, compare=False)  # (key, batches) of _scored

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

        texts = list(texts)
        sums, counts = np.zeros(len(texts)), np.zeros(len(texts), np.int64)
        with hooked(self.model, active() + as_interventions(interventions)), eval_mode(self.model):
            for b in self._scored(texts, mask_prob, seed, batch_size):
                sums[b.idx] = _nll_sums(self._scored_logits(b), b)
                counts[b.idx] = b.counts()
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

        texts = list(texts)
        T = len(texts)
        out = Divergence(np.zeros(T), np.zeros(T), np.zeros(T), np.zeros(T, np.int64))
        outer, edits = active(), active() + as_interventions(interventions)
        with eval_mode(self.model):
            for b in self._scored(texts, mask_prob, seed, batch_size):
                with hooked(self.model, outer):
                    clean = self._scored_logits(b).float()
                with hooked(self.model, edits):
                    edited = self._scored_logits(b).float()
                out.clean[b.idx], out.edited[b.idx] = _nll_sums(clean, b), _nll_sums(edited, b)
                p, q = torch.log_softmax(clean.double(), -1), torch.log_softmax(edited.double(), -1)
                kl = (p.exp() * (p - q)).sum(-1)  # (M,) KL(clean || edited) per scored position, float64
                out.kl[b.idx] = b.per_text(kl)
                out.counts[b.idx] = b.counts()
        if not (np.isfinite(out.clean).all() and np.isfinite(out.edited).all() and np.isfinite(out.kl).all()):
            raise ProbeError(f"model '{self.name}': its {self.kind} loss or divergence is not finite on some texts")
        return out

    def _scored(self, texts, mask_prob: float, seed: int, batch_size: int) -> list[_Scored]:
        """The batches of ``texts`` as the model is scored on them; tokenized and masked once for a run of
        scorings of the same texts (causal probing scores its held-out texts clean and under every eraser)."""
        key = (tuple(texts), float(mask_prob), int(seed), int(batch_size), self.padding_safe)
        if self._last is None or self._last[0] != key:
            toks = self.tokenizer.tokenize(list(key[0]))
            self._last = (key, list(self._scored_batches(toks, mask_prob, seed, batch_size)))
        return self._last[1]

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
                yield _Scored(idx, ids.masked_fill(where, self.mask_id), real, where, ids[where])
            else:  # position t predicts token t + 1: every position whose next one is real
                at = torch.zeros_like(real)
                at[:, :-1] = real[:, 1:]
                yield _Scored(idx, ids, real, at, ids[:, 1:][real[:, 1:]])

    def _scored_logits(self, b: _Scored) -> torch.Tensor:
        """(M, V) the logits at the scored positions ``b.at`` (row-major order), which predict ``b.target``.

        The model's head runs on those positions only: the final hidden states are gathered there before the head
        (the S-LSTM's and MoG's ``masked_positions``; for a transformers model a hook on its base model's output,
        which runs after every intervention's hooks). A model whose output does not come out as those rows is
        scored on every position and its logits gathered after, from then on."""
        if self._rows:
            try:
                rows = self._row_logits(b)
            except ProbeError:  # an intervention's error (say): the same with every layout
                raise
            except Exception:  # noqa: BLE001 - a head that cannot take gathered states: the full logits below
                rows = None
            if rows is not None and rows.shape[:-1] == (b.target.numel(),):
                return rows
            self._rows = False
        return self._logits(b.inputs, b.real)[b.at]

    def _row_logits(self, b: _Scored) -> torch.Tensor:
        """(M, V) or whatever shape the model returns when its head is given the gathered final states."""
        from probes.models.mog import MoGForMaskedLM
        from probes.models.slstm import SLSTMForMaskedLM

        if isinstance(self.model, (SLSTMForMaskedLM, MoGForMaskedLM)):
            return self.model(b.inputs, b.real.long(), masked_positions=b.at)
        base = getattr(self.model, "base_model", None)
        if not isinstance(base, torch.nn.Module) or base is self.model:
            return torch.empty(0)  # no base model to gather the states of
        handle = base.register_forward_hook(lambda module, args, output: _gathered(output, b.at))
        try:
            out = self._logits(b.inputs, b.real)
        finally:
            handle.remove()
        return out.reshape(-1, out.shape[-1]) if out.dim() == 3 and out.shape[0] == 1 else out

    def _batches(self, lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
        """Text indices by length: right-padded batches, or batches of equal length only for a model that is not
        padding-safe (the capture's rule, probes.capture.extract.batch_plan)."""
        from probes.capture.extract import batch_plan

        return batch_plan(lengths, batch_size, self.padding_safe)

    def _logits(self, ids: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        # a causal LM of transformers keeps no cache of keys and values: nothing is generated after the pass
        extra = {"use_cache": False} if self.kind == NEXT and hasattr(getattr(self.model, "config", None),
                                                                        "use_cache") else {}
        out = self.model(input_ids=ids, attention_mask=real.long(), **extra)
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
    mask (B, n), the positions whose logits are scored (B, n), and the (M,) ids they predict, in row-major order of
    those positions (aligned with :meth:`Objective._scored_logits`)."""

    idx: np.ndarray
    inputs: torch.Tensor
    real: torch.Tensor
    at: torch.Tensor
    target: torch.Tensor

    def counts(self) -> np.ndarray:
        """(B,) each text's scored positions."""
        return self.at.sum(1).cpu().numpy()

    def per_text(self, values: torch.Tensor) -> np.ndarray:
        """(B,) float64: the sums over each text's scored positions of ``values`` (M,)."""
        rows = self.at.nonzero()[:, 0]
        return torch.zeros(len(self.idx), dtype=torch.float64, device=values.device).index_add_(
            0, rows, values.double()).cpu().numpy()


def _gathered(output, at: torch.Tensor):
    """A base model's ``output`` with its final states (B, n, d) replaced by those at ``at`` (1, M, d)."""
    if isinstance(output, torch.Tensor):
        return output[at][None]
    if isinstance(output, tuple):
        return (output[0][at][None], *output[1:])
    output[next(iter(output.keys()))] = output[0][at][None]  # a transformers ModelOutput: its first field
    return output


def _nll_sums(logits: torch.Tensor, b: _Scored) -> np.ndarray:
    """(B,) each text's summed cross-entropy at its scored positions, float64, from their logits (M, V) in rows."""
    return b.per_text(torch.nn.functional.cross_entropy(logits.float(), b.target, reduction="none"))


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
