"""Every include on a page names a file and section that exist.

That a page's code runs as shown is checked by its notebook (tests/site/test_notebooks.py):
the notebook's code cells are exactly the page's blocks in order (a test checks that), run in a
fresh kernel, in an empty folder, without the repository on the path, as a reader runs them.
"""

import pytest

from fieldguide import ROOT
from fieldguide.content.snippets import sections
from tests.helpers import includes, pages, rel


@pytest.mark.parametrize("page", pages(), ids=rel)
def test_includes_name_existing_sections(page):
    for path, section in includes(page):
        assert (ROOT / path).is_file(), f"{rel(page)} includes missing file {path}"
        if section:
            assert section in sections(ROOT / path), f"{rel(page)}: {path} has no section {section!r}"
