"""Scaffold placeholders ("Replace with …") cannot be published: fieldguide/rendering/placeholders.py finds
them, the strict build refuses them, and no published page holds one."""

import re
import textwrap

import pytest

pytest.importorskip("markdown")  # the check is a Markdown extension

from fieldguide import ROOT
from fieldguide.authoring import scaffold
from fieldguide.content.pages import included_code, includes, is_draft, pages
from fieldguide.rendering import placeholders

NAMES = scaffold.Names.parse("memory_tricks", "tiny_kernels")


def test_it_finds_placeholders_but_not_quotes_of_them():
    page = textwrap.dedent("""\
        # Tiny kernels

        - Replace with what a reader will learn.
        **Prerequisites:** replace with links to the pages to read first.
        The scaffold writes `Replace with …` where the page's own text goes.
        ``Replace with`` is quoted too.
        def f():
            \"\"\"Replace with the code the page teaches.\"\"\"
        """)
    assert [p.line for p in placeholders.found(page)] == [3, 4, 8]


def test_every_placeholder_the_scaffold_writes_is_found():
    """The page, its cheat-sheet rule and the code it shows: each 'replace with' the scaffold
    writes there is one the check finds (the scaffold and the check share the phrase)."""
    shown = scaffold._render(scaffold.PAGE, NAMES).replace(
        f'--8<-- "{NAMES.snippet}:example"', _example_section())
    shown += "".join(scaffold.add_to_cheat_sheet("# Cheat sheet\n", NAMES))
    written = [line for line in shown.splitlines() if re.search("replace with", line, re.I)]
    assert len(written) >= 8
    assert [p.text for p in placeholders.found(shown)] == [line.strip() for line in written]


def _example_section() -> str:
    source = scaffold._render(scaffold.SNIPPET, NAMES)
    return source.split("# --8<-- [start:example]\n")[1].split("# --8<-- [end:example]")[0]


def test_no_published_page_holds_a_placeholder():
    left = {}
    for page in pages():
        if is_draft(page):
            continue
        text = page.read_text(encoding="utf-8")
        for path, section in includes(text):
            text += "\n" + included_code(ROOT, path, section)
        if found := placeholders.found(text):
            left[page.relative_to(ROOT).as_posix()] = [p.text for p in found]
    assert not left, f"scaffold placeholders on published pages: {left}"


def test_the_site_runs_the_check_after_the_includes():
    """In mkdocs.yml, so every build checks; as a preprocessor after pymdownx.snippets (32), so
    the code a page includes is checked too."""
    import markdown

    pytest.importorskip("pymdownx.snippets")
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^  - fieldguide\.rendering\.placeholders\b", config, re.M)
    md = markdown.Markdown(extensions=["pymdownx.snippets", "fieldguide.rendering.placeholders"])
    order = [name for name in md.preprocessors._priority]
    assert order.index(next(p for p in order if p.name == "snippet")) < order.index(
        next(p for p in order if p.name == "fieldguide-placeholders"))


MKDOCS = """\
site_name: placeholder test
markdown_extensions:
  - fieldguide.rendering.placeholders
  - pymdownx.snippets:
      base_path: [.]
      check_paths: true
"""


@pytest.mark.parametrize(("where", "expected"), [
    ("page", "scaffold placeholder left (line 3 of the page with its code included): "
             "\"Replace with the page's opening.\""),
    ("code", "'\"\"\"Replace with the code the page teaches.\"\"\"'"),
    (None, None),
])
def test_the_strict_build_refuses_a_placeholder_on_the_page_or_in_its_code(tmp_path, monkeypatch,
                                                                           caplog, where, expected):
    mkdocs_build = pytest.importorskip("mkdocs.commands.build")
    from mkdocs.config import load_config

    (tmp_path / "docs").mkdir()
    (tmp_path / "mkdocs.yml").write_text(MKDOCS)
    (tmp_path / "example.py").write_text(
        "# --8<-- [start:example]\ndef f():\n    \"\"\"" + ("Replace with the code the page teaches."
                                                          if where == "code" else "Sums.") +
        "\"\"\"\n# --8<-- [end:example]\n")
    opening = "Replace with the page's opening." if where == "page" else "Why it matters."
    (tmp_path / "docs" / "index.md").write_text(
        f"# Tiny kernels\n\n{opening}\n\n```python\n--8<-- \"example.py:example\"\n```\n")
    monkeypatch.chdir(tmp_path)
    config = load_config(str(tmp_path / "mkdocs.yml"), strict=True, site_dir=str(tmp_path / "site"))
    if expected is None:
        mkdocs_build.build(config)
        return
    # an error, not a warning: `-q` (which drops warnings) or Zensical cannot let it through
    from mkdocs.exceptions import Abort

    with pytest.raises(Abort):
        mkdocs_build.build(config)
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"
              and "scaffold placeholder left" in r.getMessage()]
    assert len(errors) == 1 and "page 'Tiny kernels'" in errors[0], errors
    assert expected in errors[0], errors[0]


def test_no_snippet_or_benchmark_holds_a_placeholder():
    """The scaffold also writes placeholders where no page shows them (a snippet module's
    docstring, a benchmark's budget line): the build never sees those, so this test does."""
    left = {}
    for folder in ("snippets", "benchmarks"):
        for module in sorted((ROOT / folder).rglob("*.py")):
            if found := placeholders.found(module.read_text(encoding="utf-8")):
                left[module.relative_to(ROOT).as_posix()] = [p.text for p in found]
    assert not left, f"scaffold placeholders left in code: {left}"
