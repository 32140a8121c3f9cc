"""analyses: one module per analysis; each reads cached Activations (or probes.models.lm /
probes.capture.timing outputs) and writes results and figures. Analyses never run a model themselves
and never import recipes/.

The one contract every entry of :data:`ANALYSES` keeps (checked once for all by tests/test_contract.py):

* ``Config``: a dataclass that composes the shared option groups (:class:`analyses.common.AnalysisConfig`:
  models, corpus, run settings, sentence bounds) and adds the analysis's own; its CLI accepts every
  shared flag (one that cannot apply is refused with one ``error:`` line when given a non-default value);
* ``load_inputs(model, cfg) -> dict``: the only place the analysis asks probes for activations or an LM
  (``model``: a name or resolved CheckpointSpec; a pairwise analysis takes the pair);
* ``compute(cfg, **inputs) -> Result``: a :class:`analyses.common.AnalysisResult` with one ``identity``
  (model as requested and as resolved, corpus identity or the caller's texts, the settings used) that
  round-trips through JSON (``Result.from_json(r.to_json())``);
* ``table_rows(result)``, ``figures(results, out)`` and ``main(argv)`` (``python -m analyses.<name>``,
  :func:`analyses.data.run_analysis`).

    $ python -c "import analyses; print(analyses.get('anisotropy').compute)"
"""

from __future__ import annotations

import importlib
from types import ModuleType

# name -> module path; `python -m analyses.<name>` runs each
ANALYSES = {
    "anisotropy": "analyses.anisotropy",
    "transitions": "analyses.transitions",
    "redundancy": "analyses.redundancy",
    "similarity": "analyses.similarity",
    "probing": "analyses.probing",
    "maps": "analyses.maps",
    "mog": "analyses.mog",
    "mog_lens": "analyses.mog_lens",
    "perplexity": "analyses.perplexity",
    "topics": "analyses.topics",
    "speed": "analyses.speed",
}


def get(name: str) -> ModuleType:
    """The analysis module registered as ``name`` (imported on first use)."""
    if name not in ANALYSES:
        raise KeyError(f"no analysis {name!r}; analyses: {', '.join(ANALYSES)}")
    return importlib.import_module(ANALYSES[name])
