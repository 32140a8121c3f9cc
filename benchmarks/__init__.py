"""Benchmarks (timings, not tests): ``python -m benchmarks`` runs them all and prints a summary table."""
