"""The lowest releases pyproject.toml allows, as a pip constraints file: every dependency of the package and of the
extras named, at the lower bound of its range (``>=X`` becomes ``==X``; an exact pin stays). CI installs a fresh
environment with it and runs the fast tier, so a lower bound that no longer works is seen, not claimed.

    $ python scripts/lower_bounds.py --extra dev --extra reference > /tmp/lowest.txt
    $ pip install torch==2.13.0 -c /tmp/lowest.txt -e ".[dev,reference]"
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
SPEC = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(\[[^\]]*\])?\s*(.*?)\s*(;.*)?$")


def lowest(requirement: str) -> str | None:
    """``name==version`` at the requirement's lower bound (``>=`` or ``==``); None when it has none."""
    m = SPEC.match(requirement)
    if m is None:
        raise SystemExit(f"error: cannot read the requirement {requirement!r} of pyproject.toml")
    name, spec = m.group(1), m.group(3)
    for part in filter(None, (p.strip() for p in spec.split(","))):
        op, version = re.match(r"(==|>=|~=|<=|<|>|!=)\s*(.*)", part).groups()
        if op in ("==", ">=", "~="):
            return f"{name}=={version}"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--extra", action="append", default=[], help="an optional-dependencies group to include")
    args = ap.parse_args(argv)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project.get("optional-dependencies", {})
    unknown = [e for e in args.extra if e not in extras]
    if unknown:
        print(f"error: pyproject.toml has no extra {', '.join(unknown)} (it has {', '.join(extras)})", file=sys.stderr)
        return 2
    requirements = [*project["dependencies"], *(r for e in args.extra for r in extras[e])]
    unbounded = [r for r in requirements if lowest(r) is None]
    if unbounded:
        print(f"error: no lower bound for {', '.join(unbounded)} in pyproject.toml: every dependency names the "
              "oldest release it is tested with", file=sys.stderr)
        return 2
    print("\n".join(sorted({lowest(r) for r in requirements}, key=str.lower)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
