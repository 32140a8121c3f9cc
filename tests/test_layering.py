"""The layering the README promises, checked on the source's imports (parsed with ``ast``):

* ``probes/`` (models, caches, corpora) imports nothing from ``analyses/`` or ``recipes/``;
* ``analyses/`` imports nothing from ``recipes/`` (an analysis never trains);
* no module uses another module's private name (``from m import _x``, or ``m._x`` on an imported
  project module): what one module offers another is public and documented.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("probes", "analyses", "recipes")
CHECKED = ("probes", "analyses", "recipes", "scripts", "benchmarks", "tests")


def sources(folder: str) -> list[Path]:
    return sorted((REPO / folder).rglob("*.py"))


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, imported module, names imported from it) of every import statement in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module, [a.name for a in node.names]))
    return out


def private_uses(path: Path) -> list[str]:
    """``from m import _x`` and ``alias._x`` where m / alias is a project module of another file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = module_name(path)
    found, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if a.name.startswith("_") and node.module != me:
                    found.append(f"{path.name}:{node.lineno} from {node.module} import {a.name}")
                elif not a.name.startswith("_"):
                    aliases[a.asname or a.name] = full
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in PACKAGES:
                    aliases[a.asname or a.name.split(".")[0]] = a.asname and a.name or a.name.split(".")[0]
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in aliases):
            target = aliases[node.value.id]
            if target != me:
                found.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    return found


def test_the_checker_sees_a_planted_violation(tmp_path):
    bad = REPO / "probes" / "_layering_probe_tmp.py"
    bad.write_text("from analyses.common import arg\nfrom probes.hf import _from_pretrained\nimport probes.hf as h\n"
                   "h._max_length\n")
    try:
        assert [m for _, m, _ in imports(bad)] == ["analyses.common", "probes.hf", "probes.hf"]
        assert len(private_uses(bad)) == 2
    finally:
        bad.unlink()


@pytest.mark.parametrize("layer,forbidden", [("probes", ("analyses", "recipes")), ("analyses", ("recipes",))])
def test_lower_layers_never_import_higher_ones(layer, forbidden):
    bad = [f"{p.relative_to(REPO)}:{line} imports {mod}" for p in sources(layer)
           for line, mod, _ in imports(p) if mod.split(".")[0] in forbidden]
    assert not bad, "\n".join(bad)


def test_no_module_uses_another_modules_private_names():
    bad = [v for folder in CHECKED for p in sources(folder) for v in private_uses(p)]
    assert not bad, "\n".join(bad)
