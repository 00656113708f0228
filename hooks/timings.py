"""MkDocs hook: timing shortcodes become tables, numbers and figures (fieldguide/shortcodes.py).

One `Build` per build: each timings folder is loaded once and each benchmark's code keyed once.
Under `mkdocs build --strict` the build fails on a missing benchmark, an unknown field or kind, a
stale timing (its code changed since it was measured), a shortcode left unrendered in a page's
HTML, or a figure that was not written.
"""

import logging
from pathlib import Path

import markdown

from fieldguide import figures, shortcodes

log = logging.getLogger("mkdocs.hooks.timings")
build: shortcodes.Build | None = None


def on_config(config):
    global build
    shortcodes.HOOK_ACTIVE = True
    def to_html(markdown_text):  # tables and figures inside tabs, with the site's extensions
        return markdown.Markdown(extensions=config.markdown_extensions,
                                 extension_configs=config.mdx_configs).convert(markdown_text)

    build = shortcodes.Build(Path(config.config_file_path).parent, config.extra.get("timings"),
                             beside=config.extra.get("timings_beside"), to_html=to_html)


def on_page_markdown(markdown, page, config, files):
    markdown, rendered = build.render_page(markdown, page.file.src_uri, page.url)
    for problem in rendered.problems:
        log.warning("%s: %s", page.file.src_uri, problem)
    return markdown


def on_page_content(html, page, config, files):
    for text in shortcodes.unrendered(html):
        log.warning("%s: shortcode left unrendered: %s", page.file.src_uri, text)
    return html


def on_post_build(config):
    for line in build.stale_report():
        log.warning(line)
    written = set(figures.write(build, config.site_dir))
    missing = [name for name in build.figures if name not in written]
    if missing:
        log.warning("figures not written: %s", ", ".join(missing))
