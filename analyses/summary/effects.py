"""The report's section on the effects of edits: one row per effect file under ``<out>/effects/`` (written by
``python -m analyses.effect``), each the edited run's name, the analysis and headline number, the clean and
edited values, the paired difference edited - clean with its interval and, with a control, the control's
difference and the edit's effect beyond it; then each effect's figure (``<out>/figures/effect-*.png``).

    $ python -m analyses.summary.report --out out
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from analyses.effect_result import EffectResult
from probes.errors import ProbeError

PURPOSE = ("What an edit of the model's states does to an analysis's headline number: the clean and the edited run "
           "on the same units, their difference bootstrapped paired over those units, and a random edit of the same "
           "rank or norm as a control (python -m analyses.effect). An interval that excludes 0 is an effect; "
           "'beyond control' is the edit's effect over that of a random edit of its size.")
HEADER = ["edited run", "analysis", "statistic", "clean", "edited", "edited - clean", "control - clean",
          "edited - control", "units"]


def read_effects(out: str | Path) -> list[EffectResult]:
    """Every effect file under ``<out>/effects/<analysis>/``, in name order; one ProbeError line naming a file that
    is not an effect document."""
    found = []
    for path in sorted((Path(out) / "effects").glob("*/*.json")):
        try:
            found.append(EffectResult.from_json(json.loads(path.read_text(encoding="utf-8"))))
        except (ProbeError, ValueError) as e:
            raise ProbeError(f"{path}: {' '.join(str(e).split())}") from None
    return found


def effect_row(e: EffectResult) -> list[str]:
    """The report table's row of one effect (see :data:`HEADER`)."""
    def text(x: object) -> str:
        return "" if x is None else str(x)

    return [f"{e.model}{e.edit}", e.analysis, e.statistic, f"{e.clean.value:.4g}", f"{e.edited.value:.4g}",
            str(e.difference), text(e.control_difference), text(e.beyond_control), f"{e.n_units} {e.unit}s"]


def effect_section(out: str | Path) -> dict | None:
    """The report's section (as :func:`analyses.summary.report.sections` makes them) listing the effects under
    ``out``; None when there are none."""
    effects = read_effects(out)
    if not effects:
        return None
    figures = []
    for e in effects:
        png = Path(out) / "figures" / f"effect-{e.analysis}-{e.name()}.png"
        if png.is_file():
            src = "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")
            figures.append({"src": src, "name": png.stem, "caption": f"{e.model}{e.edit} ({e.edit_description}): "
                            f"each run's {e.statistic} with its interval, the paired differences beside them"})
    table = {"title": "effects of edits, paired over the same units (intervals at the expanded level)",
             "header": HEADER, "rows": [effect_row(e) for e in effects]}
    return {"analysis": "effects", "id": "effects", "title": "effects of edits", "purpose": PURPOSE,
            "figures": figures, "compact": [table]}
