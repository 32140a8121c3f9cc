"""``python -m analyses.similarity``."""

from analyses.similarity import ANALYSIS

ANALYSIS.main()
