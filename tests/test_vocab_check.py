"""The suite's own architectures get the check Hugging Face folders get: an S-LSTM or Graph-Transformer folder whose
tokenizer gives ids beyond the model's embedding table is refused with one line when it is loaded, instead of an
IndexError deep in the first forward pass."""

from __future__ import annotations

import shutil

import pytest
import torch

import probes
from probes import CheckpointError
from probes.checkpoints.folder import id_range
from probes.models import mog, slstm


def folder_with(tmp_path, family: str, vocab_size: int):
    """A native folder of ``family`` with ``vocab_size`` embedding rows and MiniLM's tokenizer (30,522 ids)."""
    folder = tmp_path / f"{family}-{vocab_size}"
    torch.manual_seed(0)
    if family == "slstm":
        slstm.save_pretrained(slstm.SLSTMForMaskedLM(slstm.SLSTMConfig(vocab_size=vocab_size, hidden_size=16,
                                                                       num_layers=1)), folder)
    else:
        mog.save_pretrained(mog.MoGForMaskedLM(mog.MoGConfig(vocab_size=vocab_size, hidden_size=16, num_layers=1,
                                                             num_heads=2, intermediate_size=32)), folder)
    minilm = probes.get_spec("minilm-l6").local_path()
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (minilm / name).is_file():
            shutil.copy(minilm / name, folder / name)
    return folder


@pytest.mark.parametrize("family, sentence", [("slstm", "g"), ("mog", "cls")])
def test_a_tokenizer_beyond_the_embedding_table_is_one_line(tmp_path, monkeypatch, family, sentence):
    small, fits = folder_with(tmp_path, family, 100), folder_with(tmp_path, family, 30522)
    reg = tmp_path / "reg.yaml"
    reg.write_text("".join(f"{name}:\n  family: {family}\n  kind: encoder\n  source: {{path: {path}}}\n"
                           f"  sentence: {sentence}\n" for name, path in (("small", small), ("fits", fits))))
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(reg))
    with pytest.raises(CheckpointError, match=r"^model 'small': its tokenizer has ids up to 30,521 \(30,522 tokens\) "
                                              r"but the model's embedding table has 100 rows") as e:
        probes.load("small")
    assert "\n" not in str(e.value)
    acts = probes.extract("fits", ["A short text.", "Another one, a little longer."], cache_dir=None, progress=False)
    assert acts.n_texts == 2  # a table that covers the tokenizer loads and runs


def test_the_id_range_of_each_kind_of_tokenizer():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(probes.get_spec("minilm-l6").local_path())
    assert id_range(tok) == (30522, 30522)
    assert id_range(probes.load_tokenizer("minilm-l6")) == (30522, 30522)  # the suite's wrapper of it

    class Pieces:  # the suite's SentencePiece tokenizer: fairseq's ids, the pieces after 4 special ids
        sp, offset = type("SP", (), {"get_piece_size": lambda self: 50})(), 4

    assert id_range(Pieces()) == (54, 50)
    assert id_range(object()) == (0, None)
