"""Figure shortcodes: charts, timelines and rooflines drawn at build time as light and dark SVGs.

Each renderer draws with fieldguide.rendering.charts or fieldguide.rendering.roofline, through the
content-keyed cache (fieldguide/rendering/figure_cache.py: a figure is drawn again only when its data or the
drawing code changed), keeps the SVGs in the build (`Build.figures`, which fieldguide/rendering/render.py
writes under site/assets/charts/ as the page is rendered) and returns a <figure> with one image per theme, a
short provenance tag, and the numbers behind it in a collapsed table.
"""

from __future__ import annotations

import hashlib
import html
import posixpath

from fieldguide.rendering import charts, labels, roofline, shortcodes
from fieldguide.rendering.figure_cache import drawn

CHART_DIR = "assets/charts"


def relative_url(path: str, page_url: str) -> str:
    """`path` (from the site's root) as a link from the page at `page_url` ('execution/events/',
    '' for the home page, 'reference.html' without directory URLs)."""
    folder = page_url if page_url.endswith("/") or not page_url else posixpath.dirname(page_url)
    return posixpath.relpath(path, folder.strip("/") or ".")


def embed(build, svgs: dict[str, dict[str, str] | str], alt: str, tag_html: str,
          details_markdown: str, page_url: str) -> str:
    """<figure> with one drawing per theme and width, and the numbers behind it in a collapsed
    block. Each drawing is an <object>, not an <img>: an SVG shown as an image is a picture only,
    while an object keeps its <title>s, so each point tells its value on hover. CSS shows the one
    for the reader's scheme and screen (docs/assets/extra.css: `.timing-chart object`)."""
    def store(svg: str, suffix: str) -> str:
        name = f"{CHART_DIR}/{hashlib.sha256(svg.encode()).hexdigest()[:16]}-{suffix}.svg"
        build.figures[name] = svg
        return relative_url(name, page_url)

    label = html.escape(alt, quote=True)
    drawings = []
    for theme, layouts in svgs.items():
        layouts = {"wide": layouts} if isinstance(layouts, str) else layouts
        for layout, svg in layouts.items():
            suffix = theme if layout == "wide" else f"{theme}-{layout}"
            fits = "" if "narrow" in layouts else " timing-any-width"
            drawings.append(f'<object class="timing-{layout} only-{theme}{fits}" '
                            f'type="image/svg+xml" data="{store(svg, suffix)}" role="img" '
                            f'aria-label="{label}">{label}</object>')
    details = details_markdown.strip().replace("\n", "\n    ")
    return (
        f'\n<figure class="timing-chart">\n{chr(10).join(drawings)}\n'
        f"<figcaption>{tag_html}</figcaption>\n</figure>\n\n"
        f'??? note "The numbers behind this figure"\n\n    {details}\n\n'
    )


def render_chart(code, build, page) -> str:
    opts = code.options
    if not code.args or "x" not in opts or "y" not in opts:
        raise ValueError("timing-chart needs GLOB x=FIELD y=FIELD")
    benches = build.benchmarks(code, code.args, page)
    series = opts.get("series")
    names = {b.name: labels.series_label(b, series, build.root) for b in benches} \
        if series else {}
    svgs = drawn(build.root, charts.draw, benches, x=opts["x"], y=opts["y"], series_names=names,
                       xscale=opts.get("xscale"), yscale=opts.get("yscale"),
                       xlabel=opts.get("xlabel"), ylabel=opts.get("ylabel"), title=opts.get("title"))
    alt = opts.get("title") or f"{opts.get('ylabel', opts['y'])} against {opts.get('xlabel', opts['x'])}"
    columns = list(dict.fromkeys(["median", "runs", opts["y"]]))
    table = shortcodes.table_markdown(build, benches, columns)
    gpu = build.timings(code.gpu).gpu
    return embed(build, svgs, alt, shortcodes.tag(benches, gpu), table, page.url)


def render_timeline(code, build, page) -> str:
    if len(code.args) != 1:
        raise ValueError("timing-timeline takes one benchmark NAME")
    (bench,) = build.benchmarks(code, code.args, page)
    title = code.options.get("title")
    table = shortcodes.table_markdown(build, [bench], ["median", "runs"])
    gpu = build.timings(code.gpu).gpu
    svgs = drawn(build.root, charts.timeline, bench, title=title)
    return embed(build, svgs, title or f"timeline of {bench.name}", shortcodes.tag([bench], gpu), table,
                 page.url)


def render_roofline(code, build, page) -> str:
    """COPY_BENCH PEAK_BENCH[,PEAK_BENCH...] points=GLOB[,GLOB...] [series=FIELD] [title=...]

    The memory roof is COPY_BENCH's `bandwidth_gbs`; each PEAK_BENCH gives a compute roof of
    `flops` / median. Every benchmark matched by the point globs that recorded both `flops` and
    `bytes` becomes a point, grouped in the legend by the extra named by `series`.
    """
    if len(code.args) != 2 or "points" not in code.options:
        raise ValueError("timing-roofline takes BANDWIDTH_BENCH PEAK_BENCH[,...] points=GLOB[,...]")
    bandwidth_name, peak_names = code.args[0], code.args[1].split(",")
    (bandwidth_bench,) = build.benchmarks(code, [bandwidth_name], page)
    peak_benches = build.benchmarks(code, peak_names, page)
    point_benches = build.benchmarks(code, code.options["points"].split(","), page)
    points_by_name = {p.name: p for p in roofline.points_of(point_benches, code.options.get("series"))}
    points = list(points_by_name.values())  # a benchmark matched by two globs is drawn once

    bandwidth = roofline.bandwidth_of(bandwidth_bench)
    roofs = [roofline.roof_of(b) for b in peak_benches]
    title = code.options.get("title")
    svgs = drawn(build.root, roofline.draw, bandwidth, roofs, points, title=title)
    alt = title or "Roofline: measured memory and compute ceilings, with benchmarks placed beneath them"
    used = [bandwidth_bench, *peak_benches, *(b for b in point_benches if b.name in points_by_name)]
    names = {b.name: build.label(b) for b in point_benches if b.name in points_by_name}
    summary = roofline.summary_markdown(bandwidth, roofs, points, names=names)
    gpu = build.timings(code.gpu).gpu
    return embed(build, svgs, alt, shortcodes.tag(used, gpu), summary, page.url)


def render_waterfall(code, build, page) -> str:
    """NAME NAME ... (or GLOBs, matched in name order) [y=FIELD] [xlabel=..] [title=..]: each change's
    share of the gain in FIELD (a time, per_op by default) from the first to the last."""
    if not code.args:
        raise ValueError("timing-waterfall needs the benchmarks, first to last")
    benches = build.benchmarks(code, code.args, page)
    field = code.options.get("y", "per_op")
    names = {b.name: build.label(b) for b in benches}
    title = code.options.get("title")
    svgs = drawn(build.root, charts.waterfall, benches, field=field, names=names, title=title,
                 xlabel=code.options.get("xlabel"))
    shares = charts.waterfall_steps([b.value(field) for b in benches])
    rows = ["| Change | Share of the gain |", "|:--|--:|"] + [
        f"| {names[b.name]} | {share:.0%} |" for b, share in zip(benches[1:], shares, strict=True)]
    table = shortcodes.table_markdown(build, benches, [field, "runs"]) + "\n\n" + "\n".join(rows)
    alt = title or f"Waterfall: each change's share of the gain in {labels.field_label(field)}"
    gpu = build.timings(code.gpu).gpu
    return embed(build, svgs, alt, shortcodes.tag(benches, gpu), table, page.url)
