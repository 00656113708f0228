"""MkDocs hook: figures drawn from timings/<gpu>.json at build time.

- `timing-chart`: a sweep (one line per series, IQR band) — fieldguide.charts.draw
- `timing-timeline`: a Gantt chart of a recorded timeline — fieldguide.charts.timeline

Each becomes a light and a dark SVG (Material's #only-light / #only-dark), the fingerprint under
it, and the numbers behind it in a collapsed table. SVGs are written to site/assets/charts/.
"""

import hashlib
import logging
from pathlib import Path

from mkdocs.utils import get_relative_url

from fieldguide import charts, shortcodes

log = logging.getLogger("mkdocs.hooks.timing_charts")
CHART_DIR = "assets/charts"
_svgs: dict[str, str] = {}


def on_config(config):
    _svgs.clear()


def _figure(svgs, records, alt, columns, page):
    imgs = []
    for theme, svg in svgs.items():
        name = f"{CHART_DIR}/{hashlib.sha256(svg.encode()).hexdigest()[:16]}-{theme}.svg"
        _svgs[name] = svg
        imgs.append(f'<img src="{get_relative_url(name, page.url)}#only-{theme}" alt="{alt}">')
    data = shortcodes.table_markdown(records, columns).strip().replace("\n", "\n    ")
    return (
        f'\n<figure class="timing-chart">\n{chr(10).join(imgs)}\n'
        f"<figcaption>{shortcodes.captions(records)}</figcaption>\n</figure>\n\n"
        f'??? note "The numbers behind this figure"\n\n    {data}\n'
    )


def _chart(code, ctx, page):
    opts = code.options
    if not code.args or "x" not in opts or "y" not in opts:
        raise ValueError("timing-chart needs GLOB x=FIELD y=FIELD")
    records = ctx.records(code, code.args)
    svgs = charts.draw(records, x=opts["x"], y=opts["y"], series=opts.get("series"),
                       xscale=opts.get("xscale", "linear"), yscale=opts.get("yscale", "linear"),
                       xlabel=opts.get("xlabel"), ylabel=opts.get("ylabel"), title=opts.get("title"))
    alt = opts.get("title") or f"{opts.get('ylabel', opts['y'])} against {opts.get('xlabel', opts['x'])}"
    columns = list(dict.fromkeys(["median", "iqr", opts["y"]]))
    return _figure(svgs, records, alt, columns, page)


def _timeline(code, ctx, page):
    if len(code.args) != 1:
        raise ValueError("timing-timeline takes one benchmark NAME")
    (record,) = ctx.records(code, code.args)
    title = code.options.get("title")
    svgs = charts.timeline(record, title=title)
    return _figure(svgs, [record], title or f"timeline of {record.name}", ["median", "iqr"], page)


def on_page_markdown(markdown, page, config, files):
    if "timing-chart" not in markdown and "timing-timeline" not in markdown:
        return markdown
    ctx = shortcodes.context_from_config(config)
    render = {"chart": _chart, "timeline": _timeline}
    markdown = shortcodes.replace(markdown, set(render),
                                  lambda code: render[code.kind](code, ctx, page), ctx.problems)
    for problem in ctx.report():
        log.warning("%s: %s", page.file.src_uri, problem)
    return markdown


def on_post_build(config):
    out = Path(config.site_dir)
    for name, svg in _svgs.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(svg, encoding="utf-8")
