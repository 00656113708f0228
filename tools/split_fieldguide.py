#!/usr/bin/env python3
"""Split the flat `fieldguide/` into packages by job (issue 46), as one re-runnable change.

    python3 tools/split_fieldguide.py            # in a checkout's root: apply, then check
    python3 tools/split_fieldguide.py --check    # only say whether the tree is split already

What it does, in this order, each step a plain edit a reviewer can follow:

1. Inventory: every module of the flat fieldguide/ must be in MOVES (a module another branch
   added stops it, naming the file: give it a package in MOVES first).
2. The code-level splits, each cut at a named anchor (a missing anchor stops it, naming the file):
   - timings.py: its "How numbers read" section becomes measuring/numbers.py (the data model and
     the number formats are looked for in different places);
   - render.py: the page's context and PageProblems become rendering/context.py, which both
     render.py and unrendered.py import (they imported each other);
   - shortcodes.py: the figure renderers are imported from fieldguide.rendering.
3. `git mv` of every module (and datasheets.toml) to its package; each package's __init__.py
   says what it owns and what it may import; tools/test_package_boundaries.py, which holds
   them to it, moves to tests/tooling/.
4. Every reference rewritten, in fieldguide/, tests/, hooks/, conftest.py, Makefile, mkdocs.yml,
   pyproject.toml, README.md, docs/, .github/, .ci/: `fieldguide.X` and `fieldguide/X.py`, and
   `from fieldguide import X` (Python, by its syntax tree). In benchmarks/ and snippets/ only
   comments and docstrings change: their code is part of the timings' code keys, so a benchmark
   that imports a moved module keeps that import, served by a thin module (SHIMS).
5. Entry points: `python3 -m fieldguide.notebooks` runs the notebooks package; SHIMS keep
   `python3 -m fieldguide.timing_run`, `from fieldguide.timings import ...` (scripts outside the
   repository) and `fieldguide.diagrams.timeline_from_trace` (a benchmark's code) working.
6. `ruff --fix` of import order and of imports the splits left unused, in the Python it edited
   (never in benchmarks/ or snippets/), then checks: ruff clean, every module imports.

Re-running on a tree it already split does nothing (exit 0). It starts only on a tree without
uncommitted changes, so a stop half-way (which names the file and the anchor) is undone by
`git reset --hard HEAD && git clean -fd fieldguide tests/tooling`. Nothing else is assumed about
the tree: run it on the main of the day, then review `git diff --cached --stat -C` (-C: the
modules whose old name keeps a thin module show as copies) and commit.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

# old module under fieldguide/ -> its new dotted place under fieldguide
MOVES: dict[str, str] = {
    # content: what the pages and snippets hold and declare
    "pages": "content.pages",
    "snippets": "content.snippets",
    "prompts": "content.prompts",
    # measuring: the numbers, how they are measured, kept and keyed
    "codekey": "measuring.codekey",
    "fingerprint": "measuring.fingerprint",
    "timings": "measuring.timings",
    "host_bound": "measuring.host_bound",
    "pytest_plugin": "measuring.pytest_plugin",
    "timing_run": "measuring.timing_run",
    "gpu_round": "measuring.gpu_round",
    "report": "measuring.report",
    "estimates": "measuring.estimates",
    # notebooks: generated notebooks and the outputs recorded on a GPU
    "notebooks": "notebooks.generate",
    "outputs": "notebooks.outputs",
    "record_outputs": "notebooks.record_outputs",
    "record_commands": "notebooks.record_commands",
    # rendering: the Markdown extensions and everything they draw
    "render": "rendering.render",
    "unrendered": "rendering.unrendered",
    "shortcodes": "rendering.shortcodes",
    "labels": "rendering.labels",
    "charts": "rendering.charts",
    "roofline": "rendering.roofline",
    "memory_chart": "rendering.memory_chart",
    "diagrams": "rendering.diagrams",
    "figures": "rendering.figures",
    "figure_cache": "rendering.figure_cache",
    "figure_prefill": "rendering.figure_prefill",
    "glossary": "rendering.glossary",
    "placeholders": "rendering.placeholders",
    "reading_time": "rendering.reading_time",
    "loop_results": "rendering.loop_results",
    "calculators": "rendering.calculators",
    "pyjs": "rendering.pyjs",
    # authoring: what a contributor runs on a change
    "scaffold": "authoring.scaffold",
    "check": "authoring.check",
    "build_benchmark": "authoring.build_benchmark",
}
DATA = {"datasheets.toml": "rendering/datasheets.toml"}   # read beside roofline.py

# Names that the code-level splits move out of a module: (old module, name) -> new module.
NUMBERS = ("power_of_ten", "format_number", "format_spec", "Unit", "TIME_UNITS", "BYTE_UNITS",
           "seconds_unit", "bytes_unit", "format_seconds", "format_bytes", "FIELD_UNITS",
           "SUFFIXES", "SIZE_SUFFIXES", "carries_unit", "unit_of", "format_value",
           "format_range", "SUPERSCRIPT", "SMALLEST_PLAIN", "_TO_SECONDS", "_suffix")
CONTEXT = ("PageProblems", "Context", "context", "nested")
NAME_MOVES: dict[tuple[str, str], str] = {
    **{("timings", n): "measuring.numbers" for n in NUMBERS},
    **{("render", n): "rendering.context" for n in CONTEXT},
}

PACKAGES: dict[str, str] = {
    "content": '''"""What the repository's pages and snippets hold and declare, read without running them.

- pages.py: the pages, their includes (`--8<--`), drafts, the GPUs a page's code needs
- snippets.py: a snippet module's named sections and its GPUS_NEEDED
- prompts.py: a page's "predict, then run" blocks

May import: nothing of fieldguide but `fieldguide.ROOT`.
"""
''',
    "measuring": '''"""The numbers: how they are measured on a GPU, kept, keyed and reported.

- timing_run.py: the timing run (`make timings`, `python3 -m fieldguide.measuring.timing_run`);
  gpu_round.py: one GPU round in one device call (`make gpu-round`)
- pytest_plugin.py: the harness every test and benchmark runs under (the `snippet`, `gpus`,
  `timed` markers, `gpu_benchmark`, a benchmark's code key in its record); the timing run
  loads it, so it lives here
- timings.py: the runs' data model (Timings, Run, Record, Benchmark) and their staleness
- codekey.py: a benchmark's code key; fingerprint.py: what a run records of its machine
- numbers.py: how every number reads (format, unit, range), on the site and in the report
- host_bound.py: numbers that measure the host, declared beside their benchmark
- estimates.py: the will-it-fit estimators against the runs that measured the same case
- report.py: `make report`

May import: fieldguide.content.
"""
''',
    "notebooks": '''"""Each page's notebook, and what its code printed on a GPU.

- generate.py: a page becomes its notebook (`make notebooks`: `python3 -m fieldguide.notebooks`,
  `--check`), and the links a lesson shows to it
- outputs.py: recorded outputs, keyed by each block's code, and how a page shows them
- record_outputs.py: running the notebooks on a GPU to record them (`make outputs`);
  record_commands.py: the same for the shell commands a page declares

May import: fieldguide.content, fieldguide.measuring.
"""
''',
    "rendering": '''"""The site's rendering: the Markdown extensions of mkdocs.yml and all they draw.

- render.py: the extension `fieldguide.rendering.render` (shortcodes, figures, notebook links);
  context.py: the page being rendered and PageProblems; unrendered.py: the guard
- shortcodes.py: the shortcodes' registry (RENDERERS) and the text ones (value, ratio, table)
- labels.py: how benchmarks and fields are named in tables and charts
- charts.py, roofline.py (with datasheets.toml), memory_chart.py, diagrams.py, figures.py:
  the figures; figure_cache.py and figure_prefill.py: drawn once, kept by content
- calculators.py (with pyjs.py, the estimators translated to JavaScript): the calculators
- glossary.py, placeholders.py, reading_time.py, loop_results.py: the other extensions

May import: fieldguide.content, fieldguide.measuring, fieldguide.notebooks.
"""
''',
    "authoring": '''"""What a contributor runs on a change: start a page, check it, time the site build.

- scaffold.py: `make new-page`
- check.py: `make check PAGE=...` (one page's loop)
- build_benchmark.py: `make build-benchmark`

May import: fieldguide.content, fieldguide.measuring, fieldguide.notebooks, fieldguide.rendering.
"""
''',
}

NOTEBOOKS_MAIN = '''"""`python3 -m fieldguide.notebooks` (`make notebooks`): notebooks/generate.py."""

import sys

from fieldguide.notebooks.generate import main

sys.exit(main())
'''

# Thin modules kept at old names, each for a reason its docstring gives.
SHIMS: dict[str, str] = {
    "timing_run": '''"""Kept so that `python3 -m fieldguide.timing_run` (the README of old, the GPU machines'
notes, scripts outside the repository) still runs the timing run, now
fieldguide/measuring/timing_run.py; `from fieldguide.timing_run import X` forwards too."""

import importlib
import runpy

if __name__ == "__main__":
    runpy.run_module("fieldguide.measuring.timing_run", run_name="__main__", alter_sys=True)


def __getattr__(name: str):
    return getattr(importlib.import_module("fieldguide.measuring.timing_run"), name)
''',
    "timings": '''"""Kept so that scripts outside the repository that read the runs (`from
fieldguide.timings import Timings, CodeKeys`) still work; the runs' data model is
fieldguide/measuring/timings.py, and the number formats fieldguide/measuring/numbers.py."""

import importlib


def __getattr__(name: str):
    for module in ("fieldguide.measuring.timings", "fieldguide.measuring.numbers"):
        found = importlib.import_module(module)
        if hasattr(found, name):
            return getattr(found, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
''',
    "diagrams": '''"""Kept because benchmarks/bench_async_execution.py imports `timeline_from_trace`
from here, inside a benchmark whose code key holds that import: changing it would make its runs stale.
The diagrams, ring_all_reduce among them (a caption names this file), are
fieldguide/rendering/diagrams.py."""

import importlib


def __getattr__(name: str):
    return getattr(importlib.import_module("fieldguide.rendering.diagrams"), name)
''',
}

WHERE_THINGS_LIVE = """## Where things live

- A page's code, claims and numbers: `snippets/`, `tests/pages/`, `benchmarks/`, never `fieldguide/`.
- How a number is measured, kept, keyed or reported (the timing run, the runs, code keys, the
  pytest plugin and its markers, how a number or a ratio prints): `fieldguide/measuring/`.
- How a page renders (a shortcode, a chart or diagram, labels, the figure cache, the glossary and
  the other Markdown extensions): `fieldguide/rendering/`.
- A page's notebook and its recorded outputs: `fieldguide/notebooks/`; what pages and snippets
  declare (includes, sections, `GPUS_NEEDED`, prompts): `fieldguide/content/`.
- `make new-page`, `make check`, `make build-benchmark`: `fieldguide/authoring/`. Each package's
  `__init__.py` says what it may import (`tests/tooling/test_package_boundaries.py` checks it).

"""

TEXT_SUFFIXES = {".py", ".md", ".yml", ".yaml", ".toml", ".cfg", ".ini", ".in", ".sh", ".txt"}
TEXT_NAMES = {"Makefile", "run", "conftest.py"}
SKIPPED = ("timings/", "outputs/", "notebooks/", "site/", "requirements/", "docs/assets/",
           "tools/split_fieldguide.py")
KEYED = ("benchmarks/", "snippets/")   # their code enters the code keys: comments only


CHANGING = False   # set once the first file is changed


class Stop(SystemExit):
    def __init__(self, where: str, why: str):
        super().__init__(f"split_fieldguide: {where}: {why}")


def git(root: Path, *args: str, found_nothing_ok: bool = False) -> str:
    """git's output; `git grep` that finds nothing exits 1, an answer where found_nothing_ok."""
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if done.returncode and not (found_nothing_ok and done.returncode == 1 and not done.stderr):
        raise Stop(f"git {' '.join(args[:2])}", done.stderr.strip() or f"exit {done.returncode}")
    return done.stdout


def cut(path: Path, text: str, start: str, end: str | None) -> tuple[str, str]:
    """(text without [start, end), the part cut); the anchors must each be found once."""
    for anchor in (start, end):
        if anchor is not None and text.count(anchor) != 1:
            raise Stop(str(path), f"expected the anchor {anchor!r} once, found it "
                                  f"{text.count(anchor)} times")
    i = text.index(start)
    j = text.index(end) if end is not None else len(text)
    if j < i:
        raise Stop(str(path), f"{end!r} comes before {start!r}")
    return text[:i] + text[j:], text[i:j]


def replace_once(path: Path, text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise Stop(str(path), f"expected {old!r} once, found it {text.count(old)} times")
    return text.replace(old, new)


# --- 2. The code-level splits --------------------------------------------------------------------

def split_numbers(fg: Path) -> str:
    """timings.py's number formats -> numbers.py; returns numbers.py's text."""
    path = fg / "timings.py"
    text, section = cut(path, path.read_text(), "# --- How numbers read:", None)
    comment, _, code = section.partition("\n\n")
    lines = [line.removeprefix("#").removeprefix(" ") for line in comment.splitlines()[2:]]
    doc = ('"""How numbers read: one rule for every number on the site, and in `make report`.\n\n'
           + "\n".join(lines).strip() + "\n\n"
           "Split out of fieldguide/measuring/timings.py (the runs' data model), which keeps the "
           "fields\nthese formats read (TIME_FIELDS).\n\"\"\"\n")
    header = ("\nfrom __future__ import annotations\n\nimport math\n"
              "from collections.abc import Callable\nfrom dataclasses import dataclass\n"
              "from typing import Any\n\nfrom fieldguide.measuring.timings import TIME_FIELDS\n\n\n")
    path.write_text(text.rstrip("\n") + "\n")
    return doc + header + code.lstrip("\n")


def split_context(fg: Path) -> str:
    """render.py's page context and PageProblems -> context.py; returns context.py's text."""
    path = fg / "render.py"
    text = path.read_text()
    text, error = cut(path, text, "try:  # MkDocs prints a BuildError", "class PageProblems")
    text, section = cut(path, text, "class PageProblems", "# --- One build's state")
    doc = ('"""The page being rendered, under MkDocs or Zensical, and the error that fails it.\n\n'
           "`context(md)` is the page a Markdown conversion renders (None outside a site build); "
           "`nested(md)`\nwhether it converts inside another (a docstring, a tab). PageProblems "
           "is every problem of a\npage, raised by the guard (unrendered.py). Shared by render.py "
           "and unrendered.py, which\nimported each other before.\n\"\"\"\n\n"
           "from __future__ import annotations\n\nimport sys\nfrom dataclasses import dataclass\n"
           "from pathlib import Path\nfrom typing import Any\n\nfrom markdown import Markdown\n\n")
    text = replace_once(path, text,
                        "from fieldguide import figure_cache, figure_prefill, notebooks, outputs, "
                        "shortcodes, unrendered\n",
                        "from fieldguide import figure_cache, figure_prefill, notebooks, outputs, "
                        "shortcodes, unrendered\n"
                        "from fieldguide.rendering.context import Context, context, nested\n")
    path.write_text(text)
    return doc + error + section.rstrip("\n") + "\n"


def edit_unrendered(fg: Path) -> None:
    path = fg / "unrendered.py"
    text = path.read_text()
    text = replace_once(path, text,
                        "        from fieldguide.render import PageProblems, context, nested\n\n", "")
    text = replace_once(path, text, "from fieldguide import shortcodes\n",
                        "from fieldguide import shortcodes\n"
                        "from fieldguide.rendering.context import PageProblems, context, nested\n")
    path.write_text(text)


def edit_shortcodes(fg: Path) -> None:
    path = fg / "shortcodes.py"
    text = path.read_text()
    text = replace_once(path, text, 'importlib.import_module(f"fieldguide.{module}")',
                        'importlib.import_module(f"fieldguide.rendering.{module}")')
    path.write_text(text)


def edit_root_docstring(fg: Path) -> None:
    path = fg / "__init__.py"
    text = path.read_text()
    old = ('"""Tooling behind the GPU Field Guide: snippet metadata, the timing run, and timing data '
           'for the site.\n')
    new = ('"""Tooling behind the GPU Field Guide, in packages by job (each __init__.py says what it '
           'owns\nand may import; tests/tooling/test_package_boundaries.py holds them to it):\n\n'
           "    content/     what pages and snippets hold and declare\n"
           "    measuring/   the timing run, the runs' data model, code keys, number formats, "
           "report\n"
           "    notebooks/   each page's notebook and its recorded outputs\n"
           "    rendering/   the Markdown extensions and everything they draw\n"
           "    authoring/   new-page scaffold, make check, the build benchmark\n\n"
           "timing_run.py, timings.py and diagrams.py at this level only forward to their new "
           "places\n(each says why).\n")
    path.write_text(replace_once(path, text, old, new))


# --- 4. References -------------------------------------------------------------------------------

def _module_pattern() -> re.Pattern[str]:
    names = "|".join(sorted(MOVES, key=len, reverse=True))
    return re.compile(rf"(?<![\w.])(?P<prefix>-m\s+|-m[\"'],\s*[\"'])?fieldguide\.(?P<mod>{names})"
                      rf"(?:\.(?P<attr>\w+))?(?![\w])")


MODULE = _module_pattern()
ESCAPED = re.compile(r"(?<![\w.])fieldguide\\\.(?P<mod>" + "|".join(sorted(MOVES, key=len, reverse=True))
                     + r")(?![\w])")   # in a regular expression: fieldguide\.placeholders
PATH = re.compile(r"(?<![\w./-])fieldguide/(?P<mod>\w+)\.py\b")
DATA_PATH = re.compile(r"(?<![\w./-])fieldguide/(?P<file>datasheets\.toml)")
NUMBER_IN_TIMINGS = re.compile(r"(`(?:" + "|".join(NUMBERS) + r")`[^`\n]{0,12}`)fieldguide/timings\.py`")


def rewrite_text(text: str) -> str:
    def module(m: re.Match[str]) -> str:
        mod, attr, prefix = m["mod"], m["attr"], m["prefix"] or ""
        if mod == "notebooks" and prefix and not attr:
            return m[0]   # `python3 -m fieldguide.notebooks` runs the package's __main__
        new = NAME_MOVES.get((mod, attr)) if attr else None
        target = f"fieldguide.{new or MOVES[mod]}"
        return f"{prefix}{target}" + (f".{attr}" if attr else "")

    text = NUMBER_IN_TIMINGS.sub(r"\1fieldguide/measuring/numbers.py`", text)
    text = MODULE.sub(module, text)
    text = ESCAPED.sub(lambda m: "fieldguide\\." + MOVES[m["mod"]].replace(".", "\\."), text)
    text = PATH.sub(lambda m: (f"fieldguide/{MOVES[m['mod']].replace('.', '/')}.py"
                               if m["mod"] in MOVES else m[0]), text)
    return DATA_PATH.sub(lambda m: f"fieldguide/{DATA[m['file']]}", text)


def _import_lines(node: ast.ImportFrom, indent: str) -> list[str] | None:
    """`from fieldguide import a, b` and `from fieldguide.m import x, y` with moved names, as
    the imports that now serve them; None when nothing moved."""
    by_module: dict[str, list[str]] = {}
    moved = False
    for alias in node.names:
        name = alias.name + (f" as {alias.asname}" if alias.asname else "")
        if node.module == "fieldguide" and alias.name in MOVES:
            package, _, leaf = MOVES[alias.name].rpartition(".")
            local = alias.asname or alias.name   # the name the code uses stays
            by_module.setdefault(f"fieldguide.{package}", []).append(
                leaf if leaf == local else f"{leaf} as {local}")
            moved = True
            continue
        old = next((o for o, n in MOVES.items() if node.module == f"fieldguide.{n}"), None)
        target = NAME_MOVES.get((old, alias.name)) if old else None
        if target:
            by_module.setdefault(f"fieldguide.{target}", []).append(name)
            moved = True
            continue
        by_module.setdefault(node.module, []).append(name)
    if not moved:
        return None
    return [f"{indent}from {module} import {', '.join(names)}" for module, names in by_module.items()]


def rewrite_imports(path: Path, text: str) -> str:
    tree = ast.parse(text, filename=str(path))
    lines = text.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == "fieldguide" or node.module.startswith("fieldguide.")):
            first = lines[node.lineno - 1]
            indent = first[:len(first) - len(first.lstrip())]
            new = _import_lines(node, indent)
            if new is None:
                continue
            last = lines[node.end_lineno - 1]
            rest = last[node.end_col_offset:].rstrip("\n")
            if rest.strip() and not rest.strip().startswith("#"):
                raise Stop(str(path), f"line {node.lineno}: an import shares its line with code")
            comment = rest.strip()
            if comment:
                new = [line + "  " + comment if comment.startswith("# noqa") or i == 0 else line
                       for i, line in enumerate(new)]
            edits.append((node.lineno - 1, node.end_lineno, [line + "\n" for line in new]))
    for start, end, new in sorted(edits, reverse=True):
        lines[start:end] = new
    return "".join(lines)


def _stripped_tree(text: str) -> str:
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:]
    return ast.dump(tree)


def rewrite_keyed(path: Path, text: str) -> str:
    """A benchmark or snippet: only its comments and docstrings, checked by its syntax tree
    (docstrings left out, as the code keys leave them out)."""
    for kinds in ((tokenize.COMMENT, tokenize.STRING), (tokenize.COMMENT,)):
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        lines = text.splitlines(keepends=True)
        for tok in reversed(tokens):
            if tok.type not in kinds:
                continue
            new = rewrite_text(tok.string)
            if new == tok.string:
                continue
            (r0, c0), (r1, c1) = tok.start, tok.end
            head, tail = lines[r0 - 1][:c0], lines[r1 - 1][c1:]
            lines[r0 - 1:r1] = [head + new + tail]
        result = "".join(lines)
        if _stripped_tree(result) == _stripped_tree(text):
            return result
    raise Stop(str(path), "rewriting its comments changed its code (and so its code key)")


# Lines the longer names push past the 110 columns, where no comma or prose can take the overflow:
# (file, the text after the rewrite, the text that fits). Applied where found; a line still too long
# afterwards stops the script, naming it.
FIXUPS = [
    ("fieldguide/rendering/shortcodes.py",
     'raise TimingError("no GPU named: set `timings:` of fieldguide.rendering.render under '
     'markdown_extensions "\n                              "in mkdocs.yml, or gpu=SLUG")',
     'raise TimingError("no GPU named: set `timings:` of fieldguide.rendering.render under "\n'
     '                              "markdown_extensions in mkdocs.yml, or gpu=SLUG")'),
    ("fieldguide/rendering/unrendered.py",
     'problems += [f"a shortcode left unrendered (is `fieldguide.rendering.render` under '
     'markdown_extensions "\n                     f"in mkdocs.yml? ',
     'problems += [f"a shortcode left unrendered (is `fieldguide.rendering.render` under "\n'
     '                     f"markdown_extensions in mkdocs.yml? '),
    ("tests/tooling/test_figure_cache.py",
     '    assert figure_cache.code_key("fieldguide.rendering.roofline") != '
     'figure_cache.code_key("fieldguide.rendering.charts")',
     '    assert (figure_cache.code_key("fieldguide.rendering.roofline")\n'
     '            != figure_cache.code_key("fieldguide.rendering.charts"))'),
    # A caption the site shows (ways-to-use-several-gpus): it keeps the path it had, so the built
    # site stays byte-identical; fieldguide/diagrams.py is the thin module that points here.
    ("fieldguide/rendering/diagrams.py",
     "<code>ring_all_reduce</code> in <code>fieldguide/rendering/diagrams.py</code>",
     "<code>ring_all_reduce</code> in <code>fieldguide/diagrams.py</code>"),
    ("tests/tooling/test_figure_cache.py",   # the generator's file is notebooks/generate.py now
     'assert "notebooks.py" not in files', 'assert "generate.py" not in files'),
    ("tests/tooling/test_notebook_generator.py",
     '    (project / "mkdocs.yml").write_text(MKDOCS.replace("  - fieldguide.rendering.render\\n",\n'
     '                                                       "  - fieldguide.rendering.render:\\n'
     '      timings: fake-gpu\\n"))',
     '    (project / "mkdocs.yml").write_text(MKDOCS.replace(\n'
     '        "  - fieldguide.rendering.render\\n",\n'
     '        "  - fieldguide.rendering.render:\\n      timings: fake-gpu\\n"))'),
]
LIMIT = 110   # pyproject's line-length


def _continues(line: str, prefix: str) -> bool:
    rest = line[len(prefix):]
    return (line.startswith(prefix) and rest.strip() != "" and not rest[0].isspace()
            and not rest.startswith(("- ", "* ", '"""', "'''", "#"))
            and not rest[:2].rstrip(".").isdigit())


def fit(path: Path, text: str) -> str:
    """Lines the rewrite made longer than LIMIT, fitted: prose (comments, docstrings) and a list
    of arguments pass their overflow down to the next line, as a person would."""
    for _ in range(200):
        lines = text.splitlines(keepends=True)
        long = next((i for i, line in enumerate(lines) if len(line.rstrip("\n")) > LIMIT), None)
        if long is None:
            return text
        line = lines[long].rstrip("\n")
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        row = long + 1
        covering = next((t for t in tokens if t.start[0] <= row <= t.end[0]
                         and t.type in (tokenize.STRING, tokenize.COMMENT)
                         and (t.start[0] < row or t.start[1] <= LIMIT) and t.end[1] > 0), None)
        prose = covering is not None and (
            covering.type == tokenize.COMMENT and line.lstrip().startswith("#")
            or covering.type == tokenize.STRING and covering.string.startswith(('"""', "'''")))
        if prose:
            if covering.type == tokenize.COMMENT:
                prefix = re.match(r"\s*#\s?", line)[0]
            else:
                prefix = re.match(r"\s*", line)[0]
            cut_at = line.rfind(" ", len(prefix) + 10, LIMIT + 1)
            if cut_at < 0:
                raise Stop(f"{path}:{row}", "too long, and no space to wrap it at")
            head, tail = line[:cut_at].rstrip(), line[cut_at + 1:]
            nxt = lines[long + 1].rstrip("\n") if long + 1 < len(lines) else ""
            in_token = covering.type == tokenize.COMMENT or covering.end[0] > row
            if in_token and '"""' not in tail and _continues(nxt, prefix):
                lines[long:long + 2] = [head + "\n", prefix + tail + " " + nxt[len(prefix):] + "\n"]
            else:
                lines[long:long + 1] = [head + "\n", prefix + tail + "\n"]
        else:
            opened, at = [], None
            for t in tokens:
                if t.start[0] > row:
                    break
                if t.type == tokenize.OP and t.string in "([{":
                    opened.append(t.start)
                elif t.type == tokenize.OP and t.string in ")]}":
                    opened.pop()
                elif (t.type == tokenize.OP and t.string == "," and t.start[0] == row
                      and t.end[1] <= LIMIT and opened):
                    # the next line lines up after the bracket the comma is inside
                    at = (t.end[1], opened[-1][1] + 1)
            if at is None:
                raise Stop(f"{path}:{row}", "too long after the rewrite: add a FIXUPS entry")
            cut_at, indent = at
            head, tail = line[:cut_at], line[cut_at:].strip()
            nxt = lines[long + 1].rstrip("\n") if long + 1 < len(lines) else ""
            if nxt.startswith(" " * indent) and not nxt[indent:indent + 1].isspace():
                lines[long:long + 2] = [head + "\n", " " * indent + tail + " " + nxt[indent:] + "\n"]
            else:
                lines[long:long + 1] = [head + "\n", " " * indent + tail + "\n"]
        text = "".join(lines)
    raise Stop(str(path), "could not fit its lines")


def text_files(root: Path) -> list[Path]:
    listed = git(root, "ls-files", "-co", "--exclude-standard").splitlines()
    files = []
    for name in listed:
        if name.startswith(SKIPPED):
            continue
        path = root / name
        if path.is_file() and not path.is_symlink() and (
                path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES):
            files.append(path)
    return files


# --- The whole change ----------------------------------------------------------------------------

def is_split(fg: Path) -> bool:
    return (fg / "rendering" / "__init__.py").is_file()


def step(what: str) -> None:
    print(f"split_fieldguide: {what}", flush=True)


def apply(root: Path) -> None:
    fg = root / "fieldguide"
    if not (fg / "__init__.py").is_file():
        raise Stop(str(fg / "__init__.py"), "not found: run this in the repository's root")

    # 1. Inventory
    modules = {p.stem for p in fg.glob("*.py")} - {"__init__"}
    for name in sorted(modules - set(MOVES)):
        raise Stop(f"fieldguide/{name}.py", "a module this script does not know: give it a "
                                            "package in MOVES (tools/split_fieldguide.py)")
    for name in sorted(set(MOVES) - modules):
        raise Stop(f"fieldguide/{name}.py", "expected, not found")
    data = {p.name for p in fg.iterdir() if p.is_file() and p.suffix not in (".py", ".pyc")}
    for name in sorted(data ^ set(DATA)):
        raise Stop(f"fieldguide/{name}", "a data file this script does not expect (DATA)")
    if not (root / "tools" / "test_package_boundaries.py").is_file():
        raise Stop("tools/test_package_boundaries.py", "expected beside this script, not found")
    if git(root, "status", "--porcelain", "--untracked-files=no").strip():
        raise Stop("the work tree", "has uncommitted changes: commit or stash them first (a "
                                    "stop half-way is then undone by `git reset --hard`)")

    # 2. Code-level splits, on the old paths: from here on a stop leaves the tree half-changed
    global CHANGING
    CHANGING = True
    step("splitting timings.py, render.py")
    numbers = split_numbers(fg)
    context = split_context(fg)
    edit_unrendered(fg)
    edit_shortcodes(fg)
    edit_root_docstring(fg)

    # 3. Packages and moves
    step("moving the modules (git mv)")
    for package in PACKAGES:   # a folder left from an earlier try holds at most __pycache__
        if (fg / package).is_dir() and any((fg / package).rglob("*.py")):
            raise Stop(f"fieldguide/{package}/", "exists already, with modules in it")
        (fg / package).mkdir(exist_ok=True)
    for old, new in MOVES.items():
        git(root, "mv", f"fieldguide/{old}.py", f"fieldguide/{new.replace('.', '/')}.py")
    for old, new in DATA.items():
        git(root, "mv", f"fieldguide/{old}", f"fieldguide/{new}")
    # the test that holds the packages to their docstrings, kept beside this script until now
    git(root, "mv", "tools/test_package_boundaries.py", "tests/tooling/test_package_boundaries.py")
    (fg / "measuring" / "numbers.py").write_text(numbers)
    (fg / "rendering" / "context.py").write_text(context)

    step("rewriting references")
    # 4. References (before the files written below, which name the new places already)
    edited_python = []
    for path in text_files(root):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        if rel.startswith(KEYED):
            new = rewrite_keyed(path, text) if path.suffix == ".py" else rewrite_text(text)
        else:
            new = rewrite_text(text)
            if path.suffix == ".py":
                new = rewrite_imports(path, new)
        for file, old, fixed in FIXUPS:
            if rel == file:
                new = new.replace(old, fixed)
        if new != text:
            path.write_text(new, encoding="utf-8")
            if path.suffix == ".py" and not rel.startswith(KEYED):
                edited_python.append(rel)

    for package, doc in PACKAGES.items():
        (fg / package / "__init__.py").write_text(doc)
    (fg / "notebooks" / "__main__.py").write_text(NOTEBOOKS_MAIN)
    for name, text in SHIMS.items():
        (fg / f"{name}.py").write_text(text)

    # 5. Docs beside the code
    reference = root / "docs" / "reference.md"
    text = reference.read_text()
    reference.write_text(replace_once(reference, text, "::: fieldguide.measuring.timings\n",
                                      "::: fieldguide.measuring.timings\n\n"
                                      "::: fieldguide.measuring.numbers\n"))
    guide = root / "docs" / "contributing.md"
    text = guide.read_text()
    guide.write_text(replace_once(guide, text, "\n## Snippets\n", "\n" + WHERE_THINGS_LIVE + "## Snippets\n"))
    readme = root / "README.md"
    text = readme.read_text()
    old = ("fieldguide/           the tooling: snippet metadata, pytest plugin, timing run, and the "
           "rendering\n                      (Markdown extensions MkDocs and Zensical both run: "
           "fieldguide/rendering/render.py)\n")
    new = ("fieldguide/           the tooling, by job: content/ (what pages and snippets declare), "
           "measuring/\n                      (timing run, runs, code keys, pytest plugin), "
           "notebooks/, rendering/ (the\n                      Markdown extensions MkDocs and "
           "Zensical both run), authoring/ (new-page, check)\n")
    readme.write_text(replace_once(readme, text, old, new))
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text()
    pyproject.write_text(replace_once(
        pyproject, text, 'packages = ["fieldguide"]\n',
        'packages = ["fieldguide", "fieldguide.content", "fieldguide.measuring", '
        '"fieldguide.notebooks",\n            "fieldguide.rendering", "fieldguide.authoring"]\n'))

    # 6. Import order, imports the splits left unused; then check
    step("import order, line length, ruff")
    new_files = ["fieldguide/measuring/numbers.py", "fieldguide/rendering/context.py",
                 "fieldguide/notebooks/__main__.py", *[f"fieldguide/{n}.py" for n in SHIMS],
                 *[f"fieldguide/{p}/__init__.py" for p in PACKAGES]]
    ruff = [sys.executable, "-m", "ruff", "check", "-q"]
    subprocess.run([*ruff, "--fix", "--select", "I,F401", *sorted(set(edited_python + new_files))],
                   cwd=root, check=False)
    for rel in sorted(set(edited_python)):   # after isort has wrapped the imports
        path = root / rel
        text = path.read_text(encoding="utf-8")
        fitted = fit(path, text)
        if fitted != text:
            path.write_text(fitted, encoding="utf-8")
    check = subprocess.run([*ruff, "fieldguide", "tests", "hooks", "conftest.py"], cwd=root)
    if check.returncode:
        raise Stop("ruff", "the split tree does not lint (above)")
    left = [line for line in git(root, "grep", "-nE", r"(^|[^\w./])fieldguide[./](" + "|".join(
        m for m in MOVES if m not in ("notebooks", "timing_run", "diagrams")) + r")\b",
        "--", ".", *[f":!{s}" for s in SKIPPED], ":!benchmarks", ":!snippets",
        found_nothing_ok=True).splitlines()
        if line]
    if left:
        raise Stop("references", "old names left:\n" + "\n".join(left))
    step("checking that what benchmarks and snippets import is still there")
    for path in [*root.glob("benchmarks/**/*.py"), *root.glob("snippets/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fieldguide"):
                where = root / (node.module.replace(".", "/") + ".py")
                if node.module != "fieldguide" and not where.is_file():
                    raise Stop(f"{path.relative_to(root)}:{node.lineno}", f"imports {node.module}, "
                               "which moved: add it to SHIMS (its import is in a code key)")
    step("checking that every module imports")
    for path in sorted(fg.rglob("*.py")):
        if path.name == "__main__.py":
            continue
        name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        probe = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=root,
                               capture_output=True, text=True)
        if probe.returncode:
            raise Stop(str(path), "does not import:\n" + probe.stderr[-2000:])
    git(root, "add", "-A", "fieldguide", "tests/tooling/test_package_boundaries.py")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path.cwd())
    parser.add_argument("--check", action="store_true", help="only say whether it is split")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if is_split(root / "fieldguide"):
        print("split_fieldguide: fieldguide/ is split already; nothing to do")
        return 0
    if args.check:
        print("split_fieldguide: fieldguide/ is flat")
        return 1
    try:
        apply(root)
    except Stop:
        if not CHANGING:
            raise
        print("split_fieldguide: stopped half-way; `git reset -q --hard HEAD && git clean -qfd "
              "fieldguide tests/tooling` puts the tree back as it was", file=sys.stderr)
        raise
    print("split_fieldguide: done; review with `git diff --cached --stat -C`, then commit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
