"""Markdown extension: `<!-- reading-time: PATH -->` becomes how long PATH takes to read.

(`<!-- reading-time-rate -->` becomes the rate the times are counted at.)

PATH is a page under docs/ (`execution/profiling.md`) or a chapter's folder (`memory/`: its
published pages, drafts left out). The time is counted from the words the reader meets: the
page's Markdown with the code it includes from snippets/ (a code block is read too), less HTML
comments, at WORDS_PER_MINUTE, rounded up to whole minutes. It is computed at every build, so it
follows the pages as they change; nobody types it. A PATH that names no page is a page problem
that fails every build (fieldguide/rendering/unrendered.py raises it).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from markdown import Extension
from markdown.preprocessors import Preprocessor

from fieldguide import ROOT
from fieldguide.content.pages import INCLUDE, included_code, is_draft
from fieldguide.rendering import unrendered

WORDS_PER_MINUTE = 200   # a careful read of technical prose and code, not skimming
MARKER = re.compile(r"<!--\s*reading-time:\s*(?P<path>[^\s>]+)\s*-->")
RATE = "<!-- reading-time-rate -->"  # WORDS_PER_MINUTE, for the page that explains the times
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)")  # a marker in code is quoted, not shown
_FENCE = re.compile(r"^\s*(```|~~~)")


def words(page: Path, root: Path = ROOT) -> int:
    """The words a reader meets on `page`: its text, less comments, with its included code."""
    text = page.read_text(encoding="utf-8")
    text = INCLUDE.sub(lambda m: included_code(root, m["path"], m["section"]), text)
    return len(_COMMENT.sub(" ", text).split())


def pages_of(path: str, root: Path = ROOT) -> list[Path]:
    """The published pages PATH names: one page, or every page of a chapter's folder."""
    target = root / "docs" / path
    if path.endswith(".md"):
        found = [target] if target.is_file() else []
    else:
        found = sorted(target.rglob("*.md")) if target.is_dir() else []
    return [page for page in found if not is_draft(page, root)]


def minutes(path: str, root: Path = ROOT) -> int:
    """Minutes to read PATH; a ValueError where PATH names no published page."""
    found = pages_of(path, root)
    if not found:
        raise ValueError(f"reading-time: {path!r} names no published page under docs/ "
                         "(a page such as memory/out-of-memory-errors.md, or a chapter folder "
                         "such as memory/)")
    return max(1, math.ceil(sum(words(page, root) for page in found) / WORDS_PER_MINUTE))


def shown(path: str, root: Path = ROOT) -> str:
    return f"{minutes(path, root)} min read"


class _ReadingTime(Preprocessor):
    def __init__(self, md, root: Path):
        super().__init__(md)
        self.root = root

    def run(self, lines: list[str]) -> list[str]:
        problems = []

        def replace(match: re.Match) -> str:
            try:
                return shown(match["path"], self.root)
            except ValueError as error:
                problems.append(str(error))
                return "[reading time unavailable]"

        def outside_code(line: str) -> str:
            parts, last = [], 0
            for span in _CODE_SPAN.finditer(line):
                parts += [MARKER.sub(replace, line[last:span.start()]), span[0]]
                last = span.end()
            parts.append(MARKER.sub(replace, line[last:]))
            return "".join(parts).replace(RATE, str(WORDS_PER_MINUTE))

        out, fenced = [], False
        for line in lines:
            fenced = fenced != bool(_FENCE.match(line))
            out.append(outside_code(line) if "reading-time" in line and not fenced else line)
        if problems:  # raised with the page's other problems by the guard, in any verbosity
            self.md.fieldguide_problems = [*(getattr(self.md, "fieldguide_problems", None) or []),
                                           *problems]
        return out


class ReadingTimeExtension(Extension):
    def extendMarkdown(self, md) -> None:  # noqa: N802 (Markdown's API)
        # Before pymdownx.snippets (32), which would drop the comment's neighbours' includes
        # into the text; after fieldguide.rendering.render (34), which sets the page's problems first.
        md.preprocessors.register(_ReadingTime(md, ROOT), "fieldguide-reading-time", 33)
        unrendered.register(md)  # the guard raises the page's problems


def makeExtension(**kwargs):  # noqa: N802 (Markdown's API)
    return ReadingTimeExtension(**kwargs)
