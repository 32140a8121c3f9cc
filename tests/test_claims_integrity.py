"""What the claims count as a seed and as a model's result: seeds are told apart by their weights as well as their
names, and one analysis's folder holds one result per model. An input that would make one trained model count as
several seeds, or make the claims pick one of two results silently, ends in one error line naming both (exit 2)."""

from __future__ import annotations

import json

import claims_docs as docs
import pytest

from analyses.summary import claims, evidence
from probes.errors import ProbeError


def _weights(tag: str) -> dict:
    return {"fingerprint": {"weights_sha256": (tag * 64)[:64], "files_sha256": "f" * 64}}


def _anisotropy_seeds(out, slstm_weights: list[str], bert_weights: list[str], seeds=(0, 1, 2)) -> None:
    """Anisotropy results of slstm-small and bert-small at ``seeds``, each model's seeds with the weights given;
    the S-LSTM's token cosine clearly nearer zero in every seed."""
    found = []
    for i, seed in enumerate(seeds):
        suffix = "" if seed == 0 else f"-seed{seed}"
        found += [docs.anisotropy(f"slstm-small{suffix}", "slstm", 0.10 + 0.01 * i, 0.2, seed=seed,
                                  model=_weights(slstm_weights[i])),
                  docs.anisotropy(f"bert-small{suffix}", "bert", 0.40 + 0.02 * i, 0.6, seed=10 + seed,
                                  model=_weights(bert_weights[i]))]
    docs.write(out, "anisotropy", found)


def _token_claim(out) -> claims.Finding:
    return next(f for f in claims.evaluate(out) if f.analysis == "anisotropy" and "token" in f.claim)


def test_seeds_with_their_own_weights_are_counted_as_seeds(tmp_path):
    _anisotropy_seeds(tmp_path, ["a", "b", "c"], ["d", "e", "f"])
    f = _token_claim(tmp_path)
    assert f.verdict == claims.HOLDS and f.n_seeds == 3


def test_one_checkpoint_under_three_seed_names_is_an_error_naming_both(tmp_path, capsys):
    """The same weights registered as slstm-small, -seed7 and -seed8 would count as three seeds and "hold" on an
    interval over seeds of zero width; they are one model."""
    _anisotropy_seeds(tmp_path, ["a", "a", "a"], ["d", "e", "f"], seeds=(0, 7, 8))
    with pytest.raises(ProbeError, match=r"slstm-small and slstm-small-seed7 have the same weights \(weights_sha256 "
                                         r"aaaaaaaaaaaa\.\.\.\)"):
        claims.evaluate(tmp_path)
    with pytest.raises(SystemExit) as e:
        claims.run_main(claims.main, ["--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and err[0].startswith("error: slstm-small and slstm-small-seed7")


def test_two_results_of_one_seed_are_an_error(tmp_path):
    """bert-small and bert-small-seed0 both name seed 0: the claims would keep whichever came last."""
    _anisotropy_seeds(tmp_path, ["a", "b", "c"], ["d", "e", "f"])
    docs.write(tmp_path, "anisotropy", [docs.anisotropy("bert-small-seed0", "bert", 0.9, 0.9, model=_weights("g"))])
    with pytest.raises(ProbeError, match="of bert-small and bert-small-seed0 are both seed 0 of model bert-small"):
        claims.evaluate(tmp_path)


def test_a_backup_copy_beside_a_result_is_an_error_naming_both_files(tmp_path, capsys):
    """slstm-small.old.json (an older run, same model_name) sorts after slstm-small.json and was read last."""
    _anisotropy_seeds(tmp_path, ["a", "b", "c"], ["d", "e", "f"])
    folder = tmp_path / "results" / "anisotropy"
    old = json.loads((folder / "slstm-small.json").read_text())
    old["layers"][-1]["token"]["mean"] = 0.9
    (folder / "slstm-small.old.json").write_text(json.dumps(old))
    with pytest.raises(ProbeError) as e:
        evidence.load_all(tmp_path)
    assert f"{folder / 'slstm-small.json'} and {folder / 'slstm-small.old.json'}" in str(e.value)
    assert "both anisotropy results of model slstm-small" in str(e.value)
    with pytest.raises(SystemExit) as e:
        claims.run_main(claims.main, ["--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "slstm-small.old.json" in err[0]


def test_a_result_without_weights_hashes_is_still_read(tmp_path):
    """Results that record no weights hash (written before fingerprints existed) cannot be told apart by weights;
    they are grouped by name as before."""
    _anisotropy_seeds(tmp_path, ["a", "b", "c"], ["d", "e", "f"])
    folder = tmp_path / "results" / "anisotropy"
    for p in folder.glob("*.json"):
        doc = json.loads(p.read_text())
        doc["model"].pop("fingerprint")
        p.write_text(json.dumps(doc))
    assert _token_claim(tmp_path).n_seeds == 3


def test_the_topic_claim_counts_a_recurrent_checkpoint_once(tmp_path):
    """Topics results pair a recurrent and a base LM; two recurrent "seeds" with one set of weights are one."""
    found = []
    for seed in (0, 1):
        suffix = "" if seed == 0 else f"-seed{seed}"
        d = docs.topics(f"rec{suffix}", f"base{suffix}", [0.2] * 30, [0.3] * 30)
        d["model_a"].update(_weights("a"))
        d["model_b"].update(_weights("bc"[seed]))
        found.append(d)
    docs.write(tmp_path, "topics", found)
    with pytest.raises(ProbeError, match="rec and rec-seed1 have the same weights"):
        claims.evaluate(tmp_path)
    found[1]["model_a"].update(_weights("z"))
    docs.write(tmp_path, "topics", found)
    f = next(f for f in claims.evaluate(tmp_path) if f.analysis == "topics")
    assert f.n_seeds == 2
