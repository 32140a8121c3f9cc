"""``--device-map`` (a model spread over several devices by accelerate), checked on
CPU: a tiny random BERT saved as a model folder gives the same states with device_map cpu / auto as
without one; without accelerate, or on a model it cannot place, one clear line."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import probes
from probes import CheckpointError, ProbeError, extract
from probes.config import run_main

TEXTS = ["Hello world.", "Representations change layer by layer.", "Short.", "A fourth, final sentence here."]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """tiny-bert's random weights and tokenizer saved as a Hugging Face model folder."""
    enc = probes.load("tiny-bert")
    path = tmp_path_factory.mktemp("tiny-bert-folder")
    enc.model.save_pretrained(path)
    enc.tokenizer.tokenizer.save_pretrained(path)
    return str(path)


@pytest.mark.parametrize("device_map", ["cpu", "auto"])
def test_a_device_map_gives_the_same_states(folder, device_map):
    pytest.importorskip("accelerate")
    plain = extract(folder, TEXTS, cache_dir=None, progress=False, maps=True)
    mapped = extract(folder, TEXTS, cache_dir=None, progress=False, maps=True, device_map=device_map)
    assert mapped.meta["device_map"] == device_map and "device_map" not in plain.meta
    for a, b in ((plain.hidden, mapped.hidden), (plain.sentence, mapped.sentence),
                 (plain.maps["attention"], mapped.maps["attention"])):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=0, atol=1e-6)
    assert probes.load(folder, device_map=device_map).device_map == device_map


def test_the_flag_reaches_the_extraction_and_the_result(folder, tmp_path):
    pytest.importorskip("accelerate")
    from analyses import anisotropy

    out = tmp_path / "out"
    anisotropy.main(["--model", folder, "--device-map", "auto", "--n-sentences", "20", "--n-tokens", "50",
                     "--out", str(out)])
    cache = next((out / "cache").glob("*/*/meta.json")).read_text()
    assert '"device_map": "auto"' in cache


def test_without_accelerate_one_clear_line(folder, tmp_path, monkeypatch, capsys):
    from analyses import anisotropy

    monkeypatch.setitem(sys.modules, "accelerate", None)  # import accelerate -> ImportError
    with pytest.raises(CheckpointError, match="needs the Python package accelerate"):
        probes.load(folder, device_map="auto")
    with pytest.raises(SystemExit) as exc:
        run_main(anisotropy.main, ["--model", folder, "--device-map", "auto", "--out", str(tmp_path / "out")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert exc.value.code == 2 and len(err) == 1, err
    assert err[0].startswith("error: --device-map needs the Python package accelerate: run")
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_a_model_it_cannot_place_is_refused(tmp_path):
    with pytest.raises(ProbeError, match="random-init weights: use --device instead"):
        probes.load("tiny-bert", device_map="auto")
    with pytest.raises(ProbeError, match="family slstm"):
        probes.load("slstm-small", device_map="auto")
    with pytest.raises(ProbeError, match="use one of auto"):
        probes.load("minilm-l6", device_map="everywhere")
