"""Activation patching by row of the batch, the usual layout: one clean prompt patched into several corrupted ones
(its states broadcast to every row) or one prompt patched from several sources (source i to row i) gives the
logits of a hand-written forward hook to 1e-6 on tiny-gpt2; a batch in another order than the targets', or of
another size, is one error line; patching the prompt and then generating patches the prompt positions only
(greedy generation with and without a KV cache equals the hand-written hook's), and a patch keyed by token ids
refuses a KV-cache step in one line. Seconds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import probes
from probes.errors import ProbeError
from probes.intervention import Intervention, Patch, hooked
from probes.models.lm import load_lm

CLEAN = "the cat sat on the mat"
CORRUPTED = ["a dog ran in the park", "one bird flew over a tree"]
LAYER = 1  # hidden[1]: the output of GPT-2's block 0


@pytest.fixture(scope="module")
def lm():
    return load_lm("tiny-gpt2")


def _ids(lm, texts) -> torch.Tensor:
    ids = [lm.encode(t) for t in texts]
    assert len({len(i) for i in ids}) == 1, "the test's prompts must be of one length"
    return torch.tensor(ids)  # (B, n)


def _hidden(lm, texts) -> torch.Tensor:
    with torch.no_grad():
        return lm.model(input_ids=_ids(lm, texts), output_hidden_states=True).hidden_states[LAYER]  # (B, n, d)


def _by_hand(lm, ids, replace, **generate):
    """The logits (or greedy generation) of ``ids`` with block 0's output overwritten by ``replace(out)`` (B, n, d),
    in the first forward pass only (the prompt's): a plain forward hook, as one writes it without the suite."""
    calls = []

    def hook(module, args, output):
        calls.append(1)
        if len(calls) > 1:
            return None
        h = output[0] if isinstance(output, tuple) else output
        h = replace(h.clone())
        return (h, *output[1:]) if isinstance(output, tuple) else h

    handle = lm.model.transformer.h[0].register_forward_hook(hook)
    try:
        with torch.no_grad():
            if generate:
                return lm.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                         **generate)
            return lm.model(input_ids=ids).logits
    finally:
        handle.remove()


def _patched(lm, ids, patch, **generate):
    with torch.no_grad(), hooked(lm, Intervention(LAYER, patch)):
        if generate:
            return lm.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False, **generate)
        return lm.model(input_ids=ids).logits


def test_one_clean_source_broadcast_to_every_corrupted_prompt_matches_a_hand_written_hook(lm):
    clean = _hidden(lm, [CLEAN])[0]  # (n, d)
    ids = _ids(lm, CORRUPTED)
    targets = [lm.encode(t) for t in CORRUPTED]
    for positions, where in ((None, slice(None)), ([-1], slice(-1, None)), ([1, 2], slice(1, 3))):
        patch = Patch([clean], positions=positions, targets=targets)

        def replace(h, where=where):
            h[:, where] = clean[where]
            return h

        want = _by_hand(lm, ids, replace)
        got = _patched(lm, ids, patch)
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
        if positions is not None:
            assert (got - _patched(lm, ids, Patch([clean], targets=targets))).abs().max() > 1e-3  # positions matter
    # from two extractions: the one clean text is given to both corrupted ones, by row
    acts = probes.extract("tiny-gpt2", CORRUPTED, cache_dir=None, progress=False, cache_dtype="float32")
    built = Patch.from_activations(acts, probes.extract("tiny-gpt2", [CLEAN], cache_dir=None, progress=False,
                                                        cache_dtype="float32"), LAYER, positions=[-1])
    assert built.by_row and len(built.sources) == 1
    np.testing.assert_allclose(built.sources[0], clean.numpy(), atol=1e-6)


def test_one_prompt_from_several_sources_gives_row_i_source_i(lm):
    sources = _hidden(lm, CORRUPTED)  # (2, n, d)
    ids = _ids(lm, [CLEAN, CLEAN])

    def replace(h):
        h[:, -1] = sources[:, -1]
        return h

    patch = Patch(list(sources), positions=[-1], targets=[lm.encode(CLEAN)] * 2)
    got = _patched(lm, ids, patch)
    torch.testing.assert_close(got, _by_hand(lm, ids, replace), atol=1e-6, rtol=0)
    assert (got[0] - got[1]).abs().max() > 1e-3  # the two rows did get different sources
    # the suite's extraction of the same layout: text t's patched position holds source t's state (A3)
    target = probes.extract("tiny-gpt2", [CLEAN, CLEAN], cache_dir=None, progress=False, cache_dtype="float32")
    source = probes.extract("tiny-gpt2", CORRUPTED, cache_dir=None, progress=False, cache_dtype="float32")
    auto = Patch.from_activations(target, source, LAYER, positions=[-1])
    assert auto.by_row and len(auto.sources) == 2
    edited = probes.extract("tiny-gpt2", [CLEAN, CLEAN], cache_dir=None, progress=False, cache_dtype="float32",
                            intervention=Intervention(LAYER, auto))
    h, o = np.asarray(edited.layer_hidden(LAYER)), edited.offsets
    for t in range(2):
        np.testing.assert_allclose(h[o[t + 1] - 1], sources[t, -1].numpy(), atol=1e-5)
        np.testing.assert_allclose(h[o[t]:o[t + 1] - 1], np.asarray(target.layer_hidden(LAYER))[o[t]:o[t + 1] - 1],
                                   atol=1e-5)


def test_a_batch_in_another_order_or_size_is_one_error_line(lm):
    sources = list(_hidden(lm, CORRUPTED))
    patch = Patch(sources, targets=[lm.encode(t) for t in CORRUPTED])
    with pytest.raises(ProbeError, match="row 0 of this forward pass is not target 0"):
        _patched(lm, _ids(lm, CORRUPTED[::-1]), patch)
    with pytest.raises(ProbeError, match="holds 2 sources and this forward pass ran 3 rows"):
        _patched(lm, _ids(lm, [*CORRUPTED, CLEAN]), patch)
    with pytest.raises(ProbeError, match="2 sources and 3 targets"):
        Patch(sources, targets=[lm.encode(t) for t in [*CORRUPTED, CLEAN]])
    with pytest.raises(ProbeError, match="patch position 40"):
        _patched(lm, _ids(lm, CORRUPTED), Patch(sources, positions=[40]))


def test_patching_the_prompt_then_generating_patches_the_prompt_positions_only(lm):
    clean = _hidden(lm, [CLEAN])[0]  # (n, d)
    ids = _ids(lm, CORRUPTED)
    patch = Patch([clean], positions=[-1], targets=[lm.encode(t) for t in CORRUPTED])

    def replace(h):
        h[:, -1] = clean[-1]
        return h

    want = _by_hand(lm, ids, replace, max_new_tokens=5)  # the prompt's pass only: the KV cache holds the rest
    plain = _patched(lm, ids, Patch([clean], positions=[0], targets=[lm.encode(t) for t in CORRUPTED]),
                     max_new_tokens=5)
    for use_cache in (True, False):  # without the cache, every pass re-runs the prompt: patched again, the same
        got = _patched(lm, ids, patch, max_new_tokens=5, use_cache=use_cache)
        assert got.tolist() == want.tolist()
    assert plain.tolist() != want.tolist()  # which position is patched changes what is generated
    keyed = Patch({tuple(lm.encode(t)): clean.numpy() for t in CORRUPTED}, positions=[-1])
    torch.testing.assert_close(_patched(lm, ids, keyed), _patched(lm, ids, patch), atol=1e-6, rtol=0)
    with pytest.raises(ProbeError, match="KV cache"):
        _patched(lm, ids, keyed, max_new_tokens=3)


def test_a_left_padded_batch_of_prompts_of_different_lengths_generates_what_each_prompt_alone_does(lm):
    """Generation pads on the left: each row's positions are counted over its real tokens, in the prompt's pass
    and in every KV-cache step after it (the mask covers the cached positions)."""
    a, b = lm.encode(CORRUPTED[0]), lm.encode("one bird flew over the old tree by the river")
    sources = [_hidden(lm, [CLEAN])[0], _hidden(lm, ["it was a long and quiet night in the town"])[0]]
    n = max(len(a), len(b))
    assert len(a) != len(b)
    ids = torch.tensor([[0] * (n - len(t)) + t for t in (a, b)])
    mask = torch.tensor([[0] * (n - len(t)) + [1] * len(t) for t in (a, b)])
    patch = Patch(sources, positions=[-1], targets=[a, b])
    with torch.no_grad(), hooked(lm, Intervention(LAYER, patch)):
        batched = lm.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=4, do_sample=False,
                                    pad_token_id=0)[:, n:]
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # as generate gives a left-padded row its positions
        first = lm.model(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, -1]  # (2, V)
    for row, (t, s) in enumerate(((a, sources[0]), (b, sources[1]))):
        alone = _patched(lm, torch.tensor([t]), Patch([s], positions=[-1], targets=[t]), max_new_tokens=4)
        assert batched[row].tolist() == alone[0, len(t):].tolist()
        want = _patched(lm, torch.tensor([t]), Patch([s], positions=[-1], targets=[t]))[0, -1]
        torch.testing.assert_close(first[row], want, atol=1e-5, rtol=0)
        with torch.no_grad():
            plain = lm.model(input_ids=torch.tensor([t])).logits[0, -1]
        assert (plain - want).abs().max() > 1e-3  # the patch changed the prompt's last position
