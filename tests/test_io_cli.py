"""probes.io (complete-or-absent files) and probes.config (typed config -> validated command line)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from probes.config import RunConfig, arg, parse_config, unique
from probes.io import atomic_write, finite_or_none, strict_json, write_folder


def test_write_folder_replaces_whole_folders_and_a_failure_leaves_the_old_one(tmp_path):
    dest = tmp_path / "model"
    write_folder(dest, lambda tmp: (tmp / "a.txt").write_text("one"))
    write_folder(dest, lambda tmp: (tmp / "b.txt").write_text("two"))
    assert sorted(p.name for p in dest.iterdir()) == ["b.txt"]  # replaced, not merged

    def fail(tmp):
        (tmp / "half.txt").write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        write_folder(dest, fail)
    assert sorted(p.name for p in dest.iterdir()) == ["b.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no temporary folder left


def test_atomic_write_and_strict_json(tmp_path):
    atomic_write(tmp_path / "sub" / "x.json", b"{}")
    assert (tmp_path / "sub" / "x.json").read_bytes() == b"{}" and len(list((tmp_path / "sub").iterdir())) == 1
    with pytest.raises(ValueError):
        strict_json({"x": math.nan})
    assert strict_json({"x": finite_or_none(math.inf), "y": finite_or_none(1.5)}, indent=None) == \
        '{"x": null, "y": 1.5}'


@dataclasses.dataclass
class Demo(RunConfig):
    """A demo config."""

    name: str = arg("", "a positional name", positional=True)
    ratio: float = arg(0.5, "a fraction", min=0.0, max=1.0)
    kind: str = arg("a", "one of a, b", choices=("a", "b"))
    sizes: list[int] = arg([1, 2], "positive sizes", min=1)
    batch_size: int = arg(8, "overridden default", min=1)


def test_config_fields_inherit_override_and_validate(capsys):
    cfg = parse_config(Demo, ["x", "--ratio", "1", "--sizes", "3", "--sizes", "4", "--seed", "7"])
    assert (cfg.name, cfg.ratio, cfg.sizes, cfg.seed, cfg.batch_size, cfg.kind) == ("x", 1.0, [3, 4], 7, 8, "a")
    assert [f.name for f in dataclasses.fields(Demo)][:4] == ["seed", "batch_size", "device", "out"]
    assert parse_config(Demo, ["x"]).sizes == [1, 2]
    for bad, message in ((["x", "--ratio", "1.5"], "--ratio must be <= 1.0, got 1.5"),
                         (["x", "--sizes", "0"], "--sizes must be >= 1, got 0"),
                         (["x", "--seed", "-1"], "--seed must be >= 0, got -1"),
                         (["x", "--ratio", "nan"], "--ratio must be a number"),
                         (["x", "--kind", "c"], "invalid choice: 'c'"),
                         ([], "the following arguments are required: name")):
        with pytest.raises(SystemExit) as exc:
            parse_config(Demo, bad)
        err = capsys.readouterr().err.strip()
        assert exc.value.code == 2 and err.startswith("error: ") and "\n" not in err and message in err, err


def test_unique_keeps_the_first_of_each():
    assert unique(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]


def test_saved_floats_keep_small_values(tmp_path):
    """8 decimals, but a p-value of 2.77e-10 is not written as 0 (8 significant digits below 1e-3)."""
    import json

    from analyses.common import write_result

    js, csv_path = write_result(tmp_path, "topics", "minilm-l6",
                                {"p": 2.7712345678e-10, "x": 572.321234567, "y": -0.00123456789, "z": 0.0,
                                 "bad": float("nan")}, [{"p": 2.7712345678e-10, "x": 572.321234567}])
    got = json.loads(js.read_text())
    assert {k: got[k] for k in ("p", "x", "y", "z", "bad")} == {"p": 2.7712346e-10, "x": 572.32123457,
                                                                "y": -0.00123457, "z": 0.0, "bad": None}
    assert got["nulls"]["paths"] == ["/bad"]
    assert csv_path.read_text().splitlines()[1] == "2.7712346e-10,572.32123457"
