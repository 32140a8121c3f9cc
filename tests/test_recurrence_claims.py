"""analyses.summary.recurrence_claims: the tables' verdicts are the main claim table's, from the same
claim declarations, on planted result files."""

from __future__ import annotations

import claims_docs as docs
import numpy as np
import pytest

from analyses.summary import claims
from analyses.summary.recurrence_claims import Config, main, render
from probes.errors import ProbeError


def _ppl(root, base_gap: dict, window: int, n_docs: int = 40) -> None:
    """base and rec at overlaps 0 and T/4 (recurrent minus base: ``base_gap[o]`` nats per token)."""
    rng = np.random.default_rng(window)
    tokens = rng.integers(500, 2000, n_docs).astype(float)
    doc = rng.normal(3.5, 0.4, n_docs)
    overlaps = (0, window // 4)
    docs.write(root, "perplexity", [
        docs.perplexity("b", False, {o: doc - 0.01 * o / window + rng.normal(0, 0.005, n_docs) for o in overlaps},
                        tokens, window),
        docs.perplexity("r", True, {o: doc + base_gap[o] + rng.normal(0, 0.005, n_docs) for o in overlaps}, tokens,
                        window)])


def _table(text: str, claim: int) -> list[str]:
    part = text.split(f"## Claim {claim}")[1].split("## ")[0]
    return [line for line in part.splitlines() if line.startswith("| b / r") or line.startswith("| r vs b")]


def test_the_tables_read_the_claims_verdicts(tmp_path):
    out = tmp_path / "real"
    _ppl(out / "T64", {0: -0.05, 16: 0.05}, 64)  # recurrent better at o = 0, worse at o = 16
    rng = np.random.default_rng(0)
    ctx = rng.uniform(0.3, 0.8, 100)
    docs.write(out / "T128", "topics", [docs.topics("r", "b", ctx - 0.1 + rng.normal(0, 0.02, 100),
                                                    ctx + rng.normal(0, 0.02, 100))])
    _ppl(out / "T128", {0: -0.05, 32: -0.05}, 128)
    cfg = Config(out=str(out), base="b", recurrent="r", gpt2_out=str(tmp_path / "none"), encoders=[])
    text = render(cfg)
    c1 = _table(text, 1)
    assert [line.split("|")[2:4] for line in c1] == [[" 64 ", " 0 "], [" 64 ", " 16 "], [" 128 ", " 0 "],
                                                     [" 128 ", " 32 "]]
    assert "| yes |" in c1[0] and "| no (trained at o=0) |" in c1[1]
    # one seed: each row's verdict is the claim's, inconclusive with its reason; the intervals say the direction
    found = {c.key: c for f in claims.evaluate(out / "T64") for c in f.comparisons if f.analysis == "perplexity"}
    assert f"| {found[(64, 0)].verdict} | {found[(64, 0)].reason} |" in c1[0]
    assert all("| inconclusive | its interval excludes" in line for line in c1)
    assert " [-" in c1[0].split("|")[10] and " [+" in c1[1].split("|")[10]
    (c2_64, c2_128) = _table(text, 2)
    assert "(o=16)" in c2_64 and "(o=32)" in c2_128  # the only overlap measured, the closest to T/10
    (c3,) = _table(text, 3)
    assert "| r vs b | 128 | 100 |" in c3 and "| inconclusive |" in c3


def test_too_few_documents_are_not_testable_in_the_tables(tmp_path):
    out = tmp_path / "real"
    _ppl(out / "T64", {0: -0.05, 16: -0.05}, 64, n_docs=7)
    text = render(Config(out=str(out), base="b", recurrent="r", window=[64], gpt2_out=str(tmp_path), encoders=[]))
    assert all("| not testable | too few units" in line for line in _table(text, 1) + _table(text, 2))


def test_no_results_is_one_line_error(tmp_path):
    with pytest.raises(ProbeError, match="make recurrence-real"):  # hermetic: not the checkout's out/
        main(["--out", str(tmp_path), "--gpt2-out", str(tmp_path / "no-demo")])
