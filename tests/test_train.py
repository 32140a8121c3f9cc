"""recipes.train: a few steps of each architecture on a tiny config and corpus.

Loss finite, the folder complete (weights in float16, config, tokenizer, training config, loss log)
and written atomically with the umask's file modes, loadable through probes.load from a registry entry,
and the same seed gives the same weights and losses. Without --out-dir the recipe writes under out/, and
an existing model folder is replaced only with --overwrite.
"""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest
from safetensors.torch import load_file

import probes
from probes.config import run_main
from probes.errors import ProbeError
from recipes.mlm_data import pack_blocks
from recipes.train import TrainConfig, main, train

pytestmark = pytest.mark.slow

TEXTS = ["Emma was handsome, clever, and rich.", "The whale swam on through the grey sea."]


@pytest.fixture(scope="module")
def corpus(emma_excerpt):
    return emma_excerpt(40_000)


def tiny_cfg(arch: str, corpus, out_dir, **kw) -> TrainConfig:
    base = dict(arch=arch, corpus=str(corpus), out_dir=str(out_dir), vocab_size=200, width=16, layers=2, heads=2,
                intermediate=32, albert_embedding=8, max_positions=64, seq_len=48, batch_size=4, steps=3, warmup=1,
                log_every=1, progress=False, threads=1)
    return TrainConfig(**{**base, **kw})


def log_rows(folder):
    with open(folder / "train_log.csv") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("checkpoints")
    return out, {arch: train(tiny_cfg(arch, corpus, out)) for arch in ("slstm", "bert", "albert")}


@pytest.mark.parametrize("arch", ["slstm", "bert", "albert"])
def test_each_arch_trains_and_saves(arch, trained):
    out, folders = trained
    folder = folders[arch]
    assert folder == out / f"{arch}-small"
    assert {"model.safetensors", "config.json", "tokenizer.json", "train_config.json", "train_log.csv"} <= \
        {p.name for p in folder.iterdir()}
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no work or state folder left behind
    rows = log_rows(folder)
    assert [int(r["step"]) for r in rows] == [1, 2, 3]
    assert all(np.isfinite(float(r["loss"])) for r in rows)
    info = json.loads((folder / "train_config.json").read_text())
    assert info["config"]["arch"] == arch and info["weights_dtype"] == "float16"
    assert np.isfinite(info["final_loss"]) and info["first_loss"] < 1.5 * info["uniform_loss"]
    assert {str(v.dtype) for v in load_file(str(folder / "model.safetensors")).values()} == {"torch.float16"}


def test_checkpoints_load_through_the_registry(trained, tmp_path, monkeypatch):
    _, folders = trained
    reg = tmp_path / "checkpoints.yaml"
    reg.write_text("".join(
        f"{arch}-tiny:\n  family: {'slstm' if arch == 'slstm' else 'hf'}\n  kind: encoder\n"
        f"  source: {{path: {folder}}}\n  sentence: {'g' if arch == 'slstm' else 'cls'}\n"
        for arch, folder in folders.items()))
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(reg))
    tokens = None
    for arch in folders:
        acts = probes.extract(f"{arch}-tiny", TEXTS, maps=True, cache_dir=None, progress=False)
        assert acts.hidden.shape[0] == 3 and acts.hidden.shape[2] == 16 and acts.hidden.dtype == np.float32
        assert acts.tokens[0][0] == "[CLS]" and acts.tokens[0][-1] == "[SEP]"
        tokens = tokens or acts.tokens
        assert acts.tokens == tokens  # one tokenizer for all three
        assert set(acts.maps) == ({"gates", "gates_dominant", "sentence_weights"} if arch == "slstm" else {"attention"})
        enc = probes.load(f"{arch}-tiny")
        assert next(enc.model.parameters()).dtype.is_floating_point and \
            str(next(enc.model.parameters()).dtype) == "torch.float32"


def test_same_seed_same_model(corpus, tmp_path, trained):
    out, folders = trained
    shared = out / "wordpiece-200"  # the first run trained the tokenizer there; the others loaded it
    assert json.loads((shared / "tokenizer_training.json").read_text())["vocab_size"] == 200
    again = train(tiny_cfg("slstm", corpus, tmp_path, tokenizer=str(shared)))
    a, b = load_file(str(folders["slstm"] / "model.safetensors")), load_file(str(again / "model.safetensors"))
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
    assert [r["loss"] for r in log_rows(again)] == [r["loss"] for r in log_rows(folders["slstm"])]
    assert (again / "tokenizer.json").read_text() == (folders["slstm"] / "tokenizer.json").read_text()
    other = train(tiny_cfg("slstm", corpus, tmp_path, seed=1, name="seed1", tokenizer=str(shared)))
    assert [r["loss"] for r in log_rows(other)] != [r["loss"] for r in log_rows(again)]


def test_pack_blocks_keeps_sentences_whole_and_documents_apart():
    sents = [(0, [1, 2, 3]), (0, [4, 5]), (0, [6, 7, 8, 9]), (1, [10]), (1, list(range(11, 20)))]
    assert pack_blocks(sents, 5) == [[1, 2, 3, 4, 5], [6, 7, 8, 9], [10], [11, 12, 13, 14, 15], [16, 17, 18, 19]]


def test_bad_arguments_are_one_line_errors(corpus, tmp_path, capsys):
    with pytest.raises(ProbeError, match="unknown --arch 'gpt2'"):
        train(tiny_cfg("gpt2", corpus, tmp_path))
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text("{}")
    (tmp_path / "tok" / "tokenizer_training.json").write_text('{"vocab_size": 999, "kind": "wordpiece"}')
    with pytest.raises(ProbeError, match="pass another --tokenizer folder"):
        train(tiny_cfg("slstm", corpus, tmp_path, tokenizer=str(tmp_path / "tok")))
    with pytest.raises(SystemExit) as e:
        run_main(main, ["--arch", "slstm", "--seq-len", "4096", "--out-dir", str(tmp_path)])
    assert e.value.code == 2 and "error: --seq-len 4096" in capsys.readouterr().err


def test_default_output_is_under_out_and_a_model_is_replaced_only_with_overwrite(corpus, tmp_path, monkeypatch,
                                                                                   capsys):
    """The defaults never write into the committed checkpoints/: out/checkpoints/<arch>-small. A second run
    into a finished folder is one error line (exit 2) and leaves it as it was; --overwrite replaces it. Every
    file written has the mode a new file gets under the umask (safetensors' save_file makes 0600 ones)."""
    monkeypatch.chdir(tmp_path)
    args = ["--arch", "bert", "--corpus", str(corpus), "--vocab-size", "200", "--width", "16", "--layers", "1",
            "--heads", "2", "--intermediate", "32", "--max-positions", "64", "--seq-len", "48", "--batch-size", "4",
            "--steps", "2", "--warmup", "1", "--eval-blocks", "4", "--no-progress"]
    main(args)
    folder = tmp_path / "out" / "checkpoints" / "bert-small"
    first = (folder / "model.safetensors").read_bytes()
    umask = os.umask(0)
    os.umask(umask)
    modes = {p.relative_to(tmp_path).as_posix(): oct(p.stat().st_mode & 0o777)
             for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert len(modes) > 8 and set(modes.values()) == {oct(0o666 & ~umask)}, modes
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        run_main(main, [*args, "--seed", "1"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "--overwrite" in err
    assert (folder / "model.safetensors").read_bytes() == first
    main([*args, "--seed", "1", "--overwrite"])
    assert (folder / "model.safetensors").read_bytes() != first
    assert json.loads((folder / "train_config.json").read_text())["config"]["seed"] == 1
    assert not [p.name for p in folder.parent.iterdir() if p.name.startswith(".")]
