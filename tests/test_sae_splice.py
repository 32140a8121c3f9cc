"""An SAE spliced into the forward pass (analyses.sae.splice): a reconstruction that is exact recovers all of the
loss (1) with KL 0, one that outputs 0 recovers none of it (0, as the zero ablation), and the spliced loss is the
loss of a brute-force splice (a plain forward hook on the layer's module, texts run one at a time) to 1e-6, for a
causal LM (next-token loss) and a masked LM (MLM loss at the objective's masked positions). The edit is keyed by
its SAE's weights and reads the weights it was built with."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from analyses.sae.model import SAE, SaeShape
from analyses.sae.splice import Reconstruct, Zero, splice_stats, splice_sums
from analyses.sae.train import TrainSettings, train_sae
from probes.capture.objective import MASKED, load_objective, mask_positions
from probes.errors import ProbeError
from probes.intervention import Intervention

TEXTS = ["The cat sat on the mat.", "A dog ran far away from home today.", "Rain fell on the old town all night.",
         "She read the letter twice and smiled.", "Numbers like 42 and 7 are small.", "Birds sing at dawn."]


def exact_sae(d: int) -> SAE:
    """A ReLU SAE of width 2d that reconstructs every x exactly: z = relu([x, -x]), x_hat = z [I; -I] = x."""
    sae = SAE(SaeShape("relu", d, 2 * d))
    eye = torch.eye(d)
    with torch.no_grad():
        sae.W_enc.copy_(torch.cat([eye, -eye], 1))
        sae.W_dec.copy_(torch.cat([eye, -eye], 0))
        sae.b_enc.zero_()
        sae.b_dec.zero_()
    return sae


def zero_sae(d: int) -> SAE:
    sae = SAE(SaeShape("topk", d, 4, 2))
    with torch.no_grad():
        for p in sae.parameters():
            p.zero_()
    return sae


def layer_modules(model) -> list[torch.nn.Module]:
    """The layer modules whose outputs are hidden[1..L-1] (GPT-2's blocks, BERT's layers)."""
    base = model.base_model
    return list(base.h) if hasattr(base, "h") else list(base.encoder.layer)


def brute_force_sums(objective, texts, layer: int, sae: SAE | None, mask_prob=0.15, seed=0) -> np.ndarray:
    """Each text's loss sum with layer ``layer``'s output replaced by ``sae``'s reconstruction (None: clean), by a
    plain forward hook, one text per forward pass (no padding)."""
    module = layer_modules(objective.model)[layer - 1]

    def hook(mod, args, out):
        h = out if isinstance(out, torch.Tensor) else out[0]
        new = sae(h.float())[0].to(h.dtype)
        return new if isinstance(out, torch.Tensor) else (new, *out[1:])

    handle = module.register_forward_hook(hook) if sae is not None else None
    sums = []
    try:
        with torch.no_grad():
            for tok in objective.tokenizer.tokenize(texts):
                ids = torch.tensor([tok.ids])
                mask = torch.ones_like(ids)  # as the objective calls it (BERT's attention differs in the last bits)
                if objective.kind == MASKED:
                    where = torch.from_numpy(mask_positions(tok.ids, tok.special, mask_prob, seed))[None]
                    logits = objective.model(input_ids=ids.masked_fill(where, objective.mask_id),
                                             attention_mask=mask).logits
                    target, keep = ids, where
                else:
                    logits = objective.model(input_ids=ids, attention_mask=mask).logits[:, :-1]
                    target, keep = ids[:, 1:], torch.ones_like(ids[:, 1:], dtype=torch.bool)
                # the cross-entropy of the scored positions' logits in rows (float32's last bits depend on the
                # layout the log-softmax runs over: this is the objective's)
                nll = torch.nn.functional.cross_entropy(logits[keep].float(), target[keep], reduction="none")
                nll = nll.double().sum()
                sums.append(float(nll))
    finally:
        if handle is not None:
            handle.remove()
    return np.array(sums)


def layer_states(objective, texts, layer: int) -> np.ndarray:
    """(tokens, d) the layer's output states on ``texts`` (a forward hook), for training an SAE on."""
    got = []
    module = layer_modules(objective.model)[layer - 1]
    handle = module.register_forward_hook(lambda m, a, out: got.append(
        (out if isinstance(out, torch.Tensor) else out[0])[0].detach().float()))
    try:
        with torch.no_grad():
            for tok in objective.tokenizer.tokenize(texts):
                objective.model(input_ids=torch.tensor([tok.ids]))
    finally:
        handle.remove()
    return torch.cat(got).numpy()


@pytest.fixture(scope="module", params=["tiny-gpt2", "tiny-bert"])
def objective(request):
    return load_objective(request.param)


def d_of(objective) -> int:
    return int(objective.model.config.hidden_size)


def test_an_exact_reconstruction_recovers_all_the_loss_with_kl_zero(objective):
    sums = splice_sums(objective, TEXTS, 1, Reconstruct(exact_sae(d_of(objective))), batch_size=4)
    out = splice_stats(sums, resamples=50, seed=0)
    assert np.allclose(sums.spliced, sums.clean, atol=1e-5)
    assert out.loss_recovered == pytest.approx(1.0, abs=1e-5)
    assert out.kl == pytest.approx(0.0, abs=1e-7) and out.loss_zero != pytest.approx(out.loss_clean)


def test_a_reconstruction_of_zeros_recovers_none_of_it(objective):
    sums = splice_sums(objective, TEXTS, 1, Reconstruct(zero_sae(d_of(objective))), batch_size=4)
    out = splice_stats(sums, resamples=50, seed=0)
    assert np.array_equal(sums.spliced, sums.zero)
    assert out.loss_recovered == 0.0 and out.kl > 0


def test_the_spliced_loss_equals_a_brute_force_hook(objective):
    rng = torch.Generator().manual_seed(3)
    d = d_of(objective)
    sae = SAE(SaeShape("topk", d, 4 * d, 4), generator=rng)
    with torch.no_grad():
        sae.b_dec.copy_(torch.from_numpy(layer_states(objective, TEXTS, 1).mean(0)))
    sums = splice_sums(objective, TEXTS, 1, Reconstruct(sae), batch_size=1)  # batches of one, as the hook's
    brute = brute_force_sums(objective, TEXTS, 1, sae)
    clean = brute_force_sums(objective, TEXTS, 1, None)
    n = sums.counts.sum()
    assert np.allclose(sums.spliced / n, brute / n, atol=1e-6, rtol=0)
    assert np.allclose(sums.clean / n, clean / n, atol=1e-6, rtol=0)
    assert not np.allclose(brute, clean, atol=1e-3)  # the splice changes the loss: the comparison can fail


def test_loss_recovered_on_gpt2_small_base_equals_a_brute_force_splice():
    """A small TopK SAE trained on gpt2-small-base's layer-2 states: loss recovered and KL from the intervention
    API equal those of a plain hook to 1e-6 (batches of three texts, right-padded), and most of the loss is
    recovered."""
    objective = load_objective("gpt2-small-base")
    layer = 2
    X = layer_states(objective, TEXTS, layer)
    trained = train_sae(X, SaeShape("topk", X.shape[1], 256, 8), TrainSettings(steps=200, batch=64, lr=3e-3))
    sums = splice_sums(objective, TEXTS, layer, Reconstruct(trained.sae), batch_size=3)
    out = splice_stats(sums, resamples=50, seed=0)
    brute = brute_force_sums(objective, TEXTS, layer, trained.sae)
    clean = brute_force_sums(objective, TEXTS, layer, None)
    zero = brute_force_sums(objective, TEXTS, layer, zero_sae(X.shape[1]))
    assert out.loss_recovered == pytest.approx((zero.sum() - brute.sum()) / (zero.sum() - clean.sum()), abs=1e-6)
    assert out.loss_spliced == pytest.approx(brute.sum() / sums.counts.sum(), abs=1e-6)
    assert out.loss_recovered > 0.5 and out.kl > 0  # most of the loss, not all of it exactly (it may pass 1: the
    # SAE is trained on these texts)
    assert out.loss_spliced != pytest.approx(out.loss_clean, abs=1e-4)
    lo, hi = out.loss_recovered_ci
    assert lo <= out.loss_recovered <= hi


def test_the_edit_is_keyed_by_the_weights_it_was_built_with():
    sae = exact_sae(4)
    edit = Reconstruct(sae)
    same = Reconstruct(exact_sae(4))
    assert edit.identity() == same.identity() and edit.identity()["edit"] == "sae-reconstruct"
    assert Intervention(1, edit).identity() is not None and Zero().identity() is not None
    with torch.no_grad():
        sae.b_dec.add_(1.0)  # changing the SAE afterwards changes neither the identity nor the edit
    assert edit.identity() == same.identity()
    assert edit.identity() != Reconstruct(sae).identity()
    h = torch.randn(2, 3, 4)
    batch = type("B", (), {"ids": None, "mask": torch.ones(2, 3, dtype=torch.bool)})()
    assert torch.allclose(edit.apply(h, batch), h, atol=1e-6)
    skip = Reconstruct(zero_sae(4), skip_ids=[7])
    batch.ids = torch.tensor([[7, 1, 7], [2, 7, 3]])
    out = skip.apply(h, batch)
    assert torch.equal(out[batch.ids == 7], h[batch.ids == 7]) and (out[batch.ids != 7] == 0).all()
    with pytest.raises(ProbeError, match="5 wide|4 wide"):
        edit.apply(torch.randn(1, 2, 5), batch)


def test_the_analysis_splices_each_sae_when_the_model_has_a_head_and_says_why_not_otherwise(tmp_path):
    import probes
    from analyses import sae as sae_analysis

    texts = [f"{t} Then {i} more words came after it." for i, t in enumerate(TEXTS * 2)]
    acts = probes.extract("tiny-gpt2", texts, cache_dir=None)
    cfg = sae_analysis.Config(layers=[1], steps=20, width=64, k=4, out=str(tmp_path), save=False, resamples=20)
    with pytest.warns(UserWarning, match="held-out sentences"):
        result = sae_analysis.compute(cfg, acts=acts, objective=load_objective("tiny-gpt2"))
    row = result.saes[0]
    assert row.loss_recovered is not None and row.kl is not None and row.kl >= 0
    assert row.loss_clean is not None and row.loss_zero is not None and row.loss_spliced is not None
    assert row.loss_recovered == pytest.approx((row.loss_zero - row.loss_spliced) / (row.loss_zero - row.loss_clean))
    assert result.splice is not None and result.splice.objective["objective"] == "next-token"
    assert result.splice.n_texts == 2 and result.splice.skipped is None
    assert sae_analysis.Result.from_json(result.to_json()) == result
    with pytest.warns(UserWarning, match="held-out sentences"):
        plain = sae_analysis.compute(cfg, acts=acts, objective_skipped="no head")
    assert plain.saes[0].loss_recovered is None and plain.splice == sae_analysis.Splice(skipped="no head")
    assert plain.saes[0].explained_variance == row.explained_variance  # splicing moves no other number
