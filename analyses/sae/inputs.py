"""What the SAE analysis reads: the sentence sample's states and, with ``--splice``, the model with its head
(:class:`probes.capture.objective.Objective`), to score its own loss with each SAE spliced in
(:mod:`analyses.sae.splice`). A model without a head (a bare encoder object, a family this suite scores no
objective for) gets the reconstruction statistics only; the result says why."""

from __future__ import annotations

import dataclasses
import sys

from analyses.inputs import Sentences, is_object
from probes.capture.store import USER_CACHE
from probes.config import tqdm_class


@dataclasses.dataclass(frozen=True)
class SaeInputs(Sentences):
    """Sentences' ``acts``, plus ``objective`` (None without ``cfg.splice`` or without a head) and
    ``objective_skipped`` (why there is none)."""

    def load(self, unit: tuple, cfg) -> dict:
        return {**super().load(unit, cfg), **objective_of(unit[0], cfg)}

    def from_python(self, model, texts, cfg, *, tokenizer=None, name=None, cache_dir=USER_CACHE) -> dict:
        inputs = super().from_python(model, texts, cfg, tokenizer=tokenizer, name=name, cache_dir=cache_dir)
        return {**inputs, **objective_of(model, cfg, tokenizer, name)}


def objective_of(model, cfg, tokenizer=None, name=None) -> dict:
    """``{"objective": ..., "objective_skipped": None}``, or None and the reason (said on stderr when the model
    has no head; --no-splice: not loaded)."""
    from probes.capture.objective import NoObjective, load_objective

    if not cfg.splice:
        return {"objective": None, "objective_skipped": "--no-splice"}
    try:
        return {"objective": load_objective(model, tokenizer=tokenizer if is_object(model) else None,
                                            name=name if is_object(model) else None, device=cfg.device),
                "objective_skipped": None}
    except NoObjective as e:
        tqdm_class().write(f"sae: {e}; the SAEs are not spliced into the model", file=sys.stderr)
        return {"objective": None, "objective_skipped": str(e)}
