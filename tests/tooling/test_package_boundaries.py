"""fieldguide/'s packages keep to what their docstrings say: each `__init__.py` ends its docstring
with a line `May import: fieldguide.a, fieldguide.b.` (or `nothing of fieldguide but
fieldguide.ROOT`), and no module imports another package than those, its own, and `fieldguide`'s
ROOT; imports inside functions count. The modules' imports form no cycle either, so a reader
can start at the bottom (content/) and never meet a module that needs one above it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from fieldguide import ROOT

PACKAGE = ROOT / "fieldguide"
PACKAGES = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
RULE = re.compile(r"^May import: (?P<rule>.*)$", re.M)


def allowed(package: str) -> set[str]:
    doc = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text()))
    found = RULE.search(doc or "")
    assert found, f"fieldguide/{package}/__init__.py: its docstring says nothing on 'May import:'"
    return {*re.findall(r"fieldguide\.(\w+)", found["rule"])} - {"ROOT"} | {package}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every fieldguide import in `path`, at any depth; `from fieldguide.a
    import b` names fieldguide.a.b where b is a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == "fieldguide" or node.module.startswith("fieldguide.")):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                is_module = (PACKAGE.parent / (sub.replace(".", "/") + ".py")).is_file() or (
                    PACKAGE.parent / sub.replace(".", "/") / "__init__.py").is_file()
                found.append((node.lineno, sub if is_module else node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("fieldguide")]
    return found


def test_every_module_lives_in_a_package_or_only_forwards():
    """A module at the top of fieldguide/ is a thin one kept at an old name: it imports nothing
    of fieldguide itself, and says why it is there."""
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name == "__init__.py":
            continue
        assert not imports(path), f"{path.name}: a top-level module only forwards (importlib)"
        doc = ast.get_docstring(ast.parse(path.read_text()))
        assert doc and doc.startswith("Kept"), f"{path.name}: says why it is kept at this name"


def test_each_package_imports_only_what_its_docstring_allows():
    assert PACKAGES == ["authoring", "content", "measuring", "notebooks", "rendering"]
    wrong = []
    for package in PACKAGES:
        ok = allowed(package)
        for path in sorted((PACKAGE / package).rglob("*.py")):
            for line, module in imports(path):
                parts = module.split(".")
                if module == "fieldguide" or parts[1] in ok:
                    continue
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}, "
                             f"but fieldguide/{package} may import only {sorted(ok - {package})}")
    assert not wrong, "\n".join(wrong)


def test_the_packages_depend_in_one_direction():
    """The rules themselves form no cycle: some order of the packages puts every package after
    all those it may import."""
    rules = {p: allowed(p) - {p} for p in PACKAGES}
    order: list[str] = []
    while rules:
        ready = sorted(p for p, needs in rules.items() if needs <= set(order))
        assert ready, f"the packages' rules form a cycle: {rules}"
        order += ready
        for p in ready:
            del rules[p]


def test_no_import_cycle_between_modules():
    """Between modules, imports inside functions included (render.py and unrendered.py imported
    each other that way before the split)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        graph[name] = {m for _, m in imports(path) if m != "fieldguide" and m != name}
    state: dict[str, int] = {}   # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if state.get(nxt) is None:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
