"""Reasons and words that must be right, not only the numbers: the estimators' notes for NaN states and
near-copies, IsoScore on identical large vectors, pooling flags written as "true" or 1 and modules after the
pooling, hostile cache settings, a NaN or negative epsilon in config.json. Seconds each."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import probes
from analyses import intrinsic_dimension as idim
from analyses import isoscore as iso
from probes.capture.store import user_cache_dir
from probes.checkpoints.folder import check_config
from probes.checkpoints.pooling import folder_pooling, pooling_words
from probes.errors import CheckpointError, ProbeError


def test_nan_states_are_named_as_the_reason_the_dimension_is_undefined():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    X[7, 2] = np.nan
    out = idim.estimate(X, np.arange(400) // 4, idim.Config(resamples=20), 0.95)
    assert out.twonn is None and out.mle is None
    assert out.note == "1 of 400 points hold NaN or inf: the estimators are undefined"


def test_near_copies_are_noted_beside_the_dimension():
    rng = np.random.default_rng(0)
    cube = rng.uniform(size=(500, 5))
    X = np.r_[cube, cube + 1e-6 * rng.normal(size=cube.shape)]
    out = idim.estimate(X, np.r_[np.arange(500), np.arange(500)] // 5, idim.Config(resamples=20), 0.95)
    assert "100% of the points have a near-copy" in out.note and "TwoNN is biased low" in out.note
    clean = idim.estimate(cube, np.arange(500) // 5, idim.Config(resamples=20), 0.95)
    assert clean.note is None or "near-copy" not in clean.note


def test_identical_large_vectors_are_every_vector_the_same_for_isoscore():
    enc = probes.load("tiny-bert")
    same = torch.linspace(-1, 1, enc.hidden_size) * 1e4 + 3e4  # one large vector for every token

    def constant(module, args, output):
        hidden = output[0] if isinstance(output, tuple) else output
        hidden = same.expand_as(hidden).clone()
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    handle = enc.model.encoder.layer[0].register_forward_hook(constant)
    texts = [f"Sentence number {i} is here, with a few words." for i in range(12)]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the hook: no cache, said in a warning
            acts = probes.extract(enc, texts, cache_dir=None, progress=False)
    finally:
        handle.remove()
    layer = iso.compute(iso.Config(n_tokens=60, resamples=20), acts=acts).layers[1].token
    assert layer.isoscore is None and layer.total_variance == 0.0
    assert layer.note == "every vector is the same (no variance): IsoScore is undefined"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    from transformers import AutoTokenizer, BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(probes.get_spec("minilm-l6").local_path())
    torch.manual_seed(0)
    f = tmp_path_factory.mktemp("models") / "st"
    BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(f)
    tok.save_pretrained(f)
    return f


def sentence_transformers(folder: Path, tmp_path: Path, pooling: dict, after: tuple[str, ...] = ()) -> Path:
    out = tmp_path / "model"
    shutil.copytree(folder, out)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    modules += [{"idx": i, "name": str(i), "path": f"{i}_{kind}", "type": f"sentence_transformers.models.{kind}"}
                for i, kind in enumerate(after, start=2)]
    (out / "modules.json").write_text(json.dumps(modules))
    (out / "1_Pooling").mkdir()
    (out / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32, **pooling}))
    return out


@pytest.mark.parametrize("flag", ["true", 1])
def test_pooling_flags_are_read_as_sentence_transformers_reads_them(folder, tmp_path, flag):
    model = sentence_transformers(folder, tmp_path, {"pooling_mode_cls_token": flag,
                                                     "pooling_mode_mean_tokens": False})
    declared = folder_pooling("st", model)
    assert declared.vector == "cls" and declared.modes == ("pooling_mode_cls_token",)
    words = pooling_words(probes.get_spec(str(model)))
    assert "no pooling mode" not in words and f"pooling_mode_cls_token = {flag!r}: not JSON booleans" in words


def test_a_dense_or_normalize_module_after_the_pooling_is_named(folder, tmp_path):
    model = sentence_transformers(folder, tmp_path, {"pooling_mode_mean_tokens": True}, after=("Dense", "Normalize"))
    words = pooling_words(probes.get_spec(str(model)))
    assert "then applies Dense, Normalize to it" in words and "not the model's own sentence embedding" in words


@pytest.mark.parametrize("setting", ["a file", "below a file", "a link loop"])
def test_a_hostile_cache_setting_is_one_line_naming_it(tmp_path, monkeypatch, capsys, setting):
    from probes.capture import cache as cache_cli
    from probes.config import run_main

    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    value = {"a file": a_file, "below a file": a_file / "sub", "a link loop": loop / "sub"}[setting]
    monkeypatch.setenv("PROBES_CACHE", str(value))
    with pytest.raises(ProbeError, match=rf"\(PROBES_CACHE={value}\) cannot be used: "):
        probes.extract("tiny-bert", ["A text."], progress=False)
    with pytest.raises(SystemExit):
        run_main(cache_cli.main, ["list"])
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: the per-user cache (PROBES_CACHE={value})") and "\n" not in err, err


def test_a_blank_probes_cache_is_unset_not_a_folder_of_spaces(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROBES_CACHE", "   ")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache_dir() == tmp_path / "xdg" / "probes"


@pytest.mark.parametrize("field, value, expected", [
    ("layer_norm_eps", float("nan"), "layer_norm_eps = nan is not a finite number"),
    ("layer_norm_eps", -1e-12, "layer_norm_eps = -1e-12 is not a number >= 0"),
    ("rms_norm_eps", "small", "rms_norm_eps = 'small' is not a number >= 0"),
    ("rope_theta", float("inf"), "rope_theta = inf is not a finite number"),
])
def test_a_nan_or_negative_epsilon_in_a_config_is_one_line(field, value, expected):
    cfg = {"model_type": "bert", "hidden_size": 32, field: value}
    with pytest.raises(CheckpointError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        check_config("m", "config.json", cfg)
    check_config("m", "config.json", {"model_type": "bert", "layer_norm_eps": 1e-12, "rms_norm_eps": 0})
