"""``python -m analyses.sae``."""

from analyses.sae import ANALYSIS

ANALYSIS.main()
