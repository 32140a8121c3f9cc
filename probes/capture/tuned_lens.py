"""The tuned lens's translators (Belrose et al. 2023): one affine map per layer l = 0..L-1, trained so that
decoding h + A_l h + b_l through the final norm and output matrix matches the model's own next-token
distribution, on text the evaluation never sees. Fitting a readout of a model's states needs the model's
forward and its unembedding, so it lives here, where models run; no model weight changes.

* :class:`Translators`: ``forward(h, l) = h + A_l h + b_l``, A_l and b_l initialised at zero (the identity:
  the logit lens). Its ``state_dict`` has the keys of the ``tuned-lens`` package's ``layer_translators``
  (``"{l}.weight"``, ``"{l}.bias"``), so saved translators load into ``tuned_lens.TunedLens``.
* Training as the ``tuned-lens`` package does it (``tuned_lens.scripts.train_loop``, loss "kl"): per step a
  batch of scored tokens, loss = sum over layers of the mean KL(final || lens_l) (shift 0: layer l's
  distribution at a position against the final one at that position), SGD with Nesterov momentum 0.9,
  learning rate ``lr`` x (1 - momentum), weight decay 1e-3, a linear decay to 0 over the steps, gradients
  clipped to norm 1. Float32 throughout (the package uses bfloat16 autocast on GPUs).
* Data: the training documents in a seeded order, each run in windows by the suite's window rule (a recurrent
  model carries h_prev), a step taking windows until it has ``tokens_per_step`` scored tokens.
* Stored in ``<root>/<model>/<key>/``: ``translators.safetensors`` and ``train_config.json`` (the settings, the
  model's fingerprint, the training split's identity, the translators file's sha256, the loss per layer at the
  first and last steps). The key hashes the model (with the interventions it runs under), settings and split, so a
  run with the same ones reuses them; anything else trains anew. Under an intervention no key can see (a Python
  function) they are trained in a temporary folder and never reused. Saved translators are read back only when
  the record names this model, settings and split and the file has the recorded sha256 and the translators' keys
  and shapes: an edited, damaged or foreign file is one error line naming it, never other numbers. Training runs
  in pieces: every ``save_every`` steps ``state.pt`` (translators, optimiser, step, data position, h_prev, log)
  is written atomically, and an interrupted run resumes from it.

    tr, info = tuned_translators(lm, train_docs, split_identity, TrainSettings(window=128), "out/lens")
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sys
import tempfile
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from filelock import FileLock

from probes.capture.lens import Unembedding, chunk_tokens, n_layers, unembedding
from probes.capture.windows import check_fits, plan
from probes.config import progress_bar
from probes.errors import ProbeError
from probes.io import atomic_write, read_json, read_regular, strict_json

FORMAT = 2  # bump when the files or the training change: older translators are trained again


class Translators(torch.nn.Module):
    """One affine translator per layer 0..L-1: h + A_l h + b_l (zero A_l, b_l: the logit lens)."""

    def __init__(self, n_layers: int, d: int):
        super().__init__()
        linears = [torch.nn.Linear(d, d) for _ in range(n_layers)]
        for lin in linears:
            torch.nn.init.zeros_(lin.weight)
            torch.nn.init.zeros_(lin.bias)
        self.layers = torch.nn.ModuleList(linears)

    def forward(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        return h + self.layers[layer](h)

    def state_dict(self, *args, **kwargs):  # the tuned-lens package's layer_translators keys: "0.weight", ...
        return self.layers.state_dict(*args, **kwargs)

    def load_state_dict(self, state, strict: bool = True, assign: bool = False):
        return self.layers.load_state_dict(state, strict=strict, assign=assign)


@dataclass(frozen=True)
class TrainSettings:
    """How the translators are trained (all of it is in the key)."""

    window: int  # T of the training windows
    overlap: int = 0  # o
    steps: int = 250  # optimiser steps (the tuned-lens package's default)
    tokens_per_step: int = 2048  # scored tokens per step (the package: 2^18 on GPUs)
    lr: float = 1.0  # learning-rate scale: SGD's rate is lr x (1 - momentum), as in the package
    momentum: float = 0.9
    weight_decay: float = 1e-3
    seed: int = 0  # order of the training documents


def translators_key(lm, settings: TrainSettings, split: dict) -> str:
    """sha256 (16 hex digits) of the model's identity, the settings and the training split's identity."""
    ident = {"format": FORMAT, "model": lm.describe(), "settings": asdict(settings), "split": split}
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]


class Documents:
    """Training documents tokenized when the stream first reaches them (a run that reuses saved translators, or
    that needs only the first documents of the seeded order, tokenizes nothing more)."""

    def __init__(self, texts: list[str], encode):
        self.texts, self.encode = list(texts), encode
        self.ids: dict[int, list[int]] = {}  # document index -> its token ids

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i: int) -> list[int]:
        if i not in self.ids:
            self.ids[i] = self.encode(self.texts[i])
        return self.ids[i]


def _stream(docs, settings: TrainSettings, position: tuple[int, int, int]):
    """Windows of the training documents (a list of token-id lists, or :class:`Documents`) in a seeded order,
    epoch after epoch, from ``position`` = (epoch, document, window): yields (position, ids, window, is the
    document's last window)."""
    epoch, d, k = position
    while True:
        order = np.random.default_rng([settings.seed, epoch]).permutation(len(docs))
        found = False
        while d < len(order):
            ids = docs[int(order[d])]
            windows = plan(len(ids), settings.window, settings.overlap)
            found = found or bool(windows)
            while k < len(windows):
                yield (epoch, d, k), ids, windows[k], k + 1 == len(windows)
                k += 1
            d, k = d + 1, 0
        if not found and position[1] == 0 and position[2] == 0:
            raise ProbeError("no training document has 2 tokens")
        epoch, d, position = epoch + 1, 0, (0, 0, 0)


def _kl_loss(unembed: Unembedding, translators: Translators, hidden: torch.Tensor, chunk: int,
             scale: float) -> np.ndarray:
    """Backpropagate sum_l sum_tokens KL(final || lens_l) x ``scale`` for ``hidden`` (L+1, c, d), in token
    chunks; returns the per-layer KL sums (L,)."""
    L = hidden.shape[0] - 1
    sums = np.zeros(L)
    for a in range(0, hidden.shape[1], chunk):
        h = hidden[:, a:a + chunk]
        with torch.no_grad():
            final = torch.log_softmax(unembed(h[L], final=True), -1)
            p = final.exp()
        for lyr in range(L):
            logp = torch.log_softmax(unembed(translators(h[lyr], lyr)), -1)
            kl = (p * (final - logp)).sum()
            (kl * scale).backward()
            sums[lyr] += float(kl.detach())
    return sums


def save_state(path: Path, translators, opt, sched, step, position, h_prev, log) -> None:
    buf = io.BytesIO()
    torch.save({"translators": translators.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                "step": step, "position": list(position), "h_prev": h_prev, "log": log}, buf)
    atomic_write(path, buf.getvalue())


def train(lm, docs, settings: TrainSettings, folder: Path, save_every: int = 50,
          progress: bool = True) -> tuple[Translators, list]:
    """Train (or resume training) the translators of ``lm`` on token-id documents (or :class:`Documents`);
    ``folder`` holds state.pt while training. Returns the translators and the log [(step, per-layer mean KL)].
    The model runs in eval mode without gradients for its own weights; a caller's model object gets its
    train/eval flags and ``requires_grad`` back after."""
    check_fits(lm, settings.window)
    with frozen(lm.model), lm.running():
        return _train(lm, docs, settings, folder, save_every, progress)


@contextlib.contextmanager
def frozen(model: torch.nn.Module):
    """``model``'s parameters without gradients inside; each one's ``requires_grad`` as it was after."""
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


def _train(lm, docs, settings: TrainSettings, folder: Path, save_every: int,
           progress: bool) -> tuple[Translators, list]:
    unembed = unembedding(lm)
    L, d = n_layers(lm), int(lm.base.config.hidden_size)
    translators = Translators(L, d).to(lm.device)
    opt = torch.optim.SGD(translators.parameters(), lr=settings.lr * (1 - settings.momentum),
                          momentum=settings.momentum, nesterov=True, weight_decay=settings.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1 - s / settings.steps))
    step, position, h_prev, log = 0, (0, 0, 0), None, []
    state_path = folder / "state.pt"
    if state_path.exists():
        try:  # weights_only: a pickle that asks for code is refused, as any other damage
            state = torch.load(state_path, weights_only=True, map_location=lm.device)
            translators.load_state_dict(state["translators"])
            opt.load_state_dict(state["opt"])
            sched.load_state_dict(state["sched"])
            step, position, h_prev, log = state["step"], tuple(state["position"]), state["h_prev"], state["log"]
        except Exception as e:  # noqa: BLE001 (UnpicklingError, RuntimeError, KeyError, TypeError, ...)
            raise ProbeError(f"cannot resume the tuned lens's training from {state_path} ({type(e).__name__}: "
                             f"{' '.join(str(e).split())[:160]}); remove it to train from the start") from None
    chunk = chunk_tokens(unembed.head.weight.shape[0])
    stream = _stream(docs, settings, position)
    T, o = settings.window, settings.overlap
    bar = progress_bar(progress, total=settings.steps, initial=step, desc=f"tuned lens {lm.name}", unit="step")
    while step < settings.steps:
        batch, n_tok = [], 0
        while n_tok < settings.tokens_per_step:
            position, ids, w, last = next(stream)
            x = torch.tensor(ids[w.start:w.start + w.n_inputs], device=lm.device)[None]
            with torch.no_grad():
                if lm.recurrent:
                    out = lm.model(x, h_prev=h_prev if w.start > 0 else None, pool_len=None if last else T - o,
                                   need_state=not last)
                    h_prev = out.h_next
                    hidden = torch.stack(out.hidden_states)[:, 0]
                else:
                    hidden = torch.stack(lm.base(input_ids=x, output_hidden_states=True, use_cache=False,
                                                 logits_to_keep=1).hidden_states)[:, 0]
            batch.append(hidden[:, w.first:w.n_inputs])  # (L+1, scored, d)
            n_tok += w.n_inputs - w.first
        position = (position[0], position[1], position[2] + 1)  # the next window to read
        opt.zero_grad(set_to_none=False)
        sums = np.asarray(sum(_kl_loss(unembed, translators, hidden, chunk, 1.0 / n_tok) for hidden in batch))  # (L,)
        torch.nn.utils.clip_grad_norm_(translators.parameters(), 1.0)
        opt.step()
        sched.step()
        step += 1
        log.append([step, (sums / n_tok).tolist()])
        bar.update(1)
        bar.set_postfix(kl=f"{sums.mean() / n_tok:.4f}")
        if save_every and step % save_every == 0 and step < settings.steps:
            save_state(state_path, translators, opt, sched, step, position, h_prev, log)
    bar.close()
    return translators, log


def tuned_translators(lm, docs, split: dict, settings: TrainSettings, root: str | Path,
                      save_every: int = 50, progress: bool = True) -> tuple[Translators, dict]:
    """The translators of ``lm`` for these settings and training split: loaded from
    ``<root>/<model>/<key>/`` when they were trained before, else trained (resuming an interrupted run) and
    saved there. Saved translators are used only when ``train_config.json`` is a record of this model, these
    settings and this split and the file's sha256 is the one recorded beside it (:func:`checked_record`); anything
    else (an edited, damaged or foreign file) is one ProbeError line naming the file. Returns (translators in eval
    mode, the train_config.json record with ``reused`` and ``folder``). Under an intervention that no key can see
    (:func:`probes.intervention.key_identity` None: a Function) nothing is reused or kept: they are trained in a
    temporary folder (one warning)."""
    from probes.intervention import active, key_identity

    if key_identity(active()) is None:  # the model runs under an edit that no key can see: nothing to reuse
        warnings.warn(f"tuned lens of {lm.name}: an intervention runs a Python function, which no key can see; its "
                      "translators are trained in a temporary folder and not kept", stacklevel=2)
        with tempfile.TemporaryDirectory(prefix="tuned-lens-") as where:
            return _tuned_translators(lm, docs, split, settings, Path(where), save_every, progress)
    return _tuned_translators(lm, docs, split, settings, Path(root), save_every, progress)


def _tuned_translators(lm, docs, split: dict, settings: TrainSettings, root: Path, save_every: int,
                       progress: bool) -> tuple[Translators, dict]:
    key = translators_key(lm, settings, split)
    folder = root / lm.name / key
    folder.mkdir(parents=True, exist_ok=True)
    weights, config = folder / "translators.safetensors", folder / "train_config.json"
    L, d = n_layers(lm), int(lm.base.config.hidden_size)
    with FileLock(str(folder / ".lock")):  # one trainer per key; a second process waits, then loads
        reused = weights.exists() and config.exists()
        if not reused:
            if progress:
                print(training_notice(lm, settings, split, folder), file=sys.stderr, flush=True)
            translators, log = train(lm, docs, settings, folder, save_every, progress)
            data = translator_bytes(translators)
            record = {"format": FORMAT, "key": key, "model": lm.name, "fingerprint": lm.fingerprint,
                      "settings": asdict(settings), "split": split,
                      "translators_sha256": hashlib.sha256(data).hexdigest(),
                      "loss": "sum over layers of mean KL(final || lens_l), nats",
                      "kl_first_step": finite_list(log[0][1]), "kl_last_step": finite_list(log[-1][1]),
                      "log": [[step, finite_list(kl)] for step, kl in log]}
            atomic_write(weights, data)
            atomic_write(config, (strict_json(record) + "\n").encode())
            (folder / "state.pt").unlink(missing_ok=True)
        record = checked_record(config, {"format": FORMAT, "key": key, "model": lm.name,
                                         "fingerprint": lm.fingerprint, "settings": asdict(settings), "split": split})
        translators = read_translators(weights, record["translators_sha256"], L, d)
    bad = int(sum((~torch.isfinite(p)).sum() for p in translators.parameters()))
    return translators.to(lm.device).eval().requires_grad_(False), {**record, "reused": reused,
                                                                    "folder": str(folder), "nonfinite_values": bad}


def training_notice(lm, settings: TrainSettings, split: dict, folder: Path) -> str:
    """The line said before the translators are trained: what it costs and where they go."""
    return (f"tuned lens of {lm.name}: training its {n_layers(lm)} translators first ({settings.steps} steps of "
            f"{settings.tokens_per_step:,} tokens of the {split.get('name', 'corpus')} train split: "
            f"{settings.steps * settings.tokens_per_step:,} tokens through the model and {n_layers(lm)} unembeddings; "
            f"saved in {folder} and reused after); tuned=False (--no-tuned) skips the tuned lens")


def finite_list(values) -> list:
    """A list of floats with None for each non-finite one (a diverged training's NaN loss: strict JSON)."""
    return [float(v) if np.isfinite(v) else None for v in values]


def checked_record(path: Path, expected: dict) -> dict:
    """``train_config.json`` read and checked against what this run's translators must have been trained for
    (format, key, model and fingerprint, settings, split); one ProbeError line naming the file otherwise."""
    record = read_json(path, "tuned-lens training record")
    if not isinstance(record, dict):
        raise ProbeError(f"the tuned-lens training record {path} is a JSON {type(record).__name__}, not an object; "
                         f"remove {path.parent} to train the translators again")
    for field, want in expected.items():
        if _plain(record.get(field)) != _plain(want):
            raise ProbeError(f"the tuned-lens training record {path} does not match this run: its {field} is "
                             f"{_short(record.get(field))}, this run's {_short(want)}; remove {path.parent} to "
                             "train the translators again")
    if not isinstance(record.get("translators_sha256"), str):
        raise ProbeError(f"the tuned-lens training record {path} holds no translators_sha256; remove {path.parent} "
                         "to train the translators again")
    return record


def read_translators(path: Path, sha256: str, n: int, d: int) -> Translators:
    """The translators saved in ``path``, whose bytes must have the sha256 recorded when they were saved and hold
    exactly the keys and shapes of ``n`` translators of width ``d``; one ProbeError line naming the file otherwise
    (an edited, damaged or cut file)."""
    from safetensors.torch import load

    again = f"remove {path.parent} to train the translators again"
    try:
        data = read_regular(path)
    except OSError as e:
        raise ProbeError(f"cannot read the tuned-lens translators {path}: {e.strerror or e}; {again}") from None
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ProbeError(f"the tuned-lens translators {path} are not the ones trained (their sha256 differs from "
                         f"the one in train_config.json: edited or damaged); {again}")
    translators = Translators(n, d)
    try:
        translators.load_state_dict(load(data))
    except Exception as e:  # noqa: BLE001 (safetensors' SafetensorError, torch's RuntimeError on keys or shapes)
        raise ProbeError(f"the tuned-lens translators {path} are not {n} translators of width {d} "
                         f"({' '.join(str(e).split())[:200]}); {again}") from None
    return translators


def _plain(value):
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _short(value) -> str:
    text = json.dumps(_plain(value), sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def translator_bytes(translators: Translators) -> bytes:
    """The translators as safetensors bytes (keys "{l}.weight", "{l}.bias", float32)."""
    from safetensors.torch import save

    return save({k: v.detach().float().contiguous().cpu() for k, v in translators.state_dict().items()})
