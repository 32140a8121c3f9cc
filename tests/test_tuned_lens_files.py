"""The tuned lens's saved translators are read back only as they were trained: train_config.json records the model,
settings, split and the file's sha256, and anything else (an edited or damaged file, another model's record, a
record that is not JSON, a resumable state that asks for code) is one error line naming the file. Translators
that hold NaN give null statistics with the reason, never a top-1 agreement of 0. From Python the translators go
into the per-user cache, announced with their cost, never into the current folder. Tiny GPT-2, seconds."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from analyses import lens as lens_analysis
from analyses.common import read_result, write_result
from analyses.inputs import caller_documents
from probes.capture import tuned_lens as tl
from probes.capture.store import user_cache_dir
from probes.errors import ProbeError
from probes.models.lm import load_lm

DOCS = ["Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse.",
        "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want."]
SETTINGS = tl.TrainSettings(window=16, overlap=2, steps=3, tokens_per_step=24, seed=0)
SPLIT = {"name": "two documents"}


@pytest.fixture(scope="module")
def gpt2():
    return load_lm("tiny-gpt2")


@pytest.fixture
def trained(gpt2, tmp_path) -> Path:
    """The folder of freshly trained translators."""
    docs = [gpt2.encode(t) for t in DOCS]
    _, record = tl.tuned_translators(gpt2, docs, SPLIT, SETTINGS, tmp_path / "lens", progress=False)
    return Path(record["folder"])


def reload(gpt2, folder: Path):
    return tl.tuned_translators(gpt2, [gpt2.encode(t) for t in DOCS], SPLIT, SETTINGS, folder.parents[1],
                                progress=False)


def resave(folder: Path, state: dict, record_too: bool) -> None:
    """Write ``state`` as the translators file; with ``record_too``, its sha256 into train_config.json as well."""
    save_file(state, folder / "translators.safetensors")
    if record_too:
        record = json.loads((folder / "train_config.json").read_text())
        record["translators_sha256"] = hashlib.sha256((folder / "translators.safetensors").read_bytes()).hexdigest()
        (folder / "train_config.json").write_text(json.dumps(record))


def one_line(fn, *args) -> str:
    with pytest.raises(ProbeError) as e:
        fn(*args)
    assert "\n" not in str(e.value)
    return str(e.value)


def test_saved_translators_are_reused_only_as_they_were_saved(gpt2, trained):
    first, record = reload(gpt2, trained)
    assert record["reused"] and record["translators_sha256"] == hashlib.sha256(
        (trained / "translators.safetensors").read_bytes()).hexdigest()
    # copies: safetensors' tensors may map the file, which this test then overwrites in place
    state = {k: v.clone() for k, v in load_file(trained / "translators.safetensors").items()}
    noisy = {**state, "0.weight": state["0.weight"] + 0.5 * torch.randn_like(state["0.weight"])}
    resave(trained, noisy, record_too=False)
    assert "translators.safetensors are not the ones trained" in one_line(reload, gpt2, trained)
    (trained / "translators.safetensors").write_bytes(b"\x00" * 100)  # cut short
    assert "are not the ones trained" in one_line(reload, gpt2, trained)
    for bad in ({**state, "0.weight": torch.zeros(3, 3)}, {**state, "99.weight": torch.zeros(3)},
                {k: v for k, v in state.items() if k != "1.bias"}):  # consistent with the record, wrong translators
        resave(trained, bad, record_too=True)
        text = one_line(reload, gpt2, trained)
        assert "translators.safetensors are not 2 translators of width" in text, text


@pytest.mark.parametrize("content, expected", [
    ("[1, 2]", "is a JSON list, not an object"),
    ("{bad", "is not valid JSON"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("fingerprint", "does not match this run: its fingerprint is"),
    ("settings", "does not match this run: its settings is"),
])
def test_a_training_record_that_is_not_this_runs_is_one_line_naming_it(gpt2, trained, content, expected):
    config = trained / "train_config.json"
    if content in ("fingerprint", "settings"):
        record = json.loads(config.read_text())
        record[content] = {**record[content], "edited": 1}
        content = json.dumps(record)
    config.write_text(content)
    text = one_line(reload, gpt2, trained)
    assert expected in text and str(config) in text, text


def test_a_resumable_state_that_asks_for_code_is_one_line_and_runs_nothing(gpt2, trained, tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    (trained / "translators.safetensors").unlink()
    (trained / "state.pt").write_bytes(pickle.dumps(Evil()))
    assert "cannot resume the tuned lens's training from" in one_line(reload, gpt2, trained)
    assert not marker.exists()


def test_translators_that_hold_nan_give_null_statistics_with_the_reason(gpt2, tmp_path):
    cfg = lens_analysis.Config(window=16, train_steps=2, train_tokens=24, resamples=50)
    docs = caller_documents(gpt2, DOCS)
    first = lens_analysis.compute(cfg, lm=gpt2, documents=docs, translators_dir=tmp_path / "lens")
    folder = next((tmp_path / "lens").glob("*/*"))
    state = {k: v.clone() for k, v in load_file(folder / "translators.safetensors").items()}  # not the file's map
    state["0.weight"][0, 0] = float("nan")
    resave(folder, state, record_too=True)
    result = lens_analysis.compute(cfg, lm=gpt2, documents=docs, translators_dir=tmp_path / "lens")
    write_result(tmp_path / "out", "lens", "tiny-gpt2", result, lens_analysis.table_rows(result))
    doc = read_result(tmp_path / "out" / "results" / "lens" / "tiny-gpt2.json")  # as saved: null, never NaN
    layer0 = doc["layers"][0]
    assert layer0["tuned"]["top1"] is None and layer0["tuned"]["kl"] is None and layer0["tuned"]["ce"] is None
    assert layer0["logit"]["top1"] == pytest.approx(first.layers[0].logit.top1)  # the logit lens is unchanged
    assert doc["layers"][1]["tuned"]["top1"] is not None
    assert any("tuned lens, layers 0:" in n and "1 NaN or inf values" in n for n in doc["notes"]), doc["notes"]
    one_layer = lens_analysis.Result.from_json({**doc, "layers": doc["layers"][:1]})
    assert one_layer.headline()["tuned lens, layer 0"] == "KL null nats, top-1 null"  # reloaded nulls: no TypeError


def test_lens_run_in_an_empty_folder_leaves_it_empty_and_announces_the_training(tmp_path, monkeypatch, capsys):
    empty = tmp_path / "here"
    empty.mkdir()
    monkeypatch.chdir(empty)
    monkeypatch.setenv("PROBES_CACHE", str(tmp_path / "cache"))
    kw = {"window": 16, "train_steps": 2, "train_tokens": 24, "resamples": 50}
    result = lens_analysis.run("tiny-gpt2", DOCS, **kw)
    err = capsys.readouterr().err
    assert "tuned" in result.lenses and list(empty.iterdir()) == []
    saved = list((user_cache_dir() / ".tuned-lens" / "tiny-gpt2").glob("*/translators.safetensors"))
    assert len(saved) == 1 and saved[0].is_relative_to(tmp_path / "cache")
    assert "tuned lens of tiny-gpt2: training its 2 translators first (2 steps of 24 tokens" in err
    assert "--no-tuned" in err and str(saved[0].parent) in err
    lens_analysis.run("tiny-gpt2", DOCS, **kw)  # reused: no training, no notice
    assert "training its" not in capsys.readouterr().err and list(empty.iterdir()) == []
    lens_analysis.run("tiny-gpt2", DOCS, cache_dir=None, **kw)  # no cache: a temporary folder, dropped
    assert list(empty.iterdir()) == [] and len(list((tmp_path / "cache").rglob("translators.safetensors"))) == 1
    assert np.isfinite(result.layers[0].of("tuned").kl)
