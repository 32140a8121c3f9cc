"""The layering the README promises, checked on the source's imports (parsed with ``ast``; lazy imports inside
functions count):

* layers, top to bottom: ``analyses`` > ``recipes`` > ``probes.capture`` > ``probes.intervention`` >
  ``probes.models`` > ``probes.checkpoints`` and ``probes.series`` > the base modules (``probes.config``,
  ``corpus``, ``precision``, ``io``, ``errors``, ``resources``); every module of ``probes`` and ``analyses`` has
  its place (the package face ``probes`` stands above its own package); a module imports only its own layer and
  the ones below (``analyses`` never imports ``recipes`` either: an analysis never trains), and nothing inside
  ``probes`` imports the package face ``probes`` itself. An import under ``if TYPE_CHECKING:`` names a type for
  an annotation and never runs, so the layer order does not count it;
* no import cycle anywhere (between modules of one layer included), type-only imports counted too: two modules
  that name each other's types are one knot to a reader, whichever import runs;
* no module uses another module's private name (``from m import _x``, or ``m._x`` on an imported
  project module): what one module offers another is public and documented.
"""

from __future__ import annotations

import ast
import functools
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


def type_checking_nodes(nodes: list[ast.AST]) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks, of a tree's ``nodes`` (every node, as ast.walk gives)."""
    inside = set()
    for node in nodes:
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            inside.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return inside


def parsed(path: Path) -> tuple[list[ast.AST], list[ast.AST]]:
    """(every node of the syntax tree of ``path``, those outside ``if TYPE_CHECKING:`` blocks), parsed and walked
    once per version of the file (its modification time and size) for all the checks below."""
    stat = path.stat()
    return _parsed(path, stat.st_mtime_ns, stat.st_size)


@functools.cache
def _parsed(path: Path, mtime_ns: int, size: int) -> tuple[list[ast.AST], list[ast.AST]]:
    nodes = list(ast.walk(ast.parse(path.read_text(encoding="utf-8"))))
    skip = type_checking_nodes(nodes)
    return nodes, [node for node in nodes if id(node) not in skip]


def imports(path: Path, type_only: bool = False) -> list[tuple[int, str, list[str]]]:
    """(line, imported module, names imported from it) of every import statement in ``path`` (at any depth,
    lazy ones included; those under ``if TYPE_CHECKING:`` only with ``type_only``). ``from pkg import mod`` of a
    project submodule counts as an import of ``pkg.mod``."""
    out = []
    for node in parsed(path)[0 if type_only else 1]:
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module, [a.name for a in node.names]))
            out += [(node.lineno, f"{node.module}.{a.name}", []) for a in node.names
                    if node.module.split(".")[0] in PACKAGES and module_file(f"{node.module}.{a.name}")]
    return out


def module_file(module: str) -> Path | None:
    """The source file of a project module, or None."""
    base = REPO.joinpath(*module.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


# top to bottom; a module belongs to the first layer whose prefix it has
LAYERS = [("analyses",), ("recipes",), ("probes.capture",), ("probes.intervention",), ("probes.models",),
          ("probes.checkpoints", "probes.series"),
          ("probes.config", "probes.corpus", "probes.precision", "probes.io", "probes.errors", "probes.resources")]


def layer_of(module: str) -> int | None:
    for i, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    return None


def layer_violations(paths: list[Path]) -> list[str]:
    """Imports that point up the layer order, or into the package face ``probes`` from inside it."""
    bad = []
    for path in paths:
        me = module_name(path)
        mine = layer_of(me)
        for line, mod, _ in imports(path):
            if mod.split(".")[0] not in PACKAGES:
                continue
            if me.startswith("probes.") and mod == "probes":
                bad.append(f"{path.relative_to(REPO)}:{line} imports the package face probes")
                continue
            theirs = layer_of(mod)
            if mine is not None and theirs is not None and theirs < mine:
                bad.append(f"{path.relative_to(REPO)}:{line} ({LAYERS[mine][0]}) imports {mod} ({LAYERS[theirs][0]})")
    return bad


def import_graph(paths: list[Path]) -> dict[str, set[str]]:
    """module -> the project modules it imports, lazily and under ``if TYPE_CHECKING:`` included (a module's import
    of ``pkg.mod.name`` counts as ``pkg.mod``)."""
    graph = {}
    for path in paths:
        edges = set()
        for _, mod, _ in imports(path, type_only=True):
            while mod and mod.split(".")[0] in PACKAGES and module_file(mod) is None:
                mod = mod.rpartition(".")[0]
            if mod and mod.split(".")[0] in PACKAGES:
                edges.add(mod)
        me = module_name(path)
        # a package's __init__ importing its own submodules is how a package is built, not a cycle
        graph[me] = {m for m in edges if m != me and not (path.name == "__init__.py" and m.startswith(me + "."))}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def private_uses(path: Path) -> list[str]:
    """``from m import _x`` and ``alias._x`` where m / alias is a project module of another file."""
    nodes = parsed(path)[0]
    me = module_name(path)
    found, aliases = [], {}
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if a.name.startswith("_") and not a.name.endswith("__") and node.module != me:
                    found.append(f"{path.name}:{node.lineno} from {node.module} import {a.name}")
                elif not a.name.startswith("_"):
                    aliases[a.asname or a.name] = full
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in PACKAGES:
                    aliases[a.asname or a.name.split(".")[0]] = a.asname and a.name or a.name.split(".")[0]
    for node in nodes:
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in aliases):
            target = aliases[node.value.id]
            if target != me:
                found.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    return found


def test_the_checker_sees_a_planted_violation(tmp_path):
    bad = REPO / "probes" / "_layering_probe_tmp.py"
    bad.write_text("from analyses.common import arg\nfrom probes.models.hf import _from_pretrained\n"
                   "import probes.models.hf as h\n"
                   "h._max_length\n")
    try:
        assert [m for _, m, _ in imports(bad)] == ["analyses.common", "probes.models.hf", "probes.models.hf"]
        assert len(private_uses(bad)) == 2
    finally:
        bad.unlink()


@pytest.mark.parametrize("layer,forbidden", [("probes", ("analyses", "recipes")), ("analyses", ("recipes",))])
def test_lower_layers_never_import_higher_ones(layer, forbidden):
    bad = [f"{p.relative_to(REPO)}:{line} imports {mod}" for p in sources(layer)
           for line, mod, _ in imports(p) if mod.split(".")[0] in forbidden]
    assert not bad, "\n".join(bad)


def test_imports_point_down_the_layer_order():
    bad = layer_violations([p for folder in PACKAGES for p in sources(folder)])
    assert not bad, "\n".join(bad)


def test_the_layer_checker_sees_a_planted_upward_import():
    bad = REPO / "probes" / "checkpoints" / "_layering_probe_tmp.py"
    bad.write_text("def f():\n    from probes.capture.extract import extract\n    import probes\n")
    try:
        found = layer_violations([bad])
        assert len(found) == 2 and "imports probes.capture.extract (probes.capture)" in found[0], found
        assert "package face" in found[1]
    finally:
        bad.unlink()


def test_every_module_of_the_two_packages_has_its_layer():
    unplaced = [name for folder in ("probes", "analyses") for p in sources(folder)
                if (name := module_name(p)) != "probes" and layer_of(name) is None]
    assert not unplaced, f"modules in no layer of LAYERS (so no import of theirs is checked): {unplaced}"


def test_the_intervention_layer_stands_above_the_models():
    """Interventions find where each family makes its layers' states, so they import the models; an LM applies the
    active edits through probes.models.forward, never by importing probes.intervention."""
    assert LAYERS.index(("probes.intervention",)) < LAYERS.index(("probes.models",))
    up = [f"{p.relative_to(REPO)}:{line}" for p in sources("probes/models")
          for line, mod, _ in imports(p, type_only=True) if mod.startswith("probes.intervention")]
    assert not up, up


def test_no_import_cycle_anywhere():
    found = cycles(import_graph([p for folder in CHECKED for p in sources(folder)]))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_cycle_checker_sees_a_planted_cycle():
    one, two = REPO / "analyses" / "_cycle_tmp_one.py", REPO / "analyses" / "_cycle_tmp_two.py"
    two.write_text("def f():\n    import analyses._cycle_tmp_one\n")  # lazy imports count too
    three = REPO / "analyses" / "_cycle_tmp_three.py"
    three.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from analyses._cycle_tmp_one import X\n")
    one.write_text("from analyses import _cycle_tmp_two\nfrom analyses._cycle_tmp_three import Y\n")
    try:
        graph = import_graph([p for folder in CHECKED for p in sources(folder)])
        assert ["analyses._cycle_tmp_one", "analyses._cycle_tmp_three", "analyses._cycle_tmp_two"] in cycles(graph)
    finally:
        one.unlink()
        two.unlink()
        three.unlink()


def test_no_module_uses_another_modules_private_names():
    bad = [v for folder in CHECKED for p in sources(folder) for v in private_uses(p)]
    assert not bad, "\n".join(bad)


MAX_LINES = 500  # a module of the two installed packages is one idea a reader holds at once (split by idea above)


def test_no_module_of_the_packages_is_over_500_lines():
    long = {str(p.relative_to(REPO)): n for folder in ("probes", "analyses") for p in sources(folder)
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long} (split by idea, as analyses/cosines.py from anisotropy.py)"
