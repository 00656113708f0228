"""Roofline charts: a GPU's measured ceilings, and measured kernels placed beneath them.

The roofline model bounds the rate of a kernel that does `flops` floating-point operations while
moving `bytes` to and from memory. Its arithmetic intensity is I = flops / bytes (flop per byte);
the attainable rate is min(peak, bandwidth * I). Left of the ridge point I = peak / bandwidth a
kernel is memory-bound; right of it, compute-bound.

Everything here comes from timing records: the memory roof from a copy benchmark's
`bandwidth_gbs`, each compute roof from a benchmark's `flops` / median time, and a point for every
benchmark whose `extra_info` holds both `flops` and `bytes`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import matplotlib.pyplot as plt

from fieldguide.charts import PALETTE, THEMES, _svg, _themed  # charts selects the Agg backend
from fieldguide.timings import Record, TimingError


@dataclass(frozen=True)
class Roof:
    """A compute ceiling: the rate one benchmark reached, in flop/s."""

    label: str
    flops_per_s: float


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
    return Roof(short_label(record), achieved(record.extra["flops"], record.stats["median"]))


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
    return f"{flops_per_s / 1e12:.3g} TFLOP/s" if flops_per_s >= 1e11 else f"{flops_per_s / 1e9:.3g} GFLOP/s"


def summary_markdown(bandwidth: float, roofs: list[Roof], points: list[Point]) -> str:
    """The ceilings in one line, and every point in a table (flop/byte, rate, share of its roof)."""
    ceilings = "; ".join(
        f"{r.label} {format_rate(r.flops_per_s)} (ridge at {ridge(bandwidth, r.flops_per_s):.3g} flop/byte)"
        for r in roofs
    )
    head = (f"Memory roof {bandwidth / 1e9:.4g} GB/s. Compute roofs: {ceilings}. "
            "*Of roof* is the point's rate over the roofline at its intensity, under the compute "
            "roof of its own precision where it names one and the highest roof otherwise.")
    rows = [
        "| Benchmark | flop/byte | Rate | Roof | Of roof | Roofline limit |",
        "|:--|--:|--:|:--|--:|:--|",
    ]
    for p in sorted(points, key=lambda p: (p.intensity, p.name)):
        roof = roof_for(p, roofs)
        share = p.flops_per_s / attainable(p.intensity, bandwidth, roof.flops_per_s)
        percent = f"{share:.0%}" if share >= 0.1 else f"{share * 100:.2g}%"
        rows.append(f"| `{p.name}` | {p.intensity:.3g} | {format_rate(p.flops_per_s)} | "
                    f"{p.roof or '–'} | {percent} | {bound(p.intensity, bandwidth, roof.flops_per_s)} |")
    return head + "\n\n" + "\n".join(rows)


def _clusters(roofs: list[Roof]) -> list[list[Roof]]:
    """Roofs (sorted by rate) grouped where each is within 25% of the one below it."""
    groups: list[list[Roof]] = []
    for roof in roofs:
        if groups and roof.flops_per_s < 1.25 * groups[-1][-1].flops_per_s:
            groups[-1].append(roof)
        else:
            groups.append([roof])
    return groups


def draw(bandwidth: float, roofs: list[Roof], points: list[Point],
         title: str | None = None) -> dict[str, str]:
    """A log-log roofline with one compute roof per entry of `roofs`. Returns {"light", "dark"} SVGs."""
    if bandwidth <= 0 or not roofs:
        raise ValueError("a roofline needs a positive bandwidth and at least one compute roof")
    roofs = sorted(roofs, key=lambda r: r.flops_per_s)
    peak = roofs[-1].flops_per_s
    intensities = [p.intensity for p in points] + [ridge(bandwidth, r.flops_per_s) for r in roofs]
    lo = 2 ** math.floor(math.log2(min(intensities) / 2))
    hi = 2 ** math.ceil(math.log2(max(intensities) * 4))
    groups: dict[str, list[Point]] = defaultdict(list)
    for p in points:
        groups[p.group].append(p)

    svgs = {}
    for theme, colors in THEMES.items():
        with _themed(colors):
            fig, ax = plt.subplots(figsize=(7.5, 4.8))
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlim(lo, hi)
            low_rate = min([p.flops_per_s for p in points] + [bandwidth * lo])
            ax.set_ylim(low_rate / 3, peak * 3)
            ax.set_xlabel("arithmetic intensity (flop/byte)")
            ax.set_ylabel("rate (flop/s)")
            if title:
                ax.set_title(title, color=colors["text"])
            ax.grid(True, color=colors["grid"], linewidth=0.6)
            # The memory roof, up to the highest compute roof, labelled along its slope.
            ax.plot([lo, ridge(bandwidth, peak)], [bandwidth * lo, peak], color=colors["text"],
                    linewidth=1.6)
            fig.tight_layout()
            x0 = math.sqrt(lo * ridge(bandwidth, roofs[0].flops_per_s))
            (ax0, ay0), (ax1, ay1) = ax.transData.transform([(x0, bandwidth * x0),
                                                             (2 * x0, 2 * bandwidth * x0)])
            ax.text(x0, bandwidth * x0 * 1.5, f"memory {bandwidth / 1e9:.4g} GB/s", fontsize=9,
                    rotation=math.degrees(math.atan2(ay1 - ay0, ax1 - ax0)), rotation_mode="anchor",
                    ha="center", va="bottom", color=colors["text"])
            # One flat compute roof per precision, from where it meets the memory roof; roofs
            # within 25% of each other share one label.
            for k, roof in enumerate(roofs):
                ax.plot([ridge(bandwidth, roof.flops_per_s), hi], [roof.flops_per_s] * 2,
                        color=colors["text"], linewidth=1.2,
                        linestyle="-" if k == len(roofs) - 1 else "--")
            for cluster in _clusters(roofs):
                text = " · ".join(f"{r.label} {format_rate(r.flops_per_s)}" for r in cluster)
                ax.text(hi / 1.15, cluster[-1].flops_per_s * 1.08, text, ha="right", va="bottom",
                        fontsize=9, color=colors["text"])
            roof_labels = {r.label for r in roofs}
            for i, (group, members) in enumerate(sorted(groups.items())):
                color = PALETTE[i % len(PALETTE)]
                members.sort(key=lambda p: p.intensity)
                ax.scatter([p.intensity for p in members], [p.flops_per_s for p in members],
                           color=color, s=28, zorder=3, label=group)
                for p in members:
                    if p.label and p.label not in roof_labels:  # a roof's own point is named by the roof
                        ax.annotate(p.label, (p.intensity, p.flops_per_s), textcoords="offset points",
                                    xytext=(6, -10), fontsize=8, color=color)
            legend = ax.legend(frameon=False, fontsize=9, loc="lower right")
            for text in legend.get_texts():
                text.set_color(colors["text"])
            svgs[theme] = _svg(fig)
    return svgs
