""""Predict, then run" prompts: a question the page then answers with its own measurement.

A prompt is one collapsible block of one admonition type, `predict` (styled in
docs/assets/extra.css; pymdownx.details makes it a native <details>, so the question is a
<summary> a keyboard reaches and a screen reader names):

    ??? predict "How much faster is the pinned copy of 64 MiB than the pageable one?"
        <!-- timing-ratio: pinned_memory.copy[...] pinned_memory.copy[...] .1f -->× on this page's
        GPU: ...

The answer is the page's own number, written with the timing shortcodes like every number on the
site (never typed), or, for a claim without a number, the page's explanation in a sentence or
two. It sits above the code block that produces the result, so the reader predicts first. In
a page's notebook a prompt keeps its question, moved down above the first code cell that runs
and prints, and points at the page for the measured answer (fieldguide/notebooks/generate.py).

Where the page's code only defines and one long cell (often "The whole script") prints the
answers of several prompts, a prompt names the line of that code where the part that prints its
answer begins, in an HTML comment of its body, which the page does not show:

    ??? predict "Reading the loss every step instead of every 50: how much slower is the loop?"
        <!-- timing-ratio: ... -->× the time ...

        <!-- notebook-part: per_step = seconds_per_step(every=1) -->

The notebook then cuts that cell before the top-level statement holding the line, and asks the
question right above the part (fieldguide/notebooks/generate.py, `split_for_prompts`). Standard
library only: the notebooks are generated without MkDocs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KIND = "predict"   # the admonition type: `??? predict "Question?"`, one registry for prompts
# A prompt opens collapsed (`???`, not `???+`): the answer shows only once the reader asks.
BLOCK = re.compile(rf'^\?\?\? {KIND} "(?P<question>[^"]*)"[ \t]*\n'
                   r'(?P<body>(?:(?:[ \t]*|    .*)\n)*)', re.M)
# `<!-- notebook-part: LINE -->` in a prompt's body: LINE starts the one line of the notebook's
# code, after the prompt, that begins (or lies in) the part printing the prompt's answer.
PART = re.compile(r"^[ \t]*<!--\s*notebook-part:[ \t]*(?P<line>.*?)[ \t]*-->[ \t]*$", re.M)


@dataclass(frozen=True)
class Prompt:
    question: str
    answer: str   # the block's body, dedented, as Markdown (shortcodes unrendered)
    part: str | None = None   # where its part of the notebook's code begins (`PART`), if named


def prompts(markdown: str) -> list[Prompt]:
    """Every prompt on a page, in page order."""
    found = []
    for match in BLOCK.finditer(markdown if markdown.endswith("\n") else markdown + "\n"):
        body = "\n".join(line[4:] for line in match["body"].splitlines())
        parts = [m["line"] for m in PART.finditer(body)]
        if len(parts) > 1:
            raise ValueError(f"prompt {match['question']!r} names {len(parts)} notebook parts: "
                             "one at most")
        answer = re.sub(r"\n{3,}", "\n\n", PART.sub("", body)).strip()
        found.append(Prompt(match["question"].strip(), answer, parts[0] if parts else None))
    return found
