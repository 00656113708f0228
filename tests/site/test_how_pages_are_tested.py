"""Pages explain; what their tests assert sits in one box at the end of each page.

A sentence such as "a test checks that ..." in the middle of an explanation reads as a note to
the maintainers, and a reference to "the tutorials this site grew from" points readers at sources
they cannot see. So every page under docs/ keeps such sentences out of its prose and gathers
them, if it has any, in one collapsible box right before `## References`:

    ??? info "How this page is tested"
        What [`tests/pages/test_x.py`](REPO/blob/main/tests/pages/test_x.py) asserts ...

        - ...

Read from the page sources, drafts included, since a draft is published as it is written.
"""

import re
from pathlib import Path

import pytest
import yaml

from fieldguide import ROOT
from fieldguide.notebooks.generate import is_workbook

DOCS = ROOT / "docs"
BOX_TITLE = '??? info "How this page is tested"'

# Named exceptions, each with its reason:
# - the contributor pages are about the tests themselves;
CONTRIBUTOR_PAGES = {"contributing.md", "reference.md"}
# - an exercise's solution says how it is checked: that is part of the exercise.
# (fieldguide.notebooks.generate.is_workbook: exercises.md or <chapter>-exercises.md)

# A sentence about what the tests do, and sources readers cannot see.
TEST_TALK = re.compile(
    r"\btests?(?:\s+on\s+(?:the|a)\s+GPU)?\s+(?:checks?|requires?|asserts?|confirms?|counts?|"
    r"compares?|holds?|claims?|allows?|finds?|measures?|writes?|runs?|rel(?:y|ies))\b"
    r"|\btest\s+suite\s+(?:checks|requires|counts|holds|asserts)\b"
    r"|\bthis\s+site\s+grew\s+from\b",
    re.I)


def repo_blob_base() -> str:
    """Where the box's links point: the repository (repo_url) on the branch edit_uri names."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    repo = re.search(r"^repo_url:\s*(\S+)", text, re.M)[1].rstrip("/")
    branch = re.search(r"^edit_uri:\s*edit/([^/\s]+)/", text, re.M)[1]
    return f"{repo}/blob/{branch}/"


def pages() -> list[str]:
    """Every page under docs/ (the notebooks folder is a link to generated notebooks)."""
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        relative = path.relative_to(DOCS).as_posix()
        if relative.startswith("notebooks/") or relative in CONTRIBUTOR_PAGES:
            continue
        if is_workbook(relative):
            continue
        found.append(relative)
    return found


def split_box(markdown: str) -> tuple[str, list[str]]:
    """(the page without its boxes, each box's lines). A box is its title line and the indented
    or blank lines under it."""
    rest: list[str] = []
    boxes: list[list[str]] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        if lines[i] == BOX_TITLE:
            box = [lines[i]]
            i += 1
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
                box.append(lines[i])
                i += 1
            boxes.append(box)
            continue
        rest.append(lines[i])
        i += 1
    return "\n".join(rest), boxes


def talk_outside_the_box(markdown: str) -> list[str]:
    """The lines of the prose, outside the box, that talk about the tests or unseen sources."""
    prose, _ = split_box(markdown)
    # Sentences wrap: join each paragraph's lines so "the tests\ncheck" is found too.
    paragraphs = re.split(r"\n\s*\n", prose)
    return [" ".join(p.split()) for p in paragraphs if TEST_TALK.search(" ".join(p.split()))]


def test_the_rule_finds_test_talk_in_prose_and_leaves_the_box_alone():
    page = ("# A page\n\nThe sum is exact (a test checks it).\n\nThe tests\ncheck both.\n\n"
            "It matches (a test on the GPU checks each call).\n\n"
            "One of the tutorials this site grew from says so.\n\nThe error grew from 1e-7.\n\n"
            f"{BOX_TITLE}\n    What the tests check:\n\n    - a test checks the sum.\n\n"
            "## References\n")
    found = talk_outside_the_box(page)
    assert found == ["The sum is exact (a test checks it).", "The tests check both.",
                     "It matches (a test on the GPU checks each call).",
                     "One of the tutorials this site grew from says so."]


@pytest.mark.parametrize("page", pages())
def test_the_prose_leaves_the_tests_to_the_box(page):
    found = talk_outside_the_box((DOCS / page).read_text(encoding="utf-8"))
    assert not found, (
        f"docs/{page}: say what the tests assert in the '{BOX_TITLE}' box before '## References', "
        f"not in the explanation, and name no source readers cannot see: {found}")


@pytest.mark.parametrize("page", pages())
def test_a_page_has_at_most_one_box_and_it_comes_right_before_the_references(page):
    markdown = (DOCS / page).read_text(encoding="utf-8")
    _, boxes = split_box(markdown)
    if not boxes:
        return
    assert len(boxes) == 1, f"docs/{page}: {len(boxes)} '{BOX_TITLE}' boxes; gather them in one"
    after = markdown[markdown.index(BOX_TITLE):]
    following = [line for line in after.splitlines()[1:] if line.strip() and not line.startswith("    ")]
    assert following and following[0] == "## References", (
        f"docs/{page}: the box goes at the end of the page, right before '## References'")
    items = [line for line in boxes[0] if line.startswith("    - ")]
    assert items, f"docs/{page}: the box lists what the tests assert, as a list"


@pytest.mark.parametrize("page", pages())
def test_the_box_links_the_test_files_it_speaks_for(page):
    _, boxes = split_box((DOCS / page).read_text(encoding="utf-8"))
    if not boxes:
        return
    base = repo_blob_base()
    links = re.findall(r"\]\((?P<target>[^)\s]+)\)", "\n".join(boxes[0]))
    test_files = [link.removeprefix(base) for link in links if link.startswith(base + "tests/")]
    assert test_files, f"docs/{page}: the box links no test file under {base}tests/"
    for path in test_files:
        assert (ROOT / path).is_file(), f"docs/{page}: the box links {path}, which does not exist"
    own = f"tests/pages/test_{Path(page).stem.replace('-', '_')}.py"
    if (ROOT / own).is_file():
        assert own in test_files, f"docs/{page}: the box does not link the page's own tests, {own}"


def test_the_box_base_is_the_repository_of_mkdocs_yml():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_AnyTag)
    assert repo_blob_base() == f"{config['repo_url'].rstrip('/')}/blob/main/"


class _AnyTag(yaml.SafeLoader):
    """mkdocs.yml has !ENV and !!python/name tags; this test reads plain keys only."""


_AnyTag.add_multi_constructor("", lambda loader, suffix, node: None)
_AnyTag.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
