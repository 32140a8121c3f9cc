"""``python -m analyses.probing``."""

from analyses.probing import ANALYSIS

ANALYSIS.main()
