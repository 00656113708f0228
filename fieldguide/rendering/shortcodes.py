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
    <!-- timing-waterfall: NAME NAME ... [y=FIELD] [xlabel="..."] [title="..."] [gpu=SLUG] -->
                       (each change's share of the gain in a time, first to last)
    <!-- timing-bound: CLAIM [FORMAT] -->   (a bound from CLAIMS in the page's tests)
    <!-- timing-queue: LAUNCH_BENCH WAIT_BENCH -->   (the host queue ahead of the GPU, one run)
    <!-- timing-diagram: NAME -->   (a schematic of DIAGRAMS in fieldguide/rendering/diagrams.py)

Tables and charts without `gpu=` show the default GPU (`timings:` of fieldguide.rendering.render in
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
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fieldguide.measuring import host_bound
from fieldguide.measuring.numbers import (
    bytes_unit,
    carries_unit,
    format_number,
    format_range,
    format_spec,
    format_value,
    unit_of,
)
from fieldguide.measuring.timings import (
    LEASES_WANTED,
    RUNS_WANTED,
    Benchmark,
    CodeKeys,
    Run,
    TimingError,
    Timings,
    disagreeing_range,
    link_summary,
)
from fieldguide.rendering import labels

SHORTCODE = re.compile(r"<!--\s*timing-(?P<kind>[\w-]+):(?P<body>.*?)-->", re.DOTALL)
# Any HTML comment that starts with "timing" in a rendered page: a shortcode nothing rendered, or
# one misspelled so that nothing could (`timings-value:`, a missing colon). The guard
# (fieldguide/rendering/unrendered.py) fails the build on each.
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
    # the indent of the shortcode being rendered: inside an admonition or a list item, where raw
    # HTML would be wrapped in a paragraph, tabs are written as pymdownx.tabbed's `===` blocks
    indent: str = ""
    # (gpu slug, benchmark name) -> the benchmark, for each one the page shows
    shown: dict[tuple[str, str], Benchmark] = field(default_factory=dict)


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
            raise TimingError("no GPU named: set `timings:` of fieldguide.rendering.render under "
                              "markdown_extensions in mkdocs.yml, or gpu=SLUG")
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
            page.shown[(timings.slug, bench.name)] = bench
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
                             "module (fieldguide/rendering/labels.py)")
        return declared

    # --- pages ---------------------------------------------------------------------------------
    def render_page(self, markdown: str, src_uri: str, url: str) -> tuple[str, Page]:
        page = Page(src_uri, url)
        out, last = [], 0
        for match, code in find(markdown):
            renderer = RENDERERS.get(code.kind)
            glued = code.kind == "ratio" and markdown.startswith("×", match.end())
            if glued:  # "<!-- timing-ratio: ... -->×": the sign goes after the number and range
                code.options.setdefault("unit", "×")
            start = markdown.rfind("\n", 0, match.start()) + 1
            indent = markdown[start:match.start()]
            page.indent = indent if indent and not indent.strip() else ""
            try:
                if renderer is None:
                    raise ValueError(f"unknown shortcode kind {code.kind!r}; known: "
                                     f"{', '.join(sorted(RENDERERS))}")
                rendered = renderer(code, self, page)
            except (TimingError, ValueError, KeyError, SyntaxError) as exc:
                page.problems.append(f"{code.text.strip()}: {exc}")
                rendered = f'<span class="timing-missing">[timing unavailable: {code.kind}]</span>'
            # A table or a figure written indented (in an admonition, a list item) keeps that
            # indent on every line: at column 0 it would end the block, and the paragraphs
            # after it would read as code.
            if page.indent and "\n" in rendered:
                # there raw HTML would sit in a paragraph: the tag is a paragraph with a class
                rendered = re.sub(r'^([ \t]*)<p class="timing-tag">(.*?)</p>',
                                  r"\1\2\n\1{: .timing-tag }", rendered, flags=re.M)
                rendered = rendered.replace("\n", "\n" + page.indent)
            page.indent = ""
            out.append(markdown[last:match.start()])
            out.append(rendered)
            last = match.end() + (1 if glued else 0)
        out.append(markdown[last:])
        markdown = one_tag_per_group("".join(out))
        if page.runs:
            markdown = markdown.rstrip("\n") + "\n\n" + measured_on(page) + "\n"
        return markdown, page

    def is_reference(self, slug: str) -> bool:
        """The reference GPU's own folder, or a machine of several of that GPU ('2x-nvidia-h200')."""
        ref = self.default_gpu
        return bool(ref) and (slug == ref or (slug.endswith("-" + ref)
                                              and slug.split("-", 1)[0].rstrip("x").isdigit()))

    def too_few_runs(self, page: Page) -> list[str]:
        """One line per benchmark the page shows from the reference GPU (or a machine of several of
        it) that fewer than RUNS_WANTED runs, or fewer than LEASES_WANTED machine leases, measured
        as its code is now: a published claim rests on no less."""
        short = []
        for (slug, name), bench in sorted(page.shown.items()):
            leases = {r.run.lease for r in bench.records if r.run.lease}  # a run without one counts none
            if self.is_reference(slug) and (len(bench.records) < RUNS_WANTED
                                            or len(leases) < LEASES_WANTED):
                short.append(f"{name} on {slug}: {len(bench.records)} run(s) on {len(leases)} "
                             f"lease(s) measured its code, fewer than {RUNS_WANTED} runs from "
                             f"{LEASES_WANTED} leases; measure it with `make gpu-round` (the timing "
                             "run's --wanted), or keep the page in draft_docs until then")
        return short

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

TAG = re.compile(r'<p class="timing-tag">(?P<gpu>[^·<]+) · (?P<rest>.*?)</p>\n?')


def _dates(runs: list[Run]) -> str:
    dates = sorted(run.date[:10] for run in runs)
    if dates[0] == dates[-1]:
        return dates[0]
    same_month = dates[0][:7] == dates[-1][:7]
    return f"{dates[0]} to {dates[-1][8:] if same_month else dates[-1]}"


def _count(n: int, noun: str) -> str:
    return f"{format_number(n)} {noun}{'' if n == 1 else 's'}"


def tag(benchmarks: list[Benchmark], gpu: str) -> str:
    """The short line under a table or figure: which GPU, how many runs, when. A page shows it
    once per group of tables and figures measured by the same runs (`one_tag_per_group`)."""
    runs = list({run.id: run for b in benchmarks for run in b.runs}.values())
    return (f'<p class="timing-tag">{html.escape(labels.gpu_label(gpu))} · '
            f'{_count(len(runs), "run")} · {_dates(runs)} · '
            f'<a href="#measured-on">how and where</a></p>')


def one_tag_per_group(text: str) -> str:
    """Drops each provenance tag that repeats the last one shown for its GPU: a run of tables and
    figures measured by the same runs gets one tag, under the first."""
    last: dict[str, str] = {}

    def keep_new(match: re.Match[str]) -> str:
        gpu, rest = match["gpu"].strip(), match["rest"]
        if last.get(gpu) == rest:
            return ""
        last[gpu] = rest
        return match[0]

    return TAG.sub(keep_new, text)


# (label, fingerprint key) of what a run's numbers depend on besides the GPU
VERSIONS = (("driver", "driver"), ("CUDA", "cuda_runtime"), ("PyTorch", "torch"),
            ("Triton", "triton"), ("CuPy", "cupy"), ("NumPy", "numpy"), ("Python", "python"))


def _host(fp: dict) -> str | None:
    return f"{fp['cpu_brand']}, {fp['cpu_count']} cores" if fp.get("cpu_brand") else None


def _machine(fp: dict) -> str:
    """SMs and compute capability, and for a machine of several GPUs its link and NCCL."""
    text = f"{fp['sm_count']} SMs, sm_{fp['compute_capability'].replace('.', '')}"
    if (fp.get("gpu_count") or 1) > 1:
        text += f", {link_summary(fp.get('interconnect')) or 'link not recorded'}"
        text += f", NCCL {fp.get('nccl') or 'not recorded'}"
    return text


def _values(runs: list[Run], read: Callable[[dict], str | None]) -> list[str]:
    return sorted({v for v in (read(r.fingerprint) for r in runs) if v})


def measured_on(page: Page) -> str:
    """The page's provenance: one line per GPU (its runs, leases, dates, and each version, with
    every value where runs differ), and every run in a collapsed table."""
    by_gpu: dict[str, list[Run]] = {}
    for gpu, run, _ in sorted(page.runs.values(), key=lambda t: (t[0], t[1].date)):
        by_gpu.setdefault(gpu, []).append(run)
    lines = []
    for gpu, runs in by_gpu.items():
        leases = {r.lease for r in runs if r.lease}
        parts = [f"{label} {' or '.join(vals)}" for label, key in VERSIONS
                 if (vals := _values(runs, lambda fp, key=key: fp.get(key)))]
        hosts = _values(runs, _host)
        lines.append(
            f"- **{html.escape(labels.gpu_label(gpu))}** ({_machine(runs[-1].fingerprint)}): "
            f"{_count(len(runs), 'run')} on {_count(len(leases), 'machine lease')}, "
            f"{_dates(runs)}; {', '.join(parts)}"
            + (f"; host {' or '.join(hosts)}" if hosts else "") + ".")
    every = [(gpu, run) for gpu, runs in by_gpu.items() for run in runs]
    # the per-run table keeps only what tells the runs apart
    varying = [(label, key) for label, key in VERSIONS
               if len({run.fingerprint.get(key) for _, run in every}) > 1]
    head = ["Date (UTC)", "GPU", "Lease", "Commit", *(label for label, _ in varying)]
    rows = ["| " + " | ".join(head) + " |", "|" + ":--|" * len(head)]
    for gpu, run in every:
        fp = run.fingerprint
        commit = f"`{run.commit[:10]}`" + (" (uncommitted changes)" if fp.get("git_dirty") else "")
        cells = [run.date[:16].replace("T", " "), labels.gpu_label(gpu), (run.lease or "–")[:8],
                 commit, *(str(fp.get(key) or "–") for _, key in varying)]
        rows.append("| " + " | ".join(cells) + " |")
    table = "\n".join("    " + row for row in rows)
    return ("## Measured on\n\n"
            "Every number and figure on this page comes from these timing runs. A number is the "
            "median over the runs that measured the current code; where runs disagree by more "
            "than 20 % the page gives their range.\n\n" + "\n".join(lines) + "\n\n"
            f'??? info "Every run behind this page ({format_number(len(every))})"\n\n' + table + "\n")


# --- Text renderers ------------------------------------------------------------------------------

def _with_range(bench: Benchmark, field_name: str, spec: str | None = None, unit: str = "") -> str:
    """The value, and where runs disagree their range in the value's unit, written once:
    "0.0377 GB/s (0.0315–0.0440 over 4 runs)". `unit` follows a value that has none of its own
    (a page's `unit=`)."""
    value = bench.value(field_name)
    spread = bench.spread(field_name)
    if not spread:
        return format_value(field_name, value, spec) + unit
    text, ends = format_range(field_name, value, *spread, spec)
    glued = unit in ("×", "%")
    return f"{text}{unit} ({ends}{unit if glued else ''} over {len(bench.records)} runs)"


def spread_span(text: str, title: str, kind: str = "timing-spread") -> str:
    """A number in prose: the median alone, its spread in the hover title (issue 45: a reader
    reads past a parenthesis of runs and ranges three times a paragraph). Tables keep the
    spread in their cells."""
    return f'<span class="{kind}" title="{html.escape(title, quote=True)}">{text}</span>'


def _median_in_prose(bench: Benchmark, field_name: str, spec: str | None = None, unit: str = "") -> str:
    """The value alone, as prose shows it; where runs disagree, their range in its hover title:
    "0.0377 GB/s" titled "The median of 4 runs, which ranged 0.0315–0.0440 GB/s"."""
    value = bench.value(field_name)
    spread = bench.spread(field_name)
    shown = format_value(field_name, value, spec) + unit
    if not spread:
        return shown
    _, ends = format_range(field_name, value, *spread, spec)
    after = ""   # the unit the ends leave out (format_range writes a glued × or % itself)
    if not spec and isinstance(value, (int, float)):
        measure, base = unit_of(field_name, value)
        if field_name == "bytes" or field_name.endswith("_bytes"):
            measure = bytes_unit(base)
        after = "" if measure.text in ("×", "%") else measure.text
    after += "" if unit in ("×", "%") and ends.endswith(unit) else unit
    return spread_span(shown, f"The median of {len(bench.records)} runs, which ranged "
                              f"{ends}{after}")


def render_table(code: Shortcode, build: Build, page: Page) -> str:
    if not code.args:
        raise ValueError("timing-table needs at least one benchmark name or pattern")
    benches = build.benchmarks(code, code.args, page)
    columns = code.options.get("columns", "median,iqr,runs").split(",")
    return table_markdown(build, benches, columns) + tag(benches, build.timings(code.gpu).gpu)


def table_markdown(build: Build, benches: list[Benchmark], columns: list[str]) -> str:
    head = "| Benchmark | " + " | ".join(labels.column_label(c) for c in columns) + " |"
    rule = "|:--|" + "--:|" * len(columns)
    rows, flagged, host_rows = [], False, {}
    for bench in benches:
        cells = []
        host = host_bound.host_bound(bench, build.root)
        if host:
            host_rows[bench.name] = (bench, host)
        for column in columns:
            if column == "runs":  # a count; where runs disagree, the values give their range
                cells.append(format_number(len(bench.records)))
                continue
            # a spread (IQR, standard deviation) or a count of rounds is shown as it is
            if column in ("iqr", "stddev", "rounds"):
                cell = format_value(column, bench.value(column))
            elif host and host_bound.measured_field(column):
                # a host-bound number: its whole range over every run and machine, however close
                cell = (format_value(column, bench.value(column))
                        + f" ({host_bound.spread_note(bench, column)})")
            else:
                cell = _with_range(bench, column)
            if column == "median" and bench.unsteady():
                cell += ' <span class="timing-flag" title="rounds spread wider than their median">⚠</span>'
                flagged = True
            cells.append(cell)
        rows.append(f"| {build.label(bench)} | " + " | ".join(cells) + " |")
    note = ("\n\n⚠ The rounds of this benchmark spread wider than their median: the median "
            "stands for two kinds of round, and the text says why." if flagged else "")
    if host_rows:
        benches_, reasons = zip(*host_rows.values(), strict=True)
        note += "\n\n" + host_bound.hosts_line(list(benches_), list(reasons))
    return "\n".join(["", head, rule, *rows]) + note + "\n\n"


def render_value(code: Shortcode, build: Build, page: Page) -> str:
    if len(code.args) not in (2, 3):
        raise ValueError("timing-value takes NAME FIELD [FORMAT] [unit=UNIT]")
    name, field_name, *spec = code.args
    (bench,) = build.benchmarks(code, [name], page)
    # unit=GB/s: for a value whose field carries no unit; written once, after the value
    unit = code.options.get("unit", "")
    spec = spec[0] if spec else None
    # A field whose name says its unit (fieldguide/measuring/timings.py, SUFFIXES) reads with it, unless a
    # FORMAT prints the bare number: a `unit=` beside it would print the unit twice ("GiB GiB").
    if unit and not spec and carries_unit(field_name):
        raise ValueError(f"{field_name!r} reads with its own unit ({format_value(field_name, 1)!r} "
                         f"for 1): remove unit={unit}")
    unit = unit if unit in ("", "×", "%") else f" {unit}"
    host = host_bound.host_bound(bench, build.root)
    if host and host_bound.measured_field(field_name):
        text = format_value(field_name, bench.value(field_name), spec) + unit
        note = host_bound.spread_note(bench, field_name, spec, unit)
        return spread_span(text, f"{note[0].upper()}{note[1:]} (the text shows their median, "
                           f"{text.strip()}). Measures the host ({host}). Hosts: "
                           + " · ".join(host_bound.hosts([bench])), "timing-host")
    return _median_in_prose(bench, field_name, spec, unit)


def render_ratio(code: Shortcode, build: Build, page: Page) -> str:
    """NAME[:FIELD] over NAME[:FIELD]. With `unit=×` (given when the page writes × right after
    the shortcode) the sign follows the number: "2,528×", with "Within each of 4 runs:
    1,902–2,859×" in its hover title where runs disagree. A host-bound pair reads as the median
    of its per-run ratios, and its title says so where it differs from the ratio of the two
    medians: "30×" titled "The median of 4 runs' own ratios, 27–104×; the two medians give
    28×"."""
    if len(code.args) not in (2, 3):
        raise ValueError("timing-ratio takes NAME[:FIELD] NAME[:FIELD] [FORMAT]")
    values, per_run, host = [], [], False
    for operand in code.args[:2]:
        name, _, field_name = operand.partition(":")
        (bench,) = build.benchmarks(code, [name], page)
        values.append(bench.value(field_name or "median"))
        per_run.append({r.run.id: r.value(field_name or "median") for r in bench.records})
        host = host or host_bound.host_bound(bench, build.root) is not None
    spec = code.args[2] if len(code.args) == 3 else None
    unit = code.options.get("unit", "")

    def number(value: float) -> str:
        return format_spec(value, spec) if spec else format_number(value)

    # The ratio within each run that measured both: where runs disagree, their range too.
    ratios = [per_run[0][run] / per_run[1][run] for run in per_run[0].keys() & per_run[1].keys()
              if isinstance(per_run[0][run], (int, float)) and per_run[1][run]]
    spread = disagreeing_range(ratios)
    low = number(spread[0]) if spread else ""
    low = low.rstrip("%") if spec and spec.endswith("%") else low
    across = f"{low}–{number(spread[1])}{unit}" if spread else ""
    of_medians = number(values[0] / values[1])
    # A host-bound number moves with the machine: only a ratio within one run compares alike, so
    # the page shows the median of those. Where it reads otherwise than the ratio of the two
    # medians a page prints beside it (timing-value), it says which it is and gives both.
    within = number(statistics.median(ratios)) if host and ratios else of_medians
    if within != of_medians:
        return spread_span(within + unit, f"The median of {len(ratios)} runs' own ratios"
                           + (f", {across}" if spread else "")
                           + f"; the two medians give {of_medians}{unit}")
    if not spread:
        return within + unit
    return spread_span(within + unit, f"Within each of {len(ratios)} runs: {across}")


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
        return f"at none of the sizes measured (up to {_in_prose(x)} = {format_value(x, shared[-1])})"
    spec = code.args[2] if len(code.args) == 3 else None
    if winning_from == shared[-1]:  # ahead at the last size alone: nothing says it stays ahead
        return f"at {_in_prose(x)} = {format_value(x, winning_from, spec)}, the largest size measured"
    return f"from {_in_prose(x)} = {format_value(x, winning_from, spec)} upwards"


def _in_prose(field_name: str) -> str:
    """A field's label inside a sentence: 'Size' -> 'size'; 'GPU 0 idle' stays."""
    text = labels.field_label(field_name)
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


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
    return format_spec(bound, code.args[1]) if len(code.args) == 2 else format_number(bound)


def in_gpu_tabs(render: Callable[[Shortcode, Build, Page], str]
                ) -> Callable[[Shortcode, Build, Page], str]:
    """A table or figure renderer that also draws it for each GPU beside the default one, in
    content tabs labelled with the GPU's name (linked: one choice switches every tab set)."""
    def tabs(code: Shortcode, build: Build, page: Page) -> str:
        first = render(code, build, page)
        others = build.also_measured_on(code)
        if not others:
            return first
        shown = [(labels.gpu_label(build.timings(None).gpu), first)]
        for slug in others:
            on_other = Shortcode(code.kind, code.args, {**code.options, "gpu": slug}, code.text)
            shown.append((labels.gpu_label(build.timings(slug).gpu), render(on_other, build, page)))
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
    if page.indent:   # Markdown tabs: a table's tabs, in a block (raw HTML there would be a <p>)
        return "\n\n" + "".join(f'=== "{name}"\n\n' + "".join(
            f"    {line}\n" if line.strip() else "\n" for line in body.strip("\n").splitlines())
            + "\n" for name, body in tabs)
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
        return getattr(importlib.import_module(f"fieldguide.rendering.{module}"), function)(code, build, page)

    return render


RENDERERS: dict[str, Callable[[Shortcode, Build, Page], str]] = {
    "table": in_gpu_tabs(render_table), "value": render_value, "ratio": render_ratio,
    "crossover": render_crossover, "bound": render_bound,
    "chart": in_gpu_tabs(_figure("figures", "render_chart")),
    "timeline": _figure("figures", "render_timeline"),
    "roofline": _figure("figures", "render_roofline"), "memory": _figure("memory_chart", "render_memory"),
    "waterfall": in_gpu_tabs(_figure("figures", "render_waterfall")),
    "queue": _figure("diagrams", "render_queue"), "diagram": _figure("diagrams", "render_diagram"),
}
# The one list of shortcode kinds: the guard's message, the notebooks' filter, the contributing
# page's table (a test compares it) and the tests all read it.
KINDS: tuple[str, ...] = tuple(RENDERERS)
