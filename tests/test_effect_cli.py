"""``python -m analyses.effect``: the effect of an edit given as arrays on disk, run on tiny-gpt2 and tiny-bert
from the command line (in-process): the effect file reads back into the EffectResult the run printed, its figure
draws the file's numbers, the report lists it in its effect section, and bad input is one ``error:`` line with exit
status 2. Seconds."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from analyses import effect
from analyses.effect_result import EffectResult

TEXTS = ["The cat sat on the mat.", "A dog ran in the park today.", "Birds sing in the morning light.",
         "The river runs to the sea.", "She read the letter twice.", "Snow fell on the quiet town."]
D = 32  # tiny-gpt2's and tiny-bert's width


@pytest.fixture()
def files(tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    np.save(tmp_path / "v.npy", np.random.default_rng(0).normal(size=D))
    np.save(tmp_path / "rows.npy", np.random.default_rng(1).normal(size=(2, D)))
    np.save(tmp_path / "narrow.npy", np.ones(5))
    left = np.linalg.qr(np.random.default_rng(2).normal(size=(D, 2)))[0]
    np.savez(tmp_path / "erase.npz", left=left, right=left.T)
    return tmp_path


def _main(argv):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few blocks or sentences: the interval's coverage warning
        effect.main(argv)


def test_the_cli_writes_an_effect_that_reads_back_and_a_figure_of_its_numbers(files, capsys, drawn):
    out = files / "out"
    _main(["--model", "tiny-gpt2", "--texts", str(files / "texts.txt"), "--arrays", str(files / "v.npy"), "--scale",
           "4", "--layer", "1", "--option", "overlap=0", "--option", "window=16", "--out", str(out)])
    printed = capsys.readouterr().out
    (path,) = (out / "effects" / "perplexity").glob("*.json")
    e = EffectResult.from_json(json.loads(path.read_text()))
    assert path.name.startswith("tiny-gpt2+add@1_") and e.model == "tiny-gpt2" and e.edit.startswith("+add@1_")
    assert repr(e) in printed and e.control is not None and e.control_kind == "random vector of the same norm"
    assert e.difference.value == pytest.approx(e.edited.value - e.clean.value, rel=1e-6)
    assert e.difference.covers(e.difference.value) and e.n_units == e.to_frame()["n_units"][0]
    assert EffectResult.from_json(e.to_json()).to_json() == e.to_json()
    (fig,) = drawn.values()
    ax = fig.axes[0]
    ys = [float(line.get_ydata()[0]) for line in ax.lines if len(line.get_ydata()) == 1 and line.get_marker() == "o"]
    np.testing.assert_allclose(ys, [e.clean.value, e.edited.value, e.control.value], rtol=1e-6)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["clean", "edited", "control"]

    # a ProjectOut on tiny-bert's anisotropy, without a control: its own file beside the first
    _main(["--analysis", "anisotropy", "--model", "tiny-bert", "--texts", str(files / "texts.txt"), "--edit",
           "project-out", "--arrays", str(files / "rows.npy"), "--layer", "-1", "--control", "none",
           "--no-figures", "--option", "n_tokens=20", "--out", str(out)])
    (path,) = (out / "effects" / "anisotropy").glob("*.json")
    a = EffectResult.from_json(json.loads(path.read_text()))
    assert a.control is None and a.edit.startswith("+erase@-1_") and a.unit == "sentence" and a.n_units == 6

    from analyses.summary.effects import effect_section

    section = effect_section(out)
    assert section is not None
    (table,) = section["compact"]
    assert len(table["rows"]) == 2 and any("tiny-bert+erase@-1_" in cell for row in table["rows"] for cell in row)
    assert any(f"{e.difference.value:.4g}" in cell for row in table["rows"] for cell in row)
    from analyses.summary.report import render

    html = render(out)
    assert 'id="effects"' in html and f"tiny-gpt2{e.edit}" in html and str(e.difference).replace("-", "") in \
        html.replace("-", "")


@pytest.mark.parametrize("args, says", [
    (["--arrays", "{d}/narrow.npy"], "the edit is 5 wide, the layer's states 32"),
    (["--arrays", "{d}/missing.npy"], "no such file"),
    (["--arrays", "{d}/v.npy", "--option", "wndow=3"], "KEY one of"),
    (["--arrays", "{d}/v.npy", "--option", "window=abc"], "window takes int"),
    (["--arrays", "{d}/v.npy", "--edit", "erase"], "a .npz file with arrays left and right"),
    (["--arrays", "{d}/erase.npz"], "one array in a .npy file"),
    (["--arrays", "{d}/v.npy", "--analysis", "lens"], "invalid choice"),
    (["--arrays", "{d}/v.npy", "--layer", "9"], "the model has layers 0..2"),
    (["--arrays", "{d}/v.npy", "--texts", "{d}/empty.txt"], "no text in it"),
])
def test_bad_input_is_one_error_line_and_exit_2(files, capsys, args, says):
    (files / "empty.txt").write_text("\n\n")
    argv = ["--model", "tiny-gpt2", "--texts", str(files / "texts.txt"), "--option", "overlap=0", "--option",
            "window=16", "--out", str(files / "out"), *[a.format(d=files) for a in args]]
    with pytest.raises(SystemExit) as exit_:
        _main(argv)
    assert exit_.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and says in errors[0], errors
    assert not (files / "out" / "effects").exists()
