"""Plant six typical mistakes at the seams, one at a time, and check that `make typecheck` (mypy) finds each.

    $ python scripts/planted_mistakes.py          # in a clone's root; each file is put back after its run

The six: a misspelt Result accessor named in a claim's declaration; a misspelt field of a model's description; a
(value, interval) tuple stored where a float belongs in causal probing's rows; a figure function given as an
analysis's table_rows; a misspelt field of anisotropy's rows in the accessor the claims read; the trajectory writer
reading a misspelt field of a judged point. Exit status 1 when mypy lets one through.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PLANTS = {
    "accessor named in a claim": ("analyses/summary/papers.py", 'read=Read(Anisotropy.last_layer_mean, "token")',
                                  'read=Read(Anisotropy.last_layer_maen, "token")'),
    "field of the model's description": ("analyses/summary/papers.py",
                                         "return r.model.num_layers, r.model.hidden_size",
                                         "return r.model.num_layer, r.model.hidden_size"),
    "tuple stored as a float": ("analyses/causal_probing/protocol.py", "accuracy=scores[1 + k][0],",
                                "accuracy=scores[1 + k],"),
    "figure given as table_rows": ("analyses/causal_probing/__init__.py",
                                   "compute=compute, table_rows=table_rows,", "compute=compute, table_rows=plot,"),
    "field of a result's rows": ("analyses/anisotropy.py", "point = self.layers[-1].of(level).mean",
                                 "point = self.layers[-1].of(level).maen"),
    "field of a judged point": ("analyses/summary/trajectories.py", "CoursePoint(point.fraction, step",
                                "CoursePoint(point.fracton, step"),
}


def main() -> int:
    missed = []
    for what, (path, old, new) in PLANTS.items():
        file = Path(path)
        text = file.read_text(encoding="utf-8")
        if text.count(old) != 1:
            print(f"error: {path} no longer holds the text to plant for {what!r}: update this script")
            return 2
        try:
            file.write_text(text.replace(old, new), encoding="utf-8")
            run = subprocess.run([sys.executable, "-m", "mypy"], capture_output=True, text=True)
        finally:
            file.write_text(text, encoding="utf-8")
        found = [line for line in run.stdout.splitlines() if "error:" in line]
        print(f"{what}: {'found: ' + found[0] if found else 'NOT FOUND'}")
        if not found:
            missed.append(what)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
