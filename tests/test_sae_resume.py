"""The SAE analysis's wiring: the held-out statistics streamed in blocks equal those of the states in memory; with
--save a second run resumes from the saved SAEs (the same numbers, nothing trained) and trains again where its
settings differ; a saved SAE of another model or layer, edited, truncated or whose cfg.json does not match its
weights is one ``error:`` line and exit 2 on the command line (tiny-bert); ``run(..., layer=l)`` is ``layers=[l]``."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from analyses import records
from analyses import sae as sae_analysis
from analyses.common import run_main
from analyses.sae.io import CHECKSUMS, CONFIG, WEIGHTS, load_sae
from analyses.sae.metrics import estimates, held_out_sums
from probes.capture.activations import Activations
from probes.errors import ProbeError

pytestmark = pytest.mark.filterwarnings("ignore:bootstrap intervals")  # few held-out sentences, on purpose

def synthetic_acts(n_tokens: int = 400, n_texts: int = 40, d: int = 8) -> Activations:
    """(3, n_tokens, d) random states split evenly into ``n_texts`` texts, no special tokens."""
    hidden = np.random.default_rng(0).normal(size=(3, n_tokens, d)) + 2.0
    offsets = np.linspace(0, n_tokens, n_texts + 1).astype(np.int64)
    return Activations(meta={"model": {"name": "synthetic", "fingerprint": {"sha256": "abc"}}},
                       texts=[f"t{i}" for i in range(n_texts)],
                       tokens=[["x"] * int(n) for n in np.diff(offsets)], offsets=offsets,
                       token_ids=np.zeros(n_tokens, np.int64), special=np.zeros(n_tokens, bool),
                       hidden=hidden.astype(np.float32), sentence=np.zeros((3, n_texts, d), np.float32))


def config(tmp_path: Path, **changes) -> sae_analysis.Config:
    return dataclasses.replace(sae_analysis.Config(layers=[1], steps=20, width=16, k=2, out=str(tmp_path),
                                                   resamples=20, splice=False), **changes)


@pytest.fixture
def train_calls(monkeypatch):
    """How many SAEs analyses.sae trains (in memory or streamed)."""
    calls: list[str] = []
    for name in ("train_sae", "train_sae_streamed"):
        real = getattr(sae_analysis, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(sae_analysis, name, counted)
    return calls


# ----------------------------------------------------------------------------- held-out statistics streamed


def test_compute_streams_the_held_out_states_with_the_numbers_of_the_states_in_memory(tmp_path, monkeypatch):
    acts = synthetic_acts()
    reads: list[int] = []
    layer_hidden = acts.layer_hidden

    def counted(layer, rows=None):
        if rows is not None and not isinstance(rows, slice):
            reads.append(len(rows))
        return layer_hidden(layer, rows)

    monkeypatch.setattr(acts, "layer_hidden", counted)
    monkeypatch.setattr(sae_analysis, "HELD_OUT_BLOCK", 7)
    result = sae_analysis.compute(config(tmp_path), acts=acts)
    row = result.saes[0]
    assert row.n_held_out_tokens == 80 and max(reads[1:]) == 7  # past the training states: blocks of 7 tokens
    held = sae_analysis.split_sentences(acts.n_texts, 0.2, 0)
    text_of = acts.text_index()
    held_rows = np.flatnonzero(held[text_of])
    unit_of = np.searchsorted(np.flatnonzero(held), text_of[held_rows])
    sae, _ = load_sae(tmp_path / "sae" / "synthetic" / "layer1-seed0")
    X_held = sae_analysis.finite_states(acts, 1, held_rows)  # (80, 8) in memory
    # the same blocks: the same numbers to float64 round-off; all 80 at once: the SAE's float32 round-off
    for block, tol in ((7, 1e-12), (4096, 1e-6)):
        est = estimates(held_out_sums(sae, X_held, unit_of, int(held.sum()), block=block), 20, 0)
        for name, e in est.items():
            value, ci = getattr(row, name), getattr(row, f"{name}_ci")
            assert (value is None) == (e.value is None) and (ci is None) == (e.ci is None), name
            if e.value is not None:
                assert abs(value - e.value) <= tol * max(1.0, abs(e.value)), (name, block)
            if e.ci is not None:
                np.testing.assert_allclose(ci, e.ci, rtol=tol, atol=tol, err_msg=f"{name} {block}")


def test_nan_held_out_states_are_refused_before_any_training(tmp_path, train_calls):
    acts = synthetic_acts()
    held = sae_analysis.split_sentences(acts.n_texts, 0.2, 0)
    row = int(np.flatnonzero(held[acts.text_index()])[-1])  # the last held-out token: in the last block of 7
    acts.hidden[1, row, 3] = np.nan
    with pytest.raises(ProbeError, match=r"layer 1: 1 of 80 token states hold NaN or inf"):
        sae_analysis.compute(config(tmp_path, save=False), acts=acts)
    assert train_calls == []


# ----------------------------------------------------------------------------- resumed runs


@pytest.mark.parametrize("buffer_tokens", [0, 64])
def test_a_second_run_resumes_with_the_same_numbers_and_trains_nothing(tmp_path, train_calls, capsys, buffer_tokens):
    acts = synthetic_acts()
    cfg = config(tmp_path, layers=[2, 1], seeds=2, buffer_tokens=buffer_tokens, tokens_per_step=32)
    first = sae_analysis.compute(cfg, acts=acts)
    assert len(train_calls) == 4
    folder = tmp_path / "sae" / "synthetic" / "layer1-seed0"
    stamp = (folder / WEIGHTS).stat().st_mtime_ns
    again = sae_analysis.compute(cfg, acts=acts)
    assert len(train_calls) == 4, "the second run trained"
    assert (folder / WEIGHTS).stat().st_mtime_ns == stamp
    assert records.to_json(again.saes) == records.to_json(first.saes)
    assert records.to_json(again.agreement) == records.to_json(first.agreement)
    err = capsys.readouterr().err
    assert "training it again" not in err and err.count("resumed (trained before") == 4, err


@pytest.mark.parametrize("change, named", [({"lr": 3e-3}, "lr"), ({"steps": 21}, "steps"), ({"width": 24}, "width"),
                                           ({"held_out": 0.3}, "train_sentences")])
def test_a_saved_sae_of_other_settings_is_trained_again_with_one_line(tmp_path, train_calls, capsys, change, named):
    acts = synthetic_acts()
    first = sae_analysis.compute(config(tmp_path), acts=acts)
    capsys.readouterr()
    other = sae_analysis.compute(config(tmp_path, **change), acts=acts)
    err = capsys.readouterr().err
    assert len(train_calls) == 2 and err.count("training it again") == 1 and f"this run's in {named}" in err, err
    assert other.saes[0].weights_sha256 != first.saes[0].weights_sha256
    _, record = load_sae(tmp_path / "sae" / "synthetic" / "layer1-seed0")  # saved over: the new settings
    assert record.settings is not None and record.final_loss == other.saes[0].final_loss


def test_a_saved_sae_that_records_no_training_is_trained_again_with_one_line(tmp_path, train_calls, capsys):
    acts = synthetic_acts()
    first = sae_analysis.compute(config(tmp_path), acts=acts)
    folder = tmp_path / "sae" / "synthetic" / "layer1-seed0"
    cfg = json.loads((folder / CONFIG).read_text())
    for name in ("settings", "buffer_tokens", "train_sentences", "n_train_tokens", "final_loss", "dead_in_training"):
        del cfg["probes"][name]  # as saved before runs resumed
    (folder / CONFIG).write_text(json.dumps(cfg))
    resum(folder)
    capsys.readouterr()
    again = sae_analysis.compute(config(tmp_path), acts=acts)
    err = capsys.readouterr().err
    assert len(train_calls) == 2 and err.count("training it again") == 1 and "does not record" in err, err
    assert records.to_json(again.saes) == records.to_json(first.saes)  # trained again alike (seeded, same device)
    assert load_sae(folder)[1].settings is not None


# ----------------------------------------------------------------------------- the command line on tiny-bert

ARGV = ["--model", "tiny-bert", "--n-sentences", "12", "--layers", "1", "--k", "4", "--width", "32", "--steps", "3",
        "--tokens-per-step", "32", "--resamples", "10", "--no-splice"]


def cli(out: Path, capsys, *extra: str) -> tuple[int, str]:
    """(exit status, stderr) of ``python -m analyses.sae`` run in this process."""
    code = 0
    try:
        run_main(sae_analysis.main, [*ARGV, *extra, "--out", str(out)])
    except SystemExit as e:
        code = int(e.code or 0)
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """An out folder after one run (its cache, results and layer-1 SAE), and the result's rows."""
    out = tmp_path_factory.mktemp("sae-cli")
    sae_analysis.main([*ARGV, "--out", str(out)])
    return out, json.loads((out / "results" / "sae" / "tiny-bert.json").read_text())["saes"]


@pytest.fixture
def out(first_run, tmp_path):
    copy = tmp_path / "out"
    shutil.copytree(first_run[0], copy)
    return copy


def resum(folder: Path) -> None:
    sums = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in (WEIGHTS, CONFIG)}
    (folder / CHECKSUMS).write_text("".join(f"{h}  {name}\n" for name, h in sums.items()))


@pytest.mark.integration
def test_the_command_line_resumes_with_the_same_numbers(first_run, out, capsys, train_calls):
    code, err = cli(out, capsys)
    assert code == 0 and train_calls == [], err
    assert json.loads((out / "results" / "sae" / "tiny-bert.json").read_text())["saes"] == first_run[1]


def damage(out: Path, how: str) -> None:
    folder = out / "sae" / "tiny-bert" / "layer1-seed0"
    if how == "another layer":  # the layer-1 SAE where the layer-2 one belongs
        shutil.copytree(folder, out / "sae" / "tiny-bert" / "layer2-seed0")
    elif how == "another model":
        cfg = json.loads((folder / CONFIG).read_text())
        cfg["probes"]["fingerprint"] = {"sha256": "0" * 64}
        (folder / CONFIG).write_text(json.dumps(cfg))
        resum(folder)
    elif how == "truncated":
        data = (folder / WEIGHTS).read_bytes()
        (folder / WEIGHTS).write_bytes(data[:len(data) - 40])
    elif how == "edited":
        data = (folder / WEIGHTS).read_bytes()
        (folder / WEIGHTS).write_bytes(data[:-9] + bytes([data[-9] ^ 2]) + data[-8:])
    else:  # cfg.json of another width, its checksums written again
        cfg = json.loads((folder / CONFIG).read_text())
        cfg["d_sae"] = 64
        (folder / CONFIG).write_text(json.dumps(cfg))
        resum(folder)


@pytest.mark.integration
@pytest.mark.parametrize("how, words", [
    ("another layer", "reads layer 1, not layer 2"),
    ("another model", "another fingerprint"),
    ("truncated", "does not match its checksum"),
    ("edited", "does not match its checksum"),
    ("cfg vs weights", "d_sae is 64"),
])
def test_a_bad_saved_sae_is_one_error_line_and_exit_2(out, capsys, train_calls, how, words):
    damage(out, how)
    code, err = cli(out, capsys, *(["--layers", "2"] if how == "another layer" else []))
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip()]  # (progress bars aside)
    assert code == 2 and lines[-1].startswith("error: ") and words in lines[-1], err
    assert err.count("error") == 1 and "Traceback" not in err and "remove it" in lines[-1], err
    assert train_calls == []


# ----------------------------------------------------------------------------- run(..., layer=l)

TEXTS = [f"Sentence {i} is about the cat and the sea today." for i in range(12)]


@pytest.mark.integration
def test_run_takes_one_layer_as_layer_and_refuses_it_beside_other_layers():
    settings = dict(k=4, width=32, steps=3, tokens_per_step=32, resamples=10, save=False, splice=False,
                    cache_dir=None)
    one = sae_analysis.run("tiny-bert", TEXTS, layer=1, **settings)
    listed = sae_analysis.run("tiny-bert", TEXTS, layers=[1], **settings)
    assert [r.layer for r in one.saes] == [1]
    assert records.to_json(one.saes) == records.to_json(listed.saes)
    assert sae_analysis.run("tiny-bert", TEXTS, layer=-1, layers=[-1], **settings).saes[0].layer == 2
    with pytest.raises(ProbeError, match=r"layer=1 and layers=\[2\]: give one of them") as e:
        sae_analysis.run("tiny-bert", TEXTS, layer=1, layers=[2], **settings)
    assert "\n" not in str(e.value)
    with pytest.raises(ProbeError, match="no layer to train an SAE on"):
        sae_analysis.run("tiny-bert", TEXTS, layers=[], **settings)
