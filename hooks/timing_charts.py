"""MkDocs hook: `timing-chart` shortcodes become light and dark SVG charts of a timing sweep.

The SVGs are drawn at build time from timings/<gpu>.json (fieldguide/charts.py), written to
site/assets/charts/ after the build, and shown with Material's #only-light / #only-dark switch.
Below each chart: the fingerprint, and the numbers themselves in a collapsed table.
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


def _render(code, ctx, page):
    if len(code.args) < 1 or "x" not in code.options or "y" not in code.options:
        raise ValueError("timing-chart needs GLOB x=FIELD y=FIELD")
    records = ctx.records(code, code.args)
    opts = code.options
    svgs = charts.draw(records, x=opts["x"], y=opts["y"], series=opts.get("series"),
                       xscale=opts.get("xscale", "linear"), yscale=opts.get("yscale", "linear"),
                       xlabel=opts.get("xlabel"), ylabel=opts.get("ylabel"), title=opts.get("title"))
    alt = opts.get("title") or f"{opts['y']} against {opts['x']}"
    imgs = []
    for theme, svg in svgs.items():
        name = f"{CHART_DIR}/{hashlib.sha256(svg.encode()).hexdigest()[:16]}-{theme}.svg"
        _svgs[name] = svg
        src = get_relative_url(name, page.url)
        imgs.append(f'<img src="{src}#only-{theme}" alt="{alt}" loading="lazy">')
    columns = ["median", "iqr"] + ([opts["y"]] if opts["y"] not in ("median", "iqr") else [])
    data = shortcodes.table_markdown(records, columns).strip().replace("\n", "\n    ")
    return (
        f'\n<figure class="timing-chart">\n{chr(10).join(imgs)}\n'
        f"<figcaption>{shortcodes.captions(records)}</figcaption>\n</figure>\n\n"
        f'??? note "The numbers behind this chart"\n\n    {data}\n'
    )


def on_page_markdown(markdown, page, config, files):
    if "timing-chart" not in markdown:
        return markdown
    ctx = shortcodes.context_from_config(config)
    markdown = shortcodes.replace(markdown, {"chart"}, lambda c: _render(c, ctx, page), ctx.problems)
    for problem in dict.fromkeys(ctx.problems):
        log.warning("%s: %s", page.file.src_uri, problem)
    return markdown


def on_post_build(config):
    out = Path(config.site_dir)
    for name, svg in _svgs.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(svg, encoding="utf-8")
