"""A saved SAE refused with one line, in Python (ProbeError) and at its command line (``python -m analyses.sae.check``:
``error:`` and exit status 2): another model or layer, an edited or truncated file (its checksum), a cfg.json that
does not match its weights (even with the checksums written again), a weights file that safetensors cannot read."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from analyses.sae.check import main
from analyses.sae.io import CHECKSUMS, CONFIG, WEIGHTS, SaeRecord, load_sae, save_sae
from analyses.sae.model import SAE, SaeShape
from probes.config import run_main
from probes.errors import ProbeError

REPO = Path(__file__).resolve().parent.parent
RECORD = SaeRecord(model="m", fingerprint={"sha256": "abc"}, layer=2, seed=0, scale=0.5, steps=10,
                   special_tokens="excluded")


def saved(folder: Path, kind: str = "topk") -> Path:
    sae = SAE(SaeShape(kind, 8, 16, 3 if kind in ("topk", "batchtopk") else None),
              generator=torch.Generator().manual_seed(0))
    save_sae(sae, folder, RECORD)
    return folder


def resum(folder: Path) -> None:
    """Write checksums.sha256 again for the files as they are now (what an editor who knows the format does)."""
    sums = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in (WEIGHTS, CONFIG)}
    (folder / CHECKSUMS).write_text("".join(f"{h}  {name}\n" for name, h in sums.items()))


def edit_cfg(folder: Path, **changes) -> None:
    cfg = json.loads((folder / CONFIG).read_text())
    cfg.update(changes)
    (folder / CONFIG).write_text(json.dumps(cfg))


class Ran:
    """What a command line did: its exit status, stdout and stderr."""

    def __init__(self, returncode: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def cli(capsys):
    """``python -m analyses.sae.check ARGS`` run in this process (its ``run_main``: exit status and output)."""

    def run(*args: str) -> Ran:
        code = 0
        try:
            run_main(main, list(args))
        except SystemExit as e:
            code = int(e.code or 0)
        out = capsys.readouterr()
        return Ran(code, out.out, out.err)

    return run


def one_error_line(proc: Ran, *words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for w in words:
        assert w in lines[0], lines[0]


@pytest.mark.integration
def test_the_module_command_line_refuses_another_layer_with_one_error_line(tmp_path):
    folder = saved(tmp_path / "sae")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "analyses.sae.check", str(folder), "--layer", "3"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    one_error_line(Ran(proc.returncode, proc.stdout, proc.stderr), "reads layer 2, not layer 3")


def test_a_good_folder_passes_the_check_and_loads(tmp_path, cli):
    folder = saved(tmp_path / "sae")
    proc = cli(str(folder), "--layer", "2")
    assert proc.returncode == 0, proc.stderr
    assert "topk SAE" in proc.stdout and "layer 2" in proc.stdout
    sae, record = load_sae(folder, fingerprint={"sha256": "abc"}, layer=2)
    assert record == RECORD and sae.shape.width == 16


def test_another_layer_is_refused_at_the_command_line(tmp_path, cli):
    one_error_line(cli(str(saved(tmp_path / "sae")), "--layer", "3"), "reads layer 2, not layer 3")


def test_another_model_is_refused_at_the_command_line(tmp_path, cli):
    # tiny-bert's registry fingerprint is not {"sha256": "abc"}
    one_error_line(cli(str(saved(tmp_path / "sae")), "--model", "tiny-bert"), "another fingerprint")


@pytest.mark.parametrize("damage", ["flip a weight byte", "truncate weights", "edit cfg"])
def test_an_edited_or_truncated_file_fails_its_checksum(tmp_path, damage, cli):
    folder = saved(tmp_path / "sae")
    data = (folder / WEIGHTS).read_bytes()
    if damage == "flip a weight byte":
        (folder / WEIGHTS).write_bytes(data[:-7] + bytes([data[-7] ^ 4]) + data[-6:])
    elif damage == "truncate weights":
        (folder / WEIGHTS).write_bytes(data[:len(data) - 40])
    else:
        edit_cfg(folder, d_sae=32)
    with pytest.raises(ProbeError, match="does not match its checksum"):
        load_sae(folder)
    one_error_line(cli(str(folder)), "does not match its checksum")


@pytest.mark.parametrize("change, words", [
    ({"d_sae": 32}, "d_sae is 32"),
    ({"d_in": 4}, "d_in is 4"),
    ({"architecture": "jumprelu"}, "architecture is 'jumprelu'"),
    ({"k": 5}, "k is 5"),
    ({"normalize_activations": "expected_average_only_in"}, "normalize_activations"),
    ({"hook_layer": 3}, "hook_layer is 3"),
])
def test_a_cfg_json_that_does_not_match_its_weights_is_refused_even_with_new_checksums(tmp_path, change, words, cli):
    folder = saved(tmp_path / "sae")
    edit_cfg(folder, **change)
    resum(folder)
    with pytest.raises(ProbeError, match="does not match its weights") as e:
        load_sae(folder)
    assert words in str(e.value) and "\n" not in str(e.value)
    one_error_line(cli(str(folder)), "does not match its weights", words)


def test_a_probes_block_of_another_width_than_the_weights_is_refused(tmp_path, cli):
    folder = saved(tmp_path / "sae")
    cfg = json.loads((folder / CONFIG).read_text())
    cfg["probes"]["shape"]["width"] = 32
    cfg["d_sae"] = 32  # consistent cfg.json, the weights still 16 wide
    (folder / CONFIG).write_text(json.dumps(cfg))
    resum(folder)
    with pytest.raises(ProbeError, match=r"W_enc is \(8, 16\).*implies \(8, 32\)"):
        load_sae(folder)


@pytest.mark.parametrize("kind", ["topk", "jumprelu"])
def test_weights_of_another_architecture_are_refused(tmp_path, kind, cli):
    """The weights of a topk SAE under a jumprelu cfg.json (no threshold), and a jumprelu's under a topk one."""
    folder = saved(tmp_path / "sae", kind)
    other = saved(tmp_path / "other", "jumprelu" if kind == "topk" else "topk")
    (folder / CONFIG).write_bytes((other / CONFIG).read_bytes())
    resum(folder)
    with pytest.raises(ProbeError, match="holds tensors"):
        load_sae(folder)


def test_a_weights_file_safetensors_cannot_read_is_one_error(tmp_path, cli):
    folder = saved(tmp_path / "sae")
    data = (folder / WEIGHTS).read_bytes()
    (folder / WEIGHTS).write_bytes(data[:len(data) // 2])
    resum(folder)
    with pytest.raises(ProbeError, match="not a readable safetensors file") as e:
        load_sae(folder)
    assert "\n" not in str(e.value)
    one_error_line(cli(str(folder)), "not a readable safetensors file")


def test_nan_weights_and_a_missing_file_are_one_error(tmp_path, cli):
    from safetensors.torch import load_file, save_file

    folder = saved(tmp_path / "sae")
    tensors = load_file(str(folder / WEIGHTS))
    tensors["b_enc"][3] = float("nan")
    save_file(tensors, str(folder / WEIGHTS))
    resum(folder)
    with pytest.raises(ProbeError, match="b_enc holds NaN"):
        load_sae(folder)
    (folder / CHECKSUMS).unlink()
    one_error_line(cli(str(folder)), "checksums.sha256 is missing")
