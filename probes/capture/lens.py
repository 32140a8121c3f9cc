"""The logit lens and the tuned lens of a causal LM: every layer's residual stream decoded into next-token
distributions, and per-token statistics of how they compare with the model's own (nostalgebraist 2020;
Belrose et al. 2023).

* :class:`Unembedding`: the model's final norm and output matrix, found per family: GPT-2 ``transformer.ln_f``,
  Llama / SmolLM2 / Gemma-3 ``model.norm`` (Gemma's (1 + w) RMSNorm as the model applies it), then
  ``get_output_embeddings()``, then Gemma's ``final_logit_softcapping`` when its config sets one. Gemma's
  embedding scale (sqrt(d)) is part of its embedding module's output, hence already in hidden[0].
* The last layer: Hugging Face returns hidden[L] AFTER the final norm (every family here), so layer L is decoded
  by the output matrix alone and IS the model's output: KL 0 and top-1 agreement 1 there by construction.
  :func:`lens_statistics` checks, on every document, that decoding hidden[L] gives the model's own logits.
* A lens maps hidden[l] (l < L) before the final norm: the logit lens is the identity; the tuned lens
  (:mod:`probes.capture.tuned_lens`) adds a learned affine translator, h + A_l h + b_l.
* :func:`lens_statistics` runs a document in windows by the suite's window rule (:mod:`probes.capture.windows`:
  windows of T tokens every T - o, each target scored once; a recurrent GPT-2 carries h_prev from window to
  window) and returns per scored target and layer: the cross-entropy on the next token, KL(final || layer) and
  whether the layer's top-1 token is the final one's. The (tokens x vocabulary) logits exist only for a chunk
  of tokens at a time (``chunk_elements``), so a 262k vocabulary fits in bounded memory.

    >>> from probes.models.lm import load_lm
    >>> lm = load_lm("tiny-gpt2")                 # 2 layers; "gpt2-small-base", ...
    >>> ids = lm.encode("It is a truth universally acknowledged, that a single man in possession of a good fortune")
    >>> s = lens_statistics(lm, ids, T=8, o=0)
    >>> s["stats"]["logit"]["kl"].shape == (3, len(ids) - 1)   # (L + 1, n - 1): layers x scored targets
    True
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from probes.capture.windows import Window, check_fits, plan
from probes.errors import ProbeError
from probes.models.hf import FINAL_NORMS

CHUNK_ELEMENTS = 2**22  # logits per chunk (tokens x vocabulary): 32 MiB per float64 (chunk, V) matrix
STATS = ("ce", "kl", "top1")


@dataclass
class Unembedding:
    """hidden state -> logits: ``head(norm(h))`` (+ softcapping) for a layer before the last, ``head(h)`` for the
    last (hidden[L] already holds the final norm's output)."""

    norm: torch.nn.Module
    head: torch.nn.Linear  # the output embeddings: weight (vocabulary, d)
    softcap: float | None = None

    def __call__(self, h: torch.Tensor, final: bool = False, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        logits = self.head(h if final else self.norm(h)).to(dtype)
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits


def unembedding(lm) -> Unembedding:
    """The final norm, output matrix and logit softcapping of ``lm`` (a probes.models.lm.LM)."""
    base = lm.base
    inner = getattr(base, base.base_model_prefix)
    inner = getattr(inner, "decoder", inner)  # OPT keeps its layers under .decoder
    norm = next((getattr(inner, n) for n in FINAL_NORMS if isinstance(getattr(inner, n, None), torch.nn.Module)),
                None)
    head = base.get_output_embeddings()
    if norm is None or head is None:
        raise ProbeError(f"model '{lm.name}' ({type(base).__name__}): no final norm ({', '.join(FINAL_NORMS)}) or "
                         "output matrix found; the lens needs both")
    return Unembedding(norm, head, getattr(base.config, "final_logit_softcapping", None))


def n_layers(lm) -> int:
    return int(lm.base.config.num_hidden_layers)


def chunk_tokens(vocab: int, chunk_elements: int = CHUNK_ELEMENTS) -> int:
    """Tokens decoded at once so that one (tokens, vocabulary) float32 matrix holds ``chunk_elements``."""
    return max(1, chunk_elements // max(vocab, 1))


# ----------------------------------------------------------------------------- windows with hidden states


def window_states(lm, x: torch.Tensor, windows: list[Window], T: int, o: int,
                  batch_size: int = 8) -> Iterator[tuple[Window, torch.Tensor, torch.Tensor]]:
    """``(window, hidden (L+1, n, d), the model's logits at the window's last input (V,))`` for every window of
    ``windows`` over ``x`` (1, n), by the window rule of :func:`probes.capture.windows.run_windows`: a recurrent
    model in order with h_prev pooled over each window's first T - o positions; a plain model's full-length
    windows ``batch_size`` at a time (its head runs on the last position only)."""
    if lm.recurrent:
        h_prev = None
        for k, w in enumerate(windows):
            last = k + 1 == len(windows)
            with lm.running():  # eval mode; a caller's model object gets its train/eval flags back after
                out = lm.model(x[:, w.start:w.start + w.n_inputs], h_prev=h_prev, pool_len=None if last else T - o,
                               need_state=not last)
            h_prev = out.h_next
            yield w, torch.stack(out.hidden_states)[:, 0], out.logits[0, -1].float()
        return
    groups = [[w] for w in windows if w.n_inputs != T]
    full = [w for w in windows if w.n_inputs == T]
    groups = [full[b:b + batch_size] for b in range(0, len(full), batch_size)] + groups
    for group in groups:
        inputs = torch.cat([x[:, w.start:w.start + w.n_inputs] for w in group])
        with lm.running():
            out = lm.base(input_ids=inputs, output_hidden_states=True, use_cache=False, logits_to_keep=1)
        hidden = torch.stack(out.hidden_states)  # (L+1, B, n, d)
        for i, w in enumerate(group):
            yield w, hidden[:, i], out.logits[i, -1].float()


# ----------------------------------------------------------------------------- statistics


def chunk_statistics(unembed: Unembedding, hidden: torch.Tensor, targets: torch.Tensor,
                     lenses: dict) -> dict[str, dict[str, np.ndarray]]:
    """Per lens, {"ce", "kl", "top1"} each (L+1, c) for the c tokens of ``hidden`` (L+1, c, d) with next tokens
    ``targets`` (c,). ``lenses``: name -> None (logit lens) or a translator module with ``forward(h, layer)``."""
    L = hidden.shape[0] - 1
    final = torch.log_softmax(unembed(hidden[L], final=True, dtype=torch.float64), -1)  # (c, V)
    p_final = final.exp()
    top_final = final.argmax(-1)
    final_ok = torch.isfinite(final).all(-1)  # (c,) tokens whose model output is a distribution
    ce_final = -final.gather(-1, targets[:, None])[:, 0]
    out = {}
    for name, translator in lenses.items():
        ce, kl, top1 = (np.empty((L + 1, len(targets))) for _ in STATS)
        for lyr in range(L):
            h = hidden[lyr] if translator is None else translator(hidden[lyr], lyr)
            logp = torch.log_softmax(unembed(h, dtype=torch.float64), -1)
            ce[lyr] = (-logp.gather(-1, targets[:, None])[:, 0]).double().cpu().numpy()
            kl[lyr] = (p_final * (final - logp)).sum(-1).double().cpu().numpy()
            # an argmax over NaN logits is a number but no prediction: NaN there, like ce and kl (null in results)
            agree = (logp.argmax(-1) == top_final).double()
            top1[lyr] = torch.where(torch.isfinite(logp).all(-1) & final_ok, agree, torch.nan).cpu().numpy()
        ce[L] = ce_final.double().cpu().numpy()  # layer L is the model's output: KL 0, top-1 agreement 1
        kl[L], top1[L] = (torch.where(final_ok, v, torch.nan).cpu().numpy() for v in (0.0, 1.0))
        out[name] = {"ce": ce, "kl": kl, "top1": top1}
    return out


@torch.inference_mode()
def lens_statistics(lm, ids: list[int], T: int, o: int, lenses: dict | None = None, batch_size: int = 8,
                    chunk_elements: int = CHUNK_ELEMENTS) -> dict:
    """Per-target lens statistics of one document under windowed execution.

    Returns {"stats": {lens: {"ce", "kl", "top1"} each float64 (L+1, n - 1) for targets t_1..t_{n-1}},
    "window": (n - 1,) the index of the window that scored each target, "n_windows"}. ``lenses``: name ->
    None (the logit lens) or a translator module (the tuned lens); default: the logit lens only."""
    lenses = {"logit": None} if lenses is None else lenses
    check_fits(lm, T)
    unembed = unembedding(lm)
    L = n_layers(lm)
    x = torch.tensor(ids, dtype=torch.long, device=lm.device)[None]  # (1, n)
    windows = plan(len(ids), T, o)
    n = max(len(ids) - 1, 0)
    stats = {name: {s: np.full((L + 1, n), np.nan) for s in STATS} for name in lenses}
    window_of = np.full(n, -1, dtype=np.int64)
    c = chunk_tokens(unembed.head.weight.shape[0], chunk_elements)
    for w, hidden, last_logits in window_states(lm, x, windows, T, o, batch_size):
        check_final(lm, unembed, hidden[-1, -1], last_logits)
        k = windows.index(w)
        for a in range(w.first, w.n_inputs, c):
            b = min(a + c, w.n_inputs)
            targets = x[0, w.start + a + 1:w.start + b + 1]
            part = chunk_statistics(unembed, hidden[:, a:b], targets, lenses)
            for name, values in part.items():
                for s in STATS:
                    stats[name][s][:, w.start + a:w.start + b] = values[s]
        window_of[w.start + w.first:w.start + w.n_inputs] = k
    if (window_of < 0).any():
        raise AssertionError("lens_statistics left a target unscored")  # a bug, not a user error
    return {"stats": stats, "window": window_of, "n_windows": len(windows)}


def check_final(lm, unembed: Unembedding, h_last: torch.Tensor, logits: torch.Tensor) -> None:
    """ProbeError unless decoding the last layer's state gives the model's own logits: the lens's reading of
    hidden[L] (already after the final norm) must be the model's output, or every KL would be wrong."""
    mine = unembed(h_last, final=True)
    if not torch.allclose(mine, logits, rtol=1e-4, atol=1e-4 * max(1.0, float(logits.abs().max()))):
        raise ProbeError(f"model '{lm.name}': decoding its last hidden state does not give its logits (max "
                         f"difference {float((mine - logits).abs().max()):.3g}); the lens does not know where this "
                         "family applies its final norm")
