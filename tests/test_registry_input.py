"""A user's registry file and model folders that cannot be right end in one CheckpointError line (exit 2 on the
command line), before anything is loaded or run: YAML aliases (an alias bomb), repeated keys, a quoted boolean,
a random entry whose tokenizer is itself or another random entry, a base that is itself or has a base, random
configs with impossible sizes, names longer than a file name may be."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import probes
from probes.checkpoints.names import fit_name
from probes.checkpoints.registry import read_registry
from probes.errors import CheckpointError

REPO = Path(__file__).resolve().parents[1]


def random_entry(tokenizer: str | None = "minilm-l6", **fields) -> str:
    """A registry entry (its indented lines) of a random-init tiny BERT; ``fields`` replace config fields."""
    cfg = {"model_type": "bert", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
           "intermediate_size": 32, **fields}
    inner = ", ".join(f"{k}: {json.dumps(v)}" for k, v in cfg.items())
    tok = f"    tokenizer: {tokenizer}\n" if tokenizer else ""
    return f"  family: hf\n  kind: encoder\n  source:\n    random: {{{inner}}}\n{tok}  sentence: cls\n"


def bomb() -> str:
    """A 10^10-leaf alias bomb in well under a kilobyte."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    return "anchors:\n" + "".join(f"  {line}\n" for line in lines)


@pytest.fixture
def registry(tmp_path, monkeypatch):
    """write(text) -> a user registry file in use (PROBES_CHECKPOINTS), beside the built-in one."""
    monkeypatch.delenv("PROBES_BUILTIN_CHECKPOINTS", raising=False)

    def write(text: str) -> Path:
        path = tmp_path / "mine.yaml"
        path.write_text(text)
        monkeypatch.setenv("PROBES_CHECKPOINTS", str(path))
        return path

    return write


def one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


def test_an_alias_bomb_is_refused_at_once_whatever_model_is_named(registry):
    registry(bomb() + "bomb:\n" + random_entry()
             + "  description: *a9\n")
    for name in ("bomb", "tiny-bert"):
        start = time.perf_counter()
        with pytest.raises(CheckpointError) as err:
            probes.get_spec(name)
        assert time.perf_counter() - start < 5
        assert "anchors and aliases are not allowed in a registry" in one_line(err)


def test_merge_keys_and_repeated_keys_are_refused(registry):
    entry = random_entry()
    registry(f"base: &b\n{entry}copy:\n  <<: *b\n")
    with pytest.raises(CheckpointError, match=r"merge keys \(<<\) are not allowed"):
        read_registry()
    registry(f"dupe:\n{entry}dupe:\n{entry}")
    with pytest.raises(CheckpointError, match=r"the key 'dupe' is given twice in one mapping .* at line 8, column 1$"):
        read_registry()
    registry(f"dupe:\n{entry}  sentence: mean\n")
    with pytest.raises(CheckpointError, match=r"the key 'sentence' is given twice"):
        read_registry()


def test_a_quoted_boolean_is_refused(registry):
    registry("m:\n" + random_entry() + "  special_tokens: 'false'\n")
    with pytest.raises(CheckpointError, match=r"entry 'm': special_tokens must be true or false \(unquoted\), "
                                              r"not 'false'$"):
        read_registry()
    registry("m:\n" + random_entry() + "  pooler: 'no'\n")
    with pytest.raises(CheckpointError, match=r"pooler must be true or false"):
        read_registry()


def test_a_random_entry_whose_tokenizer_is_itself_or_random(registry):
    registry("selftok:\n" + random_entry("selftok"))
    with pytest.raises(CheckpointError, match=r"entry 'selftok': its tokenizer entry is itself"):
        probes.get_spec("selftok")
    registry("chained:\n" + random_entry("tiny-bert"))
    with pytest.raises(CheckpointError, match=r"^model 'chained': its tokenizer entry is 'tiny-bert', another "
                                              r"random-init entry"):
        probes.extract("chained", ["A text."], cache_dir=None, progress=False)
    registry("notok:\n" + random_entry(None))
    with pytest.raises(CheckpointError, match=r"a random source needs tokenizer:"):
        read_registry()


def test_a_base_that_is_itself_or_has_a_base(registry, tmp_path):
    entry = "  family: recurrent\n  kind: causal\n  source: {{path: {path}}}\n  sentence: last\n  base: {base}\n"
    registry("cyc:\n" + entry.format(path=tmp_path, base="cyc"))
    with pytest.raises(CheckpointError, match=r"entry 'cyc': its base is itself"):
        read_registry()
    (tmp_path / "w.safetensors").write_bytes(b"")
    registry("one:\n" + entry.format(path=tmp_path, base="two") + "two:\n" + entry.format(path=tmp_path, base="one"))
    with pytest.raises(CheckpointError, match=r"^model 'one': its base 'two' has a base of its own"):
        probes.get_spec("one").fingerprint()


@pytest.mark.parametrize("field, value", [("hidden_size", -32), ("num_hidden_layers", 0),
                                          ("num_attention_heads", "2"), ("intermediate_size", 2**40)])
def test_a_random_config_with_an_impossible_size(registry, field, value):
    registry("neg:\n" + random_entry(**{field: value}))
    with pytest.raises(CheckpointError) as err:
        read_registry()
    assert f"random: {field} = {value!r} is not a size count from 1 to" in one_line(err)


def test_a_random_config_transformers_refuses_is_one_line(registry):
    registry("odd:\n" + random_entry(hidden_size=15))  # 15 wide, 2 heads: not divisible
    with pytest.raises(CheckpointError, match=r"^model 'odd': bad random config: "):
        probes.extract("odd", ["A text."], cache_dir=None, progress=False)


def test_names_longer_than_the_rules_allow(registry):
    registry("x" * 300 + ":\n" + random_entry())
    with pytest.raises(CheckpointError, match=r"model name 'xxx.*\(300 characters\) is too long: .* at most 100"):
        read_registry()
    registry("")
    with pytest.raises(CheckpointError, match="not a registry name, and not a folder: File name too long"):
        probes.get_spec("y" * 300)
    assert len(fit_name("a" * 150)) == 100 and fit_name("a" * 150) != fit_name("a" * 151)


def test_a_bad_user_registry_is_one_error_line_on_the_command_line(tmp_path, monkeypatch, capsys):
    from analyses import anisotropy
    from probes.config import run_main

    reg = tmp_path / "bomb.yaml"
    reg.write_text(bomb() + "bomb:\n" + random_entry() + "  description: *a9\n")
    monkeypatch.delenv("PROBES_BUILTIN_CHECKPOINTS", raising=False)
    monkeypatch.setenv("PROBES_CHECKPOINTS", "")  # --registry adds to it: put back when the test ends
    with pytest.raises(SystemExit) as done:  # as python -m runs it (tests/test_cli.py starts the real process)
        run_main(anisotropy.main, ["--registry", str(reg), "--model", "tiny-bert", "--n-sentences", "5",
                                   "--no-figures", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert done.value.code == 2, err[-2000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "anchors and aliases" in lines[0]
