"""``python -m analyses.similarity``."""

from analyses.similarity import main

main()
