"""Every snippet module follows the conventions and runs as `python -m` in a fresh interpreter."""

import re

import pytest

from fieldguide import ROOT
from fieldguide.pages import gpus_needed_by
from fieldguide.pages import includes as page_includes
from fieldguide.snippets import code_outside_sections, gpus_needed, module_name, sections, snippet_files
from tests.helpers import includes, pages, rel, run_python

SNIPPETS = snippet_files()


def run_by_its_notebook(path) -> str | None:
    """The page whose notebook runs exactly this module's code, as `python -m` would, or None.

    That is: no code outside the sections (fieldguide.snippets.code_outside_sections); one page
    shows every section once, in file order, or the whole file (its notebook has those cells in
    that order: tests/site/test_notebooks.py checks it and runs it); that page needs as many GPUs
    as the module, so its notebook runs wherever the module would; and the module reads no
    command line (a kernel's sys.argv is not `python -m`'s). Then running the module as well
    would run the same code twice (tens of seconds of a GPU run for some).
    """
    text = path.read_text(encoding="utf-8")
    if code_outside_sections(path) or "sys.argv" in text or "argparse" in text:
        return None
    in_order = list(sections(path))
    for page in pages():
        markdown = page.read_text(encoding="utf-8")
        shown = [section for p, section in page_includes(markdown) if p == rel(path)]
        if shown in (in_order, [None]) and gpus_needed_by(ROOT, markdown) == gpus_needed(path):
            return rel(page)
    return None


RUN_BY_A_NOTEBOOK = {rel(p): page for p in SNIPPETS if (page := run_by_its_notebook(p))}


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
