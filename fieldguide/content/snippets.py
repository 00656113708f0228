"""What a snippet module declares and contains, read from its source without importing it.

A snippet declares its device needs once, at module level, outside every displayed section:

    GPUS_NEEDED = 0   # runs anywhere; uses CUDA when present
    GPUS_NEEDED = 1   # needs a CUDA device
    GPUS_NEEDED = 2   # needs two CUDA devices

Tests and the timing run both read it from here, so the declaration lives next to the code.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

from fieldguide import ROOT

SNIPPETS_DIR = ROOT / "snippets"

_MARKER = re.compile(r"^\s*# --8<-- \[(start|end):([\w-]+)\]\s*$")


class SnippetError(ValueError):
    """A snippet file breaks a convention the site relies on."""


def snippet_files() -> list[Path]:
    """Every snippet module, in a stable order (package `__init__.py` files excluded)."""
    return sorted(p for p in SNIPPETS_DIR.rglob("*.py") if p.name != "__init__.py")


def module_name(path: Path) -> str:
    """`snippets/streams/overlap.py` -> `snippets.streams.overlap`."""
    return ".".join(Path(path).resolve().relative_to(ROOT).with_suffix("").parts)


def gpus_needed(path: Path) -> int:
    """The GPUS_NEEDED integer a snippet declares at module level."""
    path = Path(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "GPUS_NEEDED"
        ):
            value = node.value
            if isinstance(value, ast.Constant) and type(value.value) is int and value.value >= 0:
                return value.value
            raise SnippetError(f"{_rel(path)}: GPUS_NEEDED must be a non-negative integer literal")
    raise SnippetError(
        f"{_rel(path)}: no module-level GPUS_NEEDED; declare 0 (runs anywhere), "
        "1 (needs CUDA) or N (needs N GPUs)"
    )


def sections(path: Path) -> dict[str, str]:
    """Named sections cut by `# --8<-- [start:name]` / `[end:name]`, dedented as the site shows them."""
    path = Path(path)
    found: dict[str, list[str]] = {}
    open_sections: list[str] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = _MARKER.match(line)
        if match:
            kind, name = match.groups()
            if kind == "start":
                if name in found:
                    raise SnippetError(f"{_rel(path)}:{lineno}: section {name!r} starts twice")
                found[name] = []
                open_sections.append(name)
            else:
                if name not in open_sections:
                    raise SnippetError(f"{_rel(path)}:{lineno}: section {name!r} ends but never started")
                open_sections.remove(name)
            continue
        for name in open_sections:
            found[name].append(line)
    if open_sections:
        raise SnippetError(f"{_rel(path)}: section(s) never ended: {', '.join(open_sections)}")
    return {name: textwrap.dedent("\n".join(lines)).strip("\n") for name, lines in found.items()}


def code_outside_sections(path: Path) -> list[str]:
    """Statements of the module that no section shows, as "line N: code", leaving out what a
    notebook of its sections does not need: the docstring, GPUS_NEEDED and the
    `if __name__ == "__main__":` line itself (not its body). Nested sections count as outside,
    since a page showing both would run their code twice."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    shown, open_sections, nested = [False] * len(lines), 0, []
    for index, line in enumerate(lines):
        match = _MARKER.match(line)
        if match:
            if match[1] == "start" and open_sections:
                nested.append(f"line {index + 1}: section {match[2]!r} starts inside another")
            open_sections += 1 if match[1] == "start" else -1
        shown[index] = open_sections > 0 or bool(match)

    def outside(statements: list[ast.stmt]) -> list[str]:
        found = []
        for node in statements:
            span = range(node.lineno - 1, node.end_lineno)
            if all(shown[i] for i in span):
                continue
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # a docstring
            if isinstance(node, ast.Assign) and ast.unparse(node) == f"GPUS_NEEDED = {gpus_needed(path)}":
                continue
            if isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'" \
                    and not node.orelse:
                found += outside(node.body)
                continue
            found.append(f"line {node.lineno}: {lines[node.lineno - 1].strip()}")
        return found

    return nested + outside(ast.parse(text).body)


def _rel(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)
