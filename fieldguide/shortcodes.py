"""Timing shortcodes in pages, one build context, and the registry of their renderers.

    <!-- timing-table: GLOB [GLOB ...] [columns=median,iqr,runs] [gpu=SLUG] -->
    <!-- timing-chart: GLOB x=FIELD y=FIELD [series=FIELD] [xscale=log] [yscale=log]
                       [xlabel="..."] [ylabel="..."] [title="..."] [gpu=SLUG] -->
    <!-- timing-value: NAME FIELD [FORMAT] [gpu=SLUG] -->
    <!-- timing-ratio: NAME[:FIELD] NAME[:FIELD] [FORMAT] [gpu=SLUG] -->
    <!-- timing-crossover: SLOW_GLOB FAST_GLOB x=FIELD [FORMAT] [gpu=SLUG] -->
    <!-- timing-timeline: NAME [title="..."] [gpu=SLUG] -->   (draws extra["timeline"])
    <!-- timing-roofline: COPY PEAK[,PEAK...] points=GLOB[,GLOB...] [series=FIELD] [title=...] -->
    <!-- timing-memory: NAME [title="..."] -->   (draws extra["memory_timeline"])
    <!-- timing-bound: CLAIM [FORMAT] -->   (a bound from CLAIMS in the page's tests)

Tables and charts without `gpu=` show the default GPU (`timings:` of fieldguide.render in
mkdocs.yml) and, in linked content tabs beside it, each GPU of its `beside:` whose runs measured the same
benchmarks with the current code; choosing a GPU's tab on one table switches them all.

`*` is the only wildcard in a GLOB. FIELD is a stat (median, iqr, q1, q3, mean, stddev, min, max,
rounds), a value the benchmark recorded in `extra_info`, or a derived one (`bandwidth_gbs`,
`tflops`, `per_op`). FORMAT is a Python format spec such as `.1f`; other values read in their
unit. A number is the median over the runs that measured the current code; where runs disagree
by more than 20 % the page shows their range. docs/contributing.md shows each in use (its table
of kinds is checked against `RENDERERS`, the one registry).
"""

from __future__ import annotations

import ast
import html
import importlib
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fieldguide import labels
from fieldguide.timings import (
    Benchmark,
    CodeKeys,
    Run,
    TimingError,
    Timings,
    column_label,
    disagreeing_range,
    format_value,
    link_summary,
)

SHORTCODE = re.compile(r"<!--\s*timing-(?P<kind>[\w-]+):(?P<body>.*?)-->", re.DOTALL)
# Any HTML comment that starts with "timing" in a rendered page: a shortcode nothing rendered, or
# one misspelled so that nothing could (`timings-value:`, a missing colon). The guard
# (fieldguide/unrendered.py) fails the build on each.
UNRENDERED = re.compile(r"<!--\s*timing", re.IGNORECASE)


@dataclass
class Shortcode:
    kind: str
    args: list[str]
    options: dict[str, str]
    text: str

    @property
    def gpu(self) -> str | None:
        return self.options.get("gpu")


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


@dataclass
class Page:
    """What rendering one page collects: its problems and the runs its numbers came from."""

    src_uri: str
    url: str
    problems: list[str] = field(default_factory=list)
    # (gpu slug, run id) -> (gpu name, run, uses)
    runs: dict[tuple[str, str], tuple[str, Run, int]] = field(default_factory=dict)
    tab_sets: int = 0


class Build:
    """One site build: each timings folder loaded once, each benchmark's code keyed once."""

    def __init__(self, root: Path, default_gpu: str | None, timings_dir: Path | None = None,
                 beside: list[str] | None = None, to_html: Callable[[str], str] | None = None):
        self.root = Path(root)
        self.to_html = to_html or _plain_html  # the site's Markdown, for tab contents
        self.default_gpu = default_gpu
        self.beside = list(beside or [])  # GPUs shown in tabs beside the default one
        self.timings_dir = Path(timings_dir or self.root / "timings")
        self.keys = CodeKeys(self.root)
        self.loaded: dict[str, Timings] = {}
        self.loads = 0
        self.figures: dict[str, str] = {}          # site path -> SVG text, written after the build
        self.stale: dict[str, dict[str, set[str]]] = {}   # changed file -> benchmark -> pages
        self._checked: dict[int, list[str]] = {}

    # --- data ----------------------------------------------------------------------------------
    def timings(self, gpu: str | None) -> Timings:
        slug = gpu or self.default_gpu
        if not slug:
            raise TimingError("no GPU named: set `timings:` of fieldguide.render under markdown_extensions "
                              "in mkdocs.yml, or gpu=SLUG")
        if slug not in self.loaded:
            self.loaded[slug] = Timings.for_gpu(slug, self.timings_dir)
            self.loads += 1
        return self.loaded[slug]

    def benchmarks(self, code: Shortcode, patterns: list[str], page: Page) -> list[Benchmark]:
        timings = self.timings(code.gpu)
        found: list[Benchmark] = []
        for pattern in patterns:
            found.extend(timings.matching(pattern) if "*" in pattern else [timings.benchmark(pattern)])
        for bench in found:
            if id(bench) not in self._checked:
                self._checked[id(bench)] = self.keys.stale_files(bench)
            for path in self._checked[id(bench)]:
                self.stale.setdefault(path, {}).setdefault(bench.name, set()).add(page.src_uri)
            for run in bench.runs:
                gpu, _, uses = page.runs.get((timings.slug, run.id), (timings.gpu, run, 0))
                page.runs[(timings.slug, run.id)] = (gpu, run, uses + 1)
        return found

    def also_measured_on(self, code: Shortcode) -> list[str]:
        """The GPUs of `beside` whose runs hold every benchmark `code` shows on the default GPU,
        each measured with the current code. A GPU missing one, or stale, gets no tab."""
        if code.gpu or not self.beside:
            return []
        wanted = self._names(self.timings(None), code.args)
        found = []
        for slug in self.beside:
            if not (self.timings_dir / slug).is_dir():
                continue  # nothing measured on that GPU yet
            timings = self.timings(slug)  # a broken folder is an error, not a missing tab
            try:
                if self._names(timings, code.args) != wanted:
                    continue
            except TimingError:
                continue  # that GPU has not measured these benchmarks
            if not any(self.keys.stale_files(b) for p in code.args for b in self._match(timings, p)):
                found.append(slug)
        return found

    @staticmethod
    def _match(timings: Timings, pattern: str) -> list[Benchmark]:
        return timings.matching(pattern) if "*" in pattern else [timings.benchmark(pattern)]

    def _names(self, timings: Timings, patterns: list[str]) -> list[str]:
        return [b.name for p in patterns for b in self._match(timings, p)]

    def label(self, bench: Benchmark) -> str:
        """The benchmark's declared label; a benchmark a page shows must have one."""
        declared = labels.label(bench, self.root)
        if declared is None:
            raise ValueError(f"{bench.name}: no label; declare one in LABELS of its benchmark "
                             "module (fieldguide/labels.py)")
        return declared

    # --- pages ---------------------------------------------------------------------------------
    def render_page(self, markdown: str, src_uri: str, url: str) -> tuple[str, Page]:
        page = Page(src_uri, url)
        out, last = [], 0
        for match, code in find(markdown):
            renderer = RENDERERS.get(code.kind)
            try:
                if renderer is None:
                    raise ValueError(f"unknown shortcode kind {code.kind!r}; known: "
                                     f"{', '.join(sorted(RENDERERS))}")
                rendered = renderer(code, self, page)
            except (TimingError, ValueError, KeyError, SyntaxError) as exc:
                page.problems.append(f"{code.text.strip()}: {exc}")
                rendered = f'<span class="timing-missing">[timing unavailable: {code.kind}]</span>'
            out.append(markdown[last:match.start()])
            out.append(rendered)
            last = match.end()
        out.append(markdown[last:])
        markdown = "".join(out)
        if page.runs:
            markdown = markdown.rstrip("\n") + "\n\n" + measured_on(page) + "\n"
        return markdown, page

    def stale_report(self, page: str | None = None) -> list[str]:
        """One line per changed file whose timings are shown (on `page`, where given)."""
        lines = []
        for path, benches in sorted(self.stale.items()):
            if page is not None:
                benches = {name: pages for name, pages in benches.items() if page in pages}
                if not benches:
                    continue
            names = sorted(benches)
            pages = sorted({p for ps in benches.values() for p in ps})
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            lines.append(f"{path}: the code these timings measured has changed, so they are stale: "
                         f"{shown} (shown on {', '.join(pages)}); run `make timings` on a GPU "
                         "(or `--only` those names) and commit the new run")
        return lines


def unrendered(html_text: str) -> list[str]:
    """`<!-- timing…` comments left in a page's HTML: a renderer did not run, or a shortcode is
    misspelled."""
    return [html_text[m.start():html_text.find("-->", m.start()) + 3] for m in
            UNRENDERED.finditer(html_text)]


# --- Provenance ----------------------------------------------------------------------------------

def _short_date(run: Run) -> str:
    return run.date[:10]


def tag(benchmarks: list[Benchmark], gpu: str) -> str:
    """The short line under a table or figure: which GPU, how many runs, when."""
    runs = {run.id: run for b in benchmarks for run in b.runs}
    dates = sorted(_short_date(r) for r in runs.values())
    when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    count = f"{len(runs)} run" + ("s" if len(runs) > 1 else "")
    return (f'<p class="timing-tag">{html.escape(gpu)} · {count} · {when} · '
            f'<a href="#measured-on">how and where</a></p>')


def measured_on(page: Page) -> str:
    """The page's one provenance box: every run its numbers came from."""
    rows = ["| GPU | Date | Driver | CUDA | PyTorch | CuPy | NumPy | Python | Host CPU | Commit |",
            "|:--|:--|:--|:--|:--|:--|:--|:--|:--|:--|"]
    for gpu, run, _ in sorted(page.runs.values(), key=lambda t: (t[0], t[1].date)):
        fp = run.fingerprint
        cpu = fp.get("cpu_brand")
        cpu = f"{cpu}, {fp['cpu_count']} cores" if cpu else "not recorded"
        joined = ""
        if (fp.get("gpu_count") or 1) > 1:  # what a number of several GPUs depends on
            link = link_summary(fp.get("interconnect")) or "link not recorded"
            joined = f", {link}, NCCL {fp.get('nccl') or 'not recorded'}"
        rows.append(
            f"| {gpu} ({fp['sm_count']} SMs, sm_{fp['compute_capability'].replace('.', '')}"
            f"{joined}) "
            f"| {run.date[:16].replace('T', ' ')} UTC | {fp['driver']} | {fp['cuda_runtime']} "
            f"| {fp['torch']} | {fp.get('cupy') or 'not installed'} | "
            f"{fp.get('numpy') or 'not recorded'} | {fp['python']} | {cpu} | "
            f"`{run.commit[:10]}`{' (uncommitted changes)' if fp.get('git_dirty') else ''} |")
    return ("## Measured on\n\n"
            "Every number and figure on this page comes from these timing runs. A number is the "
            "median over the runs that measured the current code; where runs disagree by more "
            "than 20 % the page gives their range.\n\n" + "\n".join(rows))


# --- Text renderers ------------------------------------------------------------------------------

def _spread_note(bench: Benchmark, field_name: str, spec: str | None = None, unit: str = "") -> str:
    spread = bench.spread(field_name)
    if not spread:
        return ""
    low, high = (format_value(field_name, v, spec) + unit for v in spread)
    return f"{low}–{high} over {len(bench.records)} runs"


def render_table(code: Shortcode, build: Build, page: Page) -> str:
    if not code.args:
        raise ValueError("timing-table needs at least one benchmark name or pattern")
    benches = build.benchmarks(code, code.args, page)
    columns = code.options.get("columns", "median,iqr,runs").split(",")
    return table_markdown(build, benches, columns) + tag(benches, build.timings(code.gpu).gpu)


def table_markdown(build: Build, benches: list[Benchmark], columns: list[str]) -> str:
    head = "| Benchmark | " + " | ".join(column_label(c) for c in columns) + " |"
    rule = "|:--|" + "--:|" * len(columns)
    rows, flagged = [], False
    for bench in benches:
        cells = []
        for column in columns:
            if column == "runs":
                cells.append(_spread_note(bench, "median") or str(len(bench.records)))
                continue
            cell = format_value(column, bench.value(column))
            # the median's range is the runs column's, if there is one; a spread's is noise
            if column not in ("iqr", "stddev", "rounds") and not (
                    column == "median" and "runs" in columns):
                spread = _spread_note(bench, column)
                cell += f" ({spread})" if spread else ""
            if column == "median" and bench.unsteady():
                cell += ' <span class="timing-flag" title="rounds spread wider than their median">⚠</span>'
                flagged = True
            cells.append(cell)
        rows.append(f"| {build.label(bench)} | " + " | ".join(cells) + " |")
    note = ("\n\n⚠ The rounds of this benchmark spread wider than their median: the median "
            "stands for two kinds of round, and the text says why." if flagged else "")
    return "\n".join(["", head, rule, *rows]) + note + "\n\n"


def render_value(code: Shortcode, build: Build, page: Page) -> str:
    if len(code.args) not in (2, 3):
        raise ValueError("timing-value takes NAME FIELD [FORMAT] [unit=UNIT]")
    name, field_name, *spec = code.args
    (bench,) = build.benchmarks(code, [name], page)
    # unit=GB/s: written after the value and after each end of its range, "7.7 GB/s (6.0 GB/s–...)"
    unit = code.options.get("unit", "")
    unit = unit if unit in ("", "×", "%") else f" {unit}"
    text = format_value(field_name, bench.value(field_name), spec[0] if spec else None) + unit
    spread = _spread_note(bench, field_name, spec[0] if spec else None, unit)
    return f"{text} ({spread})" if spread else text


def render_ratio(code: Shortcode, build: Build, page: Page) -> str:
    if len(code.args) not in (2, 3):
        raise ValueError("timing-ratio takes NAME[:FIELD] NAME[:FIELD] [FORMAT]")
    values, per_run = [], []
    for operand in code.args[:2]:
        name, _, field_name = operand.partition(":")
        (bench,) = build.benchmarks(code, [name], page)
        values.append(bench.value(field_name or "median"))
        per_run.append({r.run.id: r.value(field_name or "median") for r in bench.records})
    spec = code.args[2] if len(code.args) == 3 else ".2g"
    text = format(values[0] / values[1], spec)
    # The ratio within each run that measured both: where runs disagree, their range too.
    ratios = [per_run[0][run] / per_run[1][run] for run in per_run[0].keys() & per_run[1].keys()
              if isinstance(per_run[0][run], (int, float)) and per_run[1][run]]
    spread = disagreeing_range(ratios)
    if spread:
        text += f" ({format(spread[0], spec)}–{format(spread[1], spec)} over {len(ratios)} runs)"
    return text


def render_crossover(code: Shortcode, build: Build, page: Page) -> str:
    """The smallest x from which FAST's median beats SLOW's at that x and every larger one.

    Pairs the benchmarks of two sweeps by their x field, e.g. the CPU and GPU timings of one
    operation over sizes; says so when FAST never stays ahead.
    """
    if len(code.args) not in (2, 3) or "x" not in code.options:
        raise ValueError("timing-crossover takes SLOW_GLOB FAST_GLOB x=FIELD [FORMAT]")
    x = code.options["x"]
    slow = {b.value(x): b.value("median") for b in build.benchmarks(code, [code.args[0]], page)}
    fast = {b.value(x): b.value("median") for b in build.benchmarks(code, [code.args[1]], page)}
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


def claims_file(root: Path, src_uri: str) -> Path:
    """docs/<chapter>/<page-name>.md -> tests/pages/test_<page_name>.py"""
    return root / "tests" / "pages" / f"test_{Path(src_uri).stem.replace('-', '_')}.py"


def claims_of(path: Path) -> dict[str, float]:
    """The CLAIMS dict of a page's test module, read without importing it."""
    if not path.is_file():
        raise ValueError(f"{path.name} does not exist, so this page has no CLAIMS")
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "CLAIMS"):
            return ast.literal_eval(node.value)
    raise ValueError(f"{path.name} declares no CLAIMS")


def render_bound(code: Shortcode, build: Build, page: Page) -> str:
    if len(code.args) not in (1, 2):
        raise ValueError("timing-bound takes CLAIM [FORMAT]")
    path = claims_file(build.root, page.src_uri)
    claims = claims_of(path)
    if code.args[0] not in claims:
        raise KeyError(f"{path.name} has no claim {code.args[0]!r} (it has: {', '.join(claims)})")
    bound = claims[code.args[0]]
    return format(bound, code.args[1] if len(code.args) == 2 else "g")


def in_gpu_tabs(render: Callable[[Shortcode, Build, Page], str]
                ) -> Callable[[Shortcode, Build, Page], str]:
    """A table or figure renderer that also draws it for each GPU beside the default one, in
    content tabs labelled with the GPU's name (linked: one choice switches every tab set)."""
    def tabs(code: Shortcode, build: Build, page: Page) -> str:
        first = render(code, build, page)
        others = build.also_measured_on(code)
        if not others:
            return first
        shown = [(build.timings(None).gpu, first)]
        for slug in others:
            on_other = Shortcode(code.kind, code.args, {**code.options, "gpu": slug}, code.text)
            shown.append((build.timings(slug).gpu, render(on_other, build, page)))
        return tab_set(build, page, shown)

    return tabs


def _plain_html(markdown_text: str) -> str:
    import markdown

    return markdown.markdown(markdown_text, extensions=["tables", "admonition", "pymdownx.details"])


def tab_set(build: Build, page: Page, tabs: list[tuple[str, str]]) -> str:
    """pymdownx.tabbed's alternate-style HTML, written out: a figure's raw HTML inside `===`
    tabs would be indented, and Markdown would wrap it in a paragraph. Each tab's Markdown is
    converted with the site's extensions first."""
    page.tab_sets += 1
    n = page.tab_sets
    inputs = "".join(f'<input{" checked" if i == 0 else ""} id="__gpu_{n}_{i}" name="__gpu_{n}" '
                     'type="radio">' for i in range(len(tabs)))
    labels_html = "".join(f'<label for="__gpu_{n}_{i}">{html.escape(name)}</label>'
                          for i, (name, _) in enumerate(tabs))
    blocks = "".join(f'<div class="tabbed-block">{build.to_html(body)}</div>' for _, body in tabs)
    return (f'\n\n<div class="tabbed-set tabbed-alternate" data-tabs="{n}:{len(tabs)}">{inputs}'
            f'<div class="tabbed-labels">{labels_html}</div><div class="tabbed-content">{blocks}'
            "</div></div>\n\n")


def _figure(module: str, function: str) -> Callable[[Shortcode, Build, Page], str]:
    """A figure renderer that imports its module (matplotlib, MkDocs) only when a page uses it."""
    def render(code: Shortcode, build: Build, page: Page) -> str:
        return getattr(importlib.import_module(f"fieldguide.{module}"), function)(code, build, page)

    return render


RENDERERS: dict[str, Callable[[Shortcode, Build, Page], str]] = {
    "table": in_gpu_tabs(render_table), "value": render_value, "ratio": render_ratio,
    "crossover": render_crossover, "bound": render_bound,
    "chart": in_gpu_tabs(_figure("figures", "render_chart")),
    "timeline": _figure("figures", "render_timeline"),
    "roofline": _figure("figures", "render_roofline"), "memory": _figure("memory_chart", "render_memory"),
}
# The one list of shortcode kinds: the guard's message, the notebooks' filter, the contributing
# page's table (a test compares it) and the tests all read it.
KINDS: tuple[str, ...] = tuple(RENDERERS)
