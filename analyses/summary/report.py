"""One self-contained HTML page for every saved result: ``<out>/report.html``.

The page opens offline (figures are embedded as PNG data, no scripts, no fonts fetched). It is written
for whoever's results they are: at the top, one row per model in the results (family, layers, width,
what was run; a folder or ``hf:`` model under the name the user gave); then, when any of the papers'
claims applies to these models (:mod:`analyses.summary.claims`: it compares models that are here), the
claim table -- one line per claim and compared model with the verdict and the deciding difference, the
forest plot of every seed's difference under it, the full evidence folded in a details element -- and
the claims that do not apply named in one line; then, per analysis, what it asks (its purpose), what the
results show in a few sentences (:mod:`analyses.summary.findings`), its figures in the order its
declaration lists them with the caption it gives each (:class:`analyses.analysis.Figure`), a compact
table where the full one is long (similarity: one row per pair and measure), its tables (the Markdown
tables the analysis writes, else the CSVs, each titled with its model, scrolling sideways when wide, a
missing value an empty cell with a footnote; a CSV of more than :data:`LONG_TABLE` rows is linked, not
printed), and per model the provenance block (model fingerprint, corpus hash, settings, package versions)
folded away. When no claim applies (a user's own models), the page ends with one line saying so. Figures that the
results lack (results written from Python have none) or that are older than them are drawn first, as ``probes
figures`` draws them (where a result cannot be read back, its section says how to draw them). Built
with Jinja2 from ``analyses/summary/templates/report.html.j2``. ``python -m analyses.summary.figures`` (so
``make demo``) writes it.

Everything on the page that the suite did not write itself is escaped: Jinja autoescape for every field, and the
Markdown tables rendered without raw HTML (a ``model_name`` of ``<script>`` in a result file shows as text). Result
files are read by :func:`analyses.common.read_result` (a damaged one is one error line naming it); an ``--out``
without results is an error, and no page is written.

    $ python -m analyses.summary.report --out out
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analyses.common import arg, atomic_write, parse_config, run_main
from analyses.files import SavedResults
from analyses.model_info import ModelInfo
from analyses.summary import claims as claims_mod
from analyses.summary import findings
from analyses.summary.effects import effect_section
from analyses.summary.evidence import saved_model_name

LONG_TABLE = 50  # a CSV of more rows is linked from the page, not printed on it (the figures show its numbers)


def owner(stem: str) -> str | None:
    """The registered analysis whose declaration lists a figure that a file named ``stem`` may be: a figure of
    that name first (``mog-lens``: mog_lens's), else one of that name pattern (``maps-{}``); None for none."""
    import analyses

    declared = [(name, fig) for name in analyses.ANALYSES for fig in analyses.get(name).figures]
    exact = [name for name, fig in declared if fig.each is None and fig.name == stem]
    return next(iter(exact or [name for name, fig in declared if fig.matches(stem)]), None)


def caption(stem: str, results: Sequence = ()) -> str:
    """What to read in the figure file named ``stem``: the caption its analysis's declaration gives the figure
    (``results``, the analysis's Results, tell apart figures of one name pattern); "" for a figure of no
    registered analysis."""
    import analyses

    name = owner(stem)
    return analyses.get(name).caption(stem, results) if name is not None else ""


@dataclass
class Config:
    """Write <out>/report.html from the saved results and figures."""

    out: str = arg("out", "output root holding results/ and figures/")


def _png(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _tables(folder: Path, names: dict[str, str] | None = None, edited: frozenset[str] = frozenset(),
            own: bool = False) -> tuple[list[dict], list[dict]]:
    """(tables to print, tables to link): the analysis's Markdown tables rendered to HTML; if it wrote none, its
    CSVs, each titled with its model (``names``: file stem -> the name to show), a CSV of more than
    :data:`LONG_TABLE` rows linked instead (its name, rows and path relative to the page). A missing value is
    an empty cell (``nan`` says so). ``edited``: the file stems of edited runs, whose CSVs are left out; ``own``:
    the tables of those runs alone instead (no Markdown table: the analysis's own tables are of its models)."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")  # raw HTML in a cell is shown as text
    found = [{"name": p.name, "title": f"{folder.name}: {p.stem} (all models)",
              "html": md.render(p.read_text(encoding="utf-8")), "nan": False} for p in sorted(folder.glob("*.md"))]
    if found:
        return ([], []) if own else (found, [])
    import pandas as pd

    tables, linked = [], []
    for p in sorted(folder.glob("*.csv")):
        if (p.stem in edited) != own:
            continue
        if not p.stat().st_size:
            continue
        df = pd.read_csv(p)
        title = f"{(names or {}).get(p.stem, p.stem)}: {folder.name}"
        if len(df) > LONG_TABLE:
            linked.append({"name": p.name, "title": title, "rows": len(df),
                           "href": f"results/{folder.name}/{p.name}"})
            continue
        tables.append({"name": p.name, "title": title,
                       "html": df.to_html(index=False, float_format=lambda x: f"{x:.4g}", border=0, classes="csv",
                                          na_rep=""),
                       "nan": bool(df.isna().to_numpy().any())})
    return tables, linked


def shown_name(doc: dict) -> str:
    """The name a result's model is shown under: its registry name, or, for a folder or ``hf:`` id, the
    name as the user gave it (``model_requested``) rather than the hashed file name."""
    name, requested = str(saved_model_name(doc, "")), doc.get("model_requested")
    if isinstance(requested, str) and requested and name.startswith(("dir--", "hf--")):
        return requested
    return name


@dataclass
class ModelRow:
    """One row of the report's model table: a model's name (as given), family, kind, layers, width and the
    analyses run on it."""

    name: str
    family: str
    kind: str
    layers: int | str  # "" where the description records none
    width: int | str
    ran: list[str]


def _models(saved: SavedResults) -> list[ModelRow]:
    """One row per model in the results: name (as given), family, kind, layers, width and what was run. A
    registered analysis's models are those its declaration reads from each Result (both models of a pair,
    :meth:`analyses.analysis.Analysis.models`); a document no analysis reads names its ``model`` if it has one."""
    import analyses as registry

    rows: dict[str, ModelRow] = {}

    def add(desc: ModelInfo, analysis: str, shown: str | None = None) -> None:
        if not desc.name:
            return
        row = rows.setdefault(desc.name, ModelRow(
            shown or desc.name, desc.family, desc.kind, "" if desc.num_layers is None else desc.num_layers,
            "" if desc.hidden_size is None else desc.hidden_size, []))
        if analysis not in row.ran:
            row.ran.append(analysis)

    for analysis, files in saved.folders.items():
        decl = registry.get(analysis) if analysis in registry.ANALYSES else None
        for f in files:
            if decl is not None and f.result is not None:
                described = decl.models(f.result)
                for desc in described:
                    add(desc, analysis, shown_name(f.doc) if len(described) == 1 else None)
            elif isinstance(described := f.doc.get("model"), dict):  # a document no declaration reads
                add(ModelInfo.from_json(described), analysis, shown_name(f.doc))
    return sorted(rows.values(), key=lambda r: r.name)


def _png_width(path: Path) -> int:
    """A PNG's width in pixels (from its IHDR header)."""
    with open(path, "rb") as f:
        head = f.read(24)
    return int.from_bytes(head[16:20], "big") if head[:8] == b"\x89PNG\r\n\x1a\n" else 0


@dataclass(frozen=True)
class ShownFigure:
    """A saved figure as the report shows it: its file's stem, the PNG embedded (a data URI), its caption and its
    width in CSS pixels."""

    name: str
    src: str
    caption: str
    width: int


def _figures(out: Path, analysis: str, results: Sequence = ()) -> list[ShownFigure]:
    """The figures of ``analysis`` that are saved, as its declaration names them: the files it draws for
    ``results`` (its Results; without them, the files any of its figures may be), each with its caption, in
    the order the declaration lists them (then by name)."""
    import analyses as registry

    if analysis not in registry.ANALYSES:
        return []
    decl = registry.get(analysis)
    declared = list(decl.figures)
    try:
        stems = set(decl.figure_files(list(results))) if results else set()
    except (ValueError, IndexError, KeyError, TypeError, AttributeError):  # results that lack what a figure reads
        stems = set()
    if not stems:
        stems = {p.stem for p in (out / "figures").glob("*.png") if owner(p.stem) == analysis}
    order = lambda p: next((i for i, f in enumerate(declared) if f.matches(p.stem)), len(declared))  # noqa: E731
    figs = sorted((p for p in (out / "figures" / f"{stem}.png" for stem in stems) if p.is_file()),
                  key=lambda p: (order(p), p.stem))
    # shown at half their pixel width: saved at 200 dpi, so every figure keeps its size in inches (~100 px each)
    return [ShownFigure(p.stem, _png(p), caption(p.stem, results), _png_width(p) // 2) for p in figs]


def _typed(files: list) -> list:
    """The files' Results (they tell the analysis's figures' captions apart); none when any document is not one."""
    return [] if any(f.result is None for f in files) else [f.result for f in files]


def _provenance(doc: dict) -> str:
    keep = {k: doc[k] for k in ("model", "model_a", "model_b", "config", "activations", "corpus", "provenance")
            if k in doc}
    return json.dumps(keep, indent=1)


def _purpose(analysis: str) -> str:
    import analyses as registry

    return registry.get(analysis).purpose if analysis in registry.ANALYSES else ""


def draw_stale_figures(out: str | Path, saved: SavedResults | None = None) -> tuple[list[str], dict[str, str]]:
    """Draw, as ``probes figures`` does, the figures of every registered analysis whose saved results have a figure
    missing or newer results than its figures: results written from Python (:func:`analyses.common.write_result`)
    come without figures. ``saved``: the results read already (default: read them). Returns (the analyses drawn,
    {analysis: why its figures could not be drawn})."""
    import analyses as registry
    from analyses.files import LAYOUT_ERRORS
    from probes.errors import ProbeError

    out = Path(out)
    saved = saved if saved is not None else SavedResults(out)
    drawn, failed = [], {}
    for name, files in saved.folders.items():
        if name not in registry.ANALYSES:
            continue
        decl = registry.get(name)
        try:
            results = saved.results(name)
        except ProbeError as e:
            failed[name] = f"its figures could not be drawn ({e}); draw them with probes figures --out {out}"
            continue
        newest = max(f.path.stat().st_mtime for f in files)
        try:
            pngs = [out / "figures" / f"{stem}.png" for stem in decl.figure_files(results)]
            if any(not p.exists() or p.stat().st_mtime < newest for p in pngs):
                decl.save_figures(results, out)
                drawn.append(name)
        except (ProbeError, ValueError, IndexError, *LAYOUT_ERRORS) as e:  # reads back, lacks what a figure draws
            failed[name] = (f"its figures could not be drawn ({type(e).__name__}: {e}); draw them with "
                            f"probes figures --out {out}")
    return drawn, failed


def sections(out: str | Path, notes: dict[str, str] | None = None, saved: SavedResults | None = None) -> list[dict]:
    """One section per analysis with saved results: its purpose, what the results show in words, figures, compact
    and full tables (long ones linked), and one provenance block per result; ``notes``: analysis -> a line said
    where its figures would be (why there are none); ``saved``: the results read already (default: read them).
    The results computed under an edit of the model's states (:mod:`analyses.edited`) are a section of their own
    beside the analysis's (``id`` ``<analysis>-edited``, ``title`` and the ``edited`` line say so): its sentences,
    tables and the figures not shown above read only the edited runs, and the analysis's own only the models'."""
    out = Path(out)
    saved = saved if saved is not None else SavedResults(out)
    secs = []
    for name, all_files in saved.folders.items():
        edited = [f for f in all_files if f.result is not None and f.result.identity.edit]
        clean = [f for f in all_files if f not in edited]
        stems = frozenset(f.path.stem for f in edited)
        shown_figures: set[str] = set()
        for files, own in ((clean, None), (edited, stems)):
            if not files:
                continue
            results = [{"name": shown_name(f.doc) if own is None else f.result.model_name,  # type: ignore[union-attr]
                        "file": str(f.path.relative_to(out)), "provenance": _provenance(f.doc)} for f in files]
            typed = _typed(files)
            names = {f.path.stem: shown_name(f.doc) if own is None else f.result.model_name  # type: ignore[union-attr]
                     for f in files}
            tables, linked = _tables(out / "results" / name, names, stems, own is not None)
            figures = [fig for fig in _figures(out, name, typed) if fig.name not in shown_figures]
            shown_figures.update(fig.name for fig in figures)
            secs.append({"analysis": name, "purpose": _purpose(name), "findings": findings.sentences(name, typed),
                         "figures": figures, "compact": findings.compact_tables(name, typed),
                         "tables": tables, "linked": linked, "results": results,
                         "figures_note": (notes or {}).get(name, "") if own is None else "",
                         **({} if own is None else {"id": f"{name}-edited", "title": f"{name}, edited runs",
                                                    "edited": EDITED_NOTE})})
    return secs


# what the section of an analysis's edited runs says first
EDITED_NOTE = ("Computed under an edit of the model's states (probes.intervention), each run named by its model and "
               "the edit's label: not the model's own results, so the claims leave them out.")


def applies(finding: claims_mod.Finding, claim: claims_mod.Claim | claims_mod.Check) -> bool:
    """Whether a claim speaks about these results: it has a verdict, or it compares models that are here (a
    comparison not testable for a reason, e.g. too few units, still applies), or a result it reads is damaged.
    A claim whose models are not here (a user's own models) does not apply."""
    if finding.verdict != claims_mod.UNTESTED or finding.comparisons:
        return True
    return isinstance(claim, claims_mod.Claim) and finding.reason != claim.missing


def present_claims(found: list, declared: Sequence = ()) -> tuple[list, list]:
    """(the findings that apply to these results, the others), in the table's order; ``declared``: the claims
    the findings are verdicts of (default: :data:`analyses.summary.claims.CLAIMS`)."""
    shown: list = []
    others: list = []
    for f, c in zip(found, declared or claims_mod.CLAIMS):
        (shown if applies(f, c) else others).append(f)
    return shown, others


def claim_rows(found: list) -> list[dict]:
    """The claim table's rows: per finding its lines (:func:`analyses.summary.claims.table_lines`), the first
    carrying the claim's cells (``span``: how many lines they cover)."""
    rows = []
    for f in found:
        lines = claims_mod.table_lines(f)
        for i, ln in enumerate(lines):
            rows.append({"finding": f if i == 0 else None, "span": len(lines), "line": ln,
                         "verdict_class": str(ln.verdict).replace(" ", "-"),
                         "over": claims_mod.claim_over_training(f)})
    return rows


def _embedded(fig: Any) -> dict:
    """A Figure as an embedded PNG (src, width in CSS pixels: half the 200-dpi image's)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=200, bbox_inches="tight")
    data = buf.getvalue()
    return {"src": "data:image/png;base64," + base64.b64encode(data).decode("ascii"),
            "width": int.from_bytes(data[16:20], "big") // 2}


def forest_png(found: list) -> dict | None:
    """The forest plot of ``found``'s comparisons as an embedded PNG (src, width), or None when none has a
    per-seed difference to draw."""
    from analyses.summary.claims_figure import claims_figure, drawn

    return _embedded(claims_figure(found)) if drawn(found) else None


def course_png(out: str | Path) -> dict | None:
    """Each claim's difference along training (the trajectory file under ``<out>/trajectories``, when there is one)
    as an embedded PNG, or None."""
    from analyses.summary.claims_figure import trajectories_figure
    from analyses.summary.course import TRAJECTORY_FILE
    from analyses.summary.trajectory_doc import read

    path = Path(out) / "trajectories" / TRAJECTORY_FILE
    if not path.is_file():
        return None
    doc = read(path)
    return _embedded(trajectories_figure(doc)) if any(c.comparisons for c in doc.claims) else None


def render(out: str | Path, notes: dict[str, str] | None = None, saved: SavedResults | None = None) -> str:
    """The report page's HTML (``notes``: see :func:`sections`; ``saved``: the results read already)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("analyses.summary", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]))
    saved = saved if saved is not None else SavedResults(out)
    shown, others = present_claims(claims_mod.evaluate(out, saved=saved))
    papers = sorted({c.paper for c in claims_mod.CLAIMS})
    effects = effect_section(out)  # the effects of edits (python -m analyses.effect), after the analyses
    return env.get_template("report.html.j2").render(
        claims=shown, claim_rows=claim_rows(shown), forest=forest_png(shown), course=course_png(out), others=others,
        papers=papers,
        models=_models(saved), sections=sections(out, notes, saved) + ([effects] if effects else []), out=str(out))


def write_report(out: str | Path, saved: SavedResults | None = None) -> Path:
    """Write ``<out>/report.html`` atomically, after drawing the figures its results lack
    (:func:`draw_stale_figures`, each analysis drawn said in one line); returns its path. ``saved``: the results
    read already (``probes figures`` hands over what it read; default: read them, each file once). One error line
    (and no page, no folder made) when ``out`` holds no results."""
    claims_mod.require_results(out)
    saved = saved if saved is not None else SavedResults(out)
    drawn, failed = draw_stale_figures(out, saved)
    for name in drawn:
        print(f"report: drew the figures of {name} (its results were newer than its figures, or had none)")
    path = Path(out) / "report.html"
    atomic_write(path, render(out, failed, saved).encode("utf-8"))
    return path


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(Config, argv, __doc__.split("\n\n")[0])
    print(write_report(cfg.out))


if __name__ == "__main__":
    run_main(main)
