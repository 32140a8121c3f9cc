"""analyses.summary.recurrence_claims: the verdicts follow the numbers of planted result files."""

from __future__ import annotations

import json

import pytest

from analyses.summary.recurrence_claims import Config, main, render
from probes.errors import ProbeError


def _ppl(root, model, rows, trained=None):
    path = root / "results" / "perplexity" / f"{model}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    model_doc = {"name": model, **({"recurrence": {"overlap": trained}} if trained is not None else {})}
    path.write_text(json.dumps({"model": model_doc, "rows": [
        {"window": T, "overlap": o, "token_perplexity": p, "word_perplexity": 1.3 * p, "flops_per_token": f}
        for T, o, p, f in rows]}))


def _topics(root, a, b, jsd_a, jsd_b, share):
    path = root / "results" / "topics" / f"{a}-vs-{b}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    stats = {"n_contexts": 100, "mean_jsd_a": jsd_a, "mean_jsd_b": jsd_b, "mean_jsd_reference": 0.3,
             "share_a_less": share, "n_ties": 2, "sign_test_p": 0.5, "sign_test_p_a_less": 0.25, "wilcoxon_p": 0.4,
             "paper_direction_held": jsd_a < jsd_b and share > 0.5}
    path.write_text(json.dumps({"statistics": stats, "model_a": {"window": 128}}))


def test_verdicts_follow_the_numbers(tmp_path):
    out = tmp_path / "real"
    _ppl(out / "T64", "b", [(64, 0, 20.0, 3e8), (64, 16, 19.0, 4e8)])
    _ppl(out / "T64", "r", [(64, 0, 18.5, 3e8), (64, 16, 19.5, 4e8)], trained=0)  # better at o=0, worse at 16
    _ppl(out / "T128", "b", [(128, 0, 17.0, 3e8), (128, 32, 16.0, 4e8)])
    _ppl(out / "T128", "r", [(128, 0, 16.5, 3e8), (128, 32, 15.9, 4e8)], trained=0)
    _topics(out / "T128", "r", "b", 0.5, 0.6, 0.7)
    text = render(Config(out=str(out), base="b", recurrent="r", gpt2_out=str(tmp_path / "none"), encoders=[]))
    lines = {tuple(c.strip() for c in line.split("|")[1:4]): line for line in text.splitlines()
             if line.startswith("| b / r")}
    assert lines[("b / r", "64", "0")].endswith("| yes | holds |")
    assert lines[("b / r", "64", "16")].endswith("| no (trained at o=0) | does not hold |")
    assert "+2.63%" in lines[("b / r", "64", "16")]
    claim2 = [line for line in text.split("## Claim 2")[1].split("## Claim 3")[0].splitlines()
              if line.startswith("| b")]
    assert claim2[0].endswith("| holds |")  # T=64: recurrent o=0 18.5 <= base o=16 19.0
    assert claim2[1].endswith("| does not hold |")  # T=128: 16.5 > base o=32 16.0
    claim3 = text.split("## Claim 3")[1]
    assert "| r vs b | 128 | 100 | 0.5000 | 0.6000 | 0.3000 | 70.0% |" in claim3 and "| holds |" in claim3


def test_claim_2_compares_recurrent_o0_with_base_at_t_over_4(tmp_path):
    out = tmp_path / "real"
    _ppl(out / "T64", "b", [(64, 0, 20.0, 3e8), (64, 16, 19.0, 4e8)])
    _ppl(out / "T64", "r", [(64, 0, 18.5, 3e8), (64, 16, 18.4, 4e8)], trained=0)
    text = render(Config(out=str(out), base="b", recurrent="r", window=[64], gpt2_out=str(tmp_path), encoders=[]))
    claim2 = [line for line in text.split("## Claim 2")[1].splitlines() if line.startswith("| b")][0]
    assert "18.50 / 24.05" in claim2 and "(o=16) 19.00" in claim2 and claim2.endswith("| holds |")


def test_no_results_is_one_line_error(tmp_path):
    with pytest.raises(ProbeError, match="make recurrence-real"):  # hermetic: not the checkout's out/
        main(["--out", str(tmp_path), "--gpt2-out", str(tmp_path / "no-demo")])
