"""The home page as a course map: a way in for each reader's problem, then one line per chapter
saying what the reader will be able to do after it, with its reading time counted at build time
(fieldguide/rendering/reading_time.py). tests/browser/test_site_browser.py follows the journeys by click."""

import re
from pathlib import PurePosixPath

import pytest

pytest.importorskip("markdown")  # reading times are a Markdown extension

from fieldguide import ROOT
from fieldguide.rendering import reading_time
from tests.site.test_reader_kit import LINK, NAV, NOT_CHAPTERS, NUMBER, built

HOME = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
MARKER = reading_time.MARKER
CHAPTER_LINK = re.compile(r"\[\*\*(?P<name>[^*\]]+)\*\*\]\((?P<target>[^)\s]+)\)")

# The reader's problem -> the page that answers it, linked from the home page's first section.
JOURNEYS = {
    "My training is slow": "start-here/slow-training.md",
    "I need several GPUs next week": "several-gpus/ddp-with-torchrun.md",
    "Out of memory": "memory/out-of-memory-errors.md",
    "New to GPUs": "foundations/cpu-vs-gpu.md",
}


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", HOME, re.M | re.S)
    assert match, f"docs/index.md has no '## {title}'"
    return match[1]


def items(text: str, bullet: str) -> list[str]:
    """The list items of `text` (bullet: a regex for the marker), continuation lines joined."""
    found: list[str] = []
    for line in text.splitlines():
        if re.match(bullet, line):
            found.append(re.sub(bullet, "", line, count=1))
        elif line.startswith(" ") and found:
            found[-1] += " " + line.strip()
    return found


def chapters() -> dict[str, list[str]]:
    """Each chapter section of the nav -> its pages, in nav order."""
    found: dict[str, list[str]] = {}
    for chapter, _, path in NAV:
        if chapter not in NOT_CHAPTERS:
            found.setdefault(chapter, []).append(path)
    return found


def test_the_journeys_come_first_and_link_their_answer_pages():
    journeys = items(section("Start from your problem"), r"- ")
    first = HOME.index("## ")
    assert HOME[first:].startswith("## Start from your problem"), "the journeys come first"
    assert journeys[0].startswith("**My training is slow.**"), "the slow-training way in is first"
    for problem, page in JOURNEYS.items():
        (line,) = [item for item in journeys if item.startswith(f"**{problem}.**")]
        first_link = LINK.search(line)["target"]
        assert first_link == page, f"{problem}: links {first_link} first, not {page}"
        assert MARKER.search(line), f"{problem}: no reading time for its page"


def test_every_chapter_has_one_line_with_what_the_reader_can_do_and_its_reading_time():
    lines = items(section("The course, chapter by chapter"), r"\d+\. ")
    expected = chapters()
    assert len(lines) == len(expected), "one line per chapter of the nav"
    for line, (chapter, pages) in zip(lines, expected.items(), strict=True):
        link = CHAPTER_LINK.match(line)
        assert link and link["name"] == chapter, (
            f"the course map's lines follow the nav: expected {chapter!r}, got {line[:60]!r}")
        assert link["target"] == pages[0], f"{chapter}: link its first page, {pages[0]}"
        (marker,) = MARKER.findall(line)
        folder = str(PurePosixPath(pages[0]).parent) + "/"
        assert marker == folder, f"{chapter}: the reading time must count {folder}, not {marker}"
        outcome = line.split(":", 1)[1] if "):" in line else ""
        assert len(outcome.split()) >= 8, f"{chapter}: say what the reader will be able to do"
        prose = MARKER.sub("", re.sub(r"\[[^\]]*\]\([^)]*\)", "", line))
        assert not NUMBER.search(prose), f"{chapter}: a number typed into the course map"


def test_the_built_home_page_shows_each_reading_time_from_the_words(built_site):
    home = built(built_site, "index.md")
    for path in dict.fromkeys(MARKER.findall(HOME)):
        assert f"({reading_time.shown(path)})" in home, f"{path}: not shown as counted"
    assert "reading-time" not in home, "a reading-time marker left unrendered"
