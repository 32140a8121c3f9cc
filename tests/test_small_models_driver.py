"""scripts/train_small_models.py: which runs count as done, and the GPT-2 stages' order."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import train_small_models as driver  # noqa: E402

pytestmark = pytest.mark.slow

CPU = ["train", "--group", "all", "--device", "cpu", "--amp", "bfloat16", "--threads", "1", "--lanes", "2",
       "--batch-size", "32", "--steps", "300", "--gpt2-scale", "10"]


def config(argv=CPU):
    return driver.parse_config(driver.Config, argv, "test")


def test_command_settings_reads_values_and_switches():
    cmd = ["python", "-m", "recipes.train", "--arch", "mog", "--half-dim", "--layers", "6", "--no-resume",
           "--threads", "1", "--recurrent"]
    assert driver.command_settings(cmd) == {"arch": "mog", "half_dim": "True", "layers": "6", "recurrent": "True"}


def test_done_compares_every_setting_but_the_operational_ones(tmp_path):
    cfg = config()
    cmd = driver.encoder_command("mog-small-6l", cfg, 300, str(tmp_path))
    folder = tmp_path / "mog-small-6l"
    assert not driver.done(folder, cmd)  # nothing there
    folder.mkdir()
    recorded = {k: (v == "True" if v in ("True", "False") else int(v) if v.isdigit() else v)
                for k, v in driver.command_settings(cmd).items()}
    recorded.update(threads=2, device="cuda", lr=0.001)  # how it ran does not matter
    (folder / "train_config.json").write_text(json.dumps({"config": recorded}))
    assert driver.done(folder, cmd)
    (folder / "train_config.json").write_text(json.dumps({"config": {**recorded, "steps": 150}}))
    assert not driver.done(folder, cmd)  # a first-round checkpoint is retrained
    (folder / "train_config.json").write_text(json.dumps({"config": {k: v for k, v in recorded.items()
                                                                     if k != "amp"}}))
    assert not driver.done(folder, cmd)  # a setting it does not record counts as different


def test_gpt2_stages_probe_keeps_its_pretraining_apart():
    train = driver.gpt2_stages(config(), None, "checkpoints")
    probe = driver.gpt2_stages(config(["probe", *CPU[1:]]), 20, "out/probe-runs")
    assert train[0][train[0].index("--out") + 1] == "out/train/gpt2-small-pretrained"
    assert probe[0][probe[0].index("--out") + 1] == "out/probe-runs/gpt2-small-pretrained"
    assert all(c[c.index("--init") + 1] == "out/probe-runs/gpt2-small-pretrained" for c in probe[1:])
    assert driver.command_settings(train[2])["steps"] == "750"


STAGE = """
import json, sys, time
from pathlib import Path
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
out = Path(args["--out"])
with open(out.parent / "order.txt", "a") as f:
    f.write(out.name + "\\n")
if args.get("--fail"):
    sys.exit(int(args["--fail"]))
out.mkdir(parents=True, exist_ok=True)
(out / "training_config.json").write_text(json.dumps({"config": {"out": str(out), "steps": int(args["--steps"])}}))
"""


@pytest.mark.integration
def test_run_gpt2_pretrains_first_then_skips_what_is_done(tmp_path, monkeypatch):
    (tmp_path / "stage.py").write_text(STAGE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    stages = [[sys.executable, "-m", "stage", "--out", str(tmp_path / n), "--steps", "3"] for n in ("pre", "a", "b")]
    with open(tmp_path / "log", "w") as log:
        assert driver.run_gpt2(stages, log) == 0
        order = (tmp_path / "order.txt").read_text().split()
        assert order[0] == "pre" and sorted(order[1:]) == ["a", "b"]
        assert driver.run_gpt2(stages, log) == 0  # all three are done: nothing runs again
        assert (tmp_path / "order.txt").read_text().split() == order
        stages[2][-1] = "4"  # b asked with other settings: only b runs
        assert driver.run_gpt2(stages, log) == 0
        assert (tmp_path / "order.txt").read_text().split() == order + ["b"]
        import shutil

        shutil.rmtree(tmp_path / "pre")  # a fresh checkout: the fine-tunes are there, the intermediate is not
        assert driver.run_gpt2(stages, log) == 0
        assert (tmp_path / "order.txt").read_text().split() == order + ["b"]  # nothing ran
        failing = [[*stages[0][:-1], "5", "--fail", "3"], *stages[1:]]
        stages[1][-1] = "5"
        assert driver.run_gpt2(failing, log) == 3  # pretraining failed: no fine-tune starts
        assert (tmp_path / "order.txt").read_text().split() == order + ["b", "pre"]


@pytest.mark.integration
@pytest.mark.parametrize("codes, expected", [([0, 0], 0), ([75, 0], 75), ([75, 2], 2), ([0, 1], 1)])
def test_run_gpt2_reports_the_worst_fine_tune(tmp_path, monkeypatch, codes, expected):
    (tmp_path / "stage.py").write_text(STAGE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    stages = [[sys.executable, "-m", "stage", "--out", str(tmp_path / "pre"), "--steps", "1"]]
    stages += [[sys.executable, "-m", "stage", "--out", str(tmp_path / n), "--steps", "1", "--fail", str(c)]
               for n, c in zip("ab", codes)]
    with open(tmp_path / "log", "w") as log:
        assert driver.run_gpt2(stages, log) == expected


def test_every_run_names_its_folder_and_may_replace_it():
    """The recipes write under out/ and never replace a folder unasked: the driver names checkpoints/ and passes
    --overwrite, and a folder recorded without that flag still counts as done."""
    cfg = config()
    enc = driver.encoder_command("bert-small", cfg, 300, "checkpoints")
    assert enc[enc.index("--out-dir") + 1] == "checkpoints" and "--overwrite" in enc
    stages = driver.gpt2_stages(cfg, None, "checkpoints")
    assert all("--overwrite" in c for c in stages)
    assert [c[c.index("--out") + 1] for c in stages[1:]] == ["checkpoints/gpt2-small-base",
                                                              "checkpoints/gpt2-small-recurrent"]
    assert "overwrite" not in driver.command_settings(enc)


def test_a_seed_names_every_folder_and_its_own_pretrained_model(tmp_path):
    cfg = config([*CPU, "--seed", "2", "--snapshots"])
    cmd = driver.encoder_command("mog-small-wg", cfg, 300, str(tmp_path))
    assert cmd[cmd.index("--name") + 1] == "mog-small-wg-seed2" and cmd[cmd.index("--seed") + 1] == "2"
    assert "--snapshots" in cmd and driver.command_settings(cmd)["seed"] == "2"
    pre, base, rec = driver.gpt2_stages(cfg, None, str(tmp_path))
    assert pre[pre.index("--out") + 1] == "out/train/gpt2-small-pretrained-seed2" and "--snapshots" not in pre
    assert [c[c.index("--out") + 1] for c in (base, rec)] == [f"{tmp_path}/gpt2-small-base-seed2",
                                                             f"{tmp_path}/gpt2-small-recurrent-seed2"]
    assert all(c[c.index("--seed") + 1] == "2" and c[c.index("--init") + 1] == pre[pre.index("--out") + 1]
               for c in (base, rec))
    plain = config()
    assert "--seed" not in driver.encoder_command("mog-small-wg", plain, 300, str(tmp_path))
