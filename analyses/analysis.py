"""One declaration per analysis: everything the command line, the Python call, the figures, the report and the
contract test need to know about it, in one :class:`Analysis` object at the end of its module::

    ANALYSIS = Analysis(
        name="anisotropy",
        inputs=Sentences(),                      # the kind of input: its options and how inputs are made
        Config=Config, Result=Result, compute=compute, table_rows=table_rows,
        figures=(Figure("anisotropy", plot, "Cosine similarity of random pairs ..."),
                 Figure("anisotropy-layers", plot_layers, "Ethayarajh's statistics by layer ...")),
        example=("--model", "tiny-bert", "--n-sentences", "12", "--n-tokens", "40"),
    )
    run, main = ANALYSIS.run, ANALYSIS.main      # the Python call and the command line

    if __name__ == "__main__":
        ANALYSIS.main()

and one line in :data:`analyses.ANALYSES`. Then ``python -m analyses.<name>``, ``probes <name>``,
``<name>.run(model, texts)``, ``probes figures``, the report's captions and tests/test_contract.py all
find it. See docs/adding-an-analysis.md.

* :class:`Figure`: a figure's file name, how it is drawn from the results (``draw(results, fig=None)``) and
  the caption the report prints under it; ``select`` picks the results it draws, ``each`` draws one figure
  per group of results (the name then holds ``{}``, the group's key).
* :meth:`Analysis.main`: the command line (see :func:`analyses.data.run_analysis`).
* :meth:`Analysis.run`: the same analysis from Python on a model (a name, a folder, ``hf:org/name`` or a
  loaded transformers model with ``tokenizer=``) and texts (a list of strings, or a corpus name or path).
* :meth:`Analysis.save_figures`: every figure and table of saved results, into ``<out>/figures`` and
  ``<out>/results/<name>/``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from analyses.inputs import Inputs
from analyses.model_info import ModelInfo, ModelPair
from probes.capture.store import USER_CACHE, UserCache
from probes.errors import ProbeError

if TYPE_CHECKING:
    from analyses.common import AnalysisResult

R = TypeVar("R", bound="AnalysisResult")  # an analysis's Result class: what its table_rows is handed


@dataclasses.dataclass(frozen=True)
class Figure:
    """One figure of an analysis, saved as ``<out>/figures/<name>.{png,pdf}``.

    ``draw(results, fig=None) -> matplotlib Figure`` draws it from a list of Results (``single``: from one
    Result, ``draw(result, fig=None)``, a figure per result); ``fig=`` a Figure or SubFigure to draw into.
    ``select(results) -> results``
    keeps the results it draws (default: all; none left: no figure). With ``each(result) -> key`` one figure
    is drawn per key (results in order; a None key: none for that result), named ``name.format(key)`` (a tuple
    key fills several ``{}``; each part is a name without ``__``, so ``similarity-{}__{}`` and
    ``similarity-{}__{}__{}`` tell a file's figure apart). ``caption`` says what to read in it (the report
    prints it under the figure)."""

    name: str
    draw: Callable
    caption: str
    select: Callable | None = None
    each: Callable | None = None
    single: bool = False

    def __post_init__(self) -> None:
        if self.single and self.each is None:
            raise TypeError(f"figure {self.name}: a figure of one result (single=True) is drawn for each result: "
                            "give each=")

    def render(self, results: list, fig: Any = None) -> Any:
        """The drawn figure of ``results`` (one group of :meth:`groups`), into ``fig`` if given."""
        return self.draw(results[0], fig=fig) if self.single else self.draw(results, fig=fig)

    def groups(self, results: list) -> dict[str, list]:
        """file name -> the results that figure draws, for these results."""
        chosen = list(self.select(results)) if self.select is not None else list(results)
        if not chosen:
            return {}
        if self.each is None:
            return {self.name: chosen}
        out: dict[str, list] = {}
        for r in chosen:
            key = self.each(r)
            if key is not None:
                stem = self.name.format(*key) if isinstance(key, tuple) else self.name.format(key)
                out.setdefault(stem, []).append(r)
        return out

    def matches(self, stem: str) -> bool:
        """Whether a figure file named ``stem`` may be this one (the name, or its ``{}`` pattern)."""
        if self.each is None:
            return stem == self.name
        return re.fullmatch(re.escape(self.name).replace(r"\{\}", "(?:(?!__).)+"), stem) is not None


@dataclasses.dataclass(frozen=True)
class Analysis(Generic[R]):
    """The declaration of one analysis (see the module docstring).

    * ``name``: the name in :data:`analyses.ANALYSES`, of the results folder and of the command;
    * ``inputs``: the kind of input (:mod:`analyses.inputs`); ``Config`` must derive from its ``Config``;
    * ``Config``, ``Result`` (an :class:`analyses.common.AnalysisResult`), ``compute(cfg, **inputs) -> Result``
      and ``table_rows(result) -> rows`` (the CSV beside each result);
    * ``figures``: its :class:`Figure` s; ``tables``: file name -> ``markdown(results) -> str``, written into
      the results folder with the figures; ``summary(results) -> str``: printed by the command line after a run;
    * ``check(cfg)``: what ``arg(min=, choices=)`` cannot check, before any model is loaded;
    * ``example``: the command-line arguments of a tiny run on the suite's tiny models (the contract test runs
      it); ``deterministic=False`` for an analysis whose numbers are timings;
    * ``python_inputs``: keywords of :meth:`run` that go to ``compute`` as they are, not into the Config (what
      only Python can give: arrays, functions), each with the Config settings it implies unless the caller gives
      them or a ``config=`` (causal probing's ``labels=``: ``{"task": []}``, the caller's task only)."""

    name: str
    inputs: Inputs
    Config: type
    Result: type[R]
    compute: Callable
    # typed by the Result: a function of something else (a figure's list of results) fails make typecheck
    table_rows: Callable[[R], list[dict]]
    figures: tuple[Figure, ...] = ()
    example: tuple[str, ...] = ()
    tables: dict[str, Callable] = dataclasses.field(default_factory=dict)
    summary: Callable | None = None
    check: Callable | None = None
    deterministic: bool = True
    python_inputs: dict[str, dict] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not issubclass(self.Config, self.inputs.Config):
            raise TypeError(f"analysis {self.name}: its Config must derive from {self.inputs.Config.__name__}, the "
                            f"options of its {self.inputs.kind} inputs")
        if not self.Result.__dict__.get("ANALYSIS"):
            self.Result.ANALYSIS = self.name  # how a Result names its analysis (its repr, the report)
            self.Result.TABLE_ROWS = staticmethod(self.table_rows)  # Result.to_frame()
        object.__setattr__(self, "figures", tuple(self.figures))
        object.__setattr__(self, "example", tuple(self.example))

    # ------------------------------------------------------------------------- what it is

    @property
    def doc(self) -> str:
        """The module docstring of the analysis (its definitions)."""
        return sys.modules[self.compute.__module__].__doc__ or ""

    @property
    def purpose(self) -> str:
        """One line: what the analysis answers (the first line of its module docstring)."""
        return self.doc.strip().split("\n")[0]

    # ------------------------------------------------------------------------- the command line

    def main(self, argv: Sequence[str] | None = None) -> None:
        """The command line: ``argv`` None reads the process's arguments and turns a user error into one
        ``error:`` line and exit status 2 (``python -m analyses.<name>``); a list (from Python, tests) raises
        it. Runs the registered declaration, so the classes of ``python -m``'s ``__main__`` copy of the module
        are never mixed with the registered module's."""
        from analyses import get
        from analyses.data import run_analysis
        from probes.config import run_main

        try:
            registered = get(self.name)
        except KeyError:  # a declaration not (yet) listed in analyses.ANALYSES runs as it is
            registered = self
        if argv is None:
            run_main(lambda args: run_analysis(registered, args), None)
        else:
            run_analysis(registered, list(argv))

    # ------------------------------------------------------------------------- from Python

    def run(self, model: Any, texts: Any = None, *, tokenizer: Any = None, name: str | None = None,
            sentence: str | None = None, config: Any = None,
            cache_dir: str | os.PathLike | UserCache | None = USER_CACHE, intervention: Any = None,
            **settings: Any) -> Any:
        """The analysis of ``model`` on ``texts`` from Python, with every input the command line would build,
        as a Result (not written: :func:`analyses.common.write_result` saves one).

        ``model``: a checkpoints.yaml name, a model folder, ``hf:org/name``, or a loaded transformers model with
        its ``tokenizer=`` (and ``name=``, how results name it); a pair ``(A, B)`` for a pairwise analysis.
        ``texts``: a list of strings (the caller's texts), or a corpus name or path (a seeded sample of it, as
        the command line draws); None: the config's corpus. ``settings``: any field of the Config
        (``n_tokens=2000``), checked like the command line's flags; ``config``: a whole Config instead.
        ``cache_dir``: the activation cache (default: probes' per-user cache; the command line's is
        ``<out>/cache``); None: no cache, as in ``probes.extract``. ``sentence``: the model's sentence vector
        (cls, mean, mean_all, last), for the analyses of one model's sentence sample; as ``?sentence=`` on a
        name. ``intervention``: a :class:`probes.intervention.Intervention` (or a list) that edits a layer's
        states in every forward pass the analysis runs (its extractions under their own cache key; an LM's
        scoring and generation); the result records it. An analysis's ``python_inputs`` (causal probing's
        ``labels=``, ``label_name=``) go to its ``compute``."""
        from probes.intervention import as_interventions, intervening

        edits = as_interventions(intervention)
        if sentence is not None:
            model, tokenizer, name = self._with_sentence(model, sentence, tokenizer, name)
        given = {k: settings.pop(k) for k in self.python_inputs if k in settings}
        implied = {f: v for k, x in given.items() if x is not None for f, v in self.python_inputs[k].items()}
        cfg = self.config(config, **(settings if config is not None else {**implied, **settings}))
        cfg = self.inputs.with_corpus(cfg, texts)
        if self.check is not None:
            self.check(cfg)
        with intervening(edits):
            inputs = self.inputs.from_python(model, texts, cfg, tokenizer=tokenizer, name=name, cache_dir=cache_dir)
            computed = self.compute(cfg, **inputs, **given)
        return computed

    def _with_sentence(self, model: Any, sentence: str, tokenizer: Any, name: str | None) -> tuple:
        """(model, tokenizer, name) for :meth:`run` with the sentence vector ``sentence``: a name or folder gets
        the ``?sentence=`` suffix, a loaded object is wrapped as the Encoder ``probes.extract`` would make."""
        from analyses.inputs import is_object
        from probes.models.user import wrap_encoder

        if self.inputs.kind != "sentences":
            raise ProbeError(f"{self.name} takes no sentence=: it is for the analyses of one model's sentence sample "
                             "(name each model of a pair with ?sentence=)")
        if is_object(model):
            return wrap_encoder(model, tokenizer, name=name, sentence=sentence), None, None
        if isinstance(model, (str, os.PathLike)):
            return f"{os.fspath(model)}?sentence={sentence}", tokenizer, name
        raise ProbeError(f"sentence= goes with a model name, folder or loaded transformers model, not "
                         f"{type(model).__name__}")

    def config(self, config: Any = None, **settings: Any) -> Any:
        """A Config: ``config`` (or the defaults) with ``settings`` replaced; an unknown setting or a value out
        of its range is one error line naming it."""
        from probes.config import check_values

        names = {f.name for f in dataclasses.fields(self.Config)}
        unknown = sorted(set(settings) - names)
        if unknown:
            raise ProbeError(f"{self.name} has no setting {unknown[0]!r}; its settings: "
                             f"{', '.join(sorted(names - {'out', 'figures'}))}")
        cfg = dataclasses.replace(config if config is not None else self.Config(), **settings)
        check_values(cfg)
        return cfg

    def models(self, result: AnalysisResult) -> list[ModelInfo]:
        """The descriptions of the models ``result`` was computed from, as its identity records them: the one
        model's, or a pair's two (A's, then B's) when the kind of input is a pair (``inputs.paired``)."""
        model = result.identity.model
        return list(model.sides) if isinstance(model, ModelPair) else [] if self.inputs.paired else [model]

    # ------------------------------------------------------------------------- figures and tables

    def figure_files(self, results: list) -> dict[str, tuple[Figure, list]]:
        """figure file name -> (its Figure, the results it draws), for these results."""
        return {stem: (fig, group) for fig in self.figures for stem, group in fig.groups(results).items()}

    def caption(self, stem: str, results: Sequence = ()) -> str:
        """The caption of the figure file named ``stem`` (its results tell apart figures of one name pattern)."""
        files = self.figure_files(list(results)) if results else {}
        if stem in files:
            return files[stem][0].caption
        exact = [fig for fig in self.figures if fig.each is None and fig.matches(stem)]
        return next((fig.caption for fig in exact or self.figures if fig.matches(stem)), "")

    def save_figures(self, results: list, out: str | os.PathLike) -> list[Path]:
        """Draw and save every figure of these results into ``<out>/figures``, under the suite's theme
        (:func:`analyses.style.theme`), and write the tables into ``<out>/results/<name>/``. Returns the paths."""
        import matplotlib.pyplot as plt

        from analyses.common import atomic_write, save_figure
        from analyses.style import theme

        paths = []
        for stem, (fig, group) in self.figure_files(results).items():
            with theme():  # the suite's own figures: its paper look (a caller's plots keep the caller's rcParams)
                drawn = fig.render(group)
                paths += save_figure(drawn, out, stem)
            plt.close(drawn)
        for file, markdown in self.tables.items():
            path = Path(out) / "results" / self.name / file
            atomic_write(path, markdown(results).encode("utf-8"))
            paths.append(path)
        return paths
