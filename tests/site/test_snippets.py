"""Every snippet module follows the conventions and runs as `python -m` in a fresh interpreter."""

import re

import pytest

from fieldguide.snippets import gpus_needed, module_name, sections, snippet_files
from tests.helpers import includes, pages, rel, run_python

SNIPPETS = snippet_files()


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
    "path", [pytest.param(p, marks=pytest.mark.snippet(rel(p))) for p in SNIPPETS], ids=rel
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
