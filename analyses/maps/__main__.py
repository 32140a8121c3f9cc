"""``python -m analyses.maps``."""

from analyses.maps import main
from probes.config import run_main

run_main(main)
