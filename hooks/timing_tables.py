"""MkDocs hook: timing tables and numbers in prose, filled from timings/<gpu>.json.

Replaces `timing-table`, `timing-value`, `timing-ratio` and `timing-crossover` shortcodes (see
fieldguide/shortcodes.py). A missing benchmark, an unknown field or a stale hash is logged as a
warning naming the page, so `mkdocs build --strict` fails on it.
"""

import logging

from fieldguide import shortcodes

log = logging.getLogger("mkdocs.hooks.timing_tables")
RENDERERS = {
    "table": shortcodes.render_table,
    "value": shortcodes.render_value,
    "ratio": shortcodes.render_ratio,
    "crossover": shortcodes.render_crossover,
}


def on_page_markdown(markdown, page, config, files):
    if "timing-" not in markdown:
        return markdown
    for text in shortcodes.unknown_kinds(markdown):
        log.warning("%s: %s: unknown shortcode; use one of %s",
                    page.file.src_uri, text, ", ".join(shortcodes.KINDS))
    return shortcodes.render_page(markdown, page, config, RENDERERS, log)
