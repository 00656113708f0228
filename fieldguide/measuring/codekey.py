"""The staleness key of a benchmark: a hash of the code it can run, and of nothing else.

A number goes stale when the code that produced it changes, not when a comment, a docstring or
an unrelated function in the same file does. For one benchmark function this module keeps, in
each file the benchmark names (its benchmark module and the snippet modules of its markers):

- in the benchmark module: the benchmark function, the module-level imports and expressions,
  and every module-level function, class or assignment reachable from it by name;
- in a snippet module: every module-level statement that runs on import (all but definitions
  and the `if __name__ == "__main__":` block) and every function or class reachable by name
  from the benchmark or from other kept code, in any of the files.

"Reachable by name" over-approximates: any identifier or attribute name in kept code counts as
a use, so a name shared by accident keeps a function in, never out. Where kept code calls
`getattr`, every string literal in kept code that could name a function counts as a use too
(`getattr(snippet, version)` with `version` from a parametrize list of names).

Each kept statement is hashed as its parsed tree with docstrings removed (comments never
reach the tree), so formatting and comments do not matter and any change to code that runs
does.
"""

from __future__ import annotations

import ast
import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _is_main_block(node: ast.stmt) -> bool:
    test = getattr(node, "test", None)
    return (isinstance(node, ast.If) and isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name) and test.left.id == "__name__")


def _assigned_names(node: ast.stmt) -> list[str] | None:
    """The names a plain `NAME = ...` / `NAME: T = ...` binds; None for any other statement."""
    targets = node.targets if isinstance(node, ast.Assign) else (
        [node.target] if isinstance(node, ast.AnnAssign) else None)
    if not targets or not all(isinstance(t, ast.Name) for t in targets):
        return None
    return [t.id for t in targets]


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, *DEFINITIONS)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return tree


def _names_used(node: ast.AST) -> tuple[set[str], set[str]]:
    """(identifiers and attribute names, string literals that are identifiers) in `node`."""
    used, strings = set(), set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            used.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            used.add(sub.attr)
        elif isinstance(sub, ast.alias):
            used.add((sub.asname or sub.name).split(".")[0])
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.isidentifier():
            strings.add(sub.value)
    return used, strings


@dataclass
class _Module:
    path: str
    always: list[ast.stmt] = field(default_factory=list)   # kept whatever the benchmark uses
    named: dict[str, list[ast.stmt]] = field(default_factory=dict)  # kept when the name is used
    order: dict[int, int] = field(default_factory=dict)     # id(node) -> position in the file


def _parse(path: Path, relpath: str, is_benchmark: bool) -> _Module:
    tree = _strip_docstrings(ast.parse(path.read_text(encoding="utf-8"), filename=relpath))
    module = _Module(relpath)
    for position, node in enumerate(tree.body):
        module.order[id(node)] = position
        if isinstance(node, DEFINITIONS):
            module.named.setdefault(node.name, []).append(node)
        elif _is_main_block(node):
            continue  # runs only as `python -m`, never under a benchmark
        elif is_benchmark and (names := _assigned_names(node)) and "pytestmark" not in names:
            for name in names:  # a constant of another benchmark in the same file
                module.named.setdefault(name, []).append(node)
        else:
            module.always.append(node)
    return module


# Fields that newer Pythons add to the same source's tree (3.12: type_params on def and class).
# Left out while empty, so that the GPU machine's Python and CI's key the same code the same.
_NEWER_FIELDS = ("type_params",)


def _dump(node: ast.AST) -> str:
    """ast.dump in the form Python 3.11 gives, whichever Python runs it."""
    for child in ast.walk(node):
        for name in _NEWER_FIELDS:
            if getattr(child, name, None) == []:
                delattr(child, name)
    # 3.13 leaves out empty lists and None unless asked: keep them, as 3.11 and 3.12 do.
    extra = {"show_empty": True} if sys.version_info >= (3, 13) else {}
    return ast.dump(node, include_attributes=False, **extra)


def code_keys(root: Path, benchmark_file: str, function: str, snippet_files: list[str]) -> dict[str, str]:
    """{relative path: key} for `function` in `benchmark_file` and the snippets it names."""
    modules = [_parse(root / benchmark_file, benchmark_file, is_benchmark=True)]
    modules += [_parse(root / p, p, is_benchmark=False) for p in dict.fromkeys(snippet_files)
                if p != benchmark_file]
    bench = modules[0]
    if function not in bench.named:
        raise LookupError(f"{benchmark_file} defines no function {function!r}")

    kept: dict[str, dict[int, ast.stmt]] = {m.path: {} for m in modules}
    used: set[str] = {function}
    strings: set[str] = set()  # names that `getattr` may look up
    pending = [(bench, node) for node in bench.always]
    for module in modules[1:]:
        pending += [(module, node) for node in module.always]
    while True:
        while pending:
            module, node = pending.pop()
            if id(node) in kept[module.path]:
                continue
            kept[module.path][id(node)] = node
            names, literals = _names_used(node)
            used |= names
            strings |= literals
        dynamic = strings if "getattr" in used else set()
        for module in modules:
            for name, nodes in module.named.items():
                if name in used or name in dynamic:
                    pending += [(module, n) for n in nodes if id(n) not in kept[module.path]]
        if not pending:
            break

    keys = {}
    for module in modules:
        nodes = sorted(kept[module.path].values(), key=lambda n: module.order[id(n)])
        digest = hashlib.sha256()
        for node in nodes:
            digest.update(_dump(node).encode())
            digest.update(b"\n")
        keys[module.path] = digest.hexdigest()
    return keys
