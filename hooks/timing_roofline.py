"""MkDocs hook: `timing-roofline` shortcodes become a light and a dark roofline chart.

    <!-- timing-roofline: BANDWIDTH_BENCH PEAK_BENCH[,PEAK_BENCH...] points=GLOB[,GLOB...]
                          [series=FIELD] [title="..."] [gpu=SLUG] -->

The memory roof is BANDWIDTH_BENCH's `bandwidth_gbs`; each PEAK_BENCH gives a compute roof of
`flops` / median. Every benchmark matched by the point globs that recorded both `flops` and `bytes`
becomes a point (intensity flops/bytes, rate flops/median), grouped in the legend by the extra
named by `series` (default: the benchmark's name without its parameters). Drawing is in
fieldguide/roofline.py; fieldguide/figures.py embeds the SVGs and writes them after the build.
"""

import logging

from fieldguide import figures, roofline, shortcodes

log = logging.getLogger("mkdocs.hooks.timing_roofline")


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
    used = [bandwidth_record, *peak_records,
            *(r for r in point_records if r.name in points_by_name)]
    summary = roofline.summary_markdown(bandwidth, roofs, points)
    return figures.embed(svgs, alt, shortcodes.captions(used), summary, page.url)


def on_page_markdown(markdown, page, config, files):
    if "timing-roofline" not in markdown:
        return markdown
    return shortcodes.render_page(markdown, page, config, {"roofline": _render}, log)
