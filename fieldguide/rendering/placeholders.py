"""Scaffold placeholders ("Replace with …") left on a page: the strict build refuses them.

`make new-page` (fieldguide/authoring/scaffold.py) writes every part of a page that its author must write
as a sentence starting with PHRASE: the prose, the "What you will learn" box, the summary, the
references, the cheat-sheet rule, and the docstring of the example code the page shows. This
module finds any left, so a page cannot be published half-written:

- `found(markdown)`: every placeholder line of a page (with the code it includes) as
  `Placeholder(line, text)`; inline code (`` `Replace with` ``) is quoting, not a placeholder.
- As a Markdown extension (`fieldguide.rendering.placeholders` in mkdocs.yml's `markdown_extensions`), it
  adds one problem per placeholder, naming the page by its H1, to the page's problems, which the
  guard (fieldguide/rendering/unrendered.py) raises: every build fails, in any verbosity, with either engine.
  It runs after pymdownx.snippets, so the code a page includes is checked too. Draft pages
  (`draft_docs`) are not built, so a draft may keep its placeholders until it is published.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from markdown import Extension
from markdown.preprocessors import Preprocessor

from fieldguide.rendering import unrendered

PHRASE = "Replace with"   # how every scaffold placeholder starts (fieldguide/authoring/scaffold.py)
_PLACEHOLDER = re.compile(rf"\b{PHRASE}\b", re.IGNORECASE)
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)")
_H1 = re.compile(r"^#\s+(.+?)\s*#*\s*$")


class Placeholder(NamedTuple):
    line: int    # 1-based, in the page as the build sees it (its includes expanded)
    text: str    # the line, stripped


def found(markdown: str) -> list[Placeholder]:
    """Every line of `markdown` that holds a scaffold placeholder outside inline code."""
    return [Placeholder(number, line.strip())
            for number, line in enumerate(markdown.splitlines(), start=1)
            if _PLACEHOLDER.search(_CODE_SPAN.sub("", line))]


def page_title(lines: list[str]) -> str:
    return next((m[1] for line in lines if (m := _H1.match(line))), "a page without an H1")


class _Check(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        problems = [f"page {page_title(lines)!r}: scaffold placeholder left (line {p.line} of the "
                    f"page with its code included): {p.text[:120]!r}. Write the page's own text in "
                    "its place (docs/contributing.md, \"Adding a page\"), or list the page under "
                    "draft_docs in mkdocs.yml until it is ready"
                    for p in found("\n".join(lines))]
        if problems:  # raised with the page's other problems by the guard, in any verbosity
            self.md.fieldguide_problems = [*(getattr(self.md, "fieldguide_problems", None) or []),
                                           *problems]
        return lines


class PlaceholdersExtension(Extension):
    def extendMarkdown(self, md) -> None:  # noqa: N802 (Markdown's API)
        # After pymdownx.snippets (32): the included code is on the page by then.
        md.preprocessors.register(_Check(md), "fieldguide-placeholders", 31)
        unrendered.register(md)  # the guard raises them (fieldguide/rendering/unrendered.py)


def makeExtension(**kwargs):  # noqa: N802 (Markdown's API)
    return PlaceholdersExtension(**kwargs)
