"""MkDocs hook: timing tables and numbers in prose, filled from timings/<gpu>.json.

Replaces `timing-table`, `timing-value` and `timing-ratio` shortcodes (see
fieldguide/shortcodes.py). A missing benchmark, an unknown field or a stale hash is logged as a
warning naming the page, so `mkdocs build --strict` fails on it.
"""

import logging

from fieldguide import shortcodes

log = logging.getLogger("mkdocs.hooks.timing_tables")


def on_page_markdown(markdown, page, config, files):
    if "timing-" not in markdown:
        return markdown
    ctx = shortcodes.context_from_config(config)
    renderers = {
        "table": lambda code: shortcodes.render_table(code, ctx),
        "value": lambda code: shortcodes.render_value(code, ctx),
        "ratio": lambda code: shortcodes.render_ratio(code, ctx),
    }
    markdown = shortcodes.replace(
        markdown, set(renderers), lambda code: renderers[code.kind](code), ctx.problems
    )
    for text in shortcodes.unknown_kinds(markdown):
        ctx.problems.append(f"{text}: unknown shortcode; use one of {', '.join(shortcodes.KINDS)}")
    for problem in ctx.report():
        log.warning("%s: %s", page.file.src_uri, problem)
    return markdown
