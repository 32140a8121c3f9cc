"""Inputs built to break the suite, one test each: damaged model folders, cache removal outside a cache, claims
from odd result files, training recipes on foreign folders, report escaping, a full disk, bad numeric flags.

Every case ends in one ``error:`` line (a ProbeError, exit 2 through run_main) or a correct result, never in a
wrong number, lost data or a traceback. Models: tiny BERT folders made here with ``save_pretrained`` (seconds),
the committed checkpoints, and the seeded random ``tiny-bert`` entry.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from claims_docs import anisotropy_row

import probes
import probes.capture.cache as pc
import probes.capture.store as ps
from analyses.common import read_result, read_results
from analyses.summary import claims, report
from probes import ProbeError, extract
from probes.config import arg, parse_config
from probes.io import atomic_write

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER = ROOT / "checkpoints" / "bert-small"  # a real WordPiece tokenizer of 4096 entries
TEXTS = ["Hello world.", "Representations change layer by layer.", "Short."]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A saved tiny BERT with its tokenizer: the good folder every bad one is made from."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    f = tmp_path_factory.mktemp("models") / "good"
    BertModel(BertConfig(vocab_size=4096, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(f)
    for p in TOKENIZER.glob("tokenizer*.json"):
        shutil.copy(p, f)
    return f


def variant(folder: Path, tmp_path: Path, config: dict | None = None, drop: tuple = (), weights=None) -> str:
    """A copy of ``folder`` with config fields changed, files dropped, or other weights."""
    out = tmp_path / "model"
    shutil.copytree(folder, out)
    for name in drop:
        (out / name).unlink()
    if config:
        cfg = json.loads((out / "config.json").read_text())
        (out / "config.json").write_text(json.dumps({**cfg, **config}))
    if weights is not None:
        from safetensors.torch import load_file, save_file

        state = {k: v.clone() for k, v in load_file(out / "model.safetensors").items()}  # not a map of the file
        save_file(weights(state), out / "model.safetensors", metadata={"format": "pt"})
    return str(out)


def error_of(fn, *args, **kw) -> str:
    with pytest.raises(ProbeError) as e:
        fn(*args, **kw)
    text = str(e.value)
    assert "\n" not in text
    return text


# --------------------------------------------------------------------------- A1, A2, B9, B13, C15, C20: model folders


def test_the_good_folder_and_the_committed_checkpoints_load(folder):
    assert probes.load(str(folder)).num_layers == 2
    for name in ("minilm-l6", "bert-small", "albert-small", "slstm-small", "mog-small", "gpt2-small-base"):
        assert probes.load(name).num_layers >= 1, name


@pytest.mark.parametrize("case, change, expected", [
    ("dir-notok", {"drop": ("tokenizer.json", "tokenizer_config.json")}, "has no tokenizer files"),
    ("dir-partial", {"weights": lambda d: {k: v for k, v in d.items() if "layer.1." not in k}},
     "16 weights missing (encoder.layer.1."),
    ("dir-mismatch", {"weights": lambda d: {f"h.0.{k}": v for k, v in d.items()}}, "weights missing"),
    ("dir-extra", {"config": {"num_hidden_layers": 1}}, "weights unexpected (encoder.layer.1."),
    ("dir-hugepos", {"config": {"max_position_embeddings": 10 ** 12}}, "max_position_embeddings = 1000000000000"),
    ("dir-longpos", {"config": {"max_position_embeddings": 100_000}}, "says 100000 positions but"),
    ("dir-automap", {"config": {"auto_map": {"AutoModel": "modeling.X"}}}, "custom code (auto_map)"),
    ("dir-nanweights", {"weights": lambda d: {k: v.fill_(float("nan")) if k.endswith("output.dense.weight") else v
                                               for k, v in d.items()}}, "holds NaN or inf"),
    ("dir-badsize", {"config": {"hidden_size": -32}}, "hidden_size = -32"),
])
def test_a_bad_model_folder_is_one_line_before_anything_runs(folder, tmp_path, case, change, expected):
    path = variant(folder, tmp_path, **change)
    text = error_of(probes.load, path)
    assert expected in text and (path in text or "dir--model--" in text), (case, text)


class _Evil:
    def __reduce__(self):
        return (print, ("a pickle ran code",))


def test_a_pickle_asking_for_code_is_one_line_without_a_torch_warning(folder, tmp_path, recwarn):
    path = Path(variant(folder, tmp_path, drop=("model.safetensors",)))
    torch.save({"x": _Evil()}, path / "pytorch_model.bin", _use_new_zipfile_serialization=False, pickle_protocol=4)
    assert "refused" in error_of(probes.load, str(path))
    assert not [w for w in recwarn if "pickle" in str(w.message)]


def test_a_weight_file_that_is_not_safetensors_is_one_line(folder, tmp_path):
    path = Path(variant(folder, tmp_path))
    (path / "model.safetensors").write_bytes(b"\xff" * 64)
    assert "is not a readable safetensors file" in error_of(probes.load, str(path))


def test_nan_states_give_no_eigen_crash():
    from analyses.anisotropy import max_explainable_variance

    groups = [np.full((3, 4), np.nan), np.eye(3, 4)]
    assert np.isnan(max_explainable_variance(groups))  # null in the result, listed under nulls; no LinAlgError


def test_an_empty_model_name_is_not_the_current_folder():
    assert "model name is empty" in error_of(probes.load, "")


def test_the_weight_loader_never_silences_transformers():
    src = "\n".join(p.read_text() for p in (ROOT / "probes").rglob("*.py"))
    assert "set_verbosity_error" not in src


def test_a_folder_without_tokenizer_fails_the_cli_with_one_line(folder, tmp_path, capsys):
    from analyses import anisotropy
    from probes.config import run_main

    path = variant(folder, tmp_path, drop=("tokenizer.json",))
    with pytest.raises(SystemExit) as done:  # as python -m runs it (tests/test_cli.py starts the real process)
        run_main(anisotropy.main, ["--model", path, "--n-sentences", "30", "--n-tokens", "100", "--out",
                                   str(tmp_path / "out")])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert done.value.code == 2 and len(lines) == 1 and "no tokenizer files" in lines[0], err[-2000:]
    assert not (tmp_path / "out" / "results").exists()


# --------------------------------------------------------------------------- A3: cache remove


def test_cache_remove_refuses_a_root_that_is_not_a_cache_and_foreign_folders(tmp_path, capsys):
    out = tmp_path / "out"
    extract("tiny-bert", TEXTS, cache_dir=out / "cache", progress=False)
    (out / "results" / "redundancy").mkdir(parents=True)
    (out / "results" / "redundancy" / "tiny-bert.json").write_text("{}")
    assert (out / "cache" / ps.CACHE_TAG).read_text() == ps.CACHE_TAG_TEXT
    text = error_of(pc.main, ["--cache", str(out), "remove", "--older-than", "0"])
    assert "is not an activation cache" in text and f"{out / 'cache'}" in text
    assert (out / "results" / "redundancy" / "tiny-bert.json").exists()
    foreign = out / "cache" / "tiny-bert" / "notes"  # not a key
    foreign.mkdir()
    (foreign / "important.txt").write_text("x")
    fake = out / "cache" / "tiny-bert" / ("ab" * 12)  # a key's name, but no meta.json of the cache
    fake.mkdir()
    (fake / "important.txt").write_text("x")
    capsys.readouterr()
    pc.main(["--cache", str(out / "cache"), "remove", "--older-than", "0"])
    captured = capsys.readouterr()
    assert "removed 1 entries" in captured.out
    assert "skipped" in captured.err and "not a cache entry" in captured.err
    assert (foreign / "important.txt").exists() and (fake / "important.txt").exists()


# --------------------------------------------------------------------------- A4, B10, B11, C17, C18, C19: claims


def _claims_out(tmp_path: Path, value: str) -> Path:
    folder = tmp_path / "out" / "results" / "anisotropy"
    folder.mkdir(parents=True, exist_ok=True)
    for name, fam, tok in (("albert-small", "hf", "0.276"), ("slstm-small", "slstm", value)):
        doc = {"analysis": "anisotropy", "model_name": name, "config": {}, "corpus": {}, "headline_layer": 1,
               "definitions": {}, "model": {"family": fam, "kind": "encoder", "num_layers": 4, "hidden_size": 256},
               "layers": [anisotropy_row(0, 0.5, 0.5), anisotropy_row(1, "TOK", 0.3)]}
        (folder / f"{name}.json").write_text(json.dumps(doc).replace('"TOK"', tok))
    return tmp_path / "out"


@pytest.mark.parametrize("case, value, expected", [
    ("cl-nan", "NaN", "the number NaN is not finite"),
    ("cl-big", "1e309", "the number inf is not finite"),
    ("cl-inf", "-Infinity", "the number -Infinity is not finite"),
    ("cl-str", '"0.1"', "/layers/1/token/mean holds the text '0.1'"),
    ("ed-trunc-claims", "0.1, ", "is not a valid result file (Expecting"),
])
def test_claims_read_result_files_strictly_and_name_the_file(tmp_path, case, value, expected):
    out = _claims_out(tmp_path, value)
    text = error_of(claims.evaluate, out)
    assert expected in text and "slstm-small.json" in text, (case, text)


def test_a_null_number_makes_the_claim_not_testable_with_the_reason(tmp_path):
    token = claims.evaluate(_claims_out(tmp_path, "null"))[0]
    assert token.verdict == claims.UNTESTED
    assert "slstm-small's last-layer token cosine is missing (null)" in token.evidence
    token = claims.evaluate(_claims_out(tmp_path, "0.1"))[0]
    assert token.verdict == claims.INCONCLUSIVE and "slstm-small 0.100" in token.evidence  # one seed


def test_number_accepts_only_finite_numbers():
    assert claims.number(1) == 1.0 and claims.number(0.5) == 0.5
    for bad in (None, "0.1", True, float("nan"), float("inf"), [1]):
        with pytest.raises(claims.Untestable):
            claims.number(bad)


@pytest.mark.parametrize("content, expected", [("[1, 2, 3]", "a JSON list, not an object"), ("", "Expecting value")])
def test_a_result_of_the_wrong_shape_is_one_line(tmp_path, content, expected):
    out = _claims_out(tmp_path, "0.1")
    (out / "results" / "anisotropy" / "slstm-small.json").write_text(content)
    assert expected in error_of(claims.evaluate, out)
    assert expected in error_of(read_results, out, "anisotropy")


def test_claims_and_report_refuse_a_folder_without_results(tmp_path):
    for out in (tmp_path / "empty", tmp_path / "missing"):
        (tmp_path / "empty").mkdir(exist_ok=True)
        assert "holds no result files" in error_of(claims.main, ["--out", str(out)])
        assert "holds no result files" in error_of(report.write_report, out)
    assert not (tmp_path / "missing").exists() and not (tmp_path / "empty" / "report.html").exists()


def test_figures_reader_refuses_numbers_as_text_and_bare_nan(tmp_path):
    folder = tmp_path / "results" / "anisotropy"
    folder.mkdir(parents=True)
    (folder / "a.json").write_text('{"model_name": "1.5", "layers": [{"mean": "0.25"}]}')
    assert "/layers/0/mean holds the text '0.25'" in error_of(read_result, folder / "a.json")
    (folder / "a.json").write_text('{"model_name": "x", "layers": [{"mean": NaN}]}')
    assert "a.json" in error_of(read_results, tmp_path, "anisotropy")
    (folder / "a.json").write_text('{"model_name": "1.5", "revision": "2.0", "layers": [{"mean": null}]}')
    assert read_result(folder / "a.json")["layers"][0]["mean"] is None


# --------------------------------------------------------------------------- A5, A6, B14: training recipes


RECIPE = ["--arch", "bert", "--width", "32", "--layers", "1", "--heads", "2", "--intermediate", "64", "--seq-len",
          "64", "--batch-size", "4", "--eval-blocks", "4", "--steps", "2"]


def test_recipes_train_refuses_a_foreign_folder_and_an_escaping_name(tmp_path):
    from recipes.train import main

    victim = tmp_path / "d" / "victim"
    victim.mkdir(parents=True)
    (victim / "important.txt").write_text("x")
    text = error_of(main, [*RECIPE, "--out-dir", str(tmp_path / "d"), "--name", "victim"])
    assert "was not written by recipes.train" in text and str(victim) in text
    assert (victim / "important.txt").read_text() == "x"
    for name in ("../../escape", "a/b", "..", ".hidden"):
        assert "one folder name" in error_of(main, [*RECIPE, "--out-dir", str(tmp_path / "d"), "--name", name])
    assert not (tmp_path.parent / "escape").exists()
    assert "is not a multiple of --heads 3" in error_of(main, [*RECIPE[:7], "3", *RECIPE[8:], "--out-dir",
                                                               str(tmp_path / "d")])


def test_recipes_replace_only_their_own_kind_of_folder(tmp_path):
    from recipes.loop import check_replaceable

    own = tmp_path / "own"
    own.mkdir()
    (own / "train_config.json").write_text(json.dumps({"command": "python -m recipes.train --arch bert"}))
    check_replaceable(own, "recipes.train")  # a rerun retrains its own checkpoint
    check_replaceable(tmp_path / "absent", "recipes.train")
    assert "was not written by recipes.train_lm" in error_of(check_replaceable, own, "recipes.train_lm")
    lm = tmp_path / "lm"
    lm.mkdir()
    (lm / "training_config.json").write_text(json.dumps({"command": "python -m recipes.train_lm finetune"}))
    assert "recipes.train_recurrent" in error_of(check_replaceable, lm, "recipes.train_recurrent")



def test_a_run_never_writes_its_snapshots_over_another_runs_series(tmp_path):
    """The series folder does not follow --out-dir: a second run of the same name elsewhere (a retrain to check a
    model reproduces) would write over the first run's snapshots. Refused unless the run resumes (it keeps its
    own) or --overwrite (the old snapshots go first, so the series never mixes two runs)."""
    from recipes.loop import SNAPSHOT_RECORD, ScaleConfig, check_output, state_dir

    series, out = tmp_path / "series", tmp_path / "elsewhere" / "bert-small"
    for step in (9, 19):
        (series / f"step-{step:07d}").mkdir(parents=True)
        (series / f"step-{step:07d}" / SNAPSHOT_RECORD).write_text("{}")
    cfg = ScaleConfig(snapshots=True, snapshot_dir=str(series))
    text = error_of(check_output, out, "recipes.train", cfg)
    assert str(series) in text and "step-0000009" in text and "--snapshot-dir" in text
    check_output(out, "recipes.train", dataclasses.replace(cfg, snapshots=False))  # no series: nothing to check
    state_dir(out).mkdir(parents=True)
    (state_dir(out) / "state.pt").write_bytes(b"")
    check_output(out, "recipes.train", cfg)  # its own saved state: a resumed run keeps its snapshots
    assert "another run" in error_of(check_output, out, "recipes.train", dataclasses.replace(cfg, resume=False))
    check_output(out, "recipes.train", dataclasses.replace(cfg, resume=False, overwrite=True))
    assert series.is_dir() and not list(series.iterdir())


# --------------------------------------------------------------------------- B7: report escaping


PLANTS = ("<script>alert(1)</script>", "<img src=x onerror=alert(1)>")


def test_the_report_escapes_every_field_it_did_not_write(tmp_path):
    out = _claims_out(tmp_path, "0.1")
    for plant in PLANTS:
        for p in (out / "results" / "anisotropy").glob("*.json"):
            doc = json.loads(p.read_text())
            doc["model_name"] = doc["model_name"] + plant
            doc["model"]["description"] = plant
            doc["provenance"] = {"torch": plant}
            p.write_text(json.dumps(doc))
        red = out / "results" / "redundancy"
        red.mkdir(exist_ok=True)
        (red / "table6.md").write_text(f"| model | k |\n|---|---|\n| {plant} | 3 |\n\n{plant}\n")
        (red / f"x{plant[:2]}.json").write_text(json.dumps({"model_name": plant}))
        top = out / "results" / "topics"
        top.mkdir(exist_ok=True)
        (top / "t.json").write_text(json.dumps({"model_name": plant}))
        (top / "t.csv").write_text(f"model,value\n\"{plant}\",1\n")
        page = report.write_report(out).read_text()
        for bad in ("<script", "<img src=x"):
            assert bad not in page, (plant, page[page.find(bad) - 200:page.find(bad) + 100])
        assert "&lt;script&gt;" in page or "&lt;img" in page


# --------------------------------------------------------------------------- B8, C16: disk full


def test_disk_full_before_a_cache_entry_is_one_line(tmp_path, monkeypatch):
    real = shutil.disk_usage
    monkeypatch.setattr(ps.shutil, "disk_usage", lambda p: real(p)._replace(free=150 * 1024))
    text = error_of(extract, "tiny-bert", TEXTS, cache_dir=tmp_path / "cache", progress=False)
    assert text.startswith(f"no space left on {tmp_path}") and "needs" in text and "MB" in text
    assert not any((tmp_path / "cache").rglob("meta.json"))  # no entry, torn or whole
    monkeypatch.undo()
    acts = extract("tiny-bert", TEXTS, cache_dir=tmp_path / "cache", progress=False)  # resumes once space is free
    assert acts.meta["n_texts"] == len(TEXTS)


def test_disk_full_while_writing_a_result_names_it_and_leaves_nothing(tmp_path, monkeypatch):
    def full(self, data):
        Path.write_text(self, "")  # the temporary file exists, as after a partial write
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    text = error_of(atomic_write, tmp_path / "results" / "r.json", b"x" * 2**20)
    assert text == f"no space left on {tmp_path / 'results'} to write r.json (needs 1.00 MB)"
    assert list((tmp_path / "results").iterdir()) == []


# --------------------------------------------------------------------------- C23: numeric flags


def test_numeric_flags_reject_inf_and_nan(capsys):
    @dataclasses.dataclass
    class C:
        tol: float = arg(1e-4, "tolerance", min=0.0)

    for bad in ("inf", "nan", "-inf", "1e999"):
        with pytest.raises(SystemExit) as e:
            parse_config(C, [f"--tol={bad}"])
        assert e.value.code == 2 and "must be a number" in capsys.readouterr().err
    assert parse_config(C, ["--tol", "0.5"]).tol == 0.5


@pytest.mark.parametrize("module, model", [("analyses.mog", "tiny-bert"), ("analyses.mog_lens", "tiny-gpt2")])
def test_mog_and_the_lens_refuse_a_model_of_another_family_before_it_runs(module, model, tmp_path, capsys):
    """Defect 21: the family is checked before anything is extracted or cached."""
    import importlib

    from probes.config import run_main

    mod = importlib.import_module(module)
    with pytest.raises(SystemExit) as done:
        run_main(mod.main, ["--model", model, "--n-sentences", "8", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.startswith(f"error: model '{model}'") and err.count("\n") == 1
    assert "is of family" in err or "BERT-style" in err  # mog: a Graph-Transformer entry; the lens: BERT-style
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("meta.json"))


def test_a_json_file_that_is_not_a_result_is_left_out_with_a_warning(tmp_path):
    out = _claims_out(tmp_path, "0.1")
    n = len(read_results(out, "anisotropy"))
    notes = out / "results" / "anisotropy" / "notes.json"
    notes.write_text('{"note": "mine"}')
    with pytest.warns(UserWarning, match="notes.json is not a saved anisotropy result"):
        assert len(read_results(out, "anisotropy")) == n
    notes.write_text('{"analysis": "anisotropy", "note": "mine"}')  # says it is one: its layout is checked
    assert "notes.json does not have the layout" in error_of(read_results, out, "anisotropy")
