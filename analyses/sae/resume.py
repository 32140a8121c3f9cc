"""One SAE of the analysis: trained, or, with ``--save``, resumed from the folder an earlier run saved it in.

With ``--save`` each SAE lives in ``<out>/sae/<model>/layer<l>-seed<s>/`` (:mod:`analyses.sae.io`). Where that
folder exists, :func:`trained_or_resumed` loads it with :func:`analyses.sae.io.load_sae` (its checksums, its cfg.json
against its weights, the model's fingerprint and the layer) instead of training again:

* a folder that fails those checks (another model or layer, an edited or truncated file, a cfg.json that does not
  match its weights) is refused: a :class:`probes.errors.ProbeError` (one ``error:`` line, exit 2, on the command
  line), never silently overwritten;
* a sound folder whose recorded training differs from the run's (the SAE's shape: kind, d, width, k; the optimiser's
  settings: steps, learning rate, batch, L1 / L0 coefficients, dead window, seed, ...; the streaming buffer; the
  training sentences and tokens; special tokens kept or not), or that records no training (saved before it was
  recorded), is trained again and overwritten, with one line on stderr naming what differs;
* otherwise the saved SAE is the run's: its scale, final loss and dead latents are read from its record, nothing is
  trained, and every number computed from it equals the first run's.

    $ python -m analyses.sae --model tiny-bert --layers 1 --k 4 --width 64 --steps 60  # twice: the second resumes
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from collections.abc import Callable
from pathlib import Path

from analyses.sae.io import WEIGHTS, SaeRecord, load_sae, save_sae
from analyses.sae.model import SaeShape
from analyses.sae.train import Trained
from probes.checkpoints.identity import file_sha
from probes.config import tqdm_class
from probes.errors import ProbeError

# the record's fields a resumed SAE must share with the run (besides its shape); model and layer: load_sae checks
COMPARED = ("seed", "steps", "special_tokens", "settings", "buffer_tokens", "train_sentences", "n_train_tokens")


def differences(saved: SaeRecord, shape_saved: SaeShape, wanted: SaeRecord, shape: SaeShape) -> list[str]:
    """The names of what differs between a saved SAE and the one the run would train (empty: it is the run's)."""
    if saved.settings is None or saved.final_loss is None or saved.dead_in_training is None:
        return ["its training, which it does not record (saved before runs resumed)"]
    out = [f.name for f in dataclasses.fields(shape) if getattr(shape_saved, f.name) != getattr(shape, f.name)]
    for name in COMPARED:
        a, b = getattr(saved, name), getattr(wanted, name)
        if name == "settings" and b is not None:
            out += [f.name for f in dataclasses.fields(b) if getattr(a, f.name) != getattr(b, f.name)]
        elif a != b:
            out.append(name)
    return list(dict.fromkeys(out))


def weights_sha256(sae) -> str:
    """The sha256 of the safetensors file :func:`analyses.sae.io.save_sae` writes for ``sae``."""
    from safetensors.torch import save

    return hashlib.sha256(save(sae.tensors())).hexdigest()


def trained_or_resumed(folder: Path | None, wanted: SaeRecord, shape: SaeShape,
                       train: Callable[[], Trained]) -> tuple[Trained, str, bool]:
    """(the SAE, the sha256 of its weights file, whether it was resumed). ``folder`` None: trained and not saved;
    otherwise resumed from ``folder`` where it holds this SAE (see the module docstring), else trained and saved there
    with ``wanted`` (the run's record; its scale and training outcome filled in)."""
    if folder is not None and folder.exists():
        try:
            sae, saved = load_sae(folder, fingerprint=wanted.fingerprint, layer=wanted.layer)
        except ProbeError as e:
            raise ProbeError(f"{e} (--save resumes from {folder}: remove it, or give another --out, to train "
                             "anew)") from None
        diff = differences(saved, sae.shape, wanted, shape)
        if not diff:
            assert saved.final_loss is not None and saved.dead_in_training is not None
            tqdm_class().write(f"sae: {folder}: resumed (trained before as this run would train it)", file=sys.stderr)
            return (Trained(sae=sae, scale=saved.scale, dead_at_end=saved.dead_in_training,
                            final_loss=saved.final_loss), file_sha(folder / WEIGHTS), True)
        tqdm_class().write(f"sae: {folder}: the saved SAE differs from this run's in {', '.join(diff)}; training it "
                           "again", file=sys.stderr)
    trained = train()
    if folder is None:
        return trained, weights_sha256(trained.sae), False
    record = dataclasses.replace(wanted, scale=trained.scale, final_loss=trained.final_loss,
                                 dead_in_training=trained.dead_at_end)
    return trained, save_sae(trained.sae, folder, record), False
