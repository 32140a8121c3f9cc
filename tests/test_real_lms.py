"""The two real causal LMs of ``make models`` (smollm2-135m, gemma3-270m): skipped unless installed.

They load as encoders (``hf`` family: hidden states of every layer) and as LMs with their head, and
the recurrence wraps them without changing the first window. Each test loads one model (~1 GB of
float32 for Gemma-3), so they run only where ``make models`` has run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import probes
from probes.models.lm import load_lm
from probes.models.recurrent import RecurrenceConfig, RecurrentLM

REPO_ROOT = Path(__file__).resolve().parent.parent
SHAPES = {"smollm2-135m": ("llama", 30, 576), "gemma3-270m": ("gemma3_text", 18, 640)}


def _installed(name):
    return pytest.mark.skipif(not (REPO_ROOT / "models" / name / "config.json").exists(),
                              reason=f"{name} is not installed (run `make models`)")


@pytest.fixture(params=[pytest.param(n, marks=_installed(n)) for n in SHAPES])
def name(request, monkeypatch):
    monkeypatch.delenv("PROBES_CHECKPOINTS", raising=False)
    return request.param


def test_provenance_says_dequantised(name):
    prov = json.loads((REPO_ROOT / "models" / name / "provenance.json").read_text())
    assert prov["weights"].startswith("dequantised Q4")
    assert len(prov["gguf"]["sha256"]) == 64 and prov["converted"]["dtype"] == "float32"


@torch.inference_mode()
def test_loads_as_encoder_and_as_lm_and_wraps_exactly(name):
    model_type, layers, width = SHAPES[name]
    acts = probes.extract(name, ["A short sentence.", "Another, slightly longer sentence here."],
                          cache_dir=None, progress=False)
    assert acts.hidden.shape[0] == layers + 1 and acts.hidden.shape[2] == width
    lm = load_lm(name)
    assert (lm.base.config.model_type, lm.base.config.num_hidden_layers, lm.base.config.hidden_size) == SHAPES[name]
    x = torch.tensor([[lm.tokenizer.bos_token_id, *lm.encode("The river flows through the old town and")]])
    plain = lm.model(input_ids=x).logits
    rec = RecurrentLM(lm.model, RecurrenceConfig(window=16, l_ins=2, ffn_hidden=[8])).eval()
    assert torch.equal(rec(x).logits, plain)  # no h_prev: exactly the plain model
    h = torch.randn(1, width, generator=torch.Generator().manual_seed(0))
    assert (rec(x, h_prev=h).logits - plain).abs().amax(-1).min() > 0  # every position sees h_prev


@_installed("smollm2-135m")
@torch.inference_mode()
def test_the_committed_module_runs_on_its_base_from_models(monkeypatch):
    """smollm2-135m-recurrent = committed module + models/smollm2-135m: first window exactly the base,
    h_prev changes the next window, and the module was trained on exactly these base weights."""
    monkeypatch.delenv("PROBES_CHECKPOINTS", raising=False)
    rec, base = load_lm("smollm2-135m-recurrent"), load_lm("smollm2-135m")
    info = json.loads((REPO_ROOT / "checkpoints" / "smollm2-135m-recurrent" / "training_config.json").read_text())
    assert info["mode"] == "frozen" and info["base_model"]["name"] == "smollm2-135m"
    assert rec.fingerprint["weights_sha256"] == base.fingerprint["weights_sha256"]
    x = torch.tensor([rec.encode("It is a truth universally acknowledged, that a single man in possession")])
    first = rec.model(x)
    assert torch.equal(first.logits, base.model(input_ids=x).logits)
    assert not torch.allclose(rec.model(x, h_prev=first.h_next).logits, first.logits, atol=1e-3)
