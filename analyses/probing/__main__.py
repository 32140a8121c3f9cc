"""``python -m analyses.probing``."""

from analyses.probing import main

main()
