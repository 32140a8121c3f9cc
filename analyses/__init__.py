"""analyses: one module per analysis, each ending in one declaration, ``ANALYSIS = Analysis(...)``
(:mod:`analyses.analysis`): its kind of input (:mod:`analyses.inputs`, which owns the options that apply and
how inputs are made), its Config, ``compute(cfg, **inputs) -> Result``, ``table_rows``, its figures with their
captions and the tiny run the contract test makes. The command line (``python -m analyses.<name>``,
``probes <name>``), the Python call (``<name>.run(model, texts)``), ``probes figures``, the report and
tests/test_contract.py all read the declarations listed in :data:`ANALYSES`: adding an analysis is one module
and one line here (docs/adding-an-analysis.md).

Analyses read cached Activations (or an LM, or models built for timing) and never import recipes/; the LM
analyses' ``compute`` runs the LM it is given, and speed's times its runners.

    $ python -c "import analyses; print(analyses.get('anisotropy').compute)"
"""

from __future__ import annotations

import importlib

# name -> the module that declares it (imported on first use: ``probes --help`` imports none of them)
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
    "mlm_loss": "analyses.mlm_loss",
    "lens": "analyses.lens",
    "intrinsic_dimension": "analyses.intrinsic_dimension",
    "isoscore": "analyses.isoscore",
    "causal_probing": "analyses.causal_probing",
    "sae": "analyses.sae",
}


def get(name: str):
    """The :class:`~analyses.analysis.Analysis` registered as ``name`` (its module imported on first use)."""
    if name not in ANALYSES:
        raise KeyError(f"no analysis {name!r}; analyses: {', '.join(ANALYSES)}")
    return importlib.import_module(ANALYSES[name]).ANALYSIS
