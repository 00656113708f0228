"""Figures kept on disk by content, so a build draws only the figures whose inputs changed.

    svgs = figure_cache.drawn(root, charts.draw, benches, x="bytes", y="median", ...)

returns what `charts.draw(benches, x=..., y=...)` returns, from `.build-cache/figures/<key>.json` under
the project where an earlier build drew the same figure. The key is the sha256 of everything the
drawing can depend on:

- the drawing function's name and every argument, written out in full: a benchmark with every
  record it holds and each record's run as the run's whole JSON (hashed once per run);
- the rendering code: the function's module and every module of the fieldguide package it
  imports, at any depth (the drawing code, its palette, the number formats), and the package's
  data files (datasheets.toml);
- the versions of matplotlib and Python.

An argument of a type it cannot write out in full makes it draw without the cache, never guess.
So a cached figure is always the figure this code would draw from this data now: it can be
missing (then it is drawn), never stale. Delete `.build-cache/` at any time.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from fieldguide import ROOT

# Not under .cache/: `zensical build --clean` empties that folder.
CACHE = Path(".build-cache") / "figures"
PACKAGE = ROOT / "fieldguide"
stats = {"hits": 0, "misses": 0, "uncached": 0}   # this process's, for the tests and the benchmark


class Unkeyable(TypeError):
    """An argument the key cannot write out in full."""


def drawing_modules(module: str) -> list[Path]:
    """The files of the package that `module` (a fieldguide module) runs: itself and, through
    every `fieldguide` import in them (at any depth, inside functions too), the rest."""
    seen: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        path = PACKAGE / (name.removeprefix("fieldguide.").replace(".", "/") + ".py")
        if name in seen or not path.is_file():
            continue
        seen[name] = path
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fieldguide"):
                todo.append(node.module)
                todo.extend(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                todo.extend(a.name for a in node.names if a.name.startswith("fieldguide."))
    return sorted(seen.values())


@cache
def code_key(module: str) -> str:
    """The rendering code of a drawing in `module`: the package files it runs, every data file
    of the package (datasheets.toml), and the versions that draw."""
    import matplotlib

    digest = hashlib.sha256(f"matplotlib {matplotlib.__version__} python {sys.version}".encode())
    data = [p for p in PACKAGE.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")]
    for path in sorted({*drawing_modules(module), *data}):
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


_whole: dict[int, tuple[Any, str]] = {}   # id(large dict) -> (the dict, kept alive; its hash)


def _hash_of_whole(data: dict) -> str:
    """A run's whole JSON, hashed once per process (a run holds hundreds of benchmarks)."""
    found = _whole.get(id(data))
    if found is None or found[0] is not data:
        found = (data, hashlib.sha256(json.dumps(data, sort_keys=True, default=repr).encode()).hexdigest())
        _whole[id(data)] = found
    return found[1]


def written_out(value: Any) -> Any:
    """`value` as JSON that differs whenever `value` does."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return {"float": value.hex()}
    if isinstance(value, (list, tuple)):
        return {type(value).__name__: [written_out(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[written_out(k), written_out(v)] for k, v in value.items()]}
    if isinstance(value, Path):
        return {"path": str(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            # a run's JSON: the whole file, hashed once (it is the same object for every record)
            whole = f.name == "data" and type(value).__name__ == "Run"
            fields[f.name] = {"whole": _hash_of_whole(item)} if whole else written_out(item)
        return {f"{type(value).__module__}.{type(value).__qualname__}": fields}
    raise Unkeyable(f"cannot key a figure on a {type(value).__qualname__}")


def key(function: Callable, args: tuple, kwargs: dict) -> str:
    text = json.dumps({"function": f"{function.__module__}.{function.__qualname__}",
                       "args": written_out(args), "kwargs": written_out(kwargs),
                       "code": code_key(function.__module__)},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def drawn(root: Path, function: Callable, *args: Any, **kwargs: Any) -> Any:
    """`function(*args, **kwargs)`, a drawing that returns JSON data (SVG text by theme and
    layout), from the cache where the same inputs were drawn before."""
    try:
        name = key(function, args, kwargs)
    except Unkeyable:
        stats["uncached"] += 1
        return function(*args, **kwargs)
    path = Path(root) / CACHE / f"{name[:2]}" / f"{name}.json"
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
        stats["hits"] += 1
        return found
    except (OSError, ValueError):
        pass  # not drawn yet, or a file cut short: draw it
    result = function(*args, **kwargs)
    stats["misses"] += 1
    write_whole(path, result)
    return result


def write_whole(path: Path, data: Any) -> None:
    """`data` as JSON at `path`, atomically: a process stopped mid-write (figure_prefill.py), or
    two builds at once, leave no half-written entry and no stray temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, delete=False,
                                     suffix=".tmp") as file:
        try:
            json.dump(data, file)
        except BaseException:
            file.close()
            os.unlink(file.name)
            raise
    os.replace(file.name, path)
