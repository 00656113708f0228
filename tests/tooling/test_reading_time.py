"""fieldguide/rendering/reading_time.py: reading times counted from the words a reader meets, never typed."""

import math
import textwrap

import pytest

pytest.importorskip("markdown")  # reading times are a Markdown extension

import markdown

from fieldguide.rendering import reading_time


@pytest.fixture
def tree(tmp_path):
    """A repository with a chapter of two pages, one of them a draft, and a snippet."""
    (tmp_path / "mkdocs.yml").write_text("draft_docs: |\n  ch/draft.md\n", encoding="utf-8")
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "code.py").write_text(textwrap.dedent("""\
        # --8<-- [start:shown]
        total = one + two
        # --8<-- [end:shown]
        hidden = never shown on any page
        """), encoding="utf-8")
    chapter = tmp_path / "docs" / "ch"
    chapter.mkdir(parents=True)
    (chapter / "page.md").write_text(
        "# Title\n\nfour words of prose <!-- a comment nobody reads -->\n\n```python\n"
        '--8<-- "snippets/code.py:shown"\n```\n', encoding="utf-8")
    (chapter / "draft.md").write_text("word " * 5000, encoding="utf-8")
    return tmp_path


def test_words_count_prose_and_included_code_but_not_comments(tree):
    # "# Title" (2), "four words of prose" (4), the fences (2), "total = one + two" (5)
    assert reading_time.words(tree / "docs" / "ch" / "page.md", tree) == 2 + 4 + 2 + 5


def test_minutes_round_up_at_the_rate_and_never_show_zero(tree):
    assert reading_time.minutes("ch/page.md", tree) == 1
    page = tree / "docs" / "ch" / "long.md"
    page.write_text("word " * (reading_time.WORDS_PER_MINUTE * 3 + 1), encoding="utf-8")
    assert reading_time.minutes("ch/long.md", tree) == 4


def test_a_chapter_sums_its_published_pages_and_leaves_drafts_out(tree):
    page = tree / "docs" / "ch" / "long.md"
    page.write_text("word " * (reading_time.WORDS_PER_MINUTE * 2), encoding="utf-8")
    expected = math.ceil((reading_time.WORDS_PER_MINUTE * 2 + 13) / reading_time.WORDS_PER_MINUTE)
    assert reading_time.minutes("ch/", tree) == expected  # the draft's 5000 words left out
    assert [p.name for p in reading_time.pages_of("ch/", tree)] == ["long.md", "page.md"]


def test_a_path_that_names_no_page_fails_the_build_naming_it():
    md = markdown.Markdown(extensions=["fieldguide.rendering.reading_time"])
    with pytest.raises(Exception, match=r"reading-time: 'nowhere/' names no published page"):
        md.convert("# Home\n\nA chapter (<!-- reading-time: nowhere/ -->).\n")


def test_the_marker_becomes_minutes_and_the_rate_its_words_per_minute():
    md = markdown.Markdown(extensions=["fieldguide.rendering.reading_time"])
    html = md.convert("A page (<!-- reading-time: start-here/slow-training.md -->), at "
                      "<!-- reading-time-rate --> words a minute.\n")
    minutes = reading_time.minutes("start-here/slow-training.md")
    assert f"({minutes} min read), at {reading_time.WORDS_PER_MINUTE} words a minute" in html


def test_both_engines_run_it():
    from fieldguide import ROOT

    assert "  - fieldguide.rendering.reading_time" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_a_marker_in_code_is_quoted_not_counted():
    md = markdown.Markdown(extensions=["fieldguide.rendering.reading_time", "fenced_code"])
    html = md.convert("Write `<!-- reading-time: CHAPTER/ -->` on the home page.\n\n"
                      "```text\n<!-- reading-time: CHAPTER/ -->\n```\n")
    assert html.count("reading-time: CHAPTER/") == 2 and "min read" not in html
