"""Every snippet module follows the conventions and runs as `python -m` in a fresh interpreter."""

import ast
import json
import re
from pathlib import Path

import pytest

from fieldguide import ROOT
from fieldguide.content.pages import gpus_needed_by, included_code
from fieldguide.content.pages import includes as page_includes
from fieldguide.content.snippets import (
    code_outside_sections,
    gpus_needed,
    module_name,
    sections,
    snippet_files,
)
from fieldguide.notebooks.generate import is_workbook
from tests.helpers import includes, pages, rel, run_python

SNIPPETS = snippet_files()


def run_by_its_notebook(path) -> str | None:
    """The page whose notebook runs exactly this module's code, as `python -m` would, or None.

    That is: every statement is in a section (fieldguide.content.snippets.code_outside_sections), or
    imports from another snippet names that the same page's sections of that snippet define
    before it shows this module's sections that follow the import in the file (the notebook
    defines them there, before the code that can use them); one page shows every section once
    (its notebook has those cells in page order: tests/site/test_notebooks.py checks it and
    runs it; a whole file shown beside them, a script to download, is not run again there);
    that page needs as many GPUs as the module, so its notebook runs wherever the module
    would; and the module reads no command line but through
    `parse_known_args`, which ignores the kernel's arguments (so the notebook runs it as
    `python -m` without arguments does); and the page is no exercise page, whose notebook runs
    the solutions after all the exercises, not in page order (fieldguide.notebooks.generate.is_workbook:
    its module, in page order, runs as `python -m`). Then running the module as well would run the same
    code twice (a training run of tens of seconds on the CPU for some). Where the page shows
    the sections in another order than the file's, importing the module checks that the file's
    order works too (IN_ANOTHER_ORDER), without running its `__main__` block a second time.
    """
    text = path.read_text(encoding="utf-8")
    if "sys.argv" in text or ".parse_args(" in text:
        return None
    in_order = list(sections(path))
    for page in pages():
        if is_workbook(page.relative_to(ROOT / "docs").as_posix()):
            continue
        markdown = page.read_text(encoding="utf-8")
        shown_on_page = page_includes(markdown)
        # a whole file beside its sections is a script to download: shown, not run again
        shown = [section for p, section in shown_on_page if p == rel(path) and section]
        if sorted(shown) != sorted(in_order) \
                or gpus_needed_by(ROOT, markdown) != gpus_needed(path):
            continue
        if all(_defined_before(line, _shown_before(line, path, shown_on_page), path)
               for line in code_outside_sections(path)):
            return rel(page)
    return None


_START = re.compile(r"^\s*# --8<-- \[start:([\w-]+)\]\s*$")


def _shown_before(outside: str, path, shown_on_page: list[tuple[str, str | None]]) -> list:
    """The includes a page shows before the first of `path`'s sections that come after the
    statement `outside` ("line N: code") in the file: what the notebook has run by the time it
    reaches code that the statement's names can serve (the whole page when no section follows
    it, or when the page shows the whole file)."""
    line = int(outside.split(":", 1)[0].removeprefix("line "))
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    following = {m[1] for number, text in enumerate(lines, 1)
                 if number > line and (m := _START.match(text))}
    first = [i for i, (p, section) in enumerate(shown_on_page)
             if p == rel(path) and (section is None or section in following)]
    return shown_on_page[:first[0]] if first else shown_on_page


def _defined_before(outside: str, before: list[tuple[str, str | None]], path=None) -> bool:
    """Whether a statement outside the sections ("line N: code", the whole statement read from
    `path` when given: an import may span lines) is `from snippets.x import a, b` where the
    sections shown before (`before`, a page's includes) define a and b."""
    try:
        if path is None:
            (node,) = ast.parse(outside.split(": ", 1)[1]).body
        else:
            line = int(outside.split(":", 1)[0].removeprefix("line "))
            (node,) = [n for n in ast.walk(ast.parse(Path(path).read_text(encoding="utf-8")))
                       if isinstance(n, ast.stmt) and n.lineno == line]
    except (SyntaxError, ValueError):
        return False
    if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("snippets."):
        return False
    source = node.module.replace(".", "/") + ".py"
    defined = set()
    for path, section in before:
        if path == source:
            code = included_code(ROOT, path, section)
            defined |= {n.name for n in ast.parse(code).body
                        if isinstance(n, ast.FunctionDef | ast.ClassDef)}
            defined |= {t.id for n in ast.parse(code).body if isinstance(n, ast.Assign)
                        for t in n.targets if isinstance(t, ast.Name)}
    return all(alias.name in defined for alias in node.names)


RUN_BY_A_NOTEBOOK = {rel(p): page for p in SNIPPETS if (page := run_by_its_notebook(p))}
# Of those, the modules whose page shows their sections in another order than the file's.
IN_ANOTHER_ORDER = [p for p in SNIPPETS if rel(p) in RUN_BY_A_NOTEBOOK
                    and [s for path, s in includes(ROOT / RUN_BY_A_NOTEBOOK[rel(p)])
                         if path == rel(p) and s] != list(sections(p))]


def test_there_are_snippets():
    assert SNIPPETS, "no snippet modules found under snippets/"


@pytest.mark.parametrize("path", SNIPPETS, ids=rel)
def test_conventions(path):
    assert re.fullmatch(r"[a-z][a-z0-9_]*\.py", path.name), "snippet modules are snake_case"
    assert (path.parent / "__init__.py").is_file(), "chapters are packages, so `python -m` works"
    gpus_needed(path)  # raises with a clear message when missing or malformed
    found = sections(path)
    assert found, "a snippet with no sections shows nothing on any page"


@pytest.mark.parametrize("path", SNIPPETS, ids=rel)
def test_every_section_is_on_a_page(path):
    shown = {section for page in pages() for p, section in includes(page) if p == rel(path)}
    unused = set(sections(path)) - shown
    assert not unused, f"sections no page shows (dead example code): {sorted(unused)}"


@pytest.mark.fresh_interpreter
@pytest.mark.parametrize(
    "path", [pytest.param(p, marks=pytest.mark.snippet(rel(p)))
             for p in SNIPPETS if rel(p) not in RUN_BY_A_NOTEBOOK], ids=rel
)
def test_runs_as_module(path):
    result = run_python(["-m", module_name(path)])
    assert result.returncode == 0, f"python -m {module_name(path)} failed:\n{result.stderr}"
    assert result.stdout.strip(), "a snippet run prints what the page says it prints"


IMPORT_EACH = """import importlib, json, sys, traceback
failed = {}
for name in sys.argv[2:]:
    try:
        importlib.import_module(name)
    except BaseException:
        failed[name] = traceback.format_exc()
with open(sys.argv[1], "w", encoding="utf-8") as out:
    json.dump(failed, out)
"""


@pytest.fixture(scope="module")
def imported_in_file_order(request, tmp_path_factory):
    """{module: its import's traceback} for every module whose test_imports_in_file_order this
    session runs (not skipped), imported one after another in one fresh interpreter: each
    module runs its own code in its own namespace, in file order, whatever was imported before
    it, and torch is imported once instead of once per module (2 CPU-seconds each)."""
    names = [module_name(item.callspec.params["path"]) for item in request.session.items
             if getattr(item, "originalname", None) == "test_imports_in_file_order"
             and item.get_closest_marker("skip") is None]
    out = tmp_path_factory.mktemp("imports") / "failed.json"
    result = run_python(["-c", IMPORT_EACH, str(out), *names])
    assert result.returncode == 0 and out.is_file(), result.stderr[-3000:]
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.snippet(rel(p)))
                                  for p in IN_ANOTHER_ORDER], ids=rel)
def test_imports_in_file_order(path, imported_in_file_order):
    """Its notebook runs every line in the page's order; the file's own order must work too."""
    failed = imported_in_file_order.get(module_name(path))
    assert failed is None, f"import {module_name(path)} failed:\n{failed}"


WORKBOOK_MODULES = {p: rel(page) for page in pages()
                    if is_workbook(page.relative_to(ROOT / "docs").as_posix())
                    for p in dict.fromkeys(path for path, _ in includes(page))}


@pytest.mark.parametrize("path", sorted(WORKBOOK_MODULES), ids=str)
def test_an_exercise_module_runs_in_the_order_its_page_shows(path):
    """An exercise page's notebook runs the solutions after all the exercises; `python -m` runs
    the module in file order, so the file's order must be the page's: a reader copying each
    exercise and then its solution from the page runs what `test_runs_as_module` ran."""
    assert path not in RUN_BY_A_NOTEBOOK
    shown = [s for p, s in includes(ROOT / WORKBOOK_MODULES[path]) if p == path]
    assert shown == [s for s in sections(ROOT / path) if s in shown], (
        f"{WORKBOOK_MODULES[path]} shows the sections of {path} in another order than the file's")


DISPLAY_WIDTH = 88  # wider lines scroll sideways in the site's code blocks


@pytest.mark.parametrize("path", SNIPPETS, ids=rel)
def test_sections_fit_the_page(path):
    long = [f"{name}: {line}" for name, text in sections(path).items()
            for line in text.splitlines() if len(line) > DISPLAY_WIDTH]
    assert not long, f"lines wider than {DISPLAY_WIDTH} columns:\n" + "\n".join(long)


def test_a_module_is_left_to_its_notebook_only_when_the_notebook_runs_all_its_code(tmp_path):
    assert RUN_BY_A_NOTEBOOK, "no page's notebook runs a whole module: every module runs twice"
    module = tmp_path / "demo.py"
    shown = '''"""Docstring."""

GPUS_NEEDED = 0

# --8<-- [start:a]
x = 1
# --8<-- [end:a]

if __name__ == "__main__":
    # --8<-- [start:main]
    print(x)
    # --8<-- [end:main]
'''
    module.write_text(shown)
    assert code_outside_sections(module) == []
    module.write_text(shown.replace("x = 1\n# --8<-- [end:a]", "# --8<-- [end:a]\nx = 1"))
    assert code_outside_sections(module) == ["line 7: x = 1"]
    module.write_text(shown.replace("    print(x)", "    # --8<-- [start:inner]\n    print(x)\n"
                                                   "    # --8<-- [end:inner]"))
    assert code_outside_sections(module) == ["line 11: section 'inner' starts inside another"]


def test_a_training_script_runs_once_per_kind_of_check():
    """The torchrun scripts read their options with parse_known_args (a kernel's own arguments
    are not theirs) and FSDP2's imports what the page shows before it from the DDP script: their
    notebooks run every line, so `python -m` does not train them a second time (their pages'
    tests train them under torchrun, on two processes)."""
    for name in ("ddp_with_torchrun", "fsdp2", "all_reduce_bandwidth"):
        assert f"snippets/several_gpus/{name}.py" in RUN_BY_A_NOTEBOOK, name
    # Their pages show start_mesh (tensor_parallelism.py) right before the module's `main`, the
    # one section after the import in the file; composing.py's import spans lines
    for name in ("pipeline_parallelism", "scaling", "composing"):
        assert f"snippets/several_gpus/{name}.py" in RUN_BY_A_NOTEBOOK, name
    assert _defined_before("line 3: from snippets.several_gpus.ddp_with_torchrun import start",
                           [("snippets/several_gpus/ddp_with_torchrun.py", "setup")])
    assert not _defined_before("line 3: from snippets.several_gpus.ddp_with_torchrun import start",
                               [("snippets/several_gpus/ddp_with_torchrun.py", "data")])
    assert not _defined_before("line 3: import torch", [])
