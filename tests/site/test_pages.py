"""What a page shows is what runs: its code blocks, copied in order, run in a fresh interpreter."""

import pytest

from fieldguide import ROOT
from fieldguide.snippets import sections
from tests.helpers import includes, pages, rel, run_python

PAGES_WITH_CODE = [p for p in pages() if includes(p)]


def copied_code(page) -> str:
    """The page's code blocks, concatenated the way a reader pastes them one after another."""
    blocks = []
    for path, section in includes(page):
        source = ROOT / path
        blocks.append(source.read_text(encoding="utf-8") if section is None else sections(source)[section])
    return "\n\n".join(blocks) + "\n"


@pytest.mark.parametrize("page", pages(), ids=rel)
def test_includes_name_existing_sections(page):
    for path, section in includes(page):
        assert (ROOT / path).is_file(), f"{rel(page)} includes missing file {path}"
        if section:
            assert section in sections(ROOT / path), f"{rel(page)}: {path} has no section {section!r}"


@pytest.mark.fresh_interpreter
@pytest.mark.parametrize(
    "page",
    [pytest.param(p, marks=pytest.mark.snippet(*dict.fromkeys(path for path, _ in includes(p))))
     for p in PAGES_WITH_CODE],
    ids=rel,
)
def test_copied_code_runs(page):
    result = run_python(["-c", copied_code(page)])
    assert result.returncode == 0, f"code copied from {rel(page)} fails:\n{result.stderr}"
