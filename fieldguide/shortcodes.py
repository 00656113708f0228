"""Timing shortcodes in pages, and the markdown they become.

    <!-- timing-table: GLOB [GLOB ...] [columns=median,iqr,rounds] [gpu=SLUG] -->
    <!-- timing-chart: GLOB x=FIELD y=FIELD series=FIELD [xscale=log] [yscale=log]
                       [xlabel="..."] [ylabel="..."] [title="..."] [gpu=SLUG] -->
    <!-- timing-value: NAME FIELD [FORMAT] [gpu=SLUG] -->
    <!-- timing-ratio: NAME[:FIELD] NAME[:FIELD] [FORMAT] [gpu=SLUG] -->
    <!-- timing-crossover: SLOW_GLOB FAST_GLOB x=FIELD [FORMAT] [gpu=SLUG] -->
    <!-- timing-timeline: NAME [title="..."] [gpu=SLUG] -->   (draws extra["timeline"])

`*` is the only wildcard in a GLOB. FIELD is a stat (median, iqr, q1, q3, mean, stddev, min, max,
rounds), a value the benchmark recorded in `extra_info`, or a derived one (`bandwidth_gbs`,
`tflops`, `per_op`). FORMAT is a Python format spec such as `.1f`; times default to a readable unit.
docs/contributing.md shows each in use.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fieldguide.timings import (
    Record,
    TimingError,
    Timings,
    fingerprint_caption,
    format_value,
)

KINDS = ("table", "chart", "value", "ratio", "crossover", "timeline", "roofline")
SHORTCODE = re.compile(r"<!--\s*timing-(?P<kind>[\w-]+):(?P<body>.*?)-->", re.DOTALL)

COLUMN_LABELS = {
    "median": "Median", "iqr": "IQR", "q1": "Q1", "q3": "Q3", "mean": "Mean",
    "stddev": "Std dev", "min": "Min", "max": "Max", "rounds": "Rounds",
    "bandwidth_gbs": "GB/s", "tflops": "TFLOP/s", "per_op": "Per op",
}


@dataclass
class Shortcode:
    kind: str
    args: list[str]
    options: dict[str, str]
    text: str

    @property
    def gpu(self) -> str | None:
        return self.options.get("gpu")


@dataclass
class Context:
    """What rendering needs: a way to load a GPU's timings, and somewhere to report problems."""

    load: Callable[[str | None], Timings]
    root: Path
    problems: list[str] = field(default_factory=list)
    stale: dict[str, list[str]] = field(default_factory=dict)  # changed file -> timings it voids

    def records(self, code: Shortcode, patterns: list[str]) -> list[Record]:
        timings = self.load(code.gpu)
        found: list[Record] = []
        for pattern in patterns:
            found.extend(timings.matching(pattern) if "*" in pattern else [timings.record(pattern)])
        for record in found:
            for path in record.stale_files(self.root):
                names = self.stale.setdefault(path, [])
                if record.name not in names:
                    names.append(record.name)
        return found

    def report(self) -> list[str]:
        """Every problem once, stale timings grouped by the file that changed."""
        lines = list(dict.fromkeys(self.problems))
        for path, names in self.stale.items():
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            lines.append(f"{path} changed since it was measured, so these timings are stale: "
                         f"{shown}; run `make timings` on a GPU and commit the JSON")
        return lines


def context_from_config(config) -> Context:
    """A rendering context for one page of a MkDocs build (paths relative to mkdocs.yml)."""
    root = Path(config.config_file_path).parent
    default = config.extra.get("timings")
    loaded: dict[str | None, Timings] = {}

    def load(gpu: str | None) -> Timings:
        slug = gpu or default
        if not slug:
            raise TimingError("no GPU named: set `extra: timings:` in mkdocs.yml or gpu=SLUG")
        if slug not in loaded:
            loaded[slug] = Timings.for_gpu(slug, root / "timings")
        return loaded[slug]

    return Context(load=load, root=root)


# Shortcodes quoted in code (as on the contributing page) are shown, not rendered.
CODE = re.compile(r"^(?P<fence>```|~~~).*?^(?P=fence)|(?P<ticks>`+)(?!`).+?(?<!`)(?P=ticks)(?!`)",
                  re.M | re.S)


def find(markdown: str) -> Iterator[tuple[re.Match[str], Shortcode]]:
    quoted = [m.span() for m in CODE.finditer(markdown)]
    for match in SHORTCODE.finditer(markdown):
        if any(start <= match.start() < end for start, end in quoted):
            continue
        words = shlex.split(match["body"])
        args = [w for w in words if "=" not in w]
        options = dict(w.split("=", 1) for w in words if "=" in w)
        yield match, Shortcode(match["kind"], args, options, match[0])


def replace(markdown: str, kinds: set[str], render: Callable[[Shortcode], str],
            problems: list[str]) -> str:
    """Replace the shortcodes of `kinds`; a failing one becomes a visible marker and a problem."""
    out, last = [], 0
    for match, code in find(markdown):
        if code.kind not in kinds:
            continue
        try:
            html = render(code)
        except (TimingError, ValueError, KeyError) as exc:
            problems.append(f"{code.text.strip()}: {exc}")
            html = f'<span class="timing-missing">[timing unavailable: {code.kind}]</span>'
        out.append(markdown[last:match.start()])
        out.append(html)
        last = match.end()
    out.append(markdown[last:])
    return "".join(out)


def render_page(markdown: str, page, config, renderers: dict[str, Callable], log) -> str:
    """What every timing hook does to a page: render its kinds, log each problem once."""
    ctx = context_from_config(config)
    markdown = replace(markdown, set(renderers),
                       lambda code: renderers[code.kind](code, ctx, page), ctx.problems)
    for problem in ctx.report():
        log.warning("%s: %s", page.file.src_uri, problem)
    return markdown


def unknown_kinds(markdown: str) -> list[str]:
    return [code.text for _, code in find(markdown) if code.kind not in KINDS]


def captions(records: list[Record]) -> str:
    lines = dict.fromkeys(fingerprint_caption(r.run) for r in records)
    body = "<br>".join(lines)
    return f'<p class="timing-caption">{body}</p>'


def render_table(code: Shortcode, ctx: Context, page=None) -> str:
    if not code.args:
        raise ValueError("timing-table needs at least one benchmark name or pattern")
    records = ctx.records(code, code.args)
    return table_markdown(records, code.options.get("columns", "median,iqr,rounds").split(","))


def table_markdown(records: list[Record], columns: list[str]) -> str:
    head = "| Benchmark | " + " | ".join(COLUMN_LABELS.get(c, c) for c in columns) + " |"
    rule = "|:--|" + "--:|" * len(columns)
    rows = [
        f"| `{r.name}` | " + " | ".join(format_value(c, r.value(c)) for c in columns) + " |"
        for r in records
    ]
    return "\n".join(["", head, rule, *rows, "", captions(records), ""])


def render_value(code: Shortcode, ctx: Context, page=None) -> str:
    if len(code.args) not in (2, 3):
        raise ValueError("timing-value takes NAME FIELD [FORMAT]")
    name, field_name, *spec = code.args
    (record,) = ctx.records(code, [name])
    return format_value(field_name, record.value(field_name), spec[0] if spec else None)


def render_ratio(code: Shortcode, ctx: Context, page=None) -> str:
    if len(code.args) not in (2, 3):
        raise ValueError("timing-ratio takes NAME[:FIELD] NAME[:FIELD] [FORMAT]")
    values = []
    for operand in code.args[:2]:
        name, _, field_name = operand.partition(":")
        (record,) = ctx.records(code, [name])
        values.append(record.value(field_name or "median"))
    spec = code.args[2] if len(code.args) == 3 else ".2g"
    return format(values[0] / values[1], spec)


def render_crossover(code: Shortcode, ctx: Context, page=None) -> str:
    """The smallest x from which FAST's median beats SLOW's at that x and every larger one.

    Pairs the records of two sweeps by their x field, e.g. the CPU and GPU timings of one
    operation over sizes; says so when FAST never stays ahead.
    """
    if len(code.args) not in (2, 3) or "x" not in code.options:
        raise ValueError("timing-crossover takes SLOW_GLOB FAST_GLOB x=FIELD [FORMAT]")
    x = code.options["x"]
    slow = {r.value(x): r.value("median") for r in ctx.records(code, [code.args[0]])}
    fast = {r.value(x): r.value("median") for r in ctx.records(code, [code.args[1]])}
    shared = sorted(slow.keys() & fast.keys())
    if not shared:
        raise TimingError(f"{code.args[0]} and {code.args[1]} share no value of {x!r}")
    winning_from = None
    for size in reversed(shared):
        if fast[size] >= slow[size]:
            break
        winning_from = size
    if winning_from is None:
        return f"at none of the sizes measured (up to {x} = {format_value(x, shared[-1])})"
    spec = code.args[2] if len(code.args) == 3 else None
    return f"from {x} = {format_value(x, winning_from, spec)} upwards"
