"""The site's core ideas drawn: one figure per idea, light and dark, with words for each.

    <!-- timing-queue: LAUNCH_BENCH WAIT_BENCH -->   the host queue ahead of the GPU, from a run
    <!-- timing-diagram: NAME -->                    a schematic from DIAGRAMS (no measured number)

`timing-queue` draws what one timing run measured: how long Python took to queue `kernels`
matrix products (LAUNCH_BENCH) and how long until the GPU had finished them (WAIT_BENCH, which
ends in `torch.cuda.synchronize()`). The run records those two totals, not each launch or each
kernel, so the drawing spreads each total evenly: every launch a `kernels`-th of the queuing
time, every product a `kernels`-th of the rest. The caption says so, and names the GPU and run.

`timing-diagram` draws a schematic: the profiler's trace viewer, the memory visualizer, a ring
all-reduce (computed by simulating the ring, so every chunk label is what the algorithm holds)
and FSDP's unit cycle. They show no measured number.

Every figure is drawn with matplotlib in the charts' light and dark colours (fieldguide/rendering/charts.py)
through the content-keyed cache, per theme in two layouts: wide for a desktop's column, and
narrow (the same words stacked and wrapped, taller) for a phone's, where its text shows at 12 px
or more without scrolling sideways (issue 45). A schematic's narrow layout is part of its entry
in DIAGRAMS. Every figure carries its words three times: a short name (`aria-label` and the
SVG's <title>), a caption, and a description (the SVG's <desc>, and under the figure, linked by
`aria-describedby`).
"""

from __future__ import annotations

import hashlib
import html
import math
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from fieldguide.measuring.numbers import format_value
from fieldguide.measuring.timings import TimingError
from fieldguide.rendering import charts, labels
from fieldguide.rendering.figure_cache import drawn
from fieldguide.rendering.figures import relative_url

# Each figure is drawn twice per theme. The wide drawing, WIDTH_IN wide (inches at 96 px), is
# shown at up to DESKTOP_WIDTH_PX (docs/assets/extra.css, `.fieldguide-diagram`), so FONT_PT shows
# at about the body's 16 px, not 20. The narrow drawing, the same words laid out taller and
# narrower (stacked, wrapped), is shown instead below the stylesheet's 600 px breakpoint at the
# column's full width: on the browser test's 390 px phone, PHONE_COLUMN_PX. Drawn NARROW_WIDTH_IN
# wide, its smallest text (SMALL_PT) shows there at PHONE_TEXT_PX or more, with no sideways
# scrolling (issue 45: the wide drawings showed text at 9.3-10.1 px at 390 px).
WIDTH_IN = 4.8
NARROW_WIDTH_IN = 3.5
FONT_PT = 9.5
SMALL_PT = 9.0
TINY_PT = 8.8   # the smallest text of a wide drawing; a narrow one has none below SMALL_PT
DESKTOP_WIDTH_PX = 576
PHONE_VIEWPORT_PX = 390
# Material's side margins of the content: 0.8rem each, at its root font size of 20 px (125 %)
PHONE_COLUMN_PX = PHONE_VIEWPORT_PX - 2 * 0.8 * 20
PHONE_TEXT_PX = 12
LAYOUTS = ("wide", "narrow")


@dataclass(frozen=True)
class Diagram:
    """A schematic: what it draws, where it is shown, and its words."""

    draw: Callable[[plt.Axes, dict[str, str]], None]   # the wide layout, WIDTH_IN wide
    height_in: float
    narrow: Callable[[plt.Axes, dict[str, str]], None]  # the same words, NARROW_WIDTH_IN wide
    narrow_height_in: float
    page: str          # docs/<chapter>/<page>.md that shows it
    alt: str           # a short name: aria-label and <title>
    caption: str       # HTML under the figure
    description: str   # the figure in words: <desc> and the text under the figure


# --- The host queue, from a timing run ------------------------------------------------------------


def queue_events(launch_s: float, wait_s: float, kernels: int) -> list[dict]:
    """The timeline of `kernels` equal products queued in `launch_s` seconds and finished
    `wait_s` seconds after the first launch: [{"lane", "name", "start", "duration"}], seconds.

    Each launch takes launch_s / kernels; the first product starts when its launch returns and
    the GPU runs them back to back, so each takes (wait_s - launch_s / kernels) / kernels."""
    if kernels < 2 or not 0 < launch_s < wait_s:
        raise TimingError(f"cannot draw a queue from {kernels} launches taking {launch_s} s of "
                          f"{wait_s} s: the launches must take less time than the products")
    per_launch = launch_s / kernels
    per_kernel = (wait_s - per_launch) / kernels
    if per_kernel <= per_launch:
        raise TimingError("each product ran no longer than its launch: there is no queue to draw")
    events = [{"lane": "CPU", "name": f"launch {i + 1}", "start": i * per_launch,
               "duration": per_launch} for i in range(kernels)]
    events.append({"lane": "CPU", "name": "synchronize", "start": launch_s,
                   "duration": wait_s - launch_s})
    events += [{"lane": "GPU", "name": f"product {i + 1}", "start": per_launch + i * per_kernel,
                "duration": per_kernel} for i in range(kernels)]
    return events


def queue_depth(events: list[dict], at: float) -> int:
    """Products launched but not yet started on the GPU at time `at`."""
    launched = sum(e["lane"] == "CPU" and e["name"].startswith("launch")
                   and e["start"] + e["duration"] <= at for e in events)
    started = sum(e["lane"] == "GPU" and e["start"] <= at for e in events)
    return max(0, launched - started)


def timeline_from_trace(trace_events: list[dict]) -> list[dict]:
    """What a torch.profiler Chrome trace says of a queue: each kernel launch and device
    synchronization on the CPU, each kernel on the GPU, as timeline rows
    ([{"lane", "name", "start", "duration"}], seconds from the first launch) that the
    `timing-timeline` shortcode draws. benchmarks/bench_async_execution.py records them."""
    rows = []
    for event in trace_events:
        if event.get("ph") != "X":
            continue
        name, category = event.get("name", ""), event.get("cat", "")
        api = category in ("cuda_runtime", "cuda_driver")   # cuBLAS may launch through either
        if api and "LaunchKernel" in name:
            lane, label = "CPU: Python", "launch"
        elif api and name == "cudaDeviceSynchronize":
            lane, label = "CPU: Python", "synchronize"
        elif category == "kernel":
            lane, label = "GPU: stream", "kernel"
        else:
            continue
        rows.append({"lane": lane, "name": label, "start": float(event["ts"]),
                     "duration": float(event["dur"])})
    launches = [r["start"] for r in rows if r["name"] == "launch"]
    if not launches or not any(r["name"] == "kernel" for r in rows):
        raise TimingError("the trace holds no kernel launch or no kernel: was CUDA profiled?")
    first = min(launches)
    return sorted(({**r, "start": (r["start"] - first) / 1e6, "duration": r["duration"] / 1e6}
                   for r in rows), key=lambda r: (r["lane"], r["start"]))


LANES = ("CPU: Python", "queue", "GPU: stream")


def QUEUE_Y(depth: int, kernels: int) -> float:  # noqa: N802 - a coordinate, read as a formula
    """Where a queue of `depth` products is drawn in its lane (row 1): higher when longer."""
    return 1.4 - 0.8 * depth / kernels


def _queue_panel(ax, colors, events, end, title, layout="wide"):
    unit, scale = charts.time_unit([end])
    cpu, gpu = charts.PALETTE[0], charts.PALETTE[1]
    kernels = sum(e["lane"] == "GPU" for e in events)
    shown = [e for e in events if e["start"] < end]
    for e in shown:
        row = 0 if e["lane"] == "CPU" else 2
        start, stop = e["start"] / scale, min(e["start"] + e["duration"], end) / scale
        waiting = e["name"] == "synchronize"
        color = cpu if e["lane"] == "CPU" else gpu
        ax.broken_barh([(start, stop - start)], (row - 0.32, 0.64),
                       facecolors="none" if waiting else color + FILL,
                       edgecolor=color, hatch="///" if waiting else None, linewidth=0.8)
    # the queue: products launched but not started, as a step line within its lane
    times = sorted({0.0, end, *(e["start"] + e["duration"] for e in events if e["lane"] == "CPU"),
                    *(e["start"] for e in events if e["lane"] == "GPU")})
    times = [t for t in times if t <= end]
    depth = [queue_depth(events, t) for t in times]
    ax.step([t / scale for t in times], [QUEUE_Y(d, kernels) for d in depth], where="post",
            color=colors["text"], linewidth=1.2)
    ax.set_xlim(0, end / scale)
    ax.set_ylim(2.6, -0.6)
    ax.set_yticks(range(3), LANES)
    ax.set_xlabel(f"time since the first launch ({unit})")
    ax.set_title(title if layout == "wide" else _wrap(title, 36), loc="left", fontsize=FONT_PT,
                 color=colors["text"])
    ax.grid(True, axis="x", color=colors["grid"], linewidth=0.6)
    return scale, depth


def draw_queue(events: list[dict], kernels: int) -> dict[str, dict[str, str]]:
    """Two panels: the whole call, and its first moments enlarged."""
    launch_end = max(e["start"] + e["duration"] for e in events if e["name"].startswith("launch"))
    wait_end = max(e["start"] + e["duration"] for e in events)
    peak = max(queue_depth(events, e["start"] + e["duration"]) for e in events if e["lane"] == "CPU")

    def plot(fig, colors, layout):
        whole, first = fig.subplots(2, 1)
        scale, _ = _queue_panel(whole, colors, events, wait_end,
                                "The whole call: Python waits in synchronize()", layout)
        for e in events:
            if e["lane"] == "GPU":
                n = e["name"].split()[-1]
                whole.text((e["start"] + e["duration"] / 2) / scale, 2, n, ha="center",
                           va="center", fontsize=SMALL_PT, color=colors["text"])
        whole.text((launch_end + (wait_end - launch_end) / 2) / scale, 0, "synchronize(): waiting",
                   ha="center", va="center", fontsize=SMALL_PT, color=colors["text"],
                   bbox={"facecolor": colors["back"], "edgecolor": "none", "pad": 1.5})
        window = launch_end * 1.5
        scale, depth = _queue_panel(first, colors, events, window,
                                    f"Its first {format_value('median', window)}, enlarged", layout)
        # narrow, the words take more of the width: under the queue's line, not across it
        first.text(window / scale * 0.98, 1.2 if layout == "wide" else 1.55,
                   f"{peak} queued ahead of the GPU", ha="right",
                   va="center", fontsize=SMALL_PT, color=colors["text"])
        first.text(window / scale * 0.98, 2, "product 1 runs  ", ha="right", va="center",
                   fontsize=SMALL_PT, color=colors["text"])
        first.text(launch_end / 2 / scale, -0.48, f"{kernels} launches", ha="center",
                   va="center", fontsize=SMALL_PT, color=colors["text"])

    return _drawings(plot, {"wide": 5.4, "narrow": 6.0})


# --- Drawing, in both themes ----------------------------------------------------------------------

# Filled shapes are the palette's colours at a third of their strength (FILL, an alpha), so the
# theme's own text colour (charts.THEMES) reads on them in both themes.
FILL = "59"
BACKGROUND = {"light": "#ffffff", "dark": "#1e2129"}


def _drawings(plot: Callable, heights_in: dict[str, float]) -> dict[str, dict[str, str]]:
    """{theme: {layout: svg}}: `plot(fig, colors, layout)` drawn per theme in each layout,
    WIDTH_IN ("wide") or NARROW_WIDTH_IN ("narrow") wide and heights_in[layout] tall."""
    widths = {"wide": WIDTH_IN, "narrow": NARROW_WIDTH_IN}
    svgs: dict[str, dict[str, str]] = {}
    for theme, base in charts.THEMES.items():
        colors = {**base, "back": BACKGROUND[theme]}
        svgs[theme] = {}
        for layout in LAYOUTS:
            with charts._themed(colors), plt.rc_context({"font.size": FONT_PT}):
                fig = plt.figure(figsize=(widths[layout], heights_in[layout]))
                plot(fig, colors, layout)
                fig.patch.set_alpha(0)
                for ax in fig.axes:
                    ax.patch.set_alpha(0)
                fig.tight_layout()
                svg = charts._svg(fig)
            svgs[theme][layout] = svg.replace("<svg ", f'<svg style="color-scheme: {theme}" ', 1)
    return svgs


def _wrap(text: str, width: int) -> str:
    """`text` (its lines joined) wrapped to lines of at most `width` characters, at spaces only:
    a narrow drawing says the same words as the wide one, on more lines."""
    return textwrap.fill(" ".join(text.split()), width, break_long_words=False,
                         break_on_hyphens=False)


def _with_words(svg: str, alt: str, description: str) -> str:
    """The SVG with its name and description as <title> and <desc>, its first children."""
    opening = re.search(r"<svg\b[^>]*>", svg)
    words = f"<title>{html.escape(alt)}</title><desc>{html.escape(description)}</desc>"
    return svg[:opening.end()] + words + svg[opening.end():]


def embed(build, page, name: str, svgs: dict[str, dict[str, str]], alt: str, caption: str,
          description: str) -> str:
    """<figure> with one <object> per theme and layout (role img, named by `alt`, described by
    the text under it), the caption, and the description in words. The stylesheet shows the
    reader's theme, wide above its 600 px breakpoint and narrow below it (docs/assets/extra.css:
    `.timing-chart object`), each at the column's width or less: nothing scrolls sideways."""
    ident = f"figure-{name}-words"
    label = html.escape(alt, quote=True)
    objects = []
    for theme, layouts in svgs.items():
        for layout in LAYOUTS:
            svg = _with_words(layouts[layout], alt, description)
            suffix = theme if layout == "wide" else f"{theme}-{layout}"
            path = f"assets/charts/{name}-{hashlib.sha256(svg.encode()).hexdigest()[:12]}-{suffix}.svg"
            build.figures[path] = svg
            objects.append(f'<object class="timing-{layout} only-{theme}" '
                           f'type="image/svg+xml" data="{relative_url(path, page.url)}" role="img" '
                           f'aria-label="{label}" aria-describedby="{ident}">{label}</object>')
    return (f'\n<figure class="timing-chart fieldguide-diagram" id="figure-{name}">\n'
            + "\n".join(objects)
            + f"\n<figcaption>{caption}</figcaption>\n</figure>\n\n"
            # Markdown, not raw HTML: the glossary's terms in it get their tooltips (abbr), and
            # attr_list gives the paragraph the id the drawings' aria-describedby names
            f'??? abstract "The figure in words"\n\n    {description}\n    {{: #{ident} }}\n\n')


# --- Shortcodes -----------------------------------------------------------------------------------


def render_queue(code, build, page) -> str:
    """LAUNCH_BENCH WAIT_BENCH: the newest run that measured both, drawn as a queue. The page's
    text and table give medians and ranges over every run; the figure says it is one of them."""
    if len(code.args) != 2:
        raise ValueError("timing-queue takes LAUNCH_BENCH WAIT_BENCH")
    launch, wait = build.benchmarks(code, code.args, page)
    waits = {r.run.id: r for r in wait.records}
    both = [r for r in launch.records if r.run.id in waits]
    if not both:
        raise TimingError(f"no run measured both {launch.name} and {wait.name}")
    launch_record = both[-1]
    wait_record = waits[launch_record.run.id]
    kernels = int(launch_record.value("kernels"))
    if int(wait_record.value("kernels")) != kernels:
        raise TimingError(f"{launch.name} and {wait.name} queued different numbers of products")
    launch_s, wait_s = launch_record.value("median"), wait_record.value("median")
    events = queue_events(launch_s, wait_s, kernels)
    svgs = drawn(build.root, draw_queue, events, kernels)
    gpu = labels.gpu_label(build.timings(code.gpu).gpu)
    run = launch_record.run
    when = run.date[:16].replace("T", " ") + " UTC"
    alt = f"Timeline: Python queues {kernels} products and waits while the {gpu} runs them"
    runs = len(both)
    one_of = f"one of the {runs} runs that measured both" if runs > 1 else "the one run"
    # One sentence a reader takes in at a glance; the run, its date, the benchmarks and how
    # the two measured totals are spread over launches and products are in the words below.
    caption = (f"Python queues {kernels} matrix products and then waits while the "
               f"{html.escape(gpu)} runs them, drawn from {one_of} (the newest); the text and "
               "the table above give the medians over all of them.")
    description = (
        f"Two timelines with three rows: the CPU running Python, the queue of work waiting for the "
        f"GPU, and the GPU's stream. Python launches {kernels} matrix products one after "
        f"another, each launch returning in about {format_value('median', launch_s / kernels)} "
        f"on average; "
        f"the GPU starts the first product as soon as it is launched, and the rest wait in the "
        f"queue, which grows to {max(queue_depth(events, e['start'] + e['duration']) for e in events)} "
        f"products within {format_value('median', launch_s)}. Python then calls "
        f"torch.cuda.synchronize() and waits, doing nothing, while the GPU runs the products back "
        f"to back, about {format_value('median', (wait_s - launch_s / kernels) / kernels)} each "
        f"on average; "
        f"the queue shrinks by one as each starts, and Python goes on only when the last one ends, "
        f"{format_value('median', wait_s)} after the first launch. Only the two totals were "
        f"measured, on the {gpu}, in run {run.id} of {when}, {one_of}: {launch.name} "
        f"({format_value('median', launch_s)} to queue) and {wait.name} "
        f"({format_value('median', wait_s)} until done). Each launch is drawn as a "
        f"{_ordinal(kernels)} of the time to queue, each product as a {_ordinal(kernels)} of "
        "the remaining time.")
    return embed(build, page, "host-queue", svgs, alt, caption, description)


def _ordinal(n: int) -> str:
    return {2: "half", 4: "quarter", 10: "tenth"}.get(n, f"1/{n}")


def render_diagram(code, build, page) -> str:
    """NAME: a schematic of DIAGRAMS, on the page the registry names for it."""
    if len(code.args) != 1 or code.args[0] not in DIAGRAMS:
        raise ValueError(f"timing-diagram takes one NAME of {', '.join(sorted(DIAGRAMS))}")
    name = code.args[0]
    diagram = DIAGRAMS[name]
    if page.src_uri != diagram.page.removeprefix("docs/"):
        raise ValueError(f"the {name} diagram belongs on {diagram.page} (DIAGRAMS in "
                         "fieldguide/rendering/diagrams.py), not here")
    svgs = drawn(build.root, draw_schematic, name)
    return embed(build, page, name, svgs, diagram.alt, diagram.caption, diagram.description)


def draw_schematic(name: str) -> dict[str, dict[str, str]]:
    diagram = DIAGRAMS[name]

    def plot(fig, colors, layout):
        ax = fig.subplots()
        (diagram.draw if layout == "wide" else diagram.narrow)(ax, colors)

    return _drawings(plot, {"wide": diagram.height_in, "narrow": diagram.narrow_height_in})


# --- Schematics ------------------------------------------------------------------------------------


def _box(ax, x, y, w, h, text, color, colors, *, dashed=False, size=SMALL_PT):
    """A rounded box at (x, y) (lower left), w × h in data units, with centred text."""
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.06",
                                facecolor=color + FILL, edgecolor=color, linewidth=1.0,
                                linestyle="--" if dashed else "-"))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size,
            color=colors["text"], linespacing=1.15)


def _arrow(ax, start, end, colors, *, color=None, style="-|>", rad=0.0, width=1.0):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=9,
                                 color=color or colors["text"], linewidth=width,
                                 connectionstyle=f"arc3,rad={rad}", shrinkA=1, shrinkB=1))


def _canvas(ax, width, height):
    """Data units of the drawing: x from 0 to width, y from 0 (top) to height (bottom)."""
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.set_axis_off()


def _callout(ax, x, y, n, colors):
    """A numbered mark, explained in the list under the drawing."""
    ax.text(x, y, str(n), ha="center", va="center", fontsize=SMALL_PT, fontweight="bold",
            color=colors["back"], bbox={"boxstyle": "circle,pad=0.18", "facecolor": colors["text"],
                                        "edgecolor": "none"})


def _notes(ax, x, y, notes, colors, step=0.42):
    """The numbered explanations, one line each, from (x, y) down."""
    for i, note in enumerate(notes, start=1):
        _callout(ax, x + 0.15, y + i * step - step, i, colors)
        ax.text(x + 0.45, y + i * step - step, note, ha="left", va="center", fontsize=SMALL_PT,
                color=colors["text"])


# A narrow drawing's units: 10 across NARROW_WIDTH_IN, as long up as across, so a line of SMALL_PT
# text is about LINE tall and a unit holds about four characters.
LINE = 0.45


def _narrow_canvas(ax, height):
    """x from 0 to 10, y from 0 (top) to `height`, a unit as long up as across; the figure made
    tall enough for the canvas to take its whole width (tight_layout's margins aside)."""
    _canvas(ax, 10, height)
    ax.set_aspect("equal")
    margins_in = 0.4
    fig = ax.figure
    fig.set_figheight(max(fig.get_figheight(),
                          height * (NARROW_WIDTH_IN - margins_in) / 10 + margins_in))


def _wrapped_notes(ax, x, y, notes, colors, width):
    """_notes, each wrapped to `width` characters; where the next text would go."""
    for i, note in enumerate(notes, start=1):
        text = _wrap(note, width)
        _callout(ax, x + 0.3, y, i, colors)
        ax.text(x + 0.8, y - LINE / 2, text, ha="left", va="top", fontsize=SMALL_PT,
                color=colors["text"], linespacing=1.15)
        y += (text.count("\n") + 1) * LINE + 0.25
    return y


# The profiler's trace viewer ------------------------------------------------------------------------

# step 1 of the trace schematic: the host's forward span and the GPU's two products (x from, to);
# callout 1 reads them: forward ends after the first kernel, before the last
TRACE_FORWARD = (0.1, 4.3)
TRACE_KERNELS = [(1.7, 4.1), (4.15, 6.45)]
TRACE_NOTES = [
    "the host runs ahead: forward ends before its last kernel does",
    "cudaStreamSynchronize: the thread waits for the stream",
    "flow arrows: each launch to the kernel it started",
    "a gap: the GPU waits for the host; shorten the host work",
]
TRACE_ROWS = (0.45, 0.92, 1.39, 2.75)   # y of the spans, operators, runtime calls and kernels
TRACE_LAUNCH = "← cudaLaunchKernel(ExC)"
TRACE_LAUNCH_RIGHT = "cudaLaunchKernel(ExC)\n→"   # two lines: the narrow part has 5 cm for it


def _trace_marks(colors) -> list[tuple]:
    """What the trace schematic draws, in the wide drawing's units (x 0-10, y 0-6 down), as
    ("box", x, y, w, h, text, color, dashed), ("arrow", start, end), ("text", x, y, text, ha),
    ("rule", y), ("span", x0, x1, y) (a double arrow) and ("callout", x, y, n)."""
    cpu, gpu, wait = charts.PALETTE[0], charts.PALETTE[1], charts.PALETTE[3]
    top, mid, low, stream = TRACE_ROWS
    marks: list[tuple] = [
        ("text", 0, 0.15, "python thread (CPU)", "left"),
        ("text", 0, 2.42, "CUDA stream 7 (GPU)", "left"),
        ("rule", 2.2),
        # step 1: forward queues two products; loss.item() waits until they are done
        ("box", TRACE_FORWARD[0], top, TRACE_FORWARD[1] - TRACE_FORWARD[0], 0.42, "forward", cpu,
         False)]
    launches = []
    for i in range(2):
        x = 0.15 + i * 2.05
        marks += [("box", x, mid, 1.95, 0.42, "aten::mm", cpu, False),
                  ("box", x + 1.3, low, 0.22, 0.42, "", cpu, False)]
        launches.append(x + 1.41)
    marks += [("text", 4.4, low + 0.21, TRACE_LAUNCH, "left"),
              ("box", 4.4, top, 2.1, 0.42, "aten::item", cpu, False),
              ("box", 4.45, mid, 2.15, 0.42, "cudaStream…", wait, True),
              # step 2 starts after the host's own work; meanwhile the GPU has nothing queued
              ("box", 6.6, top, 1.45, 0.42, "host code", cpu, False),
              ("box", 8.15, top, 1.8, 0.42, "forward", cpu, False)]
    for i in range(3):
        x = 8.2 + i * 0.58
        marks += [("box", x, mid, 0.52, 0.42, "", cpu, False),
                  ("box", x + 0.2, low, 0.16, 0.42, "", cpu, False)]
    for i, (start, stop) in enumerate(TRACE_KERNELS):
        marks += [("box", start, stream, stop - start - 0.05, 0.42, "gemm", gpu, False),
                  ("arrow", (launches[i], low + 0.42), (start + 0.08, stream))]
    for i in range(2):
        start = 8.5 + i * 0.6
        marks += [("box", start, stream, 0.55, 0.42, "", gpu, False),
                  ("arrow", (8.48 + i * 0.58, low + 0.42), (start + 0.08, stream))]
    # .item() copies the loss to the host: a thin copy after the last kernel, then the wait ends
    marks += [("box", 6.45, stream, 0.12, 0.42, "", wait, False),
              ("text", 6.51, stream - 0.2, "Memcpy DtoH", "center"),
              ("span", 6.6, 8.5, stream + 0.21),
              ("text", 7.7, stream + 0.7, "GPU idle", "center"),
              ("callout", 4.0, 0.15, 1), ("callout", 5.45, 0.15, 2),
              ("callout", 0.6, stream + 0.21, 3), ("callout", 6.75, stream + 0.7, 4)]
    return marks


def _draw_marks(ax, marks, colors, x0=0.0, x1=10.0, xscale=1.0, yscale=1.0, dy=0.0):
    """The marks whose place lies within x0-x1 (a box: the part that does, with its text when
    most of it does), drawn at ((x - x0) * xscale, y * yscale + dy)."""
    def at(x, y):
        return (x - x0) * xscale, y * yscale + dy

    for kind, *mark in marks:
        if kind == "box":
            x, y, w, h, text, color, dashed = mark
            left, right = max(x, x0), min(x + w, x1)
            if right - left > 0.01:
                (px, py), (qx, _) = at(left, y), at(right, y)
                _box(ax, px, py, qx - px, h * yscale, text if right - left > w / 2 else "",
                     color, colors, dashed=dashed)
        elif kind == "arrow" and all(x0 <= x <= x1 for x, _ in mark):
            _arrow(ax, at(*mark[0]), at(*mark[1]), colors, width=0.8)
        elif kind == "text" and x0 <= mark[0] <= x1:
            x, y, text, ha = mark
            ax.text(*at(x, y), text, ha=ha, va="center", fontsize=SMALL_PT, color=colors["text"])
        elif kind == "rule":
            ax.plot([0, (x1 - x0) * xscale], [at(0, mark[0])[1]] * 2, color=colors["grid"],
                    linewidth=0.8)
        elif kind == "span" and x0 <= mark[0] and mark[1] <= x1:
            ax.annotate("", xy=at(mark[0], mark[2]), xytext=at(mark[1], mark[2]),
                        arrowprops={"arrowstyle": "<->", "color": colors["text"], "linewidth": 0.8})
        elif kind == "callout" and x0 <= mark[0] <= x1:
            _callout(ax, *at(mark[0], mark[1]), mark[2], colors)


def draw_trace(ax, colors):
    """Two steps as Perfetto or chrome://tracing shows them: the Python thread's spans nested
    (user annotation, aten:: operator, CUDA runtime call), the CUDA stream's kernels, the flow
    arrow from each launch to its kernel, the loss's copy to the host that .item() waits for,
    and the gap where the GPU waits for the host."""
    _canvas(ax, 10, 6.0)
    _draw_marks(ax, _trace_marks(colors), colors)
    _notes(ax, 0, 4.05, TRACE_NOTES, colors)


# The narrow trace: the timeline cut in two, each part across the whole width, one under the other
# (the second in the rows the first names), cut after step 1's two products and the copy, so
# that no kernel is cut in two (one cut in two read as a third kernel) and the first callout's
# "forward ends before its last kernel does" is seen whole; the launch calls named where the
# second part has room, before step 2's launches, on two lines.
TRACE_PARTS = ((0.0, 6.65), (6.55, 10.0))


def draw_trace_narrow(ax, colors):
    """draw_trace for a phone: its two steps in two parts, one under the other, each as wide
    as the drawing; the notes wrapped under them."""
    marks = []
    for mark in _trace_marks(colors):
        if mark[0] == "text" and mark[3] == TRACE_LAUNCH:
            mark = ("text", 8.25, mark[2] + 0.1, TRACE_LAUNCH_RIGHT, "right")
        marks.append(mark)
    yscale, dy = 1.8, 0.0
    for x0, x1 in TRACE_PARTS:
        _draw_marks(ax, marks, colors, x0, x1, 10 / (x1 - x0), yscale, dy)
        bottom = max(m[2] + 0.3 if m[0] == "text" else m[2] + m[4] if m[0] == "box" else 0
                     for m in marks if m[0] in ("text", "box") and x0 <= m[1] <= x1)
        dy += (bottom + 0.3) * yscale
    bottom = _wrapped_notes(ax, 0, dy, TRACE_NOTES, colors, 40)
    _narrow_canvas(ax, bottom)


# The memory visualizer's Active Memory Timeline ----------------------------------------------------

# (name, allocated at event, freed at event or None, size): one training step of the memory page's
# loop (AdamW, zero_grad(set_to_none=True)), schematic: the first step, when AdamW allocates its
# two state tensors per parameter, then (foreach, the CUDA default) a parameter-sized temporary
# (_foreach_sqrt of exp_avg_sq) that the update frees again
MEMORY_BANDS = [
    ("parameter 1", 0, None, 1.0), ("parameter 2", 0, None, 1.0), ("parameter 3", 0, None, 1.0),
    ("activation 1", 2, 17, 1.2),
    ("activation 2", 4, 15, 1.2),
    ("activation 3", 6, 13, 1.2),
    ("temporary", 8, 10, 0.8),
    ("activation 4", 9, 12, 1.2),
    ("gradient 3", 12, 27, 1.0), ("gradient 2", 14, 27, 1.0), ("gradient 1", 16, 27, 1.0),
    ("exp_avg 1", 19, None, 1.0), ("exp_avg_sq 1", 20, None, 1.0),
    ("exp_avg 2", 21, None, 1.0), ("exp_avg_sq 2", 22, None, 1.0),
    ("exp_avg 3", 23, None, 1.0), ("exp_avg_sq 3", 24, None, 1.0),
    ("update temporary", 25, 26, 3.0),
]
MEMORY_EVENTS = 28


def memory_stack(bands=MEMORY_BANDS, events=MEMORY_EVENTS):
    """The visualizer's stacking: each live allocation sits on the ones allocated before it;
    when one is freed, those above it slide down. {name: [(event, bottom)]} and the total."""
    lows = {name: [] for name, *_ in bands}
    totals = []
    for t in range(events + 1):
        bottom = 0.0
        for name, start, end, size in bands:
            if start <= t and (end is None or t < end):
                lows[name].append((t, bottom))
                bottom += size
        totals.append(bottom)
    return lows, totals


MEMORY_PARAMETERS = "parameters (allocated before recording)"


def draw_memory(ax, colors, narrow=False):
    lows, totals = memory_stack()
    palette = charts.PALETTE
    for i, (name, _start, _end, size) in enumerate(MEMORY_BANDS):
        points = lows[name]
        xs = [t for t, _ in points] + [points[-1][0] + 1]
        bottoms = [b for _, b in points] + [points[-1][1]]
        color = palette[i % len(palette)]
        ax.fill_between(xs, bottoms, [b + size for b in bottoms], step="post",
                        facecolor=color + "99", edgecolor=color, linewidth=0.8)
    ax.set_xlim(0, MEMORY_EVENTS)
    ax.set_ylim(0, max(totals) * 1.35)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel("allocator events (not seconds) →")
    ax.set_ylabel("bytes allocated →")
    for spine in ax.spines.values():
        spine.set_color(colors["grid"])
    top = max(totals)
    ax.text(MEMORY_EVENTS / 2, 1.5, _wrap(MEMORY_PARAMETERS, 24) if narrow else MEMORY_PARAMETERS,
            ha="center",
            va="center", fontsize=SMALL_PT, color=colors["text"],
            bbox={"facecolor": colors["back"], "edgecolor": "none", "pad": 1.5, "alpha": 0.85})
    # narrow, each in the middle of its phase: "backward" is as wide as its phase there
    phases = ((5.75, "forward"), (15.0, "backward"), (23.25, "optimizer")) if narrow else (
        (3.0, "forward"), (13.5, "backward"), (23.0, "optimizer"))
    for x, label in phases:
        ax.text(x, top * 1.22, label, ha="center", va="center", fontsize=SMALL_PT,
                color=colors["text"])
    for x in (11.5, 18.5):   # phase boundaries, above the parameters' label
        ax.plot([x, x], [3.0, top * 1.35], color=colors["grid"], linestyle=":", linewidth=1.0)
    _callout(ax, 7.5, 5.6, 1, colors)
    _callout(ax, 15.5, 6.2, 2, colors)
    _callout(ax, 25.5, 13.5, 3, colors)
    _callout(ax, 27.3, 10.2, 4, colors)


MEMORY_NOTES = [
    "a band is one tensor: hover for its size and stack",
    "a tensor freed below others: the bands above slide down",
    "foreach AdamW: a temporary as large as the parameters",
    "after: parameters, two AdamW states per parameter",
]


def draw_memory_with_notes(ax, colors):
    draw_memory(ax, colors)
    for i, note in enumerate(MEMORY_NOTES, start=1):
        y = -0.16 - 0.12 * i
        ax.text(0.03, y, str(i), transform=ax.transAxes, ha="center", va="center",
                fontsize=SMALL_PT, fontweight="bold", color=colors["back"],
                bbox={"boxstyle": "circle,pad=0.18", "facecolor": colors["text"], "edgecolor": "none"})
        ax.text(0.08, y, note, transform=ax.transAxes, ha="left", va="center", fontsize=SMALL_PT,
                color=colors["text"])


def draw_memory_narrow(ax, colors):
    """The same chart, taller; its notes wrapped under it, placed in points below the axes."""
    draw_memory(ax, colors, narrow=True)
    y = -34.0
    for i, note in enumerate(MEMORY_NOTES, start=1):
        text = _wrap(note, 40)
        ax.annotate(str(i), (0, 0), xycoords="axes fraction", xytext=(4, y),
                    textcoords="offset points", ha="center", va="center", fontsize=SMALL_PT,
                    fontweight="bold", color=colors["back"],
                    bbox={"boxstyle": "circle,pad=0.18", "facecolor": colors["text"],
                          "edgecolor": "none"})
        ax.annotate(text, (0, 0), xycoords="axes fraction", xytext=(16, y + 6),
                    textcoords="offset points", ha="left", va="top", fontsize=SMALL_PT,
                    color=colors["text"], linespacing=1.15)
        y -= (text.count("\n") + 1) * SMALL_PT * 1.15 * 1.2 + 6


# Ring all-reduce -------------------------------------------------------------------------------------

def ring_all_reduce(n: int = 4) -> list[tuple[str, list[list[frozenset[int]]], list[tuple[int, int]]]]:
    """The ring algorithm on `n` ranks, each holding `n` chunks: [(stage, state, sends)], where
    state[rank][chunk] is the set of ranks whose data that chunk of that rank has summed, and
    sends the (rank, chunk) each rank sends to rank + 1 in that stage."""
    state = [[frozenset({rank}) for _chunk in range(n)] for rank in range(n)]
    stages = [("start", [row[:] for row in state], [])]
    for step in range(n - 1):   # reduce-scatter: add what the left neighbour sends
        sends = [(rank, (rank - step) % n) for rank in range(n)]
        new = [row[:] for row in state]
        for rank, chunk in sends:
            new[(rank + 1) % n][chunk] = state[(rank + 1) % n][chunk] | state[rank][chunk]
        state = new
        stages.append((f"reduce-scatter {step + 1}", [row[:] for row in state], sends))
    for step in range(n - 1):   # all-gather: copy the summed chunk the left neighbour sends
        sends = [(rank, (rank + 1 - step) % n) for rank in range(n)]
        new = [row[:] for row in state]
        for rank, chunk in sends:
            new[(rank + 1) % n][chunk] = state[rank][chunk]
        state = new
        stages.append((f"all-gather {step + 1}", [row[:] for row in state], sends))
    return stages


CHUNKS = "ABCDEFGH"


def draw_ring(ax, colors, n: int = 4):
    stages = ring_all_reduce(n)
    left, cell, gap, row_h = 1.25, 0.46, 0.26, 0.6
    width = left + n * (n * cell + gap)
    heads = _ring_heads(n)
    rows = len(stages) + len(heads)
    _canvas(ax, width, 0.75 + row_h * rows + 1.3)
    for rank in range(n):
        x = left + rank * (n * cell + gap)
        ax.text(x + n * cell / 2, 0.35, f"rank {rank}", ha="center", va="center",
                fontsize=SMALL_PT, color=colors["text"], fontweight="bold")
    y = 0.75
    for s, (stage, state, sends) in enumerate(stages):
        if s in heads:
            ax.text(0, y + cell / 2, heads[s], ha="left", va="center", fontsize=SMALL_PT,
                    color=colors["text"], fontweight="bold")
            y += row_h
        label = f"step {stage.split()[-1]}" if s else "start"
        ax.text(0, y + cell / 2, label, ha="left", va="center", fontsize=SMALL_PT,
                color=colors["text"])
        sent = set(sends)
        for rank in range(n):
            for chunk in range(n):
                x = left + rank * (n * cell + gap) + chunk * cell
                _ring_chunk(ax, x, y, cell, rank, chunk, state, sent, colors, n, TINY_PT)
        y += row_h
    y += 0.2
    for i, line in enumerate(_ring_note(n)):
        ax.text(0, y + i * 0.36, line, ha="left", va="center", fontsize=SMALL_PT,
                color=colors["text"])


def _ring_heads(n: int) -> dict[int, str]:
    """The headings above the stages they start."""
    return {1: "reduce-scatter: add the chunk that arrives", n: "all-gather: keep the chunk that arrives"}


def _ring_note(n: int) -> list[str]:
    return [f"A{n}: chunk A, summed over {n} ranks' data. Outlined: sent to",
            f"the next rank (rank {n - 1} to rank 0). Each rank sends {2 * (n - 1)} chunks",
            f"of 1/{n} of the tensor: 2(n − 1)/n = {_fraction(2 * (n - 1), n)} times its size."]


def _ring_chunk(ax, x, y, cell, rank, chunk, state, sent, colors, n, size):
    """One chunk of one rank: shaded by how many ranks' data it holds, outlined when sent."""
    shade, done = charts.PALETTE[0], charts.PALETTE[2]
    summed = len(state[rank][chunk])
    full = summed == n
    alpha = format(int(40 + 180 * summed / n), "02x")
    ax.add_patch(plt.Rectangle((x + 0.02, y), cell - 0.04, cell,
                               facecolor=(done if full else shade) + alpha,
                               edgecolor=colors["text"] if (rank, chunk) in sent
                               else (done if full else shade),
                               linewidth=1.6 if (rank, chunk) in sent else 0.6))
    ax.text(x + cell / 2, y + cell / 2, f"{CHUNKS[chunk]}{summed}", ha="center",
            va="center", fontsize=size, color=colors["text"])


def draw_ring_narrow(ax, colors, n: int = 4):
    """draw_ring for a phone: each rank's chunks in a square (A B over C D), the headings and
    the note wrapped."""
    stages = ring_all_reduce(n)
    side = math.ceil(math.sqrt(n))
    left, cell, gap, stage_gap = 1.75, 0.86, 0.42, 0.34
    block = side * cell
    heads = _ring_heads(n)
    for rank in range(n):
        x = left + rank * (block + gap)
        ax.text(x + block / 2, 0.3, f"rank {rank}", ha="center", va="center",
                fontsize=SMALL_PT, color=colors["text"], fontweight="bold")
    y = 0.85
    for s, (stage, state, sends) in enumerate(stages):
        if s in heads:
            text = _wrap(heads[s], 40)
            ax.text(0, y, text, ha="left", va="top", fontsize=SMALL_PT, color=colors["text"],
                    fontweight="bold", linespacing=1.15)
            y += (text.count("\n") + 1) * LINE + 0.2
        label = f"step {stage.split()[-1]}" if s else "start"
        ax.text(0, y + block / 2, label, ha="left", va="center", fontsize=SMALL_PT,
                color=colors["text"])
        sent = set(sends)
        for rank in range(n):
            for chunk in range(n):
                x = left + rank * (block + gap) + (chunk % side) * cell
                _ring_chunk(ax, x, y + (chunk // side) * cell, cell, rank, chunk, state, sent,
                            colors, n, SMALL_PT)
        y += block + stage_gap
    text = _wrap(" ".join(_ring_note(n)), 42)
    ax.text(0, y + 0.1, text, ha="left", va="top", fontsize=SMALL_PT, color=colors["text"],
            linespacing=1.15)
    _narrow_canvas(ax, y + 0.1 + (text.count("\n") + 1) * LINE + 0.1)


def _fraction(top: int, bottom: int) -> str:
    from fractions import Fraction

    value = Fraction(top, bottom)
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def ring_traffic(n: int) -> float:
    """What each rank sends in a ring all-reduce, as a fraction of the tensor, counted from the
    simulation: each send is one chunk of 1/n."""
    sends = sum(len(s) for _stage, _state, s in ring_all_reduce(n))
    return sends / n / n


# FSDP's cycle for one unit --------------------------------------------------------------------------

# The stages of one unit, in forward and in backward: (text, colour, the parameters' shards of N = 4
# held after it); the dashed ones are skipped for the root; the notes under the drawing.
FSDP_COMM, FSDP_COMPUTE, FSDP_MEMORY = charts.PALETTE[4], charts.PALETTE[0], charts.PALETTE[2]
FSDP_ROWS = [
    ("forward, for each unit in turn", [
        ("sharded:\n1/N of its\nparameters", FSDP_MEMORY, 1), ("all-gather\n(NCCL)", FSDP_COMM, 4),
        ("forward\nwith full\nparameters", FSDP_COMPUTE, 4),
        ("free full\nparameters\n(reshard)", FSDP_COMM, 1)]),
    ("backward, units in reverse order", [
        ("all-gather\nagain", FSDP_COMM, 4), ("backward:\nfull\ngradients", FSDP_COMPUTE, 4),
        ("free full\nparameters", FSDP_COMM, 1),
        ("reduce-scatter\ngradients:\n1/N each", FSDP_COMM, 1)]),
]
FSDP_SKIPPED_BY_ROOT = {(0, 3), (1, 0)}   # (row, stage)
FSDP_HELD = "under each box: the unit's parameters held after it, of N = 4 shards"
FSDP_NOTES = [
    "Dashed: skipped for the root. By default (None) the root keeps its full",
    "parameters after forward; every other unit reshards.",
    "Prefetch: the next unit's all-gather runs while this unit computes.",
    "The shard stays allocated beside the gathered copy (1/N + N/N).",
    "Then the optimizer updates each rank's shards: no communication.",
]


def _shards(ax, x, y, shards, size=0.24, step=0.27, height=0.26):
    """The unit's parameters held, in N = 4 shards from (x, y): `shards` of them filled."""
    for k in range(4):
        ax.add_patch(plt.Rectangle((x + k * step, y), size, height,
                                   facecolor=FSDP_MEMORY + ("99" if k < shards else "00"),
                                   edgecolor=FSDP_MEMORY, linewidth=0.7,
                                   linestyle="-" if k < shards else ":"))


def draw_fsdp(ax, colors):
    _canvas(ax, 10, 6.95)
    w, h = 2.15, 1.05
    xs = [0.05, 2.6, 5.15, 7.7]
    for row, (title, boxes) in enumerate(FSDP_ROWS):
        top = (0.45, 2.5)[row]
        ax.text(0.05, top - 0.22, title, fontsize=SMALL_PT, color=colors["text"],
                fontweight="bold", va="center")
        for i, (text, color, shards) in enumerate(boxes):
            _box(ax, xs[i], top, w, h, text, color, colors, dashed=(row, i) in FSDP_SKIPPED_BY_ROOT)
            if i:
                _arrow(ax, (xs[i - 1] + w, top + h / 2), (xs[i], top + h / 2), colors)
            # under each box: the unit's parameters held afterwards, in shards of N = 4 ranks
            _shards(ax, xs[i] + 0.55, top + h + 0.12, shards)
    ax.text(0.05, 4.45, FSDP_HELD, fontsize=SMALL_PT, color=colors["text"], va="center")
    for i, line in enumerate(FSDP_NOTES):
        ax.text(0.05, 4.95 + i * 0.42, line, fontsize=SMALL_PT, color=colors["text"], va="center")


def draw_fsdp_narrow(ax, colors):
    """draw_fsdp for a phone: forward and backward side by side as columns, each stage under the
    one before it; the notes wrapped under them."""
    w, h, column = 4.3, 1.7, 5.3
    bottom = 0.0
    for row, (title, boxes) in enumerate(FSDP_ROWS):
        x = 0.05 + row * column
        text = _wrap(title, 20)
        ax.text(x, 0.05, text, fontsize=SMALL_PT, color=colors["text"], fontweight="bold",
                va="top", linespacing=1.15)
        y = 0.05 + 2 * LINE + 0.35
        for i, (label, color, shards) in enumerate(boxes):
            if i:
                _arrow(ax, (x + w / 2, y - 0.6), (x + w / 2, y), colors)
            _box(ax, x, y, w, h, label, color, colors, dashed=(row, i) in FSDP_SKIPPED_BY_ROOT)
            _shards(ax, x + w / 2 - 1.05, y + h + 0.15, shards, size=0.46, step=0.55, height=0.4)
            y += h + 0.15 + 0.4 + 0.7
        bottom = max(bottom, y - 0.6)
    y = bottom + 0.15
    for paragraph in (FSDP_HELD, *re.split(r"(?<=\.) (?=[A-Z])", " ".join(FSDP_NOTES))):
        text = _wrap(paragraph, 42)
        ax.text(0.05, y, text, fontsize=SMALL_PT, color=colors["text"], va="top", linespacing=1.15)
        y += (text.count("\n") + 1) * LINE + 0.2
    _narrow_canvas(ax, y)


# Start here's decision procedure ---------------------------------------------------------------------

# What read_trace measures (left) and where_to_look sends the reader (right), row by row: the
# branches of snippets/start_here/slow_training.py (BRANCHES, FP32), in that order (a test
# checks it); the busy branch below them, for a trace where none reaches MIN_SHARE.
DECISION_ROWS = [
    ("the GPU waits while the host\nsynchronizes (sync)", "read metrics every N steps", 3),
    ("the GPU waits for host work:\nmaking a batch (host work)",
     "DataLoader workers,\npinned memory", 3),
    ("tiny kernels, one launch each\n(launch, kernel wait)", "CUDA graphs, fusion", 3),
    ("idle for a reason one trace\ncannot show (other)", "HTA, Nsight Systems", 3),
    ("products in strict float32\n(their kernels' GPU time)", "TF32, bf16 autocast", 0),
]
DECISION_BUSY = "none reaches MIN_SHARE: the GPU is busy;\ncompare with its peak, then more GPUs"


DECISION_TRACE = ("one trace of a few steps: take_trace(), then read_trace():\n"
                  "the GPU's idle time by cause, and the float32 products")
DECISION_HEADS = ("costs the step (its share of it)", "where to look")
DECISION_NOTE = ("each listed when it costs at least MIN_SHARE of the step,\n"
                 "the largest first; several can apply")


def draw_decision(ax, colors):
    """take_trace and read_trace, then each branch's share of the step against MIN_SHARE: the
    branches listed largest first, each with where to look; the busy branch when none is."""
    fix = charts.PALETTE[2]
    _canvas(ax, 10, 7.55)
    _box(ax, 0.05, 0.05, 9.9, 0.75, DECISION_TRACE, charts.PALETTE[0], colors)
    _arrow(ax, (5, 0.8), (5, 1.2), colors)
    for x, head in zip((0.05, 5.75), DECISION_HEADS, strict=True):
        ax.text(x, 1.45, head, fontsize=SMALL_PT, color=colors["text"], fontweight="bold",
                va="center")
    top, step, h = 1.75, 0.8, 0.66
    for i, (symptom, where, color) in enumerate(DECISION_ROWS):
        y = top + i * step
        _box(ax, 0.05, y, 4.6, h, symptom, charts.PALETTE[color], colors)
        _arrow(ax, (4.7, y + h / 2), (5.7, y + h / 2), colors)
        _box(ax, 5.75, y, 4.2, h, where, fix, colors)
    below = top + len(DECISION_ROWS) * step
    ax.text(0.05, below + 0.15, DECISION_NOTE, fontsize=SMALL_PT, color=colors["text"], va="top")
    _box(ax, 0.05, below + 0.95, 9.9, 0.7, DECISION_BUSY, fix, colors, dashed=True)


def _lines(text: str) -> int:
    return text.count("\n") + 1


def draw_decision_narrow(ax, colors):
    """draw_decision for a phone: the same boxes and columns, their words on more lines."""
    fix = charts.PALETTE[2]
    trace = _wrap(DECISION_TRACE, 36)
    h = _lines(trace) * LINE + 0.35
    _box(ax, 0.05, 0.05, 9.9, h, trace, charts.PALETTE[0], colors)
    y = 0.05 + h
    _arrow(ax, (5, y), (5, y + 0.5), colors)
    y += 0.7
    split, fix_x = 5.6, 6.2
    heads = [_wrap(head, 21) for head in DECISION_HEADS]
    for x, head in zip((0.05, fix_x), heads, strict=True):
        ax.text(x, y, head, fontsize=SMALL_PT, color=colors["text"], fontweight="bold", va="top",
                linespacing=1.15)
    y += max(map(_lines, heads)) * LINE + 0.25
    for symptom, where, color in DECISION_ROWS:
        symptom, where = _wrap(symptom, 21), _wrap(where, 14)
        h = max(_lines(symptom), _lines(where)) * LINE + 0.3
        _box(ax, 0.05, y, split - 0.05, h, symptom, charts.PALETTE[color], colors)
        _arrow(ax, (split + 0.05, y + h / 2), (fix_x - 0.05, y + h / 2), colors)
        _box(ax, fix_x, y, 9.95 - fix_x, h, where, fix, colors)
        y += h + 0.25
    note = _wrap(DECISION_NOTE, 42)
    ax.text(0.05, y, note, fontsize=SMALL_PT, color=colors["text"], va="top", linespacing=1.15)
    y += _lines(note) * LINE + 0.3
    busy = _wrap(DECISION_BUSY, 38)
    h = _lines(busy) * LINE + 0.35
    _box(ax, 0.05, y, 9.9, h, busy, fix, colors, dashed=True)
    _narrow_canvas(ax, y + h + 0.05)


DIAGRAMS: dict[str, Diagram] = {
    "slow-step-decision": Diagram(
        draw=draw_decision, height_in=3.9, narrow=draw_decision_narrow, narrow_height_in=5.2,
        page="docs/start-here/slow-training.md",
        alt="The decision procedure of a slow training step: what the trace shows, each "
            "branch's share of the step, and where to look",
        caption="How <code>read_trace</code> and <code>where_to_look</code> turn one trace into "
                "where to look, drawn as a schematic (not measured).",
        description=(
            "A flow chart. At the top, one trace of a few steps, taken with take_trace and read "
            "with read_trace, which splits the time the GPU sat idle by cause and adds up the "
            "GPU time of the matrix products that ran in strict float32. Below it, five rows, "
            "each a symptom on the left with an arrow to where to look on the right. The GPU "
            "waits while the host synchronizes (cause sync): read metrics every N steps. The "
            "GPU waits for host work such as making a batch (cause host work): DataLoader "
            "workers and pinned memory. Tiny kernels, each launched on its own (causes "
            "launch and kernel wait): CUDA graphs and fusion. Idle for a reason one trace cannot show "
            "(cause other): Holistic Trace Analysis and Nsight Systems. Matrix products in "
            "strict float32, by their kernels' GPU time: TF32 and bf16 autocast. Each branch is "
            "listed when it costs at least MIN_SHARE of the step, the largest first, and "
            "several can apply. A dashed box at the bottom: when none reaches MIN_SHARE, the "
            "GPU is busy; compare its rate with the GPU's peak, then use more GPUs.")),
    "profiler-trace": Diagram(
        draw=draw_trace, height_in=3.9, narrow=draw_trace_narrow, narrow_height_in=6.2,
        page="docs/execution/profiling.md",
        alt="Schematic of a torch.profiler trace in the trace viewer: the Python thread's "
            "spans above the CUDA stream's kernels",
        caption="What a <code>torch.profiler</code> trace shows in Perfetto or "
                "<code>chrome://tracing</code>, drawn as a schematic (not measured): the rows, "
                "the flow arrows, and the four things to look for.",
        description=(
            "A schematic of the trace viewer with two rows (on a phone the timeline is cut in "
            "two, the second part under the first, in the same rows). The upper row is the "
            "Python thread: "
            "a span named forward contains two aten::mm operator spans, and each of those a "
            "short launch call such as cudaLaunchKernel (cuBLAS often launches through "
            "cudaLaunchKernelExC or cuLaunchKernelEx instead). After forward comes a long span in "
            "which item() calls cudaStreamSynchronize, then a span of other host work, then the next step's "
            "forward. The lower row is the CUDA stream: two gemm kernels, each linked by a flow "
            "arrow from the launch that started it; they start later than their launches and "
            "run back to back, and after them a thin device-to-host copy (Memcpy DtoH) brings "
            "the loss to the host; the synchronization ends when it does. "
            "Callout 1: the host runs ahead, forward ends before its last "
            "kernel does. Callout 2: the synchronization, where the thread waits for the stream. "
            "Callout 3: the flow arrows from each launch to its kernel. Callout 4: a gap in the "
            "stream row while the host does its own work, time in which the GPU is idle and "
            "which shortening the host work would win back.")),
    "memory-timeline": Diagram(
        draw=draw_memory_with_notes, height_in=3.7, narrow=draw_memory_narrow,
        narrow_height_in=5.4, page="docs/memory/memory-over-time.md",
        alt="Schematic of the memory visualizer's Active Memory Timeline over one training step",
        caption="What <a href=\"https://pytorch.org/memory_viz\">pytorch.org/memory_viz</a> "
                "shows for a snapshot from <code>_dump_snapshot</code> in its Active Memory "
                "Timeline, drawn as a schematic (not measured).",
        description=(
            "A snapshot gives each tensor its own colour, from ten that repeat; colours by "
            "category (parameter, gradient, activation, optimizer state) come only from the "
            "profiler's version, torch.cuda._memory_viz.profile_plot. "
            "A stacked area chart of one training step. The horizontal axis counts allocator "
            "events, not seconds; the vertical axis is bytes allocated; every band is one tensor. "
            "At the bottom, the parameters, allocated before recording began, stay flat "
            "throughout. During forward, activation bands stack up one by one, with a short "
            "temporary among them; when the temporary is freed, the band above it slides down. "
            "During backward the activations are freed and gradient bands appear on top; each "
            "time a tensor below them is freed, the bands above slide down to close the gap. "
            "In the first optimizer step AdamW adds two state tensors per parameter (exp_avg and "
            "exp_avg_sq); its foreach update, the default on CUDA, then allocates a temporary "
            "as large as all the parameters and frees it again, a short peak; and "
            "zero_grad(set_to_none=True) frees the gradients, so after the step the parameters "
            "and AdamW's state remain. Hovering over a band in the visualizer shows that "
            "tensor's size and the stack that allocated it.")),
    "ring-all-reduce": Diagram(
        draw=draw_ring, height_in=4.3, narrow=draw_ring_narrow, narrow_height_in=6.4,
        page="docs/several-gpus/ways-to-use-several-gpus.md",
        alt="Ring all-reduce on four ranks: three reduce-scatter steps, then three all-gather "
            "steps",
        caption="A ring all-reduce on four ranks, each holding its tensor cut into four chunks, "
                "A to D, with every chunk's label computed by running the algorithm.",
        description=(
            "A grid with one row per stage and one column group per rank, four ranks with four "
            "chunks each. At the start every rank's chunks hold only its own data, labelled A1 "
            "to D1. In each of three reduce-scatter steps every rank sends one chunk to the next "
            "rank around the ring (rank 3 sends to rank 0), which adds it to its own copy, so "
            "the count in the label grows by one. After the third step each rank holds one "
            "chunk summed over all four ranks: rank 0 holds B4, rank 1 C4, rank 2 D4 and rank 3 "
            "A4. In each of three all-gather steps every rank passes a fully summed chunk on, "
            "and the receiver overwrites its copy, until every rank holds A4, B4, C4 and D4. "
            "Each rank sent six chunks of a quarter of the tensor, one and a half times its "
            "size: 2(n − 1)/n with n = 4, the factor between algorithm and bus bandwidth. On a "
            "phone each rank's four chunks are drawn two by two, A and B over C and D: still "
            "four pieces of one tensor, not a matrix.")),
    "fsdp-unit-cycle": Diagram(
        draw=draw_fsdp, height_in=4.1, narrow=draw_fsdp_narrow, narrow_height_in=6.0,
        page="docs/several-gpus/fsdp2.md",
        alt="FSDP2's cycle for one unit: all-gather, compute and free in forward and in "
            "backward, then reduce-scatter of gradients",
        caption="What each <code>fully_shard</code> unit does in one training step, and what it "
                "keeps in GPU memory after each stage: a schematic of FSDP2's default, "
                "<code>reshard_after_forward=None</code>.",
        description=(
            "Two sequences of four boxes, forward then backward (two rows on a wide screen, two "
            "columns side by side on a phone). Forward, for each unit in turn: the unit holds a shard, one "
            "N-th of its parameters; an all-gather over NCCL assembles the full parameters; the "
            "forward pass runs with them; then the full parameters are freed and the unit is "
            "sharded again. Backward, units in reverse order: an all-gather assembles the full "
            "parameters again; the backward pass computes full gradients; the full parameters "
            "are freed; a reduce-scatter leaves each rank one N-th of the summed gradients. A "
            "strip of bars shows the unit's parameter memory with four ranks: one shard of four "
            "after the first box, four of four while gathered, one again after each free; the "
            "rank's own shard stays allocated beside the gathered copy, so while gathered it "
            "holds one and a quarter times the unit's parameters. The stages of neighbouring "
            "units overlap: FSDP2 prefetches, so the next unit's all-gather runs on its own "
            "stream while this unit computes. The "
            "root unit skips the free after forward and the all-gather in backward, since by "
            "default (reshard_after_forward=None) it keeps its full parameters after forward, "
            "and every other unit reshards. The optimizer step then updates each rank's own "
            "shards, with no communication.")),
}
