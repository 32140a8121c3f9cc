"""An SAE's latents as the states of an analysis: probing on a dictionary's features instead of a layer's states.

:func:`latents` turns one layer of a model's activations into activations of one "layer" (layer 0) whose token
states are the SAE's latents z = encode(x) of that layer's token states, (N, width), and whose sentence vectors are
the latents of the model's sentence vector at that layer (encode(s): for a [CLS], sentence-node or last-token
vector a state of the kind the SAE was trained on; for mean pooling the SAE's reading of the mean state). Any
analysis of a sentence sample takes them as ``acts=``; the probing protocol runs on them unchanged, its token tasks
with their control tasks (Hewitt & Liang), so the selectivity of a dictionary's features sits beside the layer's::

    from analyses import probing
    from analyses.sae import latents
    result = probing.compute(probing.Config(task=["position"]), acts=latents(acts, sae, layer=2))

The model's name becomes ``<model>+sae@<layer>`` (results and their files are never mistaken for the model's own),
and ``meta["sae"]`` records the layer, the SAE's kind, width, k and the sha256 of its weights. NaN or inf states
are refused in one line, as the SAE analysis refuses them.

    $ python -c "from analyses.sae.latents import latent_name; print(latent_name('bert-small', 2))"
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib

import numpy as np
import torch

from analyses.model_info import ModelInfo
from analyses.sae.model import SAE
from probes.capture.activations import Activations, layer_index
from probes.errors import ProbeError


def latent_name(model: str, layer: int) -> str:
    """The name of a model's SAE latents at ``layer`` as a model of their own."""
    return f"{model}+sae@{layer}"


@torch.no_grad()
def encode(sae: SAE, X: np.ndarray, what: str, block: int = 4096) -> np.ndarray:
    """(n, width) float32 latents of the rows of ``X`` (n, d); ProbeError naming ``what`` on a width other than the
    SAE's or on NaN or inf."""
    X = np.asarray(X, np.float32)
    if X.ndim != 2 or X.shape[1] != sae.shape.d_in:
        raise ProbeError(f"{what}: states of width {X.shape[-1]}, but the SAE reads states of width {sae.shape.d_in} "
                         "(an SAE of another model?)")
    bad = int((~np.isfinite(X)).any(1).sum())
    if bad:
        raise ProbeError(f"{what}: {bad} of {len(X)} states hold NaN or inf; the SAE cannot encode them")
    out = np.empty((len(X), sae.shape.width), np.float32)
    for s in range(0, len(X), block):
        out[s:s + block] = sae.encode(torch.from_numpy(X[s:s + block])).numpy()
    return out


def latents(acts: Activations, sae: SAE, layer: int) -> Activations:
    """``acts`` at ``layer`` (0 = embeddings, -1 = last) read through ``sae``: activations of one layer holding the
    latents of every token (hidden (1, N, width)) and of every sentence vector (sentence (1, T, width))."""
    lyr = layer_index(layer, acts.n_layers, f"layer {layer}")
    meta = copy.deepcopy(acts.meta)
    model = ModelInfo.from_json(meta.pop("model"))
    name = model.name
    hidden = encode(sae, np.asarray(acts.layer_hidden(lyr)), f"{name} layer {lyr} token states")  # (N, m)
    sentence = encode(sae, acts.sentence[lyr], f"{name} layer {lyr} sentence vectors")  # (T, m)
    from safetensors.torch import save

    meta["model"] = dataclasses.replace(model, name=latent_name(name, lyr)).to_json()
    meta["sae"] = {"layer": lyr, "kind": sae.shape.kind, "width": sae.shape.width, "k": sae.shape.k,
                   "weights_sha256": hashlib.sha256(save(sae.tensors())).hexdigest(),
                   "states": "layer 0 holds the SAE's latents of the model's layer; there are no other layers"}
    return Activations(meta=meta, texts=list(acts.texts), tokens=[list(t) for t in acts.tokens],
                       offsets=np.asarray(acts.offsets).copy(), token_ids=np.asarray(acts.token_ids).copy(),
                       special=np.asarray(acts.special).copy(), hidden=hidden[None], sentence=sentence[None])
