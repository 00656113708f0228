"""Markdown extension: a timing shortcode left in a page's HTML is a warning (so the strict build fails).

This is the guard that does not depend on the hook: with hooks/timings.py missing from
mkdocs.yml, nothing renders the shortcodes, and without this they would pass silently as HTML
comments. While the hook runs, it reports such leftovers itself, naming the page.
"""

import logging

from markdown import Extension
from markdown.postprocessors import Postprocessor

from fieldguide import shortcodes

log = logging.getLogger("mkdocs.extensions.fieldguide.unrendered")


class _Check(Postprocessor):
    def run(self, text: str) -> str:
        if not shortcodes.HOOK_ACTIVE:
            for leftover in shortcodes.unrendered(text):
                log.warning("timing shortcode left unrendered: %s; is hooks/timings.py listed "
                            "under `hooks:` in mkdocs.yml?", leftover)
        return text


class UnrenderedShortcodes(Extension):
    def extendMarkdown(self, md) -> None:  # noqa: N802 (Markdown's API)
        md.postprocessors.register(_Check(md), "fieldguide-unrendered", 0)  # after raw HTML is back


def makeExtension(**kwargs):  # noqa: N802 (Markdown's API)
    return UnrenderedShortcodes(**kwargs)
