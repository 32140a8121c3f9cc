"""Bad input to the SAE analysis is one ``error:`` line and exit 2 on the command line, one ProbeError line from
Python: a layer the model does not have, k above the SAE's width (given, or the default 8 x d), NaN states (a
registered random model whose weights overflow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyses import sae as sae_analysis
from analyses.common import run_main
from probes.errors import ProbeError

ROOT = Path(__file__).resolve().parent.parent
NAN_MODEL = """nan-bert:
  family: hf
  kind: encoder
  source:
    random: {model_type: bert, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4,
             intermediate_size: 64, max_position_embeddings: 512, initializer_range: 1.0e+30}
    tokenizer: minilm-l6
    seed: 0
  sentence: cls
  special_tokens: true
  description: a random BERT whose weights overflow, so its states are NaN
"""

CASES = {
    "missing layer": (["--layers", "3"], "--layers 3 is out of range for a model with 2 layers"),
    "k above the width": (["--k", "20", "--width", "16"], "--k 20 is more than --width 16"),
    "k above 8 x d": (["--k", "300"], "--k 300 is more than the SAE's 256 latents"),
    "NaN states": (["--model", "nan-bert", "--k", "4", "--width", "16"], "token states hold NaN or inf"),
}


@pytest.fixture
def registry(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text(NAN_MODEL)
    return str(path)


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_error_line_and_exit_2(case, registry, tmp_path, capsys):
    argv, message = CASES[case]
    model = [] if "--model" in argv else ["--model", "tiny-bert"]
    with pytest.raises(SystemExit) as e:
        run_main(sae_analysis.main, [*model, *argv, "--registry", registry, "--n-sentences", "12", "--steps", "2",
                                     "--resamples", "10", "--no-save", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip()]  # (progress bars aside)
    assert e.value.code == 2 and lines[-1].startswith("error: ") and message in lines[-1], err
    assert err.count("error") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "results" / "sae").exists() or not list((tmp_path / "results" / "sae").iterdir())


@pytest.mark.parametrize("case", ["missing layer", "k above the width", "k above 8 x d"])
def test_bad_input_from_python_is_one_probe_error(case, tmp_path):
    argv, message = CASES[case]
    settings = {"layers": [3]} if case == "missing layer" else {"k": int(argv[1])}
    if "--width" in argv:
        settings["width"] = int(argv[3])
    texts = [f"Sentence {i} is about the cat and the sea today." for i in range(12)]
    with pytest.raises(ProbeError) as e:
        sae_analysis.run("tiny-bert", texts, steps=2, resamples=10, save=False, cache_dir=None, **settings)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_nan_states_from_python_are_one_probe_error():
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=4096, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64, max_position_embeddings=64))
    with torch.no_grad():
        model.encoder.layer[0].output.dense.weight.fill_(float("nan"))
    tokenizer = AutoTokenizer.from_pretrained(ROOT / "checkpoints" / "bert-small")  # a WordPiece of 4096
    texts = [f"Sentence {i} is about the cat and the sea today." for i in range(12)]
    with pytest.raises(ProbeError, match=r"layer 1: \d+ of \d+ token states hold NaN or inf") as e:
        sae_analysis.run(model, texts, tokenizer=tokenizer, name="nan-bert", layers=[1], k=4, width=16, steps=2,
                         resamples=10, save=False, splice=False, cache_dir=None)
    assert "\n" not in str(e.value)
