"""``python -m analyses.causal_probing``."""

from analyses.causal_probing import ANALYSIS

ANALYSIS.main()
