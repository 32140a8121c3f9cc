"""``probes``: one command for every analysis, the summary layer and the cache (the console script of the
package; ``python -m analyses`` is the same).

    $ probes anisotropy --model minilm-l6 --n-sentences 500     # = python -m analyses.anisotropy ...
    $ probes report --out out                                  # = python -m analyses.summary.report ...
    $ probes cache list                                        # = python -m probes.capture.cache list
    $ probes series anisotropy --series out/train/series/bert-small-seed3   # = python -m analyses.series ...
    $ probes --help                                            # the commands, one line each

``probes --help`` reads each command's purpose from its module's docstring without importing the module (no
torch, no model code): the list costs a few milliseconds.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys
from pathlib import Path

SUMMARY = {"figures": "analyses.summary.figures", "report": "analyses.summary.report",
           "claims": "analyses.summary.claims", "recurrence-claims": "analyses.summary.recurrence_claims",
           "series": "analyses.series", "trajectory-plan": "analyses.trajectory_plan",
           "trajectories": "analyses.summary.trajectories"}
TOOLS = {"cache": "probes.capture.cache"}


def commands() -> dict[str, str]:
    """command -> the module it runs: an analysis's declaration (``ANALYSIS.main``), else the module's ``main``."""
    from analyses import ANALYSES

    return {**{name.replace("_", "-"): module for name, module in ANALYSES.items()}, **SUMMARY, **TOOLS}


def purpose(module: str) -> str:
    """The first line of ``module``'s docstring, read from its source (the module is not imported), without a
    leading "<Name>:", up to its question mark, without a trailing reference in parentheses."""
    source = _source(module)
    if source is None:
        return ""
    doc = ast.get_docstring(ast.parse(source.read_text(encoding="utf-8"))) or ""
    line = doc.strip().split("\n")[0]
    line = re.sub(r"^[A-Z][\w-]*( [\w-]+){0,2}: (?=[a-z])", "", line)  # "Anisotropy: how ...", "MoG lens: which ..."
    line = line[:line.index("?") + 1] if "?" in line else line  # the question an analysis answers
    return re.sub(r"\s*\([^()]*\)\.?$", "", line).strip()


def _source(module: str) -> Path | None:
    """The source file of ``module``, found without importing it or its packages (``find_spec`` of a submodule
    imports its parents: ``probes`` would bring torch)."""
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or spec.origin is None:
        return None
    if not rest:
        return Path(spec.origin)
    path = Path(spec.origin).parent.joinpath(*rest)
    return next((p for p in (path.with_suffix(".py"), path / "__init__.py") if p.is_file()), None)


def usage() -> str:
    table = commands()
    width = max(map(len, table))
    lines = [f"  {name:<{width}}  {purpose(module)}" for name, module in table.items()]
    return ("usage: probes COMMAND [options]   (probes COMMAND --help for its options)\n\ncommands:\n"
            + "\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return
    table = commands()
    name = argv[0].replace("_", "-")
    if name not in table:
        print(f"error: unknown command {argv[0]!r}; commands: {', '.join(table)}", file=sys.stderr)
        sys.exit(2)
    from probes.config import run_main

    sys.argv[0] = f"probes {name}"  # so each command's --help names itself
    module = importlib.import_module(table[name])
    run_main(getattr(module, "ANALYSIS", module).main, argv[1:])


if __name__ == "__main__":
    main()
