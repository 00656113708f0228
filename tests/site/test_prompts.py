""""Predict, then run" prompts (fieldguide/content/prompts.py): every teaching page asks the reader at
least two questions that the page then answers with its own measurement, revealed on click.

A teaching page is a page of the nav that fieldguide.rendering.glossary.teaches (the nav minus its
NOT_TEACHING pages and the chapters' exercise pages): one definition for the glossary and here.
The sources are read for the count and for typed numbers; the built site for what the reader
gets: a collapsed <details> with a question and a non-empty answer, its numbers rendered.
"""

from __future__ import annotations

import html
import json
import posixpath
import re

import pytest

pytest.importorskip("markdown")  # fieldguide.rendering.glossary (which pages teach) is a Markdown extension

from fieldguide import ROOT
from fieldguide.content import prompts
from fieldguide.notebooks.generate import is_workbook, notebook_path
from fieldguide.rendering import glossary
from fieldguide.rendering.shortcodes import SHORTCODE
from tests.site.test_reader_kit import NAV, NUMBER, text, url_of

MOST_PROMPTS = 3     # two or three a page: practice, not a quiz between every paragraph
LEAST_PROMPTS = 2
TEACHING = [path for _, _, path in NAV if glossary.teaches(path)]
# Start here teaches no topic of its own (it routes a symptom to the page with its fix), but it
# asks the reader to predict what a trace shows before reading one: the same rules apply.
PROMPTED = [*TEACHING, "start-here/slow-training.md"]
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


@pytest.mark.parametrize("path", PROMPTED)
def test_every_teaching_page_asks_two_or_three_predictions(path):
    found = prompts.prompts(text(path))
    assert LEAST_PROMPTS <= len(found) <= MOST_PROMPTS, (
        f"{path}: {len(found)} '??? {prompts.KIND}' prompts ({LEAST_PROMPTS} to {MOST_PROMPTS})")
    # every predict block is a collapsed one the parser reads (`!!!` would show the answer)
    assert len(ANY_PREDICT.findall(text(path))) == len(found), (
        f'{path}: write each prompt as ??? {prompts.KIND} "Question?" with its answer indented')


@pytest.mark.parametrize("path", PROMPTED)
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
    from fieldguide.notebooks import generate as notebooks
    lines = ['??? predict "How fast?"', "    <!-- timing-value: x.y median -->", "", "After."]
    shown = notebooks._admonitions(lines, "*On the page.*")
    assert shown[:3] == ["> **Predict:** How fast?", ">", "> *On the page.*"]
    assert "After." in shown and not any("timing" in line for line in shown)


def test_in_a_notebook_a_prompt_moves_down_to_the_cell_that_prints_its_result():
    """Predict, then run: a prompt above a cell that only defines a function moves down to
    the first later cell that runs and prints (here the page's whole script)."""
    from fieldguide.notebooks import generate as notebooks
    q = "> **Predict:** Q?\n>\n> *A.*"
    cells = [("markdown", "# Title"), ("code", "print('gpu check')"), ("markdown", f"Intro.\n\n{q}"),
             ("code", "def work():\n    return 1"), ("markdown", "The result."),
             ("code", "def main():\n    print(work())"), ("markdown", "## The whole script"),
             ("code", "main()")]
    assert notebooks._predict_first(cells) == [
        ("markdown", "# Title"), ("code", "print('gpu check')"), ("markdown", "Intro."),
        ("code", "def work():\n    return 1"), ("markdown", "The result."),
        ("code", "def main():\n    print(work())"), ("markdown", "## The whole script"),
        ("markdown", q), ("code", "main()")]
    kept = [("markdown", "# Title"), ("code", "gpu check"), ("markdown", q)]
    assert notebooks._predict_first(kept) == kept   # no cell that prints after it: it stays


def test_a_prompt_above_the_cell_that_prints_its_answer_says_run_it_to_check():
    """Where the cell below prints the answer, the notebook says to run it to check; a prompt
    in NOT_PRINTED keeps pointing at the page, whatever the cell below prints."""
    from fieldguide.notebooks.generate import CHECK, ON_THE_PAGE, PREDICT, _predict_first
    page, start = next(iter(prompts.NOT_PRINTED))

    def cells(question):
        return [("markdown", "# T"), ("code", "check()"),
                ("markdown", f"{PREDICT} {question}\n>\n> *{ON_THE_PAGE} [T](u).*"),
                ("code", "print(1)")]
    assert _predict_first(cells("Q?"), {}, page)[2] == (
        "markdown", f"{PREDICT} Q?\n>\n> *{CHECK} [T](u).*")
    listed = cells(f"{start}?")
    assert _predict_first(listed, {}, page) == listed


def test_the_pointer_to_the_measured_numbers_is_said_once_a_cell():
    from fieldguide.notebooks.generate import _once
    assert _once("*N.*\n\nThree regimes:\n\n*N.*", "*N.*") == "Three regimes:\n\n*N.*"
    assert _once("A.\n\n*N.*", "*N.*") == "A.\n\n*N.*"


def test_a_cell_shows_a_result_when_it_runs_something_that_prints():
    from fieldguide.notebooks.generate import printers, shows_a_result
    cells = ["def f():\n    print(1)", "def g():\n    f()", "def h():\n    return 2"]
    printing = printers(cells)
    assert printing == {"f", "g"}
    assert not any(shows_a_result(c, printing) for c in cells)   # definitions only
    assert shows_a_result("g()", printing) and shows_a_result("for i in range(2):\n    print(i)",
                                                               printing)
    assert shows_a_result("x = 1\nx + 1", printing)   # Jupyter displays a last expression
    assert not shows_a_result("h()\nX = 3", printing)


@pytest.mark.parametrize("path", PROMPTED)
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


# --- Predict, then run: the answer stays hidden until the code that produces it ----------------

# Pages whose prompts another branch is rewriting to the rule below (issue 45): each is a strict
# expected failure here, so the test says when a merge made one pass. Remove its entry then.
BEING_REVISED: dict[str, str] = {}
FENCE = re.compile(r"^[ \t]*(```|~~~)", re.M)
# A question a reader can answer without hunting on the page: no "above", "this table", "And ...".
NOT_SELF_CONTAINED = re.compile(
    r"^And\b|\b(above|below|earlier|shown|this|these)\b|\bthe (table|chart|figure|page)\b", re.I)


# The fields that are a measurement (a time, a rate, a ratio): one of them quoted before the code
# gives a prompt about another away (a ratio of medians, a bandwidth from a time).
MEASURED_FIELD = re.compile(r"\A(median|mean|min|max|q1|q3|iqr|stddev|bandwidth_gbs|tflops|per_op"
                            r"|speedup|.*_(ms|us|s|gbs|gib|mib|pct|per_s|ratio|share|error))\Z")


def _names(markdown: str) -> set[tuple[str, str | None]]:
    """What the shortcodes in `markdown` quote: (benchmark or glob, field), the field None for
    a table or a chart (every field) and "median" for a ratio that names none."""
    from fieldguide.rendering.shortcodes import find
    found = set()
    for _, code in find(markdown):
        if code.kind == "value" and len(code.args) >= 2:
            found.add((code.args[0], code.args[1]))
            continue
        operands = code.args[:2] if code.kind == "ratio" else code.args
        # a table shows its columns only (a chart, every field)
        shows = (code.options["columns"].split(",") if code.kind == "table"
                 and "columns" in code.options else [None])
        for arg in operands + [v for k, v in code.options.items() if k == "points"]:
            for part in arg.split(","):
                name, _, field = part.partition(":")
                if "." in name and not re.fullmatch(r"[.\d%]+[a-z]?", name):  # not a FORMAT
                    if field or code.kind == "ratio":
                        found.add((name, field or "median"))
                    else:
                        found.update((name, column) for column in shows)
    return found


def _overlap(a: tuple[str, str | None], b: tuple[str, str | None]) -> bool:
    """Whether two quotes can show the same number: their benchmark names or globs (`*` the only
    wildcard) can name one benchmark, and their fields are one, or both measurements."""
    def pattern(glob: str) -> re.Pattern:
        return re.compile(".*".join(map(re.escape, glob.split("*"))) + r"\Z")
    (name_a, field_a), (name_b, field_b) = a, b
    if not (pattern(name_a).match(name_b.replace("*", ""))
            or pattern(name_b).match(name_a.replace("*", ""))):
        return False
    return (None in (field_a, field_b) or field_a == field_b
            or bool(MEASURED_FIELD.match(field_a) and MEASURED_FIELD.match(field_b)))


def answered_before_its_code(markdown: str) -> list[str]:
    """Each prompt of a page whose answer the reader can see before the code that produces it,
    or that no code block follows at all. Its answer is in view when every number one of its
    shortcodes quotes (a value; both sides of a ratio) is quoted anywhere in the page from its
    start to the first code block after the prompt, by a value, a ratio, a table or a chart of
    the same benchmark, the prompts' own collapsed answers left out."""
    from fieldguide.rendering.shortcodes import find
    problems = []
    blocks = list(prompts.BLOCK.finditer(markdown))
    hidden = [m.span("body") for m in blocks]
    for match in blocks:
        question = match["question"]
        answer = "\n".join(line[4:] for line in match["body"].splitlines())
        code = FENCE.search(markdown, match.end())
        if code is None:
            problems.append(f"{question!r}: no code block after it (predict, then run)")
            continue
        before = markdown[:match.start()].rstrip()
        after = markdown[match.end():].lstrip()
        if re.search(r"^[ \t]*(```|~~~)$", before.rsplit("\n", 1)[-1]) and not FENCE.match(after):
            problems.append(f"{question!r}: comes after its code (a code block right above it, "
                            "prose below): put it above the code that answers it")
            continue
        shown, last = [], 0
        for start, end in hidden:   # the page up to that code block, less the collapsed answers
            if start >= code.start():
                break
            shown.append(markdown[last:start])
            last = end
        shown.append(markdown[last:code.start()])
        quoted = _names("".join(shown))
        for _, shortcode in find(answer):   # an explanation has none: nothing to give away
            wanted = _names(shortcode.text)
            if wanted and all(any(_overlap(q, w) for q in quoted) for w in wanted):
                problems.append(f"{question!r}: {shortcode.text} is in view before the code "
                                "that answers it")
                break
    return problems


def _strict_unless_revised(paths):
    return [pytest.param(p, marks=pytest.mark.xfail(reason=BEING_REVISED[p], strict=True))
            if p in BEING_REVISED else p for p in paths]


@pytest.mark.parametrize("path", _strict_unless_revised(PROMPTED))
def test_each_prompt_is_self_contained_and_sits_above_the_code_that_answers_it(path):
    """Retrieval practice works only while the answer is hidden: a prompt comes before the code
    that produces its number, and no shortcode of that number (a value, a ratio, a table or a
    chart of the same benchmark) is in plain view before that code. And the question states
    what it asks about: no "above", "this table" or "And its speed?"."""
    problems = answered_before_its_code(text(path))
    for prompt in prompts.prompts(text(path)):
        if loose := NOT_SELF_CONTAINED.search(prompt.question):
            problems.append(f"{prompt.question!r} leans on the page ({loose[0]!r})")
    assert not problems, f"{path}:\n" + "\n".join(problems)


def test_the_exceptions_are_teaching_pages():
    assert set(BEING_REVISED) <= set(TEACHING)


def test_an_answer_before_its_code_is_found():
    v = "<!-- timing-value: a.b[x] median -->"
    hidden = f'Intro.\n\n??? predict "How fast?"\n    {v}\n\n```python\nrun()\n```\n\n{v}\n'
    assert answered_before_its_code(hidden) == []
    shown = f'??? predict "How fast?"\n    {v}\n\n<!-- timing-table: a.* -->\n\n```python\nx\n```\n'
    assert "in view before" in answered_before_its_code(shown)[0]
    earlier = f'{v}\n\n??? predict "How fast?"\n    {v}\n\n```python\nx\n```\n'
    assert answered_before_its_code(earlier)
    assert "no code block" in answered_before_its_code(f'??? predict "Q?"\n    {v}\n')[0]
    after = '```\nx\n```\n\n??? predict "Q?"\n    Because.\n\nBecause, said.\n\n```\ny\n```\n'
    assert "comes after its code" in answered_before_its_code(after)[0]
    between = after.replace("Because, said.", "```\nz\n```")   # predict, then run the next
    assert answered_before_its_code(between) == []
    other = '??? predict "Q?"\n    <!-- timing-value: a.c median -->\n\n' + v + '\n\n```\nx\n```\n'
    assert answered_before_its_code(other) == []
    ratio = "<!-- timing-ratio: a.b[x] a.b[y] -->"
    half = f'{v}\n\n??? predict "Q?"\n    {ratio}\n\n```\nx\n```\n'   # one side alone: hidden
    assert answered_before_its_code(half) == []
    both = f'<!-- timing-table: a.b[*] -->\n\n??? predict "Q?"\n    {ratio}\n\n```\nx\n```\n'
    assert answered_before_its_code(both)
    columns = '<!-- timing-table: a.b[*] columns=Linear,cpu_count -->\n\n??? predict "Q?"\n    ' + v
    assert answered_before_its_code(columns + '\n\n```\nx\n```\n') == []   # not its column
    assert answered_before_its_code(columns.replace("Linear", "iqr") + '\n\n```\nx\n```\n')
    described = '<!-- timing-value: a.b[x] cpu_count -->\n\n??? predict "Q?"\n    ' + v + '\n\n```\nx\n```\n'
    assert answered_before_its_code(described) == []   # a fact about the run, not the answer


def test_in_a_notebook_a_prompt_above_the_code_that_answers_it_stays_there():
    from fieldguide.notebooks import generate as notebooks
    cells = [("markdown", "# Title"), ("code", "gpu check"), ("code", "def f(): ..."),
             ("markdown", "> **Predict:** Q?\n>\n> *A.*"), ("code", "print(f())")]
    assert notebooks._predict_first(cells) == cells


NOTEBOOK_PAGES = [path for path in PROMPTED if prompts.prompts(text(path))
                  and (ROOT / notebook_path(path)).exists()]
# Prompts whose answer no cell of the notebook prints, each with why: the list is
# fieldguide.content.prompts.NOT_PRINTED, which the notebook reads too.
NOT_PRINTED = prompts.NOT_PRINTED
# Prompts asked together above one code cell: where one statement (a loop, an `if`, a `try`)
# prints all their answers, so no part can begin between them (prompts all in NOT_PRINTED may
# wait together without an entry here). Keyed by the first of them; strict: an entry no stack
# needs fails.
STACKED = {
    ("foundations/cpu-vs-gpu.md", "One operation on one number"):
        "one print for each device gives the tiny operation's time and the triad's",
    ("foundations/when-to-use-a-gpu.md", "sin(x) * 2 + 1"):
        "one `if device.type == \"cuda\"` runs both sweeps and prints them",
    ("memory/memory-over-time.md", "When is allocated memory highest"):
        "one loop prints each phase's peak and what stays at its end",
    ("memory/where-gpu-memory-goes.md", "Before a process holds"):
        "one loop prints the fresh process's reports: its context, and empty_cache()",
    ("precision/fp8.md", "An fp8 product against"):
        "one `if reason: ... else:` prints the error and the speed, or why fp8 is skipped",
    ("start-here/slow-training.md", "On a GPU, which branch"):
        "one loop prints each branch's share of the step, which answers both",
}


def _listed(listing: dict, path: str, question: str) -> tuple | None:
    return next((key for key in listing if key[0] == path and question.startswith(key[1])), None)


def notebook_prompt_problems(path: str, used: set | None = None) -> list[str]:
    """What is wrong with where `path`'s notebook asks its prompts (empty: nothing): each
    prompt must sit alone right above a code cell that runs and prints (its part of the code),
    and the notebook must ask all the page's prompts. A prompt in `NOT_PRINTED` (its answer
    printed by no cell) may sit above any code cell, and several such prompts above one cell;
    `STACKED` lists the other stacks. The exceptions met are added to `used`."""
    from fieldguide.notebooks.generate import PREDICT, printers, shows_a_result
    cells = json.loads((ROOT / notebook_path(path)).read_text(encoding="utf-8"))["cells"]
    sources = [("".join(c["source"]), c["cell_type"]) for c in cells]
    printing = printers([s for s, kind in sources if kind == "code"])
    asked, problems, waiting = 0, [], []
    used = set() if used is None else used
    for n, (source, kind) in enumerate(sources):
        if kind == "code":
            if len(waiting) > 1:
                key = _listed(STACKED, path, waiting[0])
                if key:
                    used.add(key)
                elif all(_listed(NOT_PRINTED, path, q) for q in waiting):
                    pass   # the page asks them together, and no cell answers them
                else:
                    problems.append(f"cell {n}: {len(waiting)} prompts above it: "
                                    + "; ".join(repr(q[:50]) for q in waiting))
            waiting = []
            continue
        found = [p for p in source.split("\n\n") if p.startswith(PREDICT)]
        if not found:
            continue
        asked += len(found)
        waiting += [p.split("\n", 1)[0].removeprefix(PREDICT).strip() for p in found]
        following = sources[n + 1] if n + 1 < len(sources) else ("", "end")
        if not source.rstrip().endswith(found[-1].rstrip()):
            problems.append(f"cell {n}: prose after the prompt, before the code")
        prints = following[1] == "code" and shows_a_result(following[0], printing)
        for question in waiting[-len(found):]:
            key = _listed(NOT_PRINTED, path, question)
            if key:
                used.add(key)
            elif not prints:
                problems.append(f"cell {n}: {question[:70]!r} is above a cell that prints "
                                "nothing")
    if len(prompts.prompts(text(path))) != asked:
        problems.append(f"the notebook asks {asked} of {len(prompts.prompts(text(path)))} prompts")
    return problems


@pytest.mark.parametrize("path", NOTEBOOK_PAGES)
def test_in_every_notebook_each_prompt_sits_alone_above_the_part_that_prints_its_result(path):
    """In the committed notebook (fieldguide/notebooks/generate.py writes it from the page), every
    prompt is right above a code cell that runs and prints, not above one that only defines a
    function, so the reader predicts, then runs; no two prompts wait above one cell (the long
    cell that prints several answers is cut into parts); and the notebook asks all the page's
    prompts. The exceptions are listed, each with its reason, and each must name a prompt the
    notebook asks (NOT_PRINTED) or a stack it has (STACKED)."""
    used: set = set()
    problems = notebook_prompt_problems(path, used)
    assert not problems, f"{notebook_path(path)}:\n" + "\n".join(problems)
    for listing, name in ((NOT_PRINTED, "NOT_PRINTED"), (STACKED, "STACKED")):
        stale = [key for key in listing if key[0] == path and key not in used]
        assert not stale, f"{path}: {name} lists {stale}, which the notebook no longer needs"


@pytest.mark.parametrize("path", sorted(p.relative_to(ROOT).as_posix()
                                         for p in (ROOT / "notebooks").rglob("*.ipynb")))
def test_no_recorded_output_below_a_prompt_gives_its_answer_away(path):
    """The code cell right below a prompt carries no recorded output: the learner predicts,
    then runs it (fieldguide.notebooks.generate.unanswered). Its recorded output, shown before
    it runs, would answer the question before it is asked."""
    from fieldguide.notebooks.generate import PREDICT
    cells = json.loads((ROOT / path).read_text(encoding="utf-8"))["cells"]
    pairs = zip(cells, cells[1:], strict=False)
    shown = [n + 1 for n, (above, cell) in enumerate(pairs)
             if above["cell_type"] == "markdown" and cell["cell_type"] == "code"
             and any(p.startswith(PREDICT) for p in "".join(above["source"]).split("\n\n"))
             and cell.get("outputs")]
    assert not shown, f"{path}: the code cells {shown}, right below a prompt, show outputs"


def test_the_exceptions_name_notebook_pages():
    """Each entry names a prompt of a page with a notebook: NOT_PRINTED may name a page that
    is not a teaching page (its notebook still asks the prompt, and reads the list)."""
    for key in [*NOT_PRINTED, *STACKED]:
        assert key in NOT_PRINTED or key[0] in NOTEBOOK_PAGES, f"{key}: no notebook with prompts"
        assert (ROOT / notebook_path(key[0])).exists(), f"{key}: no notebook"
        assert any(p.question.startswith(key[1]) for p in prompts.prompts(text(key[0]))), key


def test_a_prompt_goes_above_the_part_of_the_script_it_names():
    """A page's whole script prints three answers; the prompts name where their parts begin,
    and the notebook cuts the script there, at top-level statements (a comment right above
    one goes with it), each prompt above its part. The parts, joined with the blank lines
    between them, are the script, whose recorded output stays keyed by its code."""
    from fieldguide.notebooks import generate as notebooks
    from fieldguide.notebooks import outputs

    def ask(question):
        return f"> **Predict:** {question}\n>\n> *A.*"
    script = ('print("a")\nx = 1\n\n# the loop\nfor i in range(2):\n    print(i)\n'
              'if x:\n    y = 2\n    print(y)')
    cells = [("markdown", "# Title"), ("code", "gpu check"),
             ("markdown", f"Intro.\n\n{ask('A?')}\n\nMore prose."), ("code", "def f(): ..."),
             ("markdown", ask("B?")), ("markdown", f"{ask('C?')}\n\n## The whole script"),
             ("code", script)]
    parts = {"B?": "print(i)", "C?": "y = 2"}
    whole = outputs.code_key(script)
    assert notebooks._predict_first(cells, parts, "demo.md") == [
        ("markdown", "# Title"), ("code", "gpu check"), ("markdown", "Intro.\n\nMore prose."),
        ("code", "def f(): ..."), ("markdown", "## The whole script"),
        ("markdown", ask("A?")), ("code", 'print("a")\nx = 1', {"part_of": whole}),
        ("markdown", ask("B?")),
        ("code", "# the loop\nfor i in range(2):\n    print(i)",
         {"part_of": whole, "blank_lines_before": 1}),
        ("markdown", ask("C?")),
        ("code", "if x:\n    y = 2\n    print(y)", {"part_of": whole, "blank_lines_before": 0})]
    cut = [c for c in notebooks._predict_first(cells, parts, "demo.md") if len(c) == 3]
    assert outputs.blocks([{"source": c[1], "metadata": {"fieldguide": c[2]}} for c in cut]) \
        == [script]
    assert notebooks._predict_first(cells, {"B?": 'print("a")'}, "demo.md")[5:7] == [
        ("markdown", "\n\n".join(ask(f"{q}?") for q in "ABC")), ("code", script)]   # its first line: no cut


@pytest.mark.parametrize("line, says", [
    ("print(z)", "no line"), ("print(", "3 lines"), ("", "no line")])
def test_a_part_that_is_not_there_or_not_one_fails_naming_the_page_and_the_prompt(line, says):
    from fieldguide.notebooks import generate as notebooks
    cells = [("markdown", "# T"), ("code", "check"), ("markdown", "> **Predict:** Q?\n>\n> *A.*"),
             ("code", 'print("a")\nprint("b")\nprint("c")')]
    with pytest.raises(notebooks.PartError, match=rf"docs/demo\.md: the prompt 'Q\?' .*{says}"):
        notebooks._predict_first(cells, {"Q?": line}, "demo.md")
    with pytest.raises(notebooks.PartError, match="does not ask it"):
        notebooks._predict_first(cells, {"Other?": "print"}, "demo.md")


def test_the_part_a_prompt_names_is_no_part_of_its_answer():
    page = ('??? predict "How fast?"\n    <!-- timing-value: a.b median -->\n\n'
            '    <!-- notebook-part: per_50 = seconds_per_step(every=50) -->\n\nAfter.\n')
    (found,) = prompts.prompts(page)
    assert found == prompts.Prompt("How fast?", "<!-- timing-value: a.b median -->",
                                   "per_50 = seconds_per_step(every=50)")
    assert not answered_before_its_code(page + "```\nx\n```\n")


# --- Check yourself: recall at the end of each chapter ----------------------------------------

EXERCISE_PAGES = [path for _, _, path in NAV if is_workbook(path)]
# Exercise pages of chapters another branch is editing: the lead writes their list after the
# merge and removes the entry (a strict expected failure says when one passes).
NO_CHECK_YET: dict[str, str] = {}
FEWEST_CHECKS, MOST_CHECKS = 6, 10
CHECK = re.compile(r'^\?\?\? question "(?P<n>\d+)\. (?P<question>[^"]+)"[ \t]*\n'
                   r'(?P<body>(?:(?:[ \t]*|    .*)\n)*)', re.M)


def check_yourself(markdown: str) -> list[tuple[int, str, str]]:
    """The (number, question, answer) of a page's "## Check yourself" section."""
    match = re.search(r"^## Check yourself\n(?P<section>.*?)(?=^## )", markdown, re.M | re.S)
    if not match:
        return []
    return [(int(m["n"]), m["question"], " ".join(m["body"].split()))
            for m in CHECK.finditer(match["section"])]


@pytest.mark.parametrize("path", [
    pytest.param(p, marks=pytest.mark.xfail(reason=NO_CHECK_YET[p], strict=True))
    if p in NO_CHECK_YET else p for p in EXERCISE_PAGES])
def test_each_exercise_page_ends_with_a_check_yourself_list(path):
    """fast.ai's questionnaire: six to ten questions the reader answers from memory, each
    collapsed with an answer that links the section teaching it (a page of the nav, an anchor),
    in a "## Check yourself" section right before the summary."""
    markdown = text(path)
    checks = check_yourself(markdown)
    assert FEWEST_CHECKS <= len(checks) <= MOST_CHECKS, (
        f"{path}: {len(checks)} 'Check yourself' questions ({FEWEST_CHECKS} to {MOST_CHECKS})")
    assert [n for n, _, _ in checks] == list(range(1, len(checks) + 1)), f"{path}: numbering"
    headings = re.findall(r"^## (.+)$", markdown, re.M)
    assert headings[headings.index("Check yourself") + 1] in ("Summary",), (
        f"{path}: 'Check yourself' comes right before '## Summary'")
    here = posixpath.dirname(path)
    for n, question, answer in checks:
        assert question.endswith("?") or question.endswith("."), f"{path}: {n}. {question!r}"
        links = [posixpath.normpath(posixpath.join(here, target))
                 for target in re.findall(r"\]\(([^)\s]+)\)", answer)]
        taught = [link for link in links if "#" in link and link.split("#")[0] in TEACHING]
        assert taught, f"{path}: answer {n} links no section of a teaching page: {links}"
