"""Markdown extension: the guard. A page that still holds a `<!-- timing…` comment once rendered,
or whose rendering found problems, fails the build, under MkDocs and Zensical, at any verbosity.

A leftover comment is a shortcode nothing rendered: fieldguide.rendering.render missing from mkdocs.yml, a
kind the registry does not know, a misspelled prefix (`timings-value:`) or a missing colon;
without this they would pass silently as HTML comments. fieldguide.rendering.render registers this same
guard, so each page is checked once whichever of the two extensions mkdocs.yml lists.

The guard raises (fieldguide.rendering.context.PageProblems) rather than logging a warning: `mkdocs build
--strict -q` drops warnings before strict mode counts them, and Zensical counts none from an
extension. `make serve` sets FIELDGUIDE_PREVIEW=1, under which the problems are logged instead,
so a page being written can still be looked at.
"""

from __future__ import annotations

import logging
import os

from markdown import Extension
from markdown.postprocessors import Postprocessor

from fieldguide.rendering import shortcodes
from fieldguide.rendering.context import PageProblems, context, nested

log = logging.getLogger("mkdocs.extensions.fieldguide")
PREVIEW = "FIELDGUIDE_PREVIEW"  # set by `make serve` only: problems are shown, not raised
NAME = "fieldguide-guard"


class Guard(Postprocessor):
    """Last, once raw HTML is back in place: a `<!-- timing…` comment still in the page is a
    shortcode nothing rendered; then every problem of the page is raised (or, in the preview,
    logged)."""

    def run(self, text: str) -> str:
        if nested(self.md):  # a docstring, a tab's content: the page's own conversion decides
            return text
        problems = list(getattr(self.md, "fieldguide_problems", None) or [])
        self.md.fieldguide_problems = None
        problems += [f"a shortcode left unrendered (is `fieldguide.rendering.render` under "
                     f"markdown_extensions in mkdocs.yml? is it `timing-KIND:` with KIND one of "
                     f"{', '.join(shortcodes.KINDS)}?): {leftover}"
                     for leftover in shortcodes.unrendered(text)]
        if not problems:
            return text
        ctx = context(self.md)
        page = ctx.src_uri if ctx else "a page"
        if os.environ.get(PREVIEW):
            for problem in problems:
                log.warning("%s: %s", page, problem)
            return text
        raise PageProblems(page, problems)


def register(md) -> None:
    md.postprocessors.register(Guard(md), NAME, 0)  # the same name: registered once per page


class UnrenderedShortcodes(Extension):
    def extendMarkdown(self, md) -> None:  # noqa: N802 (Markdown's API)
        register(md)


def makeExtension(**kwargs):  # noqa: N802 (Markdown's API)
    return UnrenderedShortcodes(**kwargs)
