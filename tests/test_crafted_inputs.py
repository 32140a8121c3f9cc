"""Crafted files anywhere the suite reads: JSON nested deeper than Python's reader goes (a model folder's
config.json, its sentence-transformers modules.json and 1_Pooling/config.json, a result file, a corpus line), and a
FIFO or a device named as a registry or a corpus. Each is one ``error:`` line with exit status 2 that names the
file: no RecursionError traceback, no hang, no MemoryError."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from pathlib import Path

import pytest
import torch

import probes
from analyses.common import read_results
from probes import ProbeError
from probes.config import run_main
from probes.corpus import load_corpus
from probes.io import loads_json, read_regular

DEEP = "[" * 100_000 + "]" * 100_000  # beyond Python's recursion limit
ARGS = ["--n-sentences", "20", "--n-tokens", "60", "--no-figures"]


@contextlib.contextmanager
def deadline(seconds: int = 60):
    """A hang (reading a FIFO) fails the test instead of stopping the suite."""
    def stop(*_):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def cli_error(capsys, module, argv: list[str]) -> str:
    """The one ``error:`` line of ``module``'s command line run on ``argv`` (exit status 2)."""
    with deadline(), pytest.raises(SystemExit) as done:
        run_main(module.main, argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert done.value.code == 2 and len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    from transformers import AutoTokenizer, BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(probes.get_spec("minilm-l6").local_path())
    torch.manual_seed(0)
    f = tmp_path_factory.mktemp("models") / "good"
    BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(f)
    tok.save_pretrained(f)
    return f


def test_deep_json_is_a_value_error_and_one_line_for_a_file():
    with pytest.raises(ValueError, match="nested too deeply"):
        loads_json(DEEP)
    assert loads_json("[[1]]") == [[1]]


@pytest.mark.parametrize("where", ["config.json", "modules.json", "1_Pooling/config.json"])
def test_a_deeply_nested_json_file_in_a_model_folder_is_one_line(folder, tmp_path, capsys, where):
    from analyses import anisotropy

    model = tmp_path / "deep"
    shutil.copytree(folder, model)
    if where != "config.json":  # a sentence-transformers folder, its pooling file nested too deeply
        (model / "1_Pooling").mkdir()
        (model / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "", "type": "x.Transformer"},
                                                        {"idx": 1, "name": "1", "path": "1_Pooling",
                                                         "type": "x.Pooling"}]))
        (model / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    path = model / where
    path.write_text(DEEP if where != "1_Pooling/config.json" else '{"pooling_mode_mean_tokens": ' + DEEP + "}")
    line = cli_error(capsys, anisotropy, ["--model", str(model), *ARGS, "--out", str(tmp_path / "out")])
    assert "nested too deeply" in line and str(path) in line, line


def test_a_deeply_nested_result_file_is_one_line_naming_it(tmp_path, capsys):
    from analyses.summary import claims, report

    results = tmp_path / "out" / "results" / "anisotropy"
    results.mkdir(parents=True)
    bad = results / "deep.json"
    bad.write_text(DEEP)
    with pytest.raises(ProbeError, match="deep.json .*nested too deeply"):
        read_results(tmp_path / "out", "anisotropy")
    assert "deep.json" in cli_error(capsys, claims, ["--out", str(tmp_path / "out")])
    with pytest.raises(ProbeError, match="deep.json"):
        report.write_report(tmp_path / "out")


def test_a_deeply_nested_corpus_line_is_one_line(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "fine"}\n{"text": ' + DEEP + "}\n")
    with pytest.raises(ProbeError, match=r"c\.jsonl, line 2: not valid JSON \(nested too deeply"):
        load_corpus(corpus)


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "fifo.yaml"
    os.mkfifo(path)
    return path


def test_read_regular_refuses_a_fifo_and_a_device_at_once(fifo):
    for path, kind in ((fifo, "a FIFO"), (Path("/dev/zero"), "a character device"), (fifo.parent, "a folder")):
        with deadline(20), pytest.raises(OSError, match=kind):
            read_regular(path)


@pytest.mark.parametrize("how", ["env-fifo", "env-device", "flag-fifo", "corpus-fifo", "corpus-device"])
def test_a_fifo_or_a_device_as_registry_or_corpus_is_one_line(fifo, tmp_path, capsys, monkeypatch, how):
    from analyses import anisotropy

    argv = ["--model", "tiny-bert", *ARGS, "--out", str(tmp_path / "out")]
    target = fifo if how.endswith("fifo") else Path("/dev/zero")
    if how.startswith("env"):
        monkeypatch.setenv("PROBES_CHECKPOINTS", str(target))
    elif how == "flag-fifo":
        argv += ["--registry", str(fifo)]
    else:
        corpus = tmp_path / "corpus.txt"
        corpus.symlink_to(target)  # a .txt name that is not a regular file
        argv += ["--corpus", str(corpus)]
    line = cli_error(capsys, anisotropy, argv)
    assert "not a regular file" in line, line
