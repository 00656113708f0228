"""Roofline charts: a GPU's measured ceilings, and measured kernels placed beneath them.

The roofline model bounds the rate of a kernel that does `flops` floating-point operations while
moving `bytes` to and from memory. Its arithmetic intensity is I = flops / bytes (flop per byte);
the attainable rate is min(peak, bandwidth * I). Left of the ridge point I = peak / bandwidth a
kernel is memory-bound; right of it, compute-bound.

Everything measured here comes from timing records: the memory roof from a copy benchmark's
`bandwidth_gbs`, each compute roof from a benchmark's `flops` / median time, and a point for every
benchmark whose `extra_info` holds both `flops` and `bytes`. Measured roofs are what the site's
own benchmarks reached, so those benchmarks sit at 100% of them by construction; beside them the
chart draws the vendor's datasheet peaks for the GPU (fieldguide/datasheets.toml, citations, not
measurements) and the summary gives each measured ceiling and point as a share of them.
"""

from __future__ import annotations

import math
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from matplotlib.ticker import FuncFormatter

from fieldguide.measuring.numbers import format_number
from fieldguide.measuring.timings import Record, TimingError
from fieldguide.rendering import charts  # selects matplotlib's Agg backend before anything draws
from fieldguide.rendering.charts import PALETTE

# beside the packages: the benchmarks read it too (bench_training_made_fast: MFU)
DATASHEETS = Path(__file__).resolve().parents[1] / "datasheets.toml"


@dataclass(frozen=True)
class Roof:
    """A compute ceiling: the rate one benchmark reached, in flop/s, on the GPU it ran on."""

    label: str
    flops_per_s: float
    gpu: str | None = None


@dataclass(frozen=True)
class Datasheet:
    """A vendor's peak figures for one product: cited, not measured."""

    product: str
    sources: tuple[tuple[str, str], ...]  # (title, URL)
    memory_bytes_per_s: float
    flops_per_s: dict[str, float] = field(default_factory=dict)  # precision label -> peak


@cache
def _datasheets(path: Path) -> dict[str, Datasheet]:
    """GPU name (as the timing run records it) -> its datasheet."""
    found = {}
    for entry in tomllib.loads(path.read_text(encoding="utf-8"))["gpu"]:
        sheet = Datasheet(entry["product"], tuple((x["title"], x["url"]) for x in entry["sources"]),
                          float(entry["memory_bytes_per_s"]),
                          {k: float(v) for k, v in entry["flops_per_s"].items()})
        for name in entry["names"]:
            found[name] = sheet
    return found


def datasheet_for(gpu: str | None, path: Path = DATASHEETS) -> Datasheet | None:
    """The datasheet of a GPU by the name the timing run recorded, or None if none is kept."""
    return _datasheets(path).get(gpu) if gpu else None


def datasheet_of(roofs: list[Roof]) -> Datasheet | None:
    """The datasheet of the one GPU all roofs were measured on; None if they disagree or none."""
    gpus = {r.gpu for r in roofs}
    return datasheet_for(gpus.pop()) if len(gpus) == 1 else None


def gpu_of(bench) -> str | None:
    """The GPU a benchmark's newest record was measured on, where the record says."""
    runs = getattr(bench, "runs", None)
    return runs[-1].fingerprint.get("gpu_name") if runs else None


@dataclass(frozen=True)
class Point:
    """One measured kernel: where it sits (flop/byte) and what it reached (flop/s)."""

    name: str
    label: str | None
    group: str
    intensity: float
    flops_per_s: float
    roof: str | None = None  # the label of the compute roof it is held to (else the highest)


def arithmetic_intensity(flops: float, nbytes: float) -> float:
    """Floating-point operations per byte moved."""
    if nbytes <= 0:
        raise ValueError(f"bytes must be positive, got {nbytes!r}")
    return flops / nbytes


def achieved(flops: float, seconds: float) -> float:
    """The rate a kernel reached, in flop/s."""
    if seconds <= 0:
        raise ValueError(f"time must be positive, got {seconds!r}")
    return flops / seconds


def attainable(intensity: float, bandwidth: float, peak: float) -> float:
    """The roofline: the best rate possible at this intensity (bandwidth in B/s, peak in flop/s)."""
    return min(peak, bandwidth * intensity)


def ridge(bandwidth: float, peak: float) -> float:
    """The intensity (flop/byte) where the memory roof meets the compute roof."""
    return peak / bandwidth


def bound(intensity: float, bandwidth: float, peak: float) -> str:
    return "memory" if intensity < ridge(bandwidth, peak) else "compute"


def short_label(record: Record) -> str:
    """The record's `label` if it set one, else its parameter id, else its name."""
    if "label" in record.extra:
        return str(record.extra["label"])
    name = record.name
    return name[name.index("[") + 1:-1] if name.endswith("]") and "[" in name else name


def bandwidth_of(record: Record) -> float:
    """Bytes per second of a copy benchmark (its `bytes` / median time)."""
    return record.value("bandwidth_gbs") * 1e9


def roof_of(record: Record) -> Roof:
    if "flops" not in record.extra:
        raise TimingError(f"benchmark {record.name!r} recorded no 'flops', which a compute roof needs")
    return Roof(short_label(record), achieved(record.extra["flops"], record.stats["median"]),
                gpu_of(record))


def point_of(record: Record, series: str | None = None) -> Point | None:
    """A point for a record with positive `flops` and `bytes`; None for any other record."""
    flops, nbytes = record.extra.get("flops"), record.extra.get("bytes")
    if not flops or not nbytes:
        return None
    group = record.extra.get(series) if series else None
    if group is None:
        group = record.name.split("[")[0]
    return Point(record.name, record.extra.get("label"), str(group),
                 arithmetic_intensity(flops, nbytes), achieved(flops, record.stats["median"]),
                 record.extra.get("roof"))


def points_of(records: list[Record], series: str | None = None) -> list[Point]:
    found = [p for p in (point_of(r, series) for r in records) if p is not None]
    if not found:
        raise TimingError("no benchmark among the points recorded both 'flops' and 'bytes'")
    return found


def roof_for(point: Point, roofs: list[Roof]) -> Roof:
    """The roof a point names in its `roof` extra, else the highest one."""
    named = [r for r in roofs if point.roof is not None and r.label == point.roof]
    return named[0] if named else max(roofs, key=lambda r: r.flops_per_s)


def format_rate(flops_per_s: float) -> str:
    """By the site's rule for numbers (fieldguide.measuring.numbers.format_number): 989 TFLOP/s, 51.2
    GFLOP/s."""
    if flops_per_s >= 1e11:
        return f"{format_number(flops_per_s / 1e12)} TFLOP/s"
    return f"{format_number(flops_per_s / 1e9)} GFLOP/s"


def _percent(share: float) -> str:
    return f"{format_number(share * 100)}%"


_AUTO = object()  # draw() and summary_markdown(): look the datasheet up from the roofs' GPU


def datasheet_share(point: Point, roof: Roof, sheet: Datasheet) -> float | None:
    """A point's rate over the datasheet roofline at its intensity, for its roof's precision."""
    peak = sheet.flops_per_s.get(roof.label)
    if peak is None:
        return None
    return point.flops_per_s / attainable(point.intensity, sheet.memory_bytes_per_s, peak)


def datasheet_markdown(bandwidth: float, roofs: list[Roof], sheet: Datasheet) -> str:
    """Each measured ceiling beside the datasheet's figure for it, and the share it reached."""
    rows = ["| Ceiling | Measured | Datasheet | Measured / datasheet |", "|:--|--:|--:|--:|",
            f"| memory | {format_number(bandwidth / 1e9)} GB/s | "
            f"{format_number(sheet.memory_bytes_per_s / 1e9)} GB/s | "
            f"{_percent(bandwidth / sheet.memory_bytes_per_s)} |"]
    for r in roofs:
        peak = sheet.flops_per_s.get(r.label)
        if peak is not None:
            rows.append(f"| {r.label} | {format_rate(r.flops_per_s)} | {format_rate(peak)} | "
                        f"{_percent(r.flops_per_s / peak)} |")
    links = ", ".join(f"[{title}]({url})" for title, url in sheet.sources)
    note = (f"Datasheet: {sheet.product}, the vendor's peak figures without sparsity ({links}); "
            "cited, not measured. The measured roofs are the rates this site's own benchmarks "
            "reached, so those benchmarks sit at 100% of them; the datasheet says how far from "
            "the hardware's peak that is.")
    return note + "\n\n" + "\n".join(rows)


def summary_markdown(bandwidth: float, roofs: list[Roof], points: list[Point],
                     datasheet: Datasheet | None | object = _AUTO,
                     names: dict[str, str] | None = None) -> str:
    """The ceilings in one line, and every point in a table (flop/byte, rate, share of its roof).

    Where the GPU has a datasheet (looked up from the roofs unless given), a second table sets
    each measured ceiling beside its datasheet figure, and the points get an *Of datasheet* column.
    """
    sheet = datasheet_of(roofs) if datasheet is _AUTO else datasheet
    ceilings = "; ".join(
        f"{r.label} {format_rate(r.flops_per_s)} "
        f"(ridge at {format_number(ridge(bandwidth, r.flops_per_s))} flop/byte)"
        for r in roofs
    )
    head = (f"Memory roof {format_number(bandwidth / 1e9)} GB/s. Compute roofs: {ceilings}. "
            "*Of roof* is the point's rate over the roofline at its intensity, under the compute "
            "roof of its own precision where it names one and the highest roof otherwise.")
    if sheet is not None:
        head += " *Of datasheet* is the same share of the roofline drawn from the datasheet."
    extra = " Of datasheet |" if sheet is not None else ""
    rows = [
        f"| Benchmark | flop/byte | Rate | Roof | Of roof |{extra} Roofline limit |",
        "|:--|--:|--:|:--|--:|" + ("--:|" if sheet is not None else "") + ":--|",
    ]
    for p in sorted(points, key=lambda p: (p.intensity, p.name)):
        roof = roof_for(p, roofs)
        share = p.flops_per_s / attainable(p.intensity, bandwidth, roof.flops_per_s)
        cells = f"{p.roof or '–'} | {_percent(share)} |"
        if sheet is not None:
            of_sheet = datasheet_share(p, roof, sheet)
            cells += f" {_percent(of_sheet) if of_sheet is not None else '–'} |"
        shown = (names or {}).get(p.name, f"`{p.name}`")  # the benchmark's label where given
        rows.append(f"| {shown} | {format_number(p.intensity)} | {format_rate(p.flops_per_s)} | "
                    f"{cells} {bound(p.intensity, bandwidth, roof.flops_per_s)} |")
    table = head + "\n\n" + "\n".join(rows)
    if sheet is not None:
        table = datasheet_markdown(bandwidth, roofs, sheet) + "\n\n" + table
    return table


def _clusters(roofs: list[Roof]) -> list[list[Roof]]:
    """Roofs (sorted by rate) grouped where each is within 25% of the one below it."""
    groups: list[list[Roof]] = []
    for roof in roofs:
        if groups and roof.flops_per_s < 1.25 * groups[-1][-1].flops_per_s:
            groups[-1].append(roof)
        else:
            groups.append([roof])
    return groups


CITED_STYLE = {"linewidth": 1.1, "linestyle": ":", "alpha": 0.6}


def _draw_cited(ax, fig, bandwidth: float, peaks: list[float], lo: float, hi: float,
                labels: list, colors: dict[str, str]) -> None:
    """The datasheet's compute roofs, dotted and fainter than the measured ones, and stopped
    short of the measured roofs' labels so that no dotted line runs through their text. (Its
    memory roof is drawn before the labels are placed, which avoid it.)"""
    style = CITED_STYLE | {"color": colors["text"]}
    fig.canvas.draw()  # lay the labels out, to know where they are
    boxes = [t.get_window_extent() for t in labels]
    for peak in peaks:
        y = ax.transData.transform((hi, peak))[1]
        crossed = [b for b in boxes if b.y0 - 3 <= y <= b.y1 + 3]
        end = hi
        if crossed:
            end = ax.transData.inverted().transform((min(b.x0 for b in crossed) - 6, y))[0]
        start = ridge(bandwidth, peak)
        if end > start:
            ax.plot([start, end], [peak, peak], **style)


def draw(bandwidth: float, roofs: list[Roof], points: list[Point],
         title: str | None = None, datasheet: Datasheet | None | object = _AUTO
         ) -> dict[str, dict[str, str]]:
    """A log-log roofline with one compute roof per entry of `roofs`: {theme: {layout: svg}}.

    Where the GPU has a datasheet (looked up from the roofs unless given), its memory roof and
    the compute roofs of the same precisions are drawn dotted beside the measured ones.
    """
    if bandwidth <= 0 or not roofs:
        raise ValueError("a roofline needs a positive bandwidth and at least one compute roof")
    roofs = sorted(roofs, key=lambda r: r.flops_per_s)
    sheet = datasheet_of(roofs) if datasheet is _AUTO else datasheet
    cited = [] if sheet is None else sorted(
        {sheet.flops_per_s[r.label] for r in roofs if r.label in sheet.flops_per_s})
    cited_bandwidth = sheet.memory_bytes_per_s if sheet is not None else None
    peak = max([roofs[-1].flops_per_s, *cited])
    intensities = [p.intensity for p in points] + [ridge(bandwidth, r.flops_per_s) for r in roofs]
    intensities += [ridge(cited_bandwidth, c) for c in cited]
    lo = 2 ** math.floor(math.log2(min(intensities) / 2))
    hi = 2 ** math.ceil(math.log2(max(intensities) * 4))
    groups: dict[str, list[Point]] = defaultdict(list)
    for p in points:
        groups[p.group].append(p)

    def plot(ax, colors, layout):
        fig = ax.figure
        narrow = layout == "narrow"
        small = charts.FONT_PT - 2  # roof and point labels: smaller than the axes', still legible
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        low_rate = min([p.flops_per_s for p in points] + [bandwidth * lo])
        ax.set_ylim(low_rate / 3, peak * 3)
        ax.xaxis.set_major_formatter(FuncFormatter(charts.tick))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: charts.tick(v / 1e12)))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _p: ""))
        ax.set_xlabel("arithmetic intensity (flop/byte)")
        ax.set_ylabel("rate (TFLOP/s)")
        # The memory roof, up to the highest compute roof, labelled along its slope.
        top = roofs[-1].flops_per_s
        ax.plot([lo, ridge(bandwidth, top)], [bandwidth * lo, top], color=colors["text"],
                linewidth=1.6)
        # One flat compute roof per precision, from where it meets the memory roof.
        for k, roof in enumerate(roofs):
            ax.plot([ridge(bandwidth, roof.flops_per_s), hi], [roof.flops_per_s] * 2,
                    color=colors["text"], linewidth=1.2,
                    linestyle="-" if k == len(roofs) - 1 else "--")
        roof_labels = {r.label for r in roofs}
        for i, (group, members) in enumerate(sorted(groups.items())):
            members.sort(key=lambda p: p.intensity)
            ax.scatter([p.intensity for p in members], [p.flops_per_s for p in members],
                       color=PALETTE[i % len(PALETTE)], marker=charts.MARKERS[i % len(charts.MARKERS)],
                       s=28, zorder=3, label=group)
        if cited:
            ax.plot([lo, ridge(cited_bandwidth, cited[-1])], [cited_bandwidth * lo, cited[-1]],
                    **CITED_STYLE, color=colors["text"], label=f"datasheet peaks ({sheet.product})")
        fig.tight_layout()
        # The labels go where they cover no roof, point or other label (charts.place_clear).
        x0 = math.sqrt(lo * ridge(bandwidth, roofs[0].flops_per_s))
        (ax0, ay0), (ax1, ay1) = ax.transData.transform([(x0, bandwidth * x0),
                                                         (2 * x0, 2 * bandwidth * x0)])
        memory = ax.text(x0, bandwidth * x0 * 1.5, f"memory {format_number(bandwidth / 1e9)} GB/s",
                         fontsize=small, rotation=math.degrees(math.atan2(ay1 - ay0, ax1 - ax0)),
                         rotation_mode="anchor", color=colors["text"])
        along = [lo * (x0 / lo) ** f for f in (1.0, 1.4, 0.7, 1.8, 2.2, 0.5, 2.6, 3.0)]
        charts.place_clear(ax, memory, [(x, bandwidth * x * above, "center", va) for x in along
                                        for above, va in ((1.5, "bottom"), (1 / 1.5, "top"),
                                                          (2.2, "bottom"), (1 / 2.2, "top"))])
        # Roofs within 25% of each other share one label.
        labels = []
        for cluster in _clusters(roofs):
            # On a phone, names only: the rates are in the table under the figure.
            text = " · ".join(r.label if narrow else f"{r.label} {format_rate(r.flops_per_s)}"
                              for r in cluster)
            label = ax.text(hi / 1.15, cluster[-1].flops_per_s * 1.08, text, fontsize=small,
                            color=colors["text"])
            y_low, y_high = cluster[0].flops_per_s, cluster[-1].flops_per_s
            start = ridge(bandwidth, y_high) * 1.3  # just right of where the roof begins
            charts.place_clear(ax, label, [
                (x, y, ha, va) for x, ha in ((hi / 1.15, "right"), (hi / 2, "right"),
                                             (hi / 4, "right"), (start, "left"), (hi / 16, "right"))
                for y, va in ((y_high * 1.08, "bottom"), (y_low / 1.08, "top"),
                              (y_high * 1.25, "bottom"), (y_low / 1.25, "top"))])
            labels.append(label)
        if cited:
            _draw_cited(ax, fig, cited_bandwidth, cited, lo, hi, labels, colors)
        if not narrow:  # too crowded on a phone: the legend and the table name the points
            for i, (_group, members) in enumerate(sorted(groups.items())):
                for p in members:
                    if p.label and p.label not in roof_labels:  # a roof's point: named by the roof
                        note = ax.annotate(p.label, (p.intensity, p.flops_per_s),
                                           textcoords="offset points", xytext=(6, -10),
                                           fontsize=small, color=PALETTE[i % len(PALETTE)])
                        charts.place_clear(ax, note, [
                            (dx, dy, "left" if dx > 0 else "right", "baseline")
                            for dx, dy in ((6, -10), (6, 6), (-6, 6), (-6, -10), (10, -16),
                                           (10, 12), (-10, 12), (-10, -16))])
        charts.legend_below(ax, colors, len(groups), layout, fontsize=small)

    return charts._both_themes(plot, title, {"wide": (7.5, 4.8), "narrow": (4.3, 5.2)})
