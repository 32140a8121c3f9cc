"""``python -m analyses.maps``."""

from analyses.maps import main

main()
