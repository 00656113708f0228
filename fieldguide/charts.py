"""SVG charts of timing sweeps, drawn with matplotlib in a light and a dark variant."""

from __future__ import annotations

import io
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")  # no display at build time
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

from fieldguide.timings import Record, TimingError  # noqa: E402

THEMES = {
    "light": {"text": "#1f2328", "grid": "#d0d7de"},
    "dark": {"text": "#e6edf3", "grid": "#3d444d"},
}
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def binary_size(nbytes: float, _pos=None) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"


def _error_bounds(record: Record, y: str) -> tuple[float, float] | None:
    """The IQR of y where it can be derived from the timing quartiles."""
    if y == "median":
        return record.stats["q1"], record.stats["q3"]
    if y in ("bandwidth_gbs", "per_op"):
        a, b = record.value(y, stat="q1"), record.value(y, stat="q3")
        return min(a, b), max(a, b)
    return None


def draw(records: list[Record], x: str, y: str, series: str | None = None,
         xscale: str = "linear", yscale: str = "linear", xlabel: str | None = None,
         ylabel: str | None = None, title: str | None = None) -> dict[str, str]:
    """One line per series value, with IQR error bars. Returns {"light": svg, "dark": svg}."""
    lines: dict[str, list[tuple[float, float, tuple[float, float] | None]]] = defaultdict(list)
    for record in records:
        key = str(record.value(series)) if series else ""
        lines[key].append((record.value(x), record.value(y), _error_bounds(record, y)))
    xs = sorted({point[0] for points in lines.values() for point in points})

    svgs = {}
    for theme, colors in THEMES.items():
        with _themed(colors):
            fig, ax = plt.subplots(figsize=(7.5, 4.2))
            for i, (label, points) in enumerate(sorted(lines.items())):
                points.sort(key=lambda p: p[0])
                px = [p[0] for p in points]
                color = PALETTE[i % len(PALETTE)]
                ax.plot(px, [p[1] for p in points], marker="o", markersize=4, color=color,
                        label=label or None)
                bounds = [p[2] for p in points]
                if all(b is not None for b in bounds):
                    ax.fill_between(px, [b[0] for b in bounds], [b[1] for b in bounds],
                                    color=color, alpha=0.25, linewidth=0)
            ax.set_xscale(xscale, **({"base": 2} if xscale == "log" else {}))
            ax.set_yscale(yscale)
            if x.endswith("bytes"):
                ax.xaxis.set_major_locator(FixedLocator(xs))
                ax.xaxis.set_minor_locator(NullLocator())
                ax.xaxis.set_major_formatter(FuncFormatter(binary_size))
                plt.setp(ax.get_xticklabels(), rotation=35, ha="right")
            ax.set_xlabel(xlabel or x)
            ax.set_ylabel(ylabel or y)
            if title:
                ax.set_title(title, color=colors["text"])
            ax.grid(True, color=colors["grid"], linewidth=0.6)
            if series:
                legend = ax.legend(frameon=False)
                for text in legend.get_texts():
                    text.set_color(colors["text"])
            svgs[theme] = _svg(fig)
    return svgs


def _themed(colors: dict[str, str]):
    return plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "field-guide", "font.size": 11,
                           "text.color": colors["text"], "axes.labelcolor": colors["text"],
                           "axes.edgecolor": colors["grid"], "xtick.color": colors["text"],
                           "ytick.color": colors["text"]})


def _svg(fig) -> str:
    fig.patch.set_alpha(0)
    for ax in fig.axes:
        ax.patch.set_alpha(0)
    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(fig)
    return buffer.getvalue()


def timeline(record: Record, title: str | None = None) -> dict[str, str]:
    """A Gantt chart of extra["timeline"]: [{"lane", "name", "start", "duration"}, ...] in seconds."""
    events = record.extra.get("timeline")
    if not events:
        raise TimingError(f"benchmark {record.name!r} recorded no timeline")
    lanes = list(dict.fromkeys(e["lane"] for e in events))
    svgs = {}
    for theme, colors in THEMES.items():
        with _themed(colors):
            fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.6 * len(lanes)))
            for row, lane in enumerate(lanes):
                spans = [(e["start"] * 1e3, e["duration"] * 1e3) for e in events if e["lane"] == lane]
                ax.broken_barh(spans, (row - 0.35, 0.7), facecolors=PALETTE[row % len(PALETTE)],
                               edgecolor=colors["text"], linewidth=0.3)
            ax.set_yticks(range(len(lanes)), lanes)
            ax.invert_yaxis()
            ax.set_xlabel("time (ms)")
            if title:
                ax.set_title(title, color=colors["text"])
            ax.grid(True, axis="x", color=colors["grid"], linewidth=0.6)
            svgs[theme] = _svg(fig)
    return svgs
