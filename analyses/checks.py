"""The analysis contract, as checks anyone can run on an analysis of their own (in the spirit of scikit-learn's
``sklearn.utils.estimator_checks.check_estimator``)::

    from analyses.checks import check_analysis
    from my_package.norms import ANALYSIS

    check_analysis(ANALYSIS)          # raises AssertionError naming the first check that fails

The declaration (:class:`analyses.analysis.Analysis`) need not be in :data:`analyses.ANALYSES`. Each check runs
its ``example`` (the tiny run the declaration names) and asserts:

* :func:`check_declaration`: its Config derives from its kind of input's Config base, its Result is an
  AnalysisResult, ``compute``'s first parameter is ``cfg``, it has a purpose, an example and figures, every figure
  a caption, and its module's ``run`` and ``main`` are the declaration's;
* :func:`check_flags`: its command line accepts every flag of its kind of input and offers none of the shared
  flags its inputs cannot use (argparse refuses them with one ``error:`` line);
* :func:`check_round_trip`: ``compute(cfg, **inputs)`` gives Results that round-trip through JSON and through the
  result file byte for byte, carry one identity block and show as a few lines (not their every number);
* :func:`check_cli_writes_what_python_computes`: the command line writes what the Python API computes (to
  :data:`TOL`), and draws every figure the declaration lists for those results;
* :func:`check_run_from_python`: ``run(model, corpus)`` builds the inputs the command line builds;
* :func:`check_deterministic`: computing again gives the same result.

The last three are skipped for a declaration with ``deterministic=False`` (timings). :func:`analysis_checks`
lists the checks of a declaration with their arguments, so a test suite can run each as its own test (the suite's
tests/test_contract.py runs them on every registered analysis).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from analyses.analysis import Analysis, Figure
from analyses.common import AnalysisResult, Identity
from analyses.files import write_result
from probes.config import CaptureConfig, CorpusConfig, ModelsConfig, SampleConfig, parse_config

# the shared flags (the groups the kinds of input compose) and a valid non-default value of each
SHARED = [f.name for g in (ModelsConfig, CorpusConfig, CaptureConfig, SampleConfig) for f in dataclasses.fields(g)]
NON_DEFAULT = {  # field -> (flags, the value parsed)
    "model": (["--model", "tiny-gpt2"], ["tiny-gpt2"]), "corpus": (["--corpus", "data/corpus"], "data/corpus"),
    "seed": (["--seed", "1"], 1), "batch_size": (["--batch-size", "3"], 3), "device": (["--device", "auto"], "auto"),
    "out": (["--out", "elsewhere"], "elsewhere"), "figures": (["--no-figures"], False),
    "dtype": (["--dtype", "bfloat16"], "bfloat16"), "cache_dtype": (["--cache-dtype", "float32"], "float32"),
    "device_map": (["--device-map", "auto"], "auto"), "min_words": (["--min-words", "4"], 4),
    "max_words": (["--max-words", "50"], 50), "n_sentences": (["--n-sentences", "7"], 7),
    "model_a": (["--model-a", "tiny-gpt2"], "tiny-gpt2"), "model_b": (["--model-b", "tiny-llama"], "tiny-llama")}
TOL = 1e-9  # numbers of two computations agree to this, relative to max(1, |a|, |b|)


# ----------------------------------------------------------------------------- helpers


def example_config(decl: Analysis, out: str | Path) -> Any:
    """The declaration's tiny run as its Config, writing under ``out``."""
    return parse_config(decl.Config, [*decl.example, "--out", str(out)])


def first_unit(decl: Analysis, cfg: Any) -> tuple:
    """The first unit of models (names) the command line would compute."""
    return decl.inputs.units(cfg)[0]


def example_inputs(decl: Analysis, cfg: Any) -> dict:
    """The inputs of the command line's first compute (every model resolved as the command line resolves it)."""
    return decl.inputs.load(tuple(decl.inputs.resolve(m) for m in first_unit(decl, cfg)), cfg)


def assert_same(a: Any, b: Any, where: str = "") -> None:
    """Equal documents: numbers within :data:`TOL` (relative to max(1, |a|, |b|)), everything else exactly."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{where}: keys {sorted(set(a) ^ set(b))}"
        for k in a:
            assert_same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"{where}: length"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}/{i}")
    elif isinstance(a, (float, int)) and not isinstance(a, bool) and isinstance(b, (float, int)):
        assert math.isclose(a, b, rel_tol=0, abs_tol=TOL * max(1, abs(a), abs(b))), f"{where}: {a} != {b}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def saved_document(out: str | Path, name: str, model_name: str) -> dict:
    """The result file ``<out>/results/<name>/<model_name>.json``, without its provenance."""
    doc = json.loads((Path(out) / "results" / name / f"{model_name}.json").read_text())
    return {k: v for k, v in doc.items() if k != "provenance"}


def document(decl: Analysis, res: AnalysisResult, workdir: str | Path) -> dict:
    """``res`` as written to a result file under ``workdir`` (without provenance)."""
    path, _ = write_result(workdir, decl.name, res.model_name, res, decl.table_rows(res))
    return {k: v for k, v in json.loads(path.read_text()).items() if k != "provenance"}


def as_json(res: AnalysisResult) -> dict:
    return json.loads(json.dumps(res.to_json(), default=lambda x: np.asarray(x).tolist()))


@contextlib.contextmanager
def figures_drawn() -> Iterator[dict]:
    """name -> Figure of every figure a command draws meanwhile, recorded instead of encoded as PNG and PDF
    (encoding is matplotlib's work, and a third of a tiny run's time)."""
    from analyses import common

    drawn: dict = {}
    save = common.save_figure

    def record(fig: Any, out: Any, stem: str) -> list[Path]:
        drawn[stem] = fig
        return []

    setattr(common, "save_figure", record)  # noqa: B010 - a module's function, replaced for the block
    try:
        yield drawn
    finally:
        setattr(common, "save_figure", save)  # noqa: B010


def assert_draws_something(stem: str, fig: Any) -> None:
    """At least one panel of ``fig`` shows data: lines, patches, collections or images."""
    assert fig.axes and any(ax.lines or ax.patches or ax.collections or ax.images for ax in fig.axes), stem


# ----------------------------------------------------------------------------- the checks


def check_declaration(decl: Analysis) -> None:
    """The declaration is complete (see the module docstring)."""
    assert isinstance(decl, Analysis), f"{decl!r} is not an analyses.analysis.Analysis"
    assert issubclass(decl.Config, decl.inputs.Config) and issubclass(decl.Result, AnalysisResult), decl.name
    assert list(decl.compute.__code__.co_varnames[:1]) == ["cfg"], f"{decl.name}: compute's first parameter is cfg"
    assert decl.purpose and decl.example and decl.figures, f"{decl.name}: a purpose, an example and figures"
    assert all(isinstance(f, Figure) and f.caption for f in decl.figures), f"{decl.name}: a caption per figure"
    module = __import__(decl.compute.__module__, fromlist=["_"])
    assert module.run == decl.run and module.main == decl.main, f"{decl.name}: run, main = ANALYSIS.run, ANALYSIS.main"


def check_flags(decl: Analysis) -> None:
    """The kind's flags are all accepted; the shared flags it cannot use are not offered (argparse refuses them)."""
    own = {f.name for f in dataclasses.fields(decl.inputs.Config)}
    assert own <= set(NON_DEFAULT), f"{decl.name}: a flag of its inputs without a test value: {own - set(NON_DEFAULT)}"
    cfg = parse_config(decl.Config, [x for field in own for x in NON_DEFAULT[field][0]])
    assert {f: getattr(cfg, f) for f in own} == {f: NON_DEFAULT[f][1] for f in own}, decl.name
    for field in sorted(set(SHARED) - own):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                parse_config(decl.Config, NON_DEFAULT[field][0])
            except SystemExit as e:
                code = e.code
            else:
                code = None
        flag, text = NON_DEFAULT[field][0][0], err.getvalue()
        assert code == 2 and text.startswith("error: ") and flag in text and text.count("\n") == 1, \
            f"{decl.name}: {flag} is offered, though its inputs cannot use it ({text!r})"


def check_round_trip(decl: Analysis[Any], cfg: Any, result: Any, workdir: str | Path) -> None:
    """Each Result of one compute round-trips through JSON and its result file, with one identity and a short repr."""
    workdir = Path(workdir)
    for res in decl.inputs.results(result):
        assert isinstance(res, decl.Result) and isinstance(res.identity, Identity), decl.name
        assert decl.Result.from_json(res.to_json()) == res, f"{decl.name}: Result.from_json(to_json()) differs"
        doc = res.to_json()
        assert {"model_name", "config"} <= set(doc) and not {"out", "figures"} & set(res.config), decl.name
        text = repr(res)  # a notebook cell shows a few lines, not every number
        shown: Any = type(res).__repr__  # AnalysisResult's short display, not a dataclass repr of every number
        assert shown is AnalysisResult.__repr__ and len(text) < 1500 and decl.name in text, text[:200]
        # the layers it has numbers for: from the embeddings, or from layer 1 for maps (the layers compute them)
        layers = res.summary().get("layers")
        assert layers is None or layers.startswith(f"{type(res).FIRST_LAYER}.."), layers
        assert res.model_name in res._repr_html_()
        # through the file: read back, the same document again
        path, _ = write_result(workdir, decl.name, res.model_name, res, decl.table_rows(res))
        back = decl.Result.from_json(json.loads(path.read_text()))
        again, _ = write_result(workdir / "again", decl.name, back.model_name, back, decl.table_rows(back))
        assert again.read_bytes() == path.read_bytes(), f"{decl.name}: the result file changes when read back"


def check_cli_writes_what_python_computes(decl: Analysis, result: Any, workdir: str | Path) -> None:
    """The command line's result files equal the Python API's result to :data:`TOL`, and it draws every figure its
    declaration lists for those results. It computes again from its own extraction, so this also checks that the
    same inputs give the same result."""
    out = Path(workdir) / "cli"
    with figures_drawn() as drawn:
        decl.main([*decl.example, "--out", str(out)])
    results = list(decl.inputs.results(result))
    for res in results:
        assert_same(saved_document(out, decl.name, res.model_name), document(decl, res, Path(workdir) / "api"),
                    f"{decl.name}: {res.model_name}")
    assert set(drawn) == set(decl.figure_files(results)), f"{decl.name}: drew {sorted(drawn)}"
    for stem, fig in drawn.items():
        assert_draws_something(stem, fig)


def check_run_from_python(decl: Analysis, cfg: Any, result: Any, workdir: str | Path) -> None:
    """``<analysis>.run(model(s), corpus, config=cfg)``: the inputs the command line builds, the same result."""
    workdir = Path(workdir)
    unit = first_unit(decl, cfg)
    model = unit[0] if not decl.inputs.paired and len(unit) == 1 else unit
    texts = getattr(cfg, "corpus", None)  # timing and training records read no corpus
    res = decl.run(model, texts, config=cfg, cache_dir=workdir / "cache")
    for a, b in zip(decl.inputs.results(res), decl.inputs.results(result)):
        assert_same(document(decl, a, workdir / "run"), document(decl, b, workdir / "compute"), decl.name)


def check_deterministic(decl: Analysis, cfg: Any, result: Any, workdir: str | Path) -> None:
    """Computing again on the same inputs gives the same result (to :data:`TOL`)."""
    assert_same(as_json(decl.compute(cfg, **example_inputs(decl, cfg))), as_json(result), decl.name)


def analysis_checks(decl: Analysis) -> Iterator[tuple[Callable, tuple]]:
    """(check, its arguments after the declaration) of every check of ``decl``, in order: the first two take none;
    the others take ``(cfg, result, workdir)`` or ``(result, workdir)``, which :func:`check_analysis` makes (one
    compute of the example, shared)."""
    yield check_declaration, ()
    yield check_flags, ()
    yield check_round_trip, ("cfg", "result", "workdir")
    if decl.deterministic:
        yield check_cli_writes_what_python_computes, ("result", "workdir")
        yield check_run_from_python, ("cfg", "result", "workdir")
        yield check_deterministic, ("cfg", "result", "workdir")


def check_analysis(decl: Analysis, workdir: str | Path | None = None) -> None:
    """Run every check of the contract on the declaration ``decl`` (see the module docstring): its example is
    computed once and shared by the checks; files go under ``workdir`` (default: a temporary folder, removed
    afterwards). Raises AssertionError, naming the analysis, at the first check that fails."""
    with contextlib.ExitStack() as stack:
        root = Path(workdir) if workdir is not None else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        shared: dict = {}
        for check, wants in analysis_checks(decl):
            if wants and not shared:
                shared["cfg"] = example_config(decl, root / "out")
                shared["result"] = decl.compute(shared["cfg"], **example_inputs(decl, shared["cfg"]))
            args = [shared[w] if w != "workdir" else root / check.__name__ for w in wants]
            check(decl, *args)
