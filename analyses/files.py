"""Result files on disk: written atomically and strictly, read back strictly, and read once per run.

* :func:`write_result` writes ``<out>/results/<analysis>/<model>.json`` and ``.csv`` atomically; the JSON holds the
  numbers and everything that produced them (config, model identity, corpus identity, package versions). No
  timestamps: equal inputs give byte-identical files. Result JSON is strict: a non-finite number is written as
  null and listed under ``nulls``.
* :func:`read_result` reads one file strictly (a damaged one is one error line naming it); :func:`read_results`
  reads an analysis's files back as its Result objects.
* :class:`SavedResults`: every result file under an ``--out``, each read and made into its analysis's Result once;
  ``probes figures``, the report and the claims table are handed one and read nothing again.
* :func:`save_figure` writes PNG + PDF into ``<out>/figures/``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from analyses.jsonable import jsonable
from probes.errors import ProbeError
from probes.io import atomic_write, loads_json, provenance, strict_json

if TYPE_CHECKING:
    from analyses.result import AnalysisResult


class Declared(Protocol):
    """What the result files need of an analysis's declaration (an :class:`analyses.analysis.Analysis`): its name,
    the folder its results are filed in, and the Result class its documents are read as."""

    @property
    def name(self) -> str: ...

    @property
    def Result(self) -> type[AnalysisResult]: ...  # noqa: N802 - the declaration's field

# a document its analysis's Result cannot be made from raises one of these in from_json (a key missing, a value of
# another type or shape)
LAYOUT_ERRORS = (KeyError, TypeError, AttributeError)
PNG_DPI = 200  # save_figure: the PNG files' resolution


def result_name(model: str) -> str:
    """The name a model's results are filed under: a registry name (or a composite of names, like
    similarity's ``a__b__unit``) as it is; an ``hf:`` id, a folder or a ``?sentence=`` name (probes.checkpoints.names)
    as its spec's safe name, so no user string ever becomes a path below results/. An edited run's name (the
    model's name and an edit's label, :mod:`analyses.edited`) is the model's filed name with the label."""
    from analyses.edited import split_name
    from probes.checkpoints.names import get_spec
    from probes.checkpoints.registry import SAFE_NAME, read_registry

    base, label = split_name(model)
    if label:
        return result_name(base) + label
    if model in read_registry() or (SAFE_NAME.fullmatch(model) and ".." not in model
                                    and not Path(model).expanduser().is_dir()):
        return model
    return get_spec(model).name


def result_paths(out: str | os.PathLike, analysis: str, model: str) -> tuple[Path, Path]:
    folder, stem = Path(out) / "results" / analysis, result_name(model)
    return folder / f"{stem}.json", folder / f"{stem}.csv"  # not with_suffix: names may hold dots (v1.0)


def write_result(out: str | os.PathLike, analysis: str, model: str, result: Any,
                 rows: list[dict]) -> tuple[Path, Path]:
    """Atomically write the result JSON (numbers + settings) and a flat CSV table (rank 0 only, under torchrun).
    A field the result's class lists in ``SIDE_FILES`` (field -> suffix) is written beside it as JSON lines,
    ``<model><suffix>``, one record a line, instead of into the JSON. A result computed under an edit of the
    model's states (it records one: :mod:`analyses.edited`) is filed, and names its model, as that edited run,
    ``<model>+<edit label>``, whether ``model`` is the model's name or the run's: the clean and the edited results
    of one model are files of their own."""
    from analyses.edited import edit_label, edited_name, recorded_edits
    from probes.capture.distributed import is_main

    if not is_main():  # the other ranks of a torchrun help extract; one process writes each result
        raise RuntimeError(f"rank {os.environ.get('RANK')} of a torchrun tried to write a result; only rank 0 does")
    side = getattr(result, "SIDE_FILES", {})
    if not isinstance(result, dict):  # a Result (analyses.common.Result): its document
        result = result.to_json()
    result = dict(result)
    label = edit_label(recorded_edits(result.get("activations"),
                                      [result.get(k) for k in ("model", "models", "model_a", "model_b")]))
    model = edited_name(result_name(model), label)
    if isinstance(result.get("model_name"), str):
        result["model_name"] = edited_name(result["model_name"], label)
    json_path, csv_path = result_paths(out, analysis, model)
    for key, suffix in side.items():
        records = result.pop(key, None)
        if records is not None:
            atomic_write(json_path.with_name(json_path.stem + suffix),
                         "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8"))
    nulls: list[str] = []
    doc = jsonable({"analysis": analysis, "model_name": result_name(model), **result, "provenance": provenance()},
                    nulls)
    if nulls:  # strict JSON: no bare NaN; say where a number is missing and why
        doc["nulls"] = {"paths": nulls, "reason": "not a finite number (an empty mean or a degenerate ratio)"}
    atomic_write(json_path, (strict_json(doc) + "\n").encode())
    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(jsonable(rows))
    atomic_write(csv_path, buf.getvalue().encode())
    return json_path, csv_path


def _declaration(analysis: str | Declared) -> Declared:
    if isinstance(analysis, str):
        from analyses import get

        return get(analysis)
    return analysis


@dataclasses.dataclass
class SavedFile:
    """One result file, read once: its path, its document (read strictly, :func:`read_result`) and the Result
    its analysis makes of it, or the error that says why the document is not one (None without an analysis)."""

    path: Path
    doc: dict
    result: AnalysisResult | None = None
    error: Exception | None = None

    @classmethod
    def read(cls, path: Path, analysis: Declared | None = None) -> SavedFile:
        saved = cls(path, read_result(path))
        if analysis is not None:
            try:
                saved.result = analysis.Result.from_json(saved.doc)
            except LAYOUT_ERRORS as e:
                saved.error = e
        return saved


def pick_results(files: Sequence[SavedFile], analysis: str, every: bool) -> list[AnalysisResult]:
    """The Results of ``files`` (of analysis ``analysis``, in order): a file whose document is not of the layout
    this version reads is one error line naming it. ``every``: the files are the whole folder, so a JSON file that
    is not a result of ``analysis`` at all (no ``"analysis"`` key naming it: a file of the user's) is left out with
    a warning."""
    results = []
    for f in files:
        if every and f.doc.get("analysis") != analysis:  # a file of the user's beside the results
            warnings.warn(f"{f.path} is not a saved {analysis} result (it has no \"analysis\": \"{analysis}\"): "
                          "left out", stacklevel=3)
            continue
        if f.result is None:
            raise ProbeError(f"{f.path} does not have the layout this version reads (missing {f.error}); run python "
                             f"-m analyses.{analysis} again") from None
        results.append(f.result)
    return results


def _named(out: str | os.PathLike, analysis: str, models: Iterable[str]) -> list[Path]:
    """The result files of ``models`` (each once, in order); one error line for the first that is missing."""
    paths = list(dict.fromkeys(result_paths(out, analysis, m)[0] for m in models))
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise ProbeError(f"no saved result {missing[0]}: run python -m analyses.{analysis} first")
    return paths


def read_results(out: str | os.PathLike, analysis: str | Declared,
                 models: list[str] | None = None) -> list[AnalysisResult]:
    """The saved results of ``analysis`` (a registered name, or a declaration) under ``out`` (all models, or the
    named ones in that order) as its Result objects, each file read strictly (:func:`read_result`); a file of
    another layout (written by another version of the suite) is one error line naming it. Reading every model's,
    a JSON file that is not a result of the analysis at all is left out with a warning (:func:`pick_results`)."""
    decl = _declaration(analysis)
    if models is None:
        paths = sorted((Path(out) / "results" / decl.name).glob("*.json"))
    else:
        paths = _named(out, decl.name, models)
    return pick_results([SavedFile.read(p, decl) for p in paths], decl.name, models is None)


class SavedResults:
    """Every result file under ``<out>/results/<analysis>/``, read once (:func:`read_result`: a damaged file is
    one error line naming it) and, for an analysis in :data:`analyses.ANALYSES`, made into its Result once: what
    ``probes figures`` draws, the report shows and the claims table judges, none of them reading a file again."""

    def __init__(self, out: str | os.PathLike):
        import analyses

        self.out = Path(out)
        self.folders: dict[str, list[SavedFile]] = {}
        for folder in sorted((self.out / "results").glob("*")):
            paths = sorted(folder.glob("*.json"))
            if paths:
                decl = analyses.get(folder.name) if folder.name in analyses.ANALYSES else None
                self.folders[folder.name] = [SavedFile.read(p, decl) for p in paths]

    def files(self, analysis: str) -> list[SavedFile]:
        """The files of ``analysis``'s folder (none: an empty list), in name order."""
        return self.folders.get(analysis, [])

    def results(self, analysis: str, models: list[str] | None = None) -> list[AnalysisResult]:
        """As :func:`read_results` gives them, from the files read already."""
        if models is None:
            return pick_results(self.files(analysis), analysis, every=True)
        by_path = {f.path: f for f in self.files(analysis)}
        return pick_results([by_path[p] for p in _named(self.out, analysis, models)], analysis, every=False)

    def docs(self) -> dict[str, list[dict]]:
        """analysis -> its documents (every folder that holds a result file)."""
        return {name: [f.doc for f in files] for name, files in self.folders.items()}


# a string that reads as a decimal number: a number stored as text ("0.1", "1e-3"; not "12", which may be a name)
_NUMBER_TEXT = re.compile(r"\s*[-+]?(\d+\.\d*|\.\d+|\d+(?=[eE]))([eE][-+]?\d+)?\s*|\s*[-+]?(nan|inf|infinity)\s*",
                          re.IGNORECASE)
# where text is text: names, versions, descriptions, the model and provenance records, the settings as given
_TEXT_KEYS = ("model_name", "name", "requested", "revision", "description", "model", "provenance", "settings",
              "corpus", "config", "identity", "texts", "tokens", "note", "notes", "caption", "label", "labels")


def _not_a_number(x: float | str) -> float:
    raise ValueError(f"the number {x} is not finite (result files hold null for it)")


def read_result(path: str | os.PathLike) -> dict:
    """One saved result JSON, read strictly: a JSON object, no bare NaN/Infinity nor a number beyond float
    range (the suite writes null and lists it under ``nulls``), no number stored as text; else one
    ProbeError line that names the file. Every reader of result files (figures, claims, report) uses it."""
    path = Path(path)
    try:
        doc = loads_json(path.read_text(encoding="utf-8"), parse_constant=_not_a_number,
                         parse_float=lambda t: float(t) if math.isfinite(float(t)) else _not_a_number(float(t)))
    except OSError as e:
        raise ProbeError(f"{path}: cannot read the result file ({e.strerror or e})") from None
    except (ValueError, UnicodeDecodeError) as e:  # json.JSONDecodeError is a ValueError
        raise ProbeError(f"{path} is not a valid result file ({e}); run the analysis again") from None
    if not isinstance(doc, dict):
        raise ProbeError(f"{path} is not a valid result file (a JSON {type(doc).__name__}, not an object); "
                         f"run the analysis again")
    if (where := _number_as_text(doc)) is not None:
        raise ProbeError(f"{path} is not a valid result file ({where[0]} holds the text {where[1]!r} where a number "
                         f"belongs); run the analysis again")
    return doc


def _number_as_text(x: Any, where: str = "") -> tuple[str, str] | None:
    """(path, text) of the first string that reads as a number outside _TEXT_KEYS, or None."""
    items: Iterable[tuple[Any, Any]]
    if isinstance(x, dict):
        items = ((k, v) for k, v in x.items() if k not in _TEXT_KEYS)
    elif isinstance(x, list):
        items = enumerate(x)
    else:
        return (where or "/", x) if isinstance(x, str) and _NUMBER_TEXT.fullmatch(x) else None
    for k, v in items:
        if (found := _number_as_text(v, f"{where}/{k}")) is not None:
            return found
    return None


def save_figure(fig: Any, out: str | os.PathLike, name: str) -> list[Path]:
    """Save ``fig`` as ``<out>/figures/<name>.png`` (200 dpi) and ``.pdf`` (fonts embedded as text), both cropped to
    the same tight box (savefig.pad_inches around it). The layout engine (constrained layout) runs once, at the
    PNG's dpi, and the figure is measured once; both files are drawn from that layout (savefig with
    bbox_inches="tight" lays the figure out and measures it again for each file, most of the time it takes). The
    figure keeps its dpi and layout engine afterwards."""
    import matplotlib

    paths = []
    engine, dpi = fig.get_layout_engine(), fig.dpi
    # no rc that would give the figure a layout engine of its own while the layout is held
    with matplotlib.rc_context({"pdf.fonttype": 42, "ps.fonttype": 42, "figure.autolayout": False,
                                "figure.constrained_layout.use": False}):
        try:
            fig.dpi = PNG_DPI
            fig.draw_without_rendering()  # the layout, once
            pad = matplotlib.rcParams["savefig.pad_inches"]
            if pad == "layout":  # the layout engine's own pads, as savefig reads them (0.1 in without any)
                pads = engine.get() if engine is not None else {}
                box = fig.get_tightbbox().padded(pads.get("w_pad", 0.1), pads.get("h_pad", 0.1))
            else:
                box = fig.get_tightbbox().padded(pad)
            fig.set_layout_engine(None)  # held: savefig draws the positions the layout gave
            for ext, kw in (("png", {"dpi": PNG_DPI}), ("pdf", {"metadata": {"CreationDate": None}})):
                buf = io.BytesIO()
                fig.savefig(buf, format=ext, bbox_inches=box, **kw)
                path = Path(out) / "figures" / f"{name}.{ext}"
                atomic_write(path, buf.getvalue())
                paths.append(path)
        finally:
            fig.dpi = dpi
            fig.set_layout_engine(engine)
    return paths


def save_drawings(results: list, out: str | os.PathLike, drawings: Iterable[tuple[str, Callable]]) -> list[Path]:
    """For each ``(name, draw)`` in ``drawings``: ``fig = draw(results)``, save it as
    ``<out>/figures/<name>.{png,pdf}`` and close it. Returns the paths."""
    import matplotlib.pyplot as plt

    paths = []
    for name, draw in drawings:
        fig = draw(results)
        paths += save_figure(fig, out, name)
        plt.close(fig)
    return paths
