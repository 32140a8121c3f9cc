"""A library install, made as a user makes it: the wheels of ``make dist`` (the suite, the seed-0 small models, one
seed's wheel) installed into a new virtual environment and used from a folder outside the repository. Names,
folders, the committed small models, a seed's model and the default corpus resolve there; the repository's own
folders (recipes, benchmarks, scripts) are not importable.

The new environment takes its dependencies (torch, transformers, ...) from the one running the tests, through a
``.pth`` line, and the wheels are installed with ``--no-index --no-deps``: the test needs no network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parent.parent


def run(args: list, cwd: Path, env: dict, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if ok:
        assert done.returncode == 0, f"{args}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    """(python of the new environment, the user's folder outside the repository, the environment variables)."""
    base = tmp_path_factory.mktemp("install")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROBES_") and k != "PYTHONPATH"}
    env.update(OMP_NUM_THREADS="1", XDG_CACHE_HOME=str(base / "xdg-cache"), PIP_NO_INDEX="1")
    run([sys.executable, REPO / "scripts/build_dist.py", "--out", base / "dist", "--only", "slstm-small",
         "--only", "slstm-small-seed1"], REPO, env)
    wheels = sorted((base / "dist").glob("*.whl"))
    assert [w.name.split("-")[0] for w in wheels] == ["probes_checkpoints", "probes_checkpoints_seed1", "probes_suite"]
    venv = base / "env"
    run([sys.executable, "-m", "venv", venv], base, env)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    python = venv / "bin" / "python"
    run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", *wheels], base, env)
    home = base / "user"
    home.mkdir()
    return python, home, env


def test_names_folders_small_models_and_the_corpus_resolve_outside_the_repository(user):
    python, home, env = user
    code = """
import json, probes, analyses
from probes.corpus import load_corpus
from transformers import AutoTokenizer, BertConfig, BertModel
site = probes.__file__.rsplit("/probes/", 1)[0]
tok = AutoTokenizer.from_pretrained(probes.get_spec("minilm-l6").local_path())
model = BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=64))
model.save_pretrained("my-bert"); tok.save_pretrained("my-bert")
corpus = load_corpus("default")
acts = probes.extract("my-bert", ["The cat sat on the mat.", "A second sentence."])
print(json.dumps({"site": site, "probes": probes.__file__, "analyses": analyses.__file__,
                  "minilm": str(probes.get_spec("minilm-l6").local_path()),
                  "slstm": str(probes.get_spec("slstm-small").local_path()),
                  "seed1": str(probes.get_spec("slstm-small-seed1").local_path()),
                  "documents": len(corpus.documents), "folder_layers": acts.n_layers}))
"""
    out = json.loads(run([python, "-c", code], home, env).stdout.strip().splitlines()[-1])
    assert out["probes"].startswith(out["site"]) and out["analyses"].startswith(out["site"])
    assert str(REPO) not in out["probes"]
    assert out["slstm"].startswith(out["site"]) and out["slstm"].endswith("probes_checkpoints/slstm-small")
    assert out["seed1"].startswith(out["site"]) and out["seed1"].endswith("probes_checkpoints_seed1/slstm-small-seed1")
    assert out["documents"] == 7 and out["folder_layers"] == 2


def test_the_command_runs_on_a_registry_name_and_on_the_committed_small_model(user):
    python, home, env = user
    probes_cmd = python.parent / "probes"
    for model in ("minilm-l6", "slstm-small"):
        run([probes_cmd, "anisotropy", "--model", model, "--n-sentences", "20", "--n-tokens", "60", "--no-figures",
             "--out", "out"], home, env)
        result = json.loads((home / "out/results/anisotropy" / f"{model}.json").read_text())
        assert result["corpus"]["name"] == "default"


def test_a_model_that_is_not_installed_is_one_line_saying_how_to_get_it(user):
    python, home, env = user
    done = run([python.parent / "probes", "anisotropy", "--model", "bert-small", "--n-sentences", "20",
                "--out", "out"], home, env, ok=False)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "probes_checkpoints" in done.stderr
    done = run([python.parent / "probes", "anisotropy", "--model", "slstm-small-seed2", "--n-sentences", "20",
                "--out", "out"], home, env, ok=False)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "install the wheel probes_checkpoints_seed2" in done.stderr


def test_the_repository_folders_are_not_importable(user):
    python, home, env = user
    for name in ("recipes", "benchmarks", "scripts"):
        done = run([python, "-c", f"import {name}"], home, env, ok=False)
        assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr, name


def test_the_readmes_five_lines_run_there_and_cache_under_xdg_cache_home(user):
    from test_readme_example import SENTENCES, readme_example

    python, home, env = user
    work = home / "notebook"
    work.mkdir()
    (work / "my_sentences.txt").write_text(SENTENCES, encoding="utf-8")
    setup = """
import probes
from transformers import AutoTokenizer, BertConfig, BertModel
tok = AutoTokenizer.from_pretrained(probes.get_spec("minilm-l6").local_path())
BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64)).save_pretrained("my-model")
tok.save_pretrained("my-model")
"""
    run([python, "-c", setup], work, env)
    code = "import matplotlib\nmatplotlib.use('Agg')\n" + readme_example() + "print(result.corpus['n_texts'])\n"
    done = run([python, "-c", code], work, env)
    assert done.stdout.strip().splitlines()[-1] == str(len([s for s in SENTENCES.splitlines() if s.strip()]))
    assert sorted(p.name for p in work.iterdir()) == ["anisotropy.png", "my-model", "my_sentences.txt"]
    entries = list((Path(env["XDG_CACHE_HOME"]) / "probes" / "my-model").iterdir())
    assert len(entries) == 1, entries  # the activation cache: in the per-user folder, not the working one
