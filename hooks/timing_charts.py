"""MkDocs hook: figures of timing data, drawn at build time.

- `timing-chart`: a sweep (one line per series, IQR band) — fieldguide.charts.draw
- `timing-timeline`: a Gantt chart of a recorded timeline — fieldguide.charts.timeline

Each becomes a light and a dark SVG with the fingerprint under it and the numbers behind it in a
collapsed table (fieldguide/figures.py).
"""

import logging

from fieldguide import charts, figures, shortcodes

log = logging.getLogger("mkdocs.hooks.timing_charts")


def _chart(code, ctx, page):
    opts = code.options
    if not code.args or "x" not in opts or "y" not in opts:
        raise ValueError("timing-chart needs GLOB x=FIELD y=FIELD")
    records = ctx.records(code, code.args)
    svgs = charts.draw(records, x=opts["x"], y=opts["y"], series=opts.get("series"),
                       xscale=opts.get("xscale", "linear"), yscale=opts.get("yscale", "linear"),
                       xlabel=opts.get("xlabel"), ylabel=opts.get("ylabel"), title=opts.get("title"))
    alt = opts.get("title") or f"{opts.get('ylabel', opts['y'])} against {opts.get('xlabel', opts['x'])}"
    table = shortcodes.table_markdown(records, list(dict.fromkeys(["median", "iqr", opts["y"]])))
    return figures.embed(svgs, alt, shortcodes.captions(records), table, page.url)


def _timeline(code, ctx, page):
    if len(code.args) != 1:
        raise ValueError("timing-timeline takes one benchmark NAME")
    (record,) = ctx.records(code, code.args)
    title = code.options.get("title")
    table = shortcodes.table_markdown([record], ["median", "iqr"])
    return figures.embed(charts.timeline(record, title=title), title or f"timeline of {record.name}",
                         shortcodes.captions([record]), table, page.url)


def on_config(config):
    figures.clear()


def on_page_markdown(markdown, page, config, files):
    if "timing-chart" not in markdown and "timing-timeline" not in markdown:
        return markdown
    return shortcodes.render_page(markdown, page, config,
                                  {"chart": _chart, "timeline": _timeline}, log)


def on_post_build(config):
    figures.write(config.site_dir)
