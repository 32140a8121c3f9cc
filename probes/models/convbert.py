"""ConvBERT's span-based dynamic convolution kernels, captured as banded (heads, n, n) maps.

ConvBERT's mixed attention (paper §3.2-3.3, Eq. 4-6) concatenates H self-attention heads with H
convolution heads (H = num_attention_heads // head_ratio). A convolution head h at position i
mixes the values of the k positions i - p .. i + p (p = (k - 1) // 2) with a kernel generated from
the local span around i:

    w[b, i, h, :] = softmax(W_f (Q ⊙ K_s))[b, i, h*k:(h+1)*k]      # (k,), sums to 1
    out[b, i, h]  = sum_m w[b, i, h, m] * V[b, i + m - p, h]         # V = conv_out_layer(X)

In Hugging Face's ``ConvBertSelfAttention`` the logits come from the Linear ``conv_kernel_layer``
as (B, n, H*k) and are reshaped to [-1, k, 1] (rows in (b, i, h) order), softmaxed over the k
offsets, and applied to ``nn.functional.unfold`` of the values with zero padding p on both ends.
:class:`ConvKernelCapture` hooks ``conv_kernel_layer`` and writes the same weights into a dense
banded map, so the kernels sit beside the attention heads:

    M[b, h, i, j] = w[b, i, h, j - i + p]   for |j - i| <= p and 0 <= j < n;  0 elsewhere

and ``M[b, h] @ V[b, :, h]`` equals the convolution half of the layer's output exactly.

**Sequence edges.** The unfold zero-pads: near the first and last p positions some offsets
point outside the sequence, and their weights multiply zeros. The map keeps exactly that: those
weights are dropped, *not renormalised*, so a row sums to 1 in the interior and to less than 1
within p of either edge (the missing mass is what the model gave to the zero padding).

**Padding leaks.** The convolution branch applies no attention mask: the span-aware key
(``key_conv_attn_layer``, a depth-wise separable convolution) and the values at pad positions are
ordinary projections of the pad tokens' states, so with right padding the last p real tokens of a
shorter text see pad tokens, and their outputs (and kernels) change. That holds at layer 1 only:
from layer 2 on *every* real token is affected, because the changed states reach all tokens
through the (masked, but global) self-attention heads, and the convolution's reach grows by p per
layer (in the random ``tiny-convbert``, a 9-token text padded to 34 changes its first 5 tokens by
~1e-9 at layer 1, noise, but by ~2e-5 at layer 2; its last 4 by ~1e-2). ``padding_safe = False``
tells the activation capture to batch only texts of equal length (no padding at all), so no
result is affected; the maps are the ones of the padded sequence as run (pad rows and columns are
not masked).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import torch

from probes.models.encoder import MapSpec

MAP_NAME = "conv_kernel"
# the version of the kernel maps computed here: in every cache key of a ConvBERT model; bump it when a change
# alters the maps (tests/test_forward_versions.py pins a seeded model's numbers to it)
FORWARD_VERSION = 1


def banded_kernel_maps(logits: torch.Tensor, heads: int, kernel_size: int) -> torch.Tensor:
    """Kernel logits (B, n, heads*k), as ``conv_kernel_layer`` returns them -> banded maps (B, heads, n, n).

    Softmax over the k offsets per (position, head), exactly as ConvBertSelfAttention does; weights
    of offsets that fall outside the sequence are dropped (the convolution multiplies them by zero
    padding), never renormalised."""
    B, n, _ = logits.shape
    k, p = kernel_size, (kernel_size - 1) // 2
    w = torch.softmax(logits.float().reshape(B, n, heads, k), dim=-1)  # (B, n, H, k): HF's [-1, k, 1] rows
    maps = logits.new_zeros((B, heads, n, n), dtype=torch.float32)
    i = torch.arange(n, device=logits.device)
    for m in range(k):
        j = i + m - p  # key position of offset m for query i
        ok = (j >= 0) & (j < n)
        maps[:, :, i[ok], j[ok]] = w[:, i[ok], :, m].transpose(1, 2)  # (B, H, n_ok)
    return maps


class ConvKernelCapture:
    """Forward hooks on every layer's ``attention.self.conv_kernel_layer`` of a Hugging Face ConvBERT.

    Built as ``ConvKernelCapture(model)`` by ``probes.models.hf`` (see ``MAP_CAPTURES``); ``capture`` is a
    context manager yielding a dict that holds ``{"conv_kernel": (L, B, H_conv, n, n)}`` once the
    forward pass inside it has finished."""

    padding_safe = False  # the convolution branch ignores the attention mask (see the module docstring)

    def __init__(self, model: torch.nn.Module):
        self.model = model
        encoder: Any = model.encoder  # a transformers ConvBertEncoder (nn.Module attributes are untyped)
        self.layers = [layer.attention.self for layer in encoder.layer]
        first = self.layers[0]
        self.heads = int(first.num_attention_heads)  # after head_ratio: num_attention_heads // head_ratio
        self.kernel_size = int(first.conv_kernel_size)

    def specs(self) -> dict[str, MapSpec]:
        return {MAP_NAME: MapSpec(
            layers=len(self.layers), k=self.heads, token_axes=2,
            description=(f"ConvBERT span-based dynamic convolution kernels (k={self.kernel_size}) as banded "
                         f"maps: [l, h, i, j] = softmax weight of offset j - i (|j - i| <= "
                         f"{(self.kernel_size - 1) // 2}) for query i in convolution head h; offsets outside "
                         "the sequence multiply zero padding and are dropped, not renormalised"))}

    @contextmanager
    def capture(self, attention_mask: torch.Tensor | None = None):
        """Yield a dict; after the forward pass run inside the block it holds the stacked maps.

        ``attention_mask`` is accepted for the MAP_CAPTURES interface but not applied: the maps
        are the kernels the model used on the (possibly padded) sequence it was given."""
        logits: dict[int, torch.Tensor] = {}
        handles = [mod.conv_kernel_layer.register_forward_hook(self._hook(logits, layer))
                   for layer, mod in enumerate(self.layers)]
        maps: dict[str, torch.Tensor] = {}
        try:
            yield maps
        finally:
            for h in handles:
                h.remove()
        if len(logits) == len(self.layers):
            maps[MAP_NAME] = torch.stack([banded_kernel_maps(logits[layer], self.heads, self.kernel_size)
                                          for layer in range(len(self.layers))])

    @staticmethod
    def _hook(store: dict, layer: int):
        def hook(module, inputs, output):
            store[layer] = output.detach()

        return hook
