"""Which folders a checkpoint series takes as its points, and which saved result each point is read from.

* The points of a series folder are one model's checkpoints: a folder that mixes architectures (ALBERT beside
  BERT, another width, an S-LSTM) is one error line, and so is a series whose points are not of the model_type of
  the entry it is said to be a run of (``like``).
* Where folders are named as trainers name them (``checkpoint-N``, ``step-N``), another folder with a config and a
  trailing number (``best-model-v2``) is no point and is named in a warning; ``step--5`` is no step 5; a step
  folder that is a loop of symbolic links is an error; a single hub revision, or a folder of one checkpoint, is
  told that a series needs two or more.
* A pair analysis along two series reads the result of exactly its two points, by the names (and weights) the
  result file records, never a result whose name merely contains them (``bert.step-...`` inside
  ``albert.step-...``).
* A folder of the suite's own S-LSTM or Graph-Transformer named by its path loads as the registry entry of it
  does: the same family and sentence vector, the same states.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import probes
from analyses import series as series_mod
from probes.errors import ProbeError
from probes.series import resolve

REPO = Path(__file__).resolve().parent.parent
TEXTS = ["A short text about the sea.", "Another one, a little longer than the first.", "The third sentence here.",
         "Ships sail on the water at dawn.", "A whale was seen near the coast.", "The captain spoke to the crew."]


def _tokenizer_into(folder: Path) -> None:
    minilm = probes.get_spec("minilm-l6").folder()
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if (minilm / name).is_file():
            shutil.copy(minilm / name, folder / name)


def hf_folder(folder: Path, arch: str = "bert", seed: int = 0, width: int = 16) -> Path:
    """A tiny random BERT or ALBERT masked LM saved with MiniLM's tokenizer."""
    from transformers import AlbertConfig, AlbertForMaskedLM, BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    sizes: dict[str, Any] = dict(vocab_size=30522, hidden_size=width, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=32, max_position_embeddings=512)
    model = (BertForMaskedLM(BertConfig(**sizes)) if arch == "bert"
             else AlbertForMaskedLM(AlbertConfig(embedding_size=8, **sizes)))
    model.save_pretrained(folder)
    _tokenizer_into(folder)
    return folder


def own_folder(folder: Path, family: str, seed: int = 0) -> Path:
    """A tiny random S-LSTM or Graph-Transformer saved as the suite's recipes save them, with MiniLM's tokenizer."""
    from probes.models import mog, slstm

    torch.manual_seed(seed)
    if family == "slstm":
        slstm.save_pretrained(slstm.SLSTMForMaskedLM(slstm.SLSTMConfig(vocab_size=30522, hidden_size=16,
                                                                       num_layers=2)), folder)
    else:
        mog.save_pretrained(mog.MoGForMaskedLM(mog.MoGConfig(vocab_size=30522, hidden_size=16, num_layers=2,
                                                             num_heads=2, intermediate_size=32)), folder)
    _tokenizer_into(folder)
    return folder


# ----------------------------------------------------------------------------- which folders are points


@pytest.mark.parametrize("second", ["albert", "wider", "slstm"])
def test_a_folder_of_checkpoints_of_different_architectures_is_no_series(tmp_path, second):
    hf_folder(tmp_path / "run" / "checkpoint-100")
    other = tmp_path / "run" / "checkpoint-200"
    if second == "slstm":
        own_folder(other, "slstm")
    else:
        hf_folder(other, "albert" if second == "albert" else "bert", width=32 if second == "wider" else 16)
    with pytest.raises(ProbeError, match="not of one architecture") as e:
        resolve(tmp_path / "run")
    assert "\n" not in str(e.value) and "checkpoint-200" in str(e.value)


def test_checkpoints_of_one_architecture_are_one_series(tmp_path):
    for step, seed in ((100, 0), (200, 1)):
        hf_folder(tmp_path / "run" / f"checkpoint-{step}", seed=seed)
    assert [p.step for p in resolve(tmp_path / "run").points] == [100, 200]  # other weights, one architecture


def test_points_not_of_the_like_entrys_model_type_are_refused(tmp_path, tiny_slstm_registry):
    tiny_slstm_registry(2, 64)
    for step in (100, 200):
        hf_folder(tmp_path / "run" / f"step-{step}", seed=step)
    with pytest.raises(ProbeError, match=r"step-100 is a 'bert' model, but tiny-slstm \(--like\) is 'slstm'"):
        resolve(tmp_path / "run", like="tiny-slstm")


@pytest.mark.parametrize("stray", ["best-model-v2", "step--5", "checkpoint-final"])
def test_a_folder_not_named_like_the_step_folders_is_skipped_with_a_word(tmp_path, stray):
    for step in (100, 200):
        hf_folder(tmp_path / "run" / f"checkpoint-{step}", seed=step)
    shutil.copytree(tmp_path / "run" / "checkpoint-200", tmp_path / "run" / stray)
    with pytest.warns(UserWarning, match=f"not taken as checkpoints: {stray}"):
        s = resolve(tmp_path / "run")
    assert [p.step for p in s.points] == [100, 200]


def test_trailing_numbers_are_steps_only_where_no_folder_is_named_like_a_trainers(tmp_path):
    for step in (3, 12):
        hf_folder(tmp_path / "run" / f"run-{step}", seed=step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [p.step for p in resolve(tmp_path / "run").points] == [3, 12]
    shutil.copytree(tmp_path / "run" / "run-3", tmp_path / "neg" / "run--5")
    shutil.copytree(tmp_path / "run" / "run-12", tmp_path / "neg" / "run-7")
    with pytest.warns(UserWarning, match="run--5"):
        assert [p.step for p in resolve(tmp_path / "neg").points] == [7]  # -5 is no step


def test_a_loop_of_links_among_the_step_folders_is_an_error(tmp_path):
    hf_folder(tmp_path / "run" / "step-200")
    (tmp_path / "run" / "step-100").symlink_to("loopb")
    (tmp_path / "run" / "loopb").symlink_to("step-100")
    with pytest.raises(ProbeError, match="step-100 is a symbolic link that leads to no folder"):
        resolve(tmp_path / "run")


def test_a_single_hub_revision_is_told_what_a_series_needs():
    with pytest.raises(ProbeError, match="a series needs two or more revisions"):
        resolve("hf:EleutherAI/pythia-70m@step1000")


def test_a_series_of_one_checkpoint_is_told_what_a_series_needs(tmp_path):
    hf_folder(tmp_path / "run" / "checkpoint-100")
    with pytest.raises(ProbeError, match=r"one checkpoint \(step 100\); a series needs two or more"):
        series_mod.run("anisotropy", [tmp_path / "run"], out=tmp_path / "out")


@pytest.mark.integration
def test_the_command_line_refuses_a_series_of_mixed_architectures_in_one_line(tmp_path):
    hf_folder(tmp_path / "run" / "checkpoint-100")
    hf_folder(tmp_path / "run" / "checkpoint-200", "albert")
    done = subprocess.run([sys.executable, "-m", "analyses.series", "anisotropy", "--series", str(tmp_path / "run"),
                           "--out", str(tmp_path / "out"), "--no-figures"], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: series ") and "not of one architecture" in lines[0]
    assert not (tmp_path / "out" / "results").exists()


# ----------------------------------------------------------------------------- which result a point reads


@pytest.fixture()
def alike_series(tmp_path, monkeypatch):
    """Three series of two tiny BERTs each, named albert, bert and x (bert's point names end albert's)."""
    monkeypatch.chdir(tmp_path)
    for k, name in enumerate(("albert", "bert", "x")):
        for step in (100, 200):
            hf_folder(tmp_path / "series" / name / f"checkpoint-{step}", seed=10 * k + step)
    return tmp_path / "series"


SIM: dict[str, Any] = dict(n_sentences=8, measure=["cka"], unit="sentence", batch_size=4)


@pytest.mark.slow
def test_a_pair_along_series_whose_names_end_alike_reads_its_own_results(alike_series, tmp_path):
    shared = tmp_path / "out"
    first = series_mod.run("similarity", [alike_series / "albert", alike_series / "x"], out=shared, **SIM)
    second = series_mod.run("similarity", [alike_series / "bert", alike_series / "x"], out=shared, **SIM)
    fresh = series_mod.run("similarity", [alike_series / "bert", alike_series / "x"], out=tmp_path / "fresh", **SIM)
    values = {k: [p.value for p in r.lines[0].points] for k, r in (("first", first), ("second", second),
                                                                     ("fresh", fresh))}
    assert values["second"] == values["fresh"], values  # bert's own pairs, not albert's
    assert values["first"] != values["second"], values  # the planted pairs differ, so the test can tell them apart
    assert [p.model for p in second.lines[0].points] == ["bert.step-0000100", "bert.step-0000200"]


@pytest.mark.slow
def test_a_result_of_other_weights_under_a_points_name_is_not_read(alike_series, tmp_path):
    out = tmp_path / "out"
    series_mod.run("anisotropy", [alike_series / "bert"], out=out, n_sentences=8, n_tokens=40)
    replaced = alike_series / "bert" / "checkpoint-200"
    shutil.rmtree(replaced)
    hf_folder(replaced, seed=999)  # the same name, other weights: its saved result is not this point's
    from analyses.series import collect, saved_results

    with pytest.raises(ProbeError, match=r"no anisotropy result for bert\.step-0000200"):
        collect("anisotropy", [resolve(alike_series / "bert")], saved_results(out, "anisotropy"), "", [], False)


# ----------------------------------------------------------------------------- a folder of the suite's own models


@pytest.mark.parametrize("family, sentence", [("slstm", "g"), ("mog", "cls")])
def test_a_folder_of_the_suites_own_architecture_loads_by_path_as_its_entry_does(tmp_path, monkeypatch, family,
                                                                                  sentence):
    registered = own_folder(tmp_path / f"{family}-entry", family)
    by_path = shutil.copytree(registered, tmp_path / "step-0000100")  # a series' point, named by its path
    reg = tmp_path / "reg.yaml"
    reg.write_text(f"tiny-own:\n  family: {family}\n  kind: encoder\n  source: {{path: {registered}}}\n"
                   f"  sentence: {sentence}\n")
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(reg))
    spec = probes.get_spec(str(by_path))
    assert (spec.family, spec.kind, spec.sentence) == (family, "encoder", sentence)
    a = probes.extract("tiny-own", TEXTS, cache_dir=None, progress=False)
    b = probes.extract(str(by_path), TEXTS, cache_dir=None, progress=False)
    assert b.meta["model"]["family"] == family and b.meta["model"]["name"] != "tiny-own"
    np.testing.assert_array_equal(np.asarray(a.sentence), np.asarray(b.sentence))
    np.testing.assert_array_equal(np.asarray(a.hidden), np.asarray(b.hidden))
    assert a.tokens == b.tokens
