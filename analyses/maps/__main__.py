"""``python -m analyses.maps``."""

from analyses.maps import ANALYSIS

ANALYSIS.main()
