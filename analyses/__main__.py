"""``probes``: one command for every analysis, the summary layer and the cache (the console script of the
package; ``python -m analyses`` is the same).

    $ probes anisotropy --model minilm-l6 --n-sentences 500     # = python -m analyses.anisotropy ...
    $ probes report --out out                                  # = python -m analyses.summary.report ...
    $ probes cache list                                        # = python -m probes.capture.cache list
    $ probes --help                                            # the commands
"""

from __future__ import annotations

import importlib
import sys

from probes.config import run_main

SUMMARY = {"figures": "analyses.summary.figures", "report": "analyses.summary.report",
           "claims": "analyses.summary.claims", "recurrence-claims": "analyses.summary.recurrence_claims"}
TOOLS = {"cache": "probes.capture.cache"}


def commands() -> dict[str, str]:
    """command -> module whose ``main(argv)`` it runs."""
    from analyses import ANALYSES

    return {**{name.replace("_", "-"): module for name, module in ANALYSES.items()}, **SUMMARY, **TOOLS}


def usage() -> str:
    table = commands()
    width = max(map(len, table))
    lines = [f"  {name:<{width}}  python -m {module}" for name, module in table.items()]
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
    sys.argv[0] = f"probes {name}"  # so each command's --help names itself
    run_main(importlib.import_module(table[name]).main, argv[1:])


if __name__ == "__main__":
    main()
