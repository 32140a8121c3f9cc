"""The split of ``make dist``'s data wheels, on file lists (nothing is built): which folders of checkpoints/ go into
which wheel, that every wheel of the committed folders stays under the size a package index takes per file, that
the build refuses an oversized wheel with one line before building anything, and that a name resolves from, or
says which, wheel carries its folder."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from probes import resources

REPO = Path(__file__).resolve().parent.parent


def _build_dist():
    spec = importlib.util.spec_from_file_location("build_dist", REPO / "scripts" / "build_dist.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_dist"] = module  # the dataclasses in it look their module up
    spec.loader.exec_module(module)
    return module


build_dist = _build_dist()
MAIN = "probes_checkpoints"


def fake_checkpoints(root: Path, sizes: dict[str, int]) -> Path:
    """A checkpoints/ folder with one file of the given size per model folder (sparse: no disk is used)."""
    for name, size in sizes.items():
        (root / name).mkdir(parents=True)
        with open(root / name / "model.safetensors", "wb") as f:
            f.truncate(size)
    (root / "README.md").write_text("models\n", encoding="utf-8")
    (root / ".bert-small.state").mkdir()  # a recipe's work folder: never packaged
    return root


def test_seed0_folders_go_to_the_main_wheel_and_each_seed_to_its_own():
    wheels = build_dist.plan(REPO / "checkpoints")
    by_package = {w.package: [f.name for f in w.folders] for w in wheels}
    every = [p.name for p in build_dist.model_folders(REPO / "checkpoints")]
    assert wheels[0].package == MAIN
    assert sorted(n for names in by_package.values() for n in names) == sorted(every)  # each folder once
    assert by_package[MAIN] == [n for n in every if not re.search(r"-seed\d+$", n)]
    assert {"wordpiece-4096", "slstm-small", "bert-small", "albert-small", "gpt2-small-base", "gpt2-small-recurrent",
            "mog-small", "smollm2-135m-recurrent"} <= set(by_package[MAIN])  # what the README's examples name
    for package, names in by_package.items():
        if package != MAIN:
            seed = re.fullmatch(r"probes_checkpoints_seed(\d+)", package)[1]
            assert names and all(n.endswith(f"-seed{seed}") for n in names), (package, names)
            assert all(n.removesuffix(f"-seed{seed}") in by_package[MAIN] for n in names)  # a retraining of one
    assert {"probes_checkpoints_seed1", "probes_checkpoints_seed2"} <= set(by_package)
    assert [p.name for p in wheels[0].files] == sorted(p.name for p in (REPO / "checkpoints").glob("README*.md"))
    assert all(not w.files for w in wheels[1:])


def test_every_wheel_of_the_committed_folders_is_under_the_limit():
    for wheel in build_dist.plan(REPO / "checkpoints"):
        assert build_dist.check_size(wheel.package, wheel.sizes()) <= build_dist.MAX_WHEEL_BYTES, wheel.package


def test_the_split_on_a_planted_folder_and_only(tmp_path):
    root = fake_checkpoints(tmp_path / "ck", {"m": 10, "m-seed1": 20, "m-seed12": 30, "n-seed2": 40, "m-seedling": 5})
    plan = {w.package: [f.name for f in w.folders] for w in build_dist.plan(root)}
    assert list(plan) == [MAIN, "probes_checkpoints_seed1", "probes_checkpoints_seed2", "probes_checkpoints_seed12"]
    assert plan[MAIN] == ["m", "m-seedling"] and plan["probes_checkpoints_seed12"] == ["m-seed12"]
    only = build_dist.plan(root, ["m-seed1"])
    assert [(w.package, [f.name for f in w.folders]) for w in only] == [(MAIN, []), ("probes_checkpoints_seed1",
                                                                                      ["m-seed1"])]


def test_the_size_guard_refuses_a_planted_oversized_file_list():
    limit = build_dist.MAX_WHEEL_BYTES
    assert build_dist.check_size("probes_checkpoints", [limit // 4] * 3) <= limit
    with pytest.raises(build_dist.DistError) as e:
        build_dist.check_size("probes_checkpoints_seed1", [limit // 4] * 4)
    assert "probes_checkpoints_seed1" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(build_dist.DistError):  # many small files: the zip's own bytes count too
        build_dist.check_size("probes_checkpoints", [limit // 100_000 - 100] * 100_000)


def test_the_build_stops_with_one_error_line_before_building_anything(tmp_path, capsys, monkeypatch):
    root = fake_checkpoints(tmp_path / "ck", {"m": 1000, "m-seed1": build_dist.MAX_WHEEL_BYTES + 1})
    monkeypatch.setattr(build_dist.subprocess, "run", lambda *a, **k: pytest.fail("a wheel was built"))
    with pytest.raises(SystemExit) as done:
        build_dist.main(["--out", str(tmp_path / "dist"), "--checkpoints", str(root)])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: the wheel probes_checkpoints_seed1 ")
    assert not (tmp_path / "dist").exists()


def test_a_built_wheel_over_the_limit_is_not_written(tmp_path, monkeypatch):
    def pip_wheel(cmd, check):
        house = Path(cmd[cmd.index("-w") + 1])
        with open(house / "x-1-py3-none-any.whl", "wb") as f:
            f.truncate(build_dist.MAX_WHEEL_BYTES + 1)

    monkeypatch.setattr(build_dist.subprocess, "run", pip_wheel)
    (tmp_path / "dist").mkdir()
    with pytest.raises(build_dist.DistError, match="^the wheel probes_suite is 100.0 MB"):
        build_dist._build_one(["pip", "wheel"], tmp_path, "probes_suite", tmp_path / "dist")
    assert list((tmp_path / "dist").iterdir()) == []


def test_names_resolve_from_the_package_that_carries_them(tmp_path, monkeypatch):
    assert resources.checkpoints_package("slstm-small") == MAIN
    assert resources.checkpoints_package("wordpiece-4096") == MAIN
    assert resources.checkpoints_package("slstm-small-seed3") == "probes_checkpoints_seed3"
    assert resources.checkpoints_package("mog-small-6l-seed1") == "probes_checkpoints_seed1"
    for package in (MAIN, "probes_checkpoints_seed1"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(resources.HOME_ENV, raising=False)
    assert resources.model_folder_candidates("checkpoints/bert-small-seed1") == [
        tmp_path / "probes_checkpoints_seed1" / "bert-small-seed1", tmp_path / MAIN / "bert-small-seed1"]
    assert resources.model_folder_candidates("checkpoints/bert-small") == [tmp_path / MAIN / "bert-small"]
    assert resources.model_folder_candidates("checkpoints/bert-small-seed2") == [tmp_path / MAIN / "bert-small-seed2"]


def test_a_missing_seed_says_which_wheel_to_install():
    line = resources.how_to_install("checkpoints/bert-small-seed2")
    assert "\n" not in line and "probes_checkpoints_seed2" in line and "seed-2" in line
    line = resources.how_to_install("checkpoints/bert-small")
    assert "probes_checkpoints," in line and "_seed" not in line
