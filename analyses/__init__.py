"""analyses: one module per analysis; each reads cached Activations (or
probes.models.lm / probes.capture.timing outputs) and
writes results and figures. Analyses never run a model themselves and never import recipes/."""
