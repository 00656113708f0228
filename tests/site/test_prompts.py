""""Predict, then run" prompts (fieldguide/prompts.py): every teaching page asks the reader at
least two questions that the page then answers with its own measurement, revealed on click.

A teaching page is a page of the nav that fieldguide.glossary.teaches (the nav minus its
NOT_TEACHING pages and the chapters' exercise pages): one definition for the glossary and here.
The sources are read for the count and for typed numbers; the built site for what the reader
gets: a collapsed <details> with a question and a non-empty answer, its numbers rendered.
"""

from __future__ import annotations

import html
import re

import pytest

pytest.importorskip("markdown")  # fieldguide.glossary (which pages teach) is a Markdown extension

from fieldguide import glossary, prompts
from fieldguide.shortcodes import SHORTCODE
from tests.site.test_reader_kit import NAV, NUMBER, text, url_of

MOST_PROMPTS = 3     # two or three a page: practice, not a quiz between every paragraph
LEAST_PROMPTS = 2
TEACHING = [path for _, _, path in NAV if glossary.teaches(path)]
ANY_PREDICT = re.compile(rf"^\s*(?:!!!|\?\?\?\+?)\s+{prompts.KIND}\b.*$", re.M)
DETAILS = re.compile(rf'<details class="{prompts.KIND}">(?P<inner>.*?)</details>', re.S)
SUMMARY = re.compile(r"<summary>(?P<question>.*?)</summary>(?P<answer>.*)", re.S)


def _plain(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def test_teaching_pages_are_the_chapters_pages():
    """The definition picks what a reader would call the lessons: every chapter's pages and the
    case study, not the home page, the reference pages or an exercise page."""
    assert len(TEACHING) >= 25
    assert "foundations/cpu-vs-gpu.md" in TEACHING and "case-studies/diffusion.md" in TEACHING
    assert not {"index.md", "cheat-sheet.md", "glossary.md", "contributing.md",
                "precision/exercises.md"} & set(TEACHING)


@pytest.mark.parametrize("path", TEACHING)
def test_every_teaching_page_asks_two_or_three_predictions(path):
    found = prompts.prompts(text(path))
    assert LEAST_PROMPTS <= len(found) <= MOST_PROMPTS, (
        f"{path}: {len(found)} '??? {prompts.KIND}' prompts ({LEAST_PROMPTS} to {MOST_PROMPTS})")
    # every predict block is a collapsed one the parser reads (`!!!` would show the answer)
    assert len(ANY_PREDICT.findall(text(path))) == len(found), (
        f'{path}: write each prompt as ??? {prompts.KIND} "Question?" with its answer indented')


@pytest.mark.parametrize("path", TEACHING)
def test_each_prompt_asks_a_question_and_never_types_its_answer(path):
    for prompt in prompts.prompts(text(path)):
        assert prompt.question.endswith("?"), f"{path}: {prompt.question!r} is not a question"
        assert prompt.answer, f"{path}: {prompt.question!r} has no answer"
        measured = list(SHORTCODE.finditer(prompt.answer))
        typed = NUMBER.search(SHORTCODE.sub("", re.sub(r"`[^`]*`|\]\([^)]*\)", "", prompt.answer)))
        assert not typed, (f"{path}: {prompt.question!r} types {typed[0]!r} in its answer: "
                           "quote the page's measurement with a timing shortcode")
        if not measured:   # an explanation, not a number: one or two sentences
            sentences = re.findall(r"[.!?](?:\s|$)", prompt.answer)
            assert len(sentences) <= 2, f"{path}: {prompt.question!r}: answer in two sentences"


def test_the_parser_reads_collapsed_prompts_and_their_answers_only():
    page = ('Intro.\n\n??? predict "How fast?"\n    <!-- timing-value: a.b median -->\n\n'
            '    and why.\n\nAfter.\n\n???+ predict "Open already?"\n    Shown.\n\n'
            '??? note "Not a prompt"\n    Text.\n')
    (found,) = prompts.prompts(page)
    assert found == prompts.Prompt("How fast?", "<!-- timing-value: a.b median -->\n\nand why.")
    assert len(ANY_PREDICT.findall(page)) == 2   # the open one is counted, and fails the page


def test_the_notebook_keeps_the_question_and_points_at_the_answer():
    from fieldguide import notebooks
    lines = ['??? predict "How fast?"', "    <!-- timing-value: x.y median -->", "", "After."]
    shown = notebooks._admonitions(lines, "*On the page.*")
    assert shown[:3] == ["> **Predict:** How fast?", ">", "> *On the page.*"]
    assert "After." in shown and not any("timing" in line for line in shown)


def test_in_a_notebook_a_prompt_after_code_comes_before_the_cell():
    """Predict, then run: the cell's recorded output would give the answer away."""
    from fieldguide import notebooks
    cells = [("markdown", "# Title"), ("code", "gpu check"), ("markdown", "Intro."),
             ("code", "work()"), ("markdown", "> **Predict:** Q?\n>\n> *A.*\n\nThe result.")]
    assert notebooks._predict_first(cells) == [
        ("markdown", "# Title"), ("code", "gpu check"), ("markdown", "Intro."),
        ("markdown", "> **Predict:** Q?\n>\n> *A.*"), ("code", "work()"),
        ("markdown", "The result.")]
    kept = [("markdown", "# Title"), ("code", "gpu check"), ("markdown", "> **Predict:** Q?")]
    assert notebooks._predict_first(kept) == kept   # never above the GPU check


@pytest.mark.parametrize("path", TEACHING)
def test_every_prompt_is_a_collapsed_question_with_its_answer_rendered(built_site, path):
    page = (built_site / url_of(path)).read_text(encoding="utf-8")
    rendered = [SUMMARY.search(m["inner"]) for m in DETAILS.finditer(page)]
    asked = prompts.prompts(text(path))
    assert len(rendered) == len(asked), (
        f"{path}: {len(asked)} prompts in the source, {len(rendered)} collapsed blocks in the page")
    for prompt, shown in zip(asked, rendered, strict=True):
        assert shown, f"{path}: {prompt.question!r} has no <summary>"
        question, answer = _plain(shown["question"]), _plain(shown["answer"])
        assert question == " ".join(prompt.question.split()), f"{path}: the page asks {question!r}"
        assert answer, f"{path}: {prompt.question!r} renders an empty answer"
        assert "timing unavailable" not in answer, f"{path}: {prompt.question!r}: {answer}"
        if SHORTCODE.search(prompt.answer):
            assert re.search(r"\d", answer), f"{path}: {prompt.question!r} shows no number: {answer}"
