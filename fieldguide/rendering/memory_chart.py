"""The memory timeline of a training step, drawn from what a benchmark recorded.

A benchmark records `extra_info["memory_timeline"]`: rows of {"t", "allocated", "phase",
"step"}, the bytes allocated after allocator event number t (derived from a memory snapshot by
snippets/memory/memory_over_time.py; never the snapshot itself), and optionally
`extra_info["memory_levels"]`: [[label, bytes], ...] drawn as dashed reference lines.

    draw(rows, title=None, levels=None) -> {theme: {layout: svg}}   (charts' light/dark, wide/narrow)
    summary_markdown(rows) -> the numbers behind the figure, a Markdown table
    render_memory(code, build, page) -> the `timing-memory: NAME [title="..."]` shortcode's HTML

The area under the line is coloured by phase (forward, backward, optimizer), a dotted line
marks where each step after the first begins, and the axis reads in MiB or GiB.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.ticker import FuncFormatter

from fieldguide.measuring.numbers import format_bytes
from fieldguide.measuring.timings import TimingError
from fieldguide.rendering import charts  # sets matplotlib's Agg backend before pyplot is used

PHASE_COLORS = {"forward": charts.PALETTE[0], "backward": charts.PALETTE[1],
                "optimizer": charts.PALETTE[2]}
REQUIRED = ("t", "allocated", "phase")


def byte_unit(values: Sequence[float]) -> tuple[str, float]:
    """The binary unit in which the largest value reads between 1 and 1024."""
    top = max(abs(v) for v in values)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if top >= scale:
            return unit, float(scale)
    return "bytes", 1.0


def check(rows: Any) -> list[dict[str, Any]]:
    if not rows or not isinstance(rows, list):
        raise TimingError("no memory timeline recorded (extra_info['memory_timeline'] is empty)")
    for row in rows:
        missing = [key for key in REQUIRED if key not in row]
        if missing:
            raise TimingError(f"memory timeline row {row!r} lacks {', '.join(missing)}")
    return sorted(rows, key=lambda r: r["t"])


def stretches(rows: list[dict[str, Any]]) -> list[tuple[str, Any, int, int]]:
    """(phase, step, first index, last index) of each run of rows in one phase of one step."""
    found: list[tuple[str, Any, int, int]] = []
    for i, row in enumerate(rows):
        key = (row["phase"], row.get("step"))
        if found and found[-1][:2] == key:
            found[-1] = (*key, found[-1][2], i)
        else:
            found.append((*key, i, i))
    return found


def draw(rows: list[dict[str, Any]], title: str | None = None,
         levels: Sequence[Sequence[Any]] | None = None) -> dict[str, dict[str, str]]:
    """Allocated memory against allocator events, the area coloured by phase."""
    rows = check(rows)
    levels = [(str(label), float(value)) for label, value in (levels or [])]
    unit, scale = byte_unit([r["allocated"] for r in rows] + [v for _, v in levels])
    ts = [r["t"] for r in rows]
    ys = [r["allocated"] / scale for r in rows]
    runs = stretches(rows)
    extra_phases = [p for p in dict.fromkeys(r[0] for r in runs) if p not in PHASE_COLORS]
    colors_of = {**PHASE_COLORS, **{p: charts.PALETTE[(3 + i) % len(charts.PALETTE)]
                                    for i, p in enumerate(extra_phases)}}

    def plot(ax, colors, layout):
        labelled = set()
        for phase, _, first, last in runs:
            end = min(last + 1, len(rows) - 1)  # reach the next stretch: no gaps in the area
            ax.fill_between(ts[first:end + 1], 0, ys[first:end + 1], step="post", linewidth=0,
                            color=colors_of[phase], alpha=0.55,
                            label=None if phase in labelled else phase)
            labelled.add(phase)
        ax.plot(ts, ys, drawstyle="steps-post", color=colors["text"], linewidth=0.9)
        top = max(ys + [v / scale for _, v in levels])
        steps = [(first, step) for phase, step, first, _ in runs]
        seen_steps = []
        for first, step in steps:
            if step is not None and step not in seen_steps:
                if seen_steps:
                    ax.axvline(ts[first], color=colors["text"], linestyle=":", linewidth=1)
                ax.text(ts[first], top * 1.04, f" step {step}", color=colors["text"],
                        fontsize=charts.FONT_PT - 2, va="bottom", ha="left")
                seen_steps.append(step)
        ax.set_xlim(ts[0], ts[-1])
        ax.set_ylim(0, top * 1.15)
        for _, value in levels:
            ax.axhline(value / scale, color=colors["text"], linestyle="--", linewidth=0.8,
                       alpha=0.7)
        lift = top * 0.02  # a level's name sits just above or below its dashed line
        for label, value in levels:  # where it covers neither the memory line nor another name
            text = ax.text(ts[-1], value / scale + lift, label, color=colors["text"],
                           fontsize=charts.FONT_PT - 2)
            inner = [(ts[len(ts) * k // 8], "center") for k in (4, 2, 6, 1, 3, 5, 7)]
            charts.place_clear(ax, text, [
                (x, value / scale + dy, ha, va)
                for x, ha in ((ts[-1], "right"), (ts[0], "left"), *inner)
                for dy, va in ((lift, "bottom"), (-lift, "top"))])
        ax.yaxis.set_major_formatter(FuncFormatter(charts.tick))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
        ax.set_xlabel("allocator events, in order")
        ax.set_ylabel(f"allocated ({unit})")
        # Below the axes: inside, it would cover the area it explains.
        charts.legend_below(ax, colors, len(labelled), layout)

    return charts._both_themes(plot, title)


def summary_markdown(rows: list[dict[str, Any]]) -> str:
    """The numbers behind the figure: each phase's peak and where it ended."""
    rows = check(rows)
    lines = ["| Step | Phase | Peak allocated | Allocated at its end |", "|:--|:--|--:|--:|"]
    for phase, step, first, last in stretches(rows):
        peak = max(r["allocated"] for r in rows[first:last + 1])
        lines.append(f"| {'' if step is None else step} | {phase} | {format_bytes(peak)} | "
                     f"{format_bytes(rows[last]['allocated'])} |")
    return "\n" + "\n".join(lines) + "\n\n"


def render_memory(code, build, page) -> str:
    """`<!-- timing-memory: NAME [title="..."] [gpu=SLUG] -->`: the timeline NAME recorded."""
    from fieldguide.rendering import figures, shortcodes
    from fieldguide.rendering.figure_cache import drawn

    if len(code.args) != 1:
        raise ValueError("timing-memory takes one benchmark NAME")
    (bench,) = build.benchmarks(code, code.args, page)
    rows = bench.extra.get("memory_timeline")
    title = code.options.get("title")
    # a level's recorded name reads through the module's WORDS, as any recorded value does
    from fieldguide.measuring.timings import benchmark_location
    from fieldguide.rendering import labels

    words = labels.declarations(build.root / benchmark_location(bench.fullname)[0])[1]
    levels = [[words.get(name, name), value]
              for name, value in bench.extra.get("memory_levels") or []] or None
    svgs = drawn(build.root, draw, rows, title=title, levels=levels)
    table = summary_markdown(rows) + shortcodes.table_markdown(build, [bench], ["median", "runs"])
    gpu = build.timings(code.gpu).gpu
    return figures.embed(build, svgs, title or f"memory timeline of {bench.name}",
                         shortcodes.tag([bench], gpu), table, page.url)
