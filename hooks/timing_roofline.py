"""MkDocs hook: `timing-roofline` shortcodes become a light and a dark roofline chart.

    <!-- timing-roofline: BANDWIDTH_BENCH PEAK_BENCH[,PEAK_BENCH...] points=GLOB[,GLOB...]
                          [series=FIELD] [title="..."] [gpu=SLUG] -->

The memory roof is BANDWIDTH_BENCH's `bandwidth_gbs`; each PEAK_BENCH gives a compute roof of
`flops` / median. Every benchmark matched by the point globs that recorded both `flops` and `bytes`
becomes a point (intensity flops/bytes, rate flops/median), grouped in the legend by the extra
named by `series` (default: the benchmark's name without its parameters). Drawing is in
fieldguide/roofline.py; the SVGs are written after the build beside the timing charts.
"""

import hashlib
import logging
from pathlib import Path

from mkdocs.utils import get_relative_url

from fieldguide import roofline, shortcodes

log = logging.getLogger("mkdocs.hooks.timing_roofline")
CHART_DIR = "assets/charts"
_svgs: dict[str, str] = {}


def on_config(config):
    _svgs.clear()


def _render(code, ctx, page):
    if len(code.args) != 2 or "points" not in code.options:
        raise ValueError("timing-roofline takes BANDWIDTH_BENCH PEAK_BENCH[,...] points=GLOB[,...]")
    bandwidth_name, peak_names = code.args[0], code.args[1].split(",")
    (bandwidth_record,) = ctx.records(code, [bandwidth_name])
    peak_records = ctx.records(code, peak_names)
    point_records = ctx.records(code, code.options["points"].split(","))
    points_by_name = {p.name: p for p in roofline.points_of(point_records, code.options.get("series"))}
    points = list(points_by_name.values())  # a benchmark matched by two globs is drawn once

    bandwidth = roofline.bandwidth_of(bandwidth_record)
    roofs = [roofline.roof_of(r) for r in peak_records]
    title = code.options.get("title")
    svgs = roofline.draw(bandwidth, roofs, points, title=title)
    alt = title or "Roofline: measured memory and compute ceilings, with benchmarks placed beneath them"
    imgs = []
    for theme, svg in svgs.items():
        name = f"{CHART_DIR}/{hashlib.sha256(svg.encode()).hexdigest()[:16]}-roofline-{theme}.svg"
        _svgs[name] = svg
        src = get_relative_url(name, page.url)
        imgs.append(f'<img src="{src}#only-{theme}" alt="{alt}" loading="lazy">')
    used = [bandwidth_record, *peak_records,
            *(r for r in point_records if r.name in points_by_name)]
    summary = roofline.summary_markdown(bandwidth, roofs, points).replace("\n", "\n    ")
    return (
        f'\n<figure class="timing-chart">\n{chr(10).join(imgs)}\n'
        f"<figcaption>{shortcodes.captions(used)}</figcaption>\n</figure>\n\n"
        f'??? note "The numbers behind this figure"\n\n    {summary}\n'
    )


def on_page_markdown(markdown, page, config, files):
    if "timing-roofline" not in markdown:
        return markdown
    ctx = shortcodes.context_from_config(config)
    markdown = shortcodes.replace(markdown, {"roofline"}, lambda c: _render(c, ctx, page), ctx.problems)
    for problem in ctx.report():
        log.warning("%s: %s", page.file.src_uri, problem)
    return markdown


def on_post_build(config):
    out = Path(config.site_dir)
    for name, svg in _svgs.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(svg, encoding="utf-8")
