"""Adding an analysis is one module and one line in ``analyses.ANALYSES``: a toy analysis written into a temporary
module, with one declaration and nothing else, is run by the ``probes`` command, drawn by ``probes figures``,
captioned in the report, and passes the contract checks of tests/test_contract.py, with no other edit.

Also the declaration's own rules: a Config that does not derive from its inputs' Config base, a figure of one
result without ``each=``, a figure file's caption told apart by its name pattern.
"""

from __future__ import annotations

import sys
import textwrap

import matplotlib
import pytest

matplotlib.use("Agg")

import analyses  # noqa: E402
from analyses import __main__ as command  # noqa: E402
from analyses.analysis import Analysis, Figure  # noqa: E402
from analyses.inputs import LM, Sentences  # noqa: E402

TOY = '''
"""Toy: how long are a model's token vectors, layer by layer? (a test's analysis)"""

from dataclasses import dataclass

import numpy as np

from analyses import common
from analyses.analysis import Analysis, Figure
from analyses.common import SentenceConfig, activations_identity
from analyses.inputs import Sentences
from probes.config import arg


@dataclass
class Config(SentenceConfig):
    """Mean L2 norm of the token states per layer."""

    n_sentences: int = arg(10, "random sentences", min=1)
    scale: float = arg(1.0, "a factor on every norm", min=0.0)


@dataclass(repr=False)
class Result(common.AnalysisResult):
    norms: list[float]

    def headline(self):
        return {"last-layer norm": f"{self.norms[-1]:.3f}"}


def compute(cfg=None, *, acts):
    cfg = cfg or Config()
    norms = [cfg.scale * float(np.linalg.norm(np.asarray(acts.layer_hidden(l)), axis=1).mean())
             for l in range(acts.n_layers + 1)]
    return Result(identity=activations_identity(acts, cfg), norms=norms)


def table_rows(result):
    return [{"layer": l, "norm": v} for l, v in enumerate(result.norms)]


def plot(results, fig=None):
    import matplotlib.pyplot as plt

    fig = fig if fig is not None else plt.figure()
    ax = fig.subplots()
    for r in results:
        ax.plot(r.norms, label=r.model_name)
    return fig


ANALYSIS = Analysis(
    name="toy", inputs=Sentences(), Config=Config, Result=Result, compute=compute, table_rows=table_rows,
    figures=(Figure("toy-norms", plot, "TOY CAPTION: mean token-state norm by layer."),),
    example=("--model", "tiny-bert", "--n-sentences", "6"),
)
run, main = ANALYSIS.run, ANALYSIS.main

if __name__ == "__main__":
    ANALYSIS.main()
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy module in a temporary folder on sys.path, and its one line in analyses.ANALYSES."""
    folder = tmp_path / "toy_src"
    folder.mkdir()
    (folder / "toy_analysis.py").write_text(textwrap.dedent(TOY))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setitem(analyses.ANALYSES, "toy", "toy_analysis")  # the one line
    yield analyses.get("toy")
    sys.modules.pop("toy_analysis", None)


def test_a_toy_analysis_in_one_module_is_picked_up_everywhere(toy, tmp_path, capsys):
    import test_contract

    from analyses.common import read_results
    from analyses.summary import figures, report

    out = tmp_path / "out"
    # the probes command lists it with its purpose and runs it
    command.main(["--help"])
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  toy ")]
    assert line.split(None, 1)[1] == "how long are a model's token vectors, layer by layer?"
    command.main(["toy", "--model", "tiny-bert", "--n-sentences", "6", "--no-figures", "--out", str(out)])
    (res,) = read_results(out, "toy")
    assert isinstance(res, toy.Result) and len(res.norms) == 3 and repr(res).startswith("<toy result: tiny-bert")
    # the figures command draws its figure, and the report captions it
    paths = figures.redraw(str(out))
    assert out / "figures" / "toy-norms.png" in paths
    page = report.write_report(out).read_text()
    assert "TOY CAPTION: mean token-state norm by layer." in page
    # the Python call
    again = toy.run("tiny-bert", "default", n_sentences=6, cache_dir=out / "cache")
    assert again.norms == pytest.approx(res.norms, abs=1e-8)  # the file holds 8 decimals
    # and the contract
    test_contract.contract_checks("toy", tmp_path / "contract", capsys)


def test_a_config_must_derive_from_its_inputs_config():
    from analyses.anisotropy import Config, Result, compute, table_rows

    with pytest.raises(TypeError, match="must derive from LMConfig"):
        Analysis(name="x", inputs=LM(), Config=Config, Result=Result, compute=compute, table_rows=table_rows)
    with pytest.raises(TypeError, match="give each="):
        Figure("x-{}", print, "caption", single=True)
    assert Analysis(name="x", inputs=Sentences(), Config=Config, Result=Result, compute=compute,
                    table_rows=table_rows).figures == ()


def test_a_figure_files_caption_is_told_apart_by_its_name_pattern():
    from analyses.summary import report

    sim = analyses.get("similarity")
    pair, overview = (f.caption for f in sim.figures)
    assert report.caption("similarity-a__b__sentence") == pair
    assert report.caption("similarity-a__token") == overview
    examples = analyses.get("maps").figures[0].caption
    assert report.caption("maps-locality") != report.caption("maps-tiny-bert") == examples
    assert report.caption("maps-tiny-mog-tokens") == analyses.get("maps").figures[1].caption
    assert report.caption("mog-lens") == analyses.get("mog_lens").figures[0].caption
    assert report.caption("mogul") == ""


@pytest.mark.integration
def test_probes_help_imports_no_analysis_and_no_torch():
    """``probes --help`` reads the purposes from the sources: no analysis module, no torch."""
    import subprocess

    code = ("import sys; from analyses.__main__ import main; main(['--help']); "
            "bad = [m for m in sys.modules if m == 'torch' or m.startswith('analyses.') and m != 'analyses.__main__']; "
            "print('IMPORTED', bad)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "IMPORTED []" in proc.stdout
    lines = {ln.split()[0]: ln for ln in proc.stdout.splitlines() if ln.startswith("  ")}
    assert set(lines) >= {n.replace("_", "-") for n in analyses.ANALYSES} | {"figures", "report", "cache"}
    assert "how spread out are an encoder's vectors?" in lines["anisotropy"]
