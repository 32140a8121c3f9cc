"""Adding an analysis is one module and one line in ``analyses.ANALYSES``: toy analyses written into a temporary
module from docs/adding-an-analysis.md, with one declaration and nothing else, are run by the ``probes`` command,
drawn by ``probes figures`` (a figure of any name), shown by the report (its figures, captions and models, both of
a pair), and pass the public contract (``analyses.checks.check_analysis``) and every display check of
tests/test_display.py, with no other edit.

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

# the module docs/adding-an-analysis.md describes, filled in: one model's mean token-state norm per layer
TOY = '''
"""Toy: how long are a model's token vectors, layer by layer? (a test's analysis)"""

from dataclasses import dataclass

import numpy as np

from analyses import common, style
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

    def plotted_values(self):
        return common.as_floats(self.norms)

    @style.drawing
    def plot(self, ax=None, **kwargs):
        ax = style.one_axes(ax)
        drawn = style.on_axes(ax, self, kwargs)
        ax.plot(range(len(self.norms)), self.norms, **drawn.line(marker="o"))
        ax.set_xlabel("layer")
        ax.set_ylabel("mean token norm")
        return style.finish(ax)


def compute(cfg=None, *, acts):
    cfg = cfg or Config()
    norms = [cfg.scale * float(np.linalg.norm(np.asarray(acts.layer_hidden(l)), axis=1).mean())
             for l in range(acts.n_layers + 1)]
    return Result(identity=activations_identity(acts, cfg), norms=norms)


def table_rows(result):
    return [{"layer": l, "norm": v} for l, v in enumerate(result.norms)]


@style.drawing
def plot(results, fig=None):
    fig = style.new_figure(fig, (4.0, 3.0))
    ax = fig.subplots()
    for drawn in style.in_figure(results):
        ax.plot(drawn.result.norms, **drawn.line(marker="o"))
    ax.set_xlabel("layer")
    ax.set_ylabel("mean token norm")
    ax.legend()
    return fig


ANALYSIS = Analysis(
    name="toy", inputs=Sentences(), Config=Config, Result=Result, compute=compute, table_rows=table_rows,
    figures=(Figure("norms-by-layer", plot, "TOY CAPTION: mean token-state norm by layer."),),
    example=("--model", "tiny-bert", "--n-sentences", "6"),
)
run, main = ANALYSIS.run, ANALYSIS.main

if __name__ == "__main__":
    ANALYSIS.main()
'''

# the same for two models (Pairs): A's norm minus B's per layer, the pair's identity made by common.pair_identity
TOY_PAIR = '''
"""Toy pair: how much longer are model A's token vectors than model B's? (a test's analysis)"""

from dataclasses import dataclass

import numpy as np

from analyses import common, style
from analyses.analysis import Analysis, Figure
from analyses.common import SentenceConfig, pair_identity
from analyses.inputs import Pairs
from probes.config import arg


@dataclass
class Config(SentenceConfig):
    """A's mean token-state norm minus B's, per layer."""

    n_sentences: int = arg(10, "random sentences", min=1)


@dataclass(repr=False)
class Result(common.AnalysisResult):
    differences: list[float]

    def headline(self):
        return {"last-layer difference": f"{self.differences[-1]:.3f}"}

    def plotted_values(self):
        return common.as_floats(self.differences)

    @style.drawing
    def plot(self, ax=None, **kwargs):
        ax = style.one_axes(ax)
        drawn = style.on_axes(ax, self, kwargs)
        ax.plot(range(len(self.differences)), self.differences, **drawn.line(marker="o"))
        ax.set_xlabel("layer")
        ax.set_ylabel("norm A - norm B")
        return style.finish(ax)


def _norms(acts):
    return np.array([np.linalg.norm(np.asarray(acts.layer_hidden(l)), axis=1).mean() for l in range(acts.n_layers + 1)])


def compute(cfg=None, *, acts_a, acts_b):
    cfg = cfg or Config()
    a, b = _norms(acts_a), _norms(acts_b)
    n = min(len(a), len(b))
    return Result(identity=pair_identity(acts_a, acts_b, cfg), differences=(a[:n] - b[:n]).tolist())


def table_rows(result):
    return [{"layer": l, "difference": v} for l, v in enumerate(result.differences)]


@style.drawing
def plot(results, fig=None):
    fig = style.new_figure(fig, (4.0, 3.0))
    ax = fig.subplots()
    for drawn in style.in_figure(results):
        ax.plot(drawn.result.differences, **drawn.line(marker="o"))
    ax.set_xlabel("layer")
    ax.set_ylabel("norm A - norm B")
    return fig


ANALYSIS = Analysis(
    name="toy_pair", inputs=Pairs(), Config=Config, Result=Result, compute=compute, table_rows=table_rows,
    figures=(Figure("pair-norm-differences", plot, "TOY PAIR CAPTION: A's norm minus B's by layer."),),
    example=("--model", "tiny-bert", "--model", "tiny-albert", "--n-sentences", "6"),
)
run, main = ANALYSIS.run, ANALYSIS.main

if __name__ == "__main__":
    ANALYSIS.main()
'''


@pytest.fixture
def toys(tmp_path, monkeypatch):
    """The toy modules in a temporary folder on sys.path, and their one line each in analyses.ANALYSES."""
    folder = tmp_path / "toy_src"
    folder.mkdir()
    (folder / "toy_analysis.py").write_text(textwrap.dedent(TOY))
    (folder / "toy_pair_analysis.py").write_text(textwrap.dedent(TOY_PAIR))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setitem(analyses.ANALYSES, "toy", "toy_analysis")  # the one line
    monkeypatch.setitem(analyses.ANALYSES, "toy_pair", "toy_pair_analysis")
    yield analyses.get("toy"), analyses.get("toy_pair")
    for module in ("toy_analysis", "toy_pair_analysis"):
        sys.modules.pop(module, None)


@pytest.mark.slow  # two analyses through every consumer and the whole contract: about 10 s
def test_toy_analyses_in_one_module_each_are_picked_up_everywhere(toys, tmp_path, capsys):
    import test_display

    from analyses.checks import check_analysis
    from analyses.common import read_results
    from analyses.summary import figures, report

    toy, pair = toys
    out = tmp_path / "out"
    # the probes command lists them with their purposes and runs them
    command.main(["--help"])
    listed = {ln.split(None, 1)[0]: ln.split(None, 1)[1] for ln in capsys.readouterr().out.splitlines()
              if ln.startswith(("  toy ", "  toy-pair "))}
    assert listed == {"toy": "how long are a model's token vectors, layer by layer?",
                      "toy-pair": "how much longer are model A's token vectors than model B's?"}
    command.main(["toy", "--model", "tiny-bert", "--n-sentences", "6", "--no-figures", "--out", str(out)])
    command.main(["toy-pair", "--model", "tiny-bert", "--model", "tiny-albert", "--n-sentences", "6",
                  "--no-figures", "--out", str(out)])
    (res,) = read_results(out, "toy")
    assert isinstance(res, toy.Result) and len(res.norms) == 3 and repr(res).startswith("<toy result: tiny-bert")
    (res_pair,) = read_results(out, "toy_pair")
    assert res_pair.model_name == "tiny-bert__tiny-albert"
    # the figures command draws their figures (named as their declarations name them), and the report shows
    # each under its analysis with its caption, and both models of the pair in its model table
    paths = figures.redraw(str(out))
    assert {out / "figures" / "norms-by-layer.png", out / "figures" / "pair-norm-differences.png"} <= set(paths)
    page = report.write_report(out).read_text()
    for analysis, figure, caption in (("toy", "norms-by-layer", "TOY CAPTION"),
                                      ("toy_pair", "pair-norm-differences", "TOY PAIR CAPTION")):
        section = page[page.index(f'<h2 id="{analysis}">'):]
        section = section[:section.find("<h2 ", 1) if "<h2 " in section[1:] else None]
        assert f'alt="{figure}"' in section and caption in section, analysis
    models = page[page.index('<table class="models">'):]
    models = models[:models.index("</table>")]
    assert "<td>tiny-albert</td>" in models and "toy_pair" in models.split("<td>tiny-albert</td>")[1].split("</tr>")[0]
    # the Python call
    again = toy.run("tiny-bert", "default", n_sentences=6, cache_dir=out / "cache")
    assert again.norms == pytest.approx(res.norms, abs=1e-8)  # the file holds 8 decimals
    # the public contract and the display checks
    for name, decl in (("toy", toy), ("toy_pair", pair)):
        check_analysis(decl, tmp_path / f"contract-{name}")
        test_display.display_checks(name)


def test_check_analysis_names_what_a_declaration_gets_wrong(toys, tmp_path):
    """The public contract fails, naming the analysis, on a declaration that breaks it: a Result whose file changes
    when read back (its round trip), and a command line that offers a flag its inputs cannot use."""
    import dataclasses

    from analyses import checks

    toy, _ = toys

    class Lossy(toy.Result):  # reads its norms back rounded: the file changes when read back
        @classmethod
        def from_json(cls, doc):
            res = super().from_json(doc)
            return dataclasses.replace(res, norms=[round(v, 1) + 0.01 for v in res.norms])

    broken = dataclasses.replace(toy, Result=Lossy, compute=lambda cfg=None, *, acts: Lossy(
        **{f.name: getattr(toy.compute(cfg, acts=acts), f.name) for f in dataclasses.fields(toy.Result)}))
    with pytest.raises(AssertionError, match="toy"):
        checks.check_round_trip(broken, *_computed(broken, tmp_path))
    with pytest.raises(AssertionError, match="compute's first parameter is cfg"):
        checks.check_declaration(dataclasses.replace(toy, compute=lambda config=None, *, acts: None))


def _computed(decl, tmp_path):
    from analyses import checks

    cfg = checks.example_config(decl, tmp_path / "out")
    return cfg, decl.compute(cfg, **checks.example_inputs(decl, cfg)), tmp_path / "round"


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
