"""analyses: one module per analysis; each reads cached Activations (or probes.lm / probes.timing outputs) and
writes results and figures. Analyses never run a model themselves and never import recipes/."""
