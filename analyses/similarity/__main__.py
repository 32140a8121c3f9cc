"""``python -m analyses.similarity``."""

from analyses.similarity import main
from probes.config import run_main

run_main(main)
