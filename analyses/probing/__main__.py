"""``python -m analyses.probing``."""

from analyses.probing import main
from probes.config import run_main

run_main(main)
