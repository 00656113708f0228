"""SVG charts of timing sweeps, drawn with matplotlib: light and dark, wide and narrow (phones).

Every axis reads in a human unit (µs/ms, GB/s, TFLOP/s, KiB/MiB/GiB; never scientific
notation), an axis whose values span two decades or more is logarithmic unless the page says
otherwise, and a title that would not fit above the axes is wrapped, or the build fails.
"""

from __future__ import annotations

import html
import io
import math
import re
import textwrap
from collections import defaultdict
from collections.abc import Callable

import matplotlib

matplotlib.use("Agg")  # no display at build time
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FixedLocator,
    FuncFormatter,
    LogLocator,
    MaxNLocator,
    NullLocator,
)

from fieldguide.measuring.numbers import format_bytes, format_number, format_value
from fieldguide.measuring.timings import TIME_FIELDS, Benchmark, TimingError
from fieldguide.rendering import labels  # noqa: E402

THEMES = {
    "light": {"text": "#1f2328", "grid": "#d0d7de"},
    "dark": {"text": "#e6edf3", "grid": "#3d444d"},
}
# Drawn at these sizes (inches at 96 px) so that text is 13-15 px wherever it is shown:
# "wide" fills a desktop column, "narrow" a phone screen.
LAYOUTS = {"wide": (7.2, 4.3), "narrow": (4.3, 5.0)}
FONT_PT = 12.5
PALETTE = ["#1f77b4", "#e8710a", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#0f9d9a"]
# Each series also differs in marker and dash, so one drawn over another still shows, in grey too.
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
DASHES = ["-", "--", "-.", ":", (0, (5, 1, 1, 1)), (0, (1, 1)), (0, (3, 1, 1, 1, 1, 1))]
MIN_TICKS = 3  # labelled ticks on every numeric axis
TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def binary_size(nbytes: float, _pos=None) -> str:
    return format_bytes(nbytes)


def count(value: float, _pos=None) -> str:
    """1,024 / 65,536 / 4.19M: plain numbers, never powers of ten."""
    if value >= 1e6:
        return f"{value / 1e6:.3g}M"
    return f"{value:,.0f}" if value >= 1 else format_number(float(value))


def tick(value: float, _pos=None) -> str:
    """A tick label by the site's rule (format_number), less the trailing zeros a tick's exact
    position does not need: 0, 0.5, 1, 1.5, 2 (not 1.50), 1,000."""
    if abs(value - round(value)) < 1e-9 * max(1.0, abs(value)):
        return format_number(round(value))
    text = format_number(float(value))
    return text.rstrip("0").rstrip(".") if "." in text and "×" not in text else text


def time_unit(seconds: list[float]) -> tuple[str, float]:
    """The unit in which the largest value reads between 1 and 1000."""
    top = max(abs(s) for s in seconds)
    for unit, scale in TIME_UNITS:
        if top >= scale:
            return unit, scale
    return "ns", 1e-9


def axis_unit(field: str, values: list[float]) -> tuple[str | None, float]:
    """(unit shown on the axis, divisor) for a field."""
    # kernel_s and the like hold seconds; items_per_s and the like are rates
    if field in TIME_FIELDS or field == "per_op" or (field.endswith("_s") and "_per_" not in field):
        return time_unit(values)
    return {"bandwidth_gbs": ("GB/s", 1.0), "tflops": ("TFLOP/s", 1.0)}.get(field, (None, 1.0))


def _label(given: str | None, field: str, unit: str | None) -> str:
    text = given or labels.field_label(field)
    return f"{text} ({unit})" if unit and unit not in text else text


def _scale(option: str | None, values: list[float]) -> str:
    if option:
        return option
    positive = [v for v in values if v > 0]
    wide = positive and len(positive) == len(values) and max(positive) / min(positive) >= 100
    return "log" if wide else "linear"


def _error_bounds(bench: Benchmark, y: str) -> tuple[float, float] | None:
    """The IQR of y where it can be derived from the timing quartiles."""
    if y == "median":
        return bench.stats["q1"], bench.stats["q3"]
    if y in ("bandwidth_gbs", "per_op", "tflops"):
        a, b = bench.value(y, stat="q1"), bench.value(y, stat="q3")
        return min(a, b), max(a, b)
    return None


def draw(benches: list[Benchmark], x: str, y: str, series_names: dict[str, str] | None = None,
         xscale: str | None = None, yscale: str | None = None, xlabel: str | None = None,
         ylabel: str | None = None, title: str | None = None) -> dict[str, dict[str, str]]:
    """One line per series, IQR band. Returns {theme: {layout: svg}}."""
    series_names = series_names or {}
    lines: dict[str, list[tuple[float, float, tuple[float, float] | None]]] = defaultdict(list)
    for bench in benches:
        lines[series_names.get(bench.name, "")].append(
            (bench.value(x), bench.value(y), _error_bounds(bench, y)))
    xs = sorted({p[0] for points in lines.values() for p in points})
    ys = [p[1] for points in lines.values() for p in points]
    unit, divisor = axis_unit(y, ys)
    xscale, yscale = _scale(xscale, xs), _scale(yscale, ys)

    xname = xlabel or labels.field_label(x)

    def plot(ax, colors, layout):
        for i, (name, points) in enumerate(sorted(lines.items())):
            points.sort(key=lambda p: p[0])
            px = [p[0] for p in points]
            color = PALETTE[i % len(PALETTE)]
            line, = ax.plot(px, [p[1] / divisor for p in points], marker=MARKERS[i % len(MARKERS)],
                            markersize=5, linestyle=DASHES[i % len(DASHES)], color=color,
                            label=name or None)
            # what each point says on hover (an SVG <title>, added by _svg)
            line.set_gid(POINTS_GID + "|".join(
                f"{name + ': ' if name else ''}{xname} {_x_text(x, p[0])}, "
                f"{format_value(y, p[1])}" for p in points))
            bounds = [p[2] for p in points]
            if all(b is not None for b in bounds):
                ax.fill_between(px, [b[0] / divisor for b in bounds], [b[1] / divisor for b in bounds],
                                color=color, alpha=0.25, linewidth=0)
        ax.set_xscale(xscale, **({"base": 2} if xscale == "log" else {}))
        ax.set_yscale(yscale)
        most = 6 if layout == "narrow" else 11  # tick labels that fit side by side
        if x.endswith("bytes"):
            every = max(1, math.ceil(len(xs) / most))
            ax.xaxis.set_major_locator(FixedLocator(xs[::every]))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_major_formatter(FuncFormatter(binary_size))
            plt.setp(ax.get_xticklabels(), rotation=35, ha="right")
        elif xscale == "log":
            if len(xs) <= 12:  # label the sizes measured, not powers of two between them
                every = max(1, math.ceil(len(xs) / most))
                ax.xaxis.set_major_locator(FixedLocator(xs[::every]))
                ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_major_formatter(FuncFormatter(count))
            if layout == "narrow":
                plt.setp(ax.get_xticklabels(), rotation=35, ha="right")
        ax.yaxis.set_major_formatter(FuncFormatter(tick))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _p: ""))
        ax.set_xlabel(xname)
        ax.set_ylabel(_label(ylabel, y, unit))
        if any(lines):
            _legend(ax, colors, layout, len(lines))

    return _both_themes(plot, title)


POINTS_GID = "points:"  # a line's gid: its points' hover texts, "|"-separated (see _svg)


def _x_text(field: str, value) -> str:
    return binary_size(value) if field.endswith("bytes") else format_value(field, value)


def enough_ticks(axis) -> None:
    """At least MIN_TICKS labelled ticks in view on a numeric axis. A log axis spanning less than
    two decades labels one or two powers of ten: label 1, 2, 5 (then every digit) of each decade
    instead; a linear axis asks its locator for more."""
    def shown() -> int:
        low, high = sorted(axis.get_view_interval())
        return sum(low <= t <= high for t in axis.get_majorticklocs())

    if shown() >= MIN_TICKS or isinstance(axis.get_major_locator(), FixedLocator):
        return
    if axis.get_scale() == "log":
        for subs in ((1.0, 2.0, 5.0), tuple(float(d) for d in range(1, 10))):
            axis.set_major_locator(LogLocator(base=axis.get_transform().base, subs=subs))
            axis.set_minor_locator(NullLocator())
            if shown() >= MIN_TICKS:
                return
    elif axis.get_scale() == "linear":
        axis.set_major_locator(MaxNLocator(nbins="auto", min_n_ticks=MIN_TICKS))


def thin_tick_labels(axis, renderer) -> None:
    """Hides each tick label that would touch the one before it (sizes close on a log axis)."""
    kept = None
    for label in axis.get_ticklabels():
        if not label.get_visible() or not label.get_text():
            continue
        box = label.get_window_extent(renderer).expanded(1.08, 1.0)
        if kept is not None and box.overlaps(kept):
            label.set_visible(False)
        else:
            kept = box


def legend_below(ax, colors, entries: int, layout: str, fontsize: float = FONT_PT - 1):
    """A legend under the axes, never over the data; placed under the tick labels and the axis
    label once the figure is laid out (place_legends)."""
    longest = max((len(t) for t in ax.get_legend_handles_labels()[1]), default=0)
    columns = 1 if layout == "narrow" or longest > 30 else min(entries, 3 if longest < 16 else 2)
    legend = ax.legend(frameon=False, loc="upper center", fontsize=fontsize, ncol=columns,
                       bbox_to_anchor=(0.5, -0.15))
    legend.below = True
    legend.set_in_layout(False)  # the axes keep their size; the saved figure grows to hold it
    for text in legend.get_texts():
        text.set_color(colors["text"])
    return legend


def place_legends(fig) -> None:
    """Each legend made by legend_below moves to just under everything else its axes draw."""
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not getattr(legend, "below", False):
            continue
        legend.set_visible(False)
        bottom = ax.get_tightbbox(renderer).y0
        legend.set_visible(True)
        y = ax.transAxes.inverted().transform((0, bottom))[1]
        legend.set_bbox_to_anchor((0.5, y - 0.02), transform=ax.transAxes)


def place_clear(ax, text, candidates: list[tuple[float, float, str, str]]) -> None:
    """Puts `text` at the first of `candidates` (x, y, ha, va) where it covers no other text, line
    or point of `ax`; the last one if none is clear (the browser test then names the chart).
    x, y are data coordinates for ax.text, and the offset from its point for ax.annotate.
    The chart places each such text again once its layout is final (_tidy)."""
    if not hasattr(ax, "placed"):
        ax.placed = []
    if all(t is not text for t, _ in ax.placed):
        ax.placed.append((text, candidates))
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    others = [t.get_window_extent(renderer) for t in ax.texts if t is not text and t.get_visible()]
    # the axes' own tick labels too: a label placed over "0.1" reads as neither
    others += [t.get_window_extent(renderer) for t in (*ax.get_xticklabels(), *ax.get_yticklabels())
               if t.get_visible() and t.get_text()]
    points = []  # (x, y, margin): a line's samples, a scatter's points (as wide as their marker)
    for line in ax.lines:
        vertices = line.get_transform().transform_path(line.get_path()).vertices
        for (x0, y0), (x1, y1) in zip(vertices, vertices[1:], strict=False):
            steps = max(1, int(math.hypot(x1 - x0, y1 - y0) / 2))
            points += [(x0 + (x1 - x0) * k / steps, y0 + (y1 - y0) * k / steps, 1.5)
                       for k in range(steps + 1)]
    for collection in ax.collections:
        if isinstance(collection, PathCollection):  # a scatter's points, not a band's area
            offsets = collection.get_offsets()
            points += [(x, y, 5.0) for x, y in collection.get_offset_transform().transform(offsets)]
    def place(x, y, ha, va) -> int:
        """Moves the text there; how much it covers (a text counts more than a point)."""
        if hasattr(text, "xyann"):
            text.xyann = (x, y)
        else:
            text.set_position((x, y))
        text.set_horizontalalignment(ha)
        text.set_verticalalignment(va)
        box = text.get_window_extent(renderer).expanded(1.02, 1.1)
        return 10 * sum(box.overlaps(o) for o in others) + sum(
            box.x0 - m < px < box.x1 + m and box.y0 - m < py < box.y1 + m for px, py, m in points)

    covered = []
    for candidate in candidates:
        covered.append(place(*candidate))
        if covered[-1] == 0:
            return
    place(*candidates[covered.index(min(covered))])  # none is clear: the least covered


def _tidy(fig) -> None:
    """Before a chart is written: enough ticks, none touching, legends under the axes."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            enough_ticks(axis)
    fig.canvas.draw()  # tick labels take their places only when drawn
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            thin_tick_labels(axis, renderer)
        for text, candidates in getattr(ax, "placed", []):  # the layout may have moved them
            place_clear(ax, text, candidates)
    place_legends(fig)
    for ax in fig.axes:  # kept out of the layout, the legends belong in the saved figure
        if ax.get_legend() is not None:
            ax.get_legend().set_in_layout(True)


def _legend(ax, colors, layout: str, entries: int) -> None:
    legend_below(ax, colors, entries, layout)


def _both_themes(plot: Callable, title: str | None, size: dict[str, tuple[float, float]] | None = None
                 ) -> dict[str, dict[str, str]]:
    svgs: dict[str, dict[str, str]] = {}
    for theme, colors in THEMES.items():
        svgs[theme] = {}
        for layout, figsize in (size or LAYOUTS).items():
            with _themed(colors):
                fig, ax = plt.subplots(figsize=figsize)
                plot(ax, colors, layout)
                ax.grid(True, color=colors["grid"], linewidth=0.6)
                svg = _svg(fig, ax, title, colors)
                # A drawing shown in an <object> on the dark page declares its scheme: Chromium
                # paints an opaque white backdrop under one whose scheme differs from its frame's.
                svgs[theme][layout] = svg.replace("<svg ", f'<svg style="color-scheme: {theme}" ', 1)
    return svgs


def _themed(colors: dict[str, str]):
    return plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "field-guide",
                           "font.size": FONT_PT, "axes.titlesize": FONT_PT + 0.5,
                           "text.color": colors["text"], "axes.labelcolor": colors["text"],
                           "axes.edgecolor": colors["grid"], "xtick.color": colors["text"],
                           "ytick.color": colors["text"]})


MAX_TITLE_LINES = 3


def fit_title(fig, ax, title: str, colors: dict[str, str]) -> None:
    """Set the title, wrapped until it fits within the figure; fail if that takes too many lines."""
    fig_width = fig.get_window_extent().width
    for width in (90, 70, 56, 44, 36, 30):
        wrapped = textwrap.fill(title, width)
        if wrapped.count("\n") >= MAX_TITLE_LINES:
            break
        text = ax.set_title(wrapped, color=colors["text"], loc="left")
        fig.tight_layout()
        box = text.get_window_extent(fig.canvas.get_renderer())
        if box.x0 >= 0 and box.x1 <= fig_width:
            return
    raise ValueError(f"chart title {title!r} does not fit the figure in {MAX_TITLE_LINES} lines; "
                     "shorten it")


def _svg(fig, ax=None, title: str | None = None, colors: dict[str, str] | None = None) -> str:
    fig.patch.set_alpha(0)
    for each in fig.axes:
        each.patch.set_alpha(0)
    if title:
        fit_title(fig, ax, title, colors)
    else:
        fig.tight_layout()
    _tidy(fig)
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    return point_titles(buffer.getvalue())


def point_titles(svg: str) -> str:
    """Each marker of a line whose gid lists its points' texts (POINTS_GID) gets an SVG <title>:
    its value on hover, and a name for assistive technology. The gid itself becomes a plain id."""
    out, last = [], 0
    for n, group in enumerate(re.finditer(r'<g id="' + re.escape(POINTS_GID) + r'([^"]*)">', svg)):
        texts = html.unescape(group[1]).split("|")
        end = _group_end(svg, group.end())
        body = svg[group.end():end]
        marks = iter(texts)

        def titled(use: re.Match[str], marks=marks) -> str:
            return f"<use {use[1]}><title>{html.escape(next(marks, ''))}</title></use>"

        body = re.sub(r"<use ([^>]*?)/>", titled, body)
        out += [svg[last:group.start()], f'<g id="series-{n + 1}">', body]
        last = end
    out.append(svg[last:])
    return "".join(out)


def _group_end(svg: str, start: int) -> int:
    """Where the <g> opened just before `start` closes."""
    depth = 1
    for tag in re.finditer(r"<(/?)g[ >]", svg[start:]):
        depth += -1 if tag[1] else 1
        if depth == 0:
            return start + tag.start()
    raise ValueError("unbalanced <g> in a chart's SVG")


def timeline(bench: Benchmark, title: str | None = None) -> dict[str, dict[str, str]]:
    """A Gantt chart of extra["timeline"]: [{"lane", "name", "start", "duration"}, ...] in seconds."""
    events = bench.extra.get("timeline")
    if not events:
        raise TimingError(f"benchmark {bench.name!r} recorded no timeline")
    lanes = list(dict.fromkeys(e["lane"] for e in events))
    unit, divisor = time_unit([e["start"] + e["duration"] for e in events])

    def plot(ax, colors, layout):
        for row, lane in enumerate(lanes):
            spans = [(e["start"] / divisor, e["duration"] / divisor) for e in events if e["lane"] == lane]
            ax.broken_barh(spans, (row - 0.35, 0.7), facecolors=PALETTE[row % len(PALETTE)],
                           edgecolor=colors["text"], linewidth=0.3)
        ax.set_yticks(range(len(lanes)), lanes)
        ax.invert_yaxis()
        ax.set_xlabel(f"time ({unit})")

    height = 1.2 + 0.6 * len(lanes)
    return _both_themes(plot, title, {"wide": (7.2, height), "narrow": (4.3, height + 0.4)})


def waterfall_steps(values: list[float]) -> list[float]:
    """Each change's share of the whole gain, from the first value to the last: the change
    from the value before it over (first - last). Shares add up to 1; a change that lost
    time has a negative share."""
    total = values[0] - values[-1]
    if total == 0:
        raise TimingError("a waterfall needs a first and a last value that differ")
    return [(before - after) / total for before, after in zip(values, values[1:], strict=False)]


def waterfall(benches: list[Benchmark], field: str = "per_op", names: dict[str, str] | None = None,
              title: str | None = None, xlabel: str | None = None) -> dict[str, dict[str, str]]:
    """A waterfall of `field` (a time) over benchmarks in the order given, one row each, top
    to bottom: the first as a whole bar, then each one's change from the one before as a
    floating bar labelled with its share of the whole gain, then the last as a whole bar."""
    if len(benches) < 2:
        raise TimingError("a waterfall needs at least two benchmarks")
    names = names or {}
    values = [bench.value(field) for bench in benches]
    shares = waterfall_steps(values)
    unit, divisor = axis_unit(field, values)
    rows = [names.get(b.name, b.name) for b in benches] + ["after every change"]

    def plot(ax, colors, layout):
        scaled = [v / divisor for v in values]
        ax.barh(0, scaled[0], color=PALETTE[0], height=0.6)
        for row, (before, after, share) in enumerate(
                zip(scaled, scaled[1:], shares, strict=False), start=1):
            color = PALETTE[2] if after <= before else PALETTE[3]
            ax.barh(row, before - after, left=after, color=color, height=0.6)
            ax.text(max(before, after), row, f" {share:.0%}".replace("-", "−"),
                    va="center", ha="left", color=colors["text"], fontsize=FONT_PT - 1.5)
        ax.barh(len(values), scaled[-1], color=PALETTE[0], height=0.6)
        wrap = 18 if layout == "narrow" else 36
        ax.set_yticks(range(len(rows)), [textwrap.fill(r, wrap) for r in rows])
        ax.invert_yaxis()
        ax.set_xlim(0, max(scaled) * 1.15)  # room for the share after the longest bar
        ax.xaxis.set_major_formatter(FuncFormatter(tick))
        ax.set_xlabel(_label(xlabel, field, unit))
        ax.set_axisbelow(True)  # the grid behind the bars

    height = 1.4 + 0.45 * len(rows)
    return _both_themes(plot, title, {"wide": (7.2, height), "narrow": (4.3, height + 0.8)})
