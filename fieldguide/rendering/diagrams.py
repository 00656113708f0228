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
through the content-keyed cache, once per theme at a width whose text stays legible from a
phone to a desktop column, and carries its words three times: a short name (`aria-label` and the
SVG's <title>), a caption, and a description (the SVG's <desc>, and under the figure, linked by
`aria-describedby`).
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Callable
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from fieldguide.measuring.numbers import format_value
from fieldguide.measuring.timings import TimingError
from fieldguide.rendering import charts, labels
from fieldguide.rendering.figure_cache import drawn
from fieldguide.rendering.figures import relative_url

# Drawn once per theme at this width (inches at 96 px): shown at 100 % of a desktop column
# (up to 46rem) the text is larger than drawn, and on a 390 px phone at about 0.78 of it, so
# FONT_PT (12.7 px) shows at 9.9 px, above the browser test's 9 px floor.
WIDTH_IN = 4.8
FONT_PT = 9.5
SMALL_PT = 9.0
TINY_PT = 8.8   # the smallest text a drawing has
# Shown widths in CSS px (docs/assets/extra.css, `.fieldguide-diagram`): on a desktop at most
# DESKTOP_WIDTH_PX, so FONT_PT shows at about the body's 16 px, not 20; on a phone at
# PHONE_WIDTH_PX in a frame that scrolls sideways, so TINY_PT shows at 12 px or more (the browser
# test's floor for the drawn ideas, issue 45: they showed at 9.3-10.1 px at 390 px).
DESKTOP_WIDTH_PX = 576
PHONE_WIDTH_PX = 480


@dataclass(frozen=True)
class Diagram:
    """A schematic: what it draws, where it is shown, and its words."""

    draw: Callable[[plt.Axes, dict[str, str]], None]
    height_in: float
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


def _queue_panel(ax, colors, events, end, title):
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
    ax.set_title(title, loc="left", fontsize=FONT_PT, color=colors["text"])
    ax.grid(True, axis="x", color=colors["grid"], linewidth=0.6)
    return scale, depth


def draw_queue(events: list[dict], kernels: int) -> dict[str, dict[str, str]]:
    """Two panels: the whole call, and its first moments enlarged."""
    launch_end = max(e["start"] + e["duration"] for e in events if e["name"].startswith("launch"))
    wait_end = max(e["start"] + e["duration"] for e in events)
    peak = max(queue_depth(events, e["start"] + e["duration"]) for e in events if e["lane"] == "CPU")

    def plot(fig, colors):
        whole, first = fig.subplots(2, 1)
        scale, _ = _queue_panel(whole, colors, events, wait_end,
                                "The whole call: Python waits in synchronize()")
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
                                    f"Its first {format_value('median', window)}, enlarged")
        first.text(window / scale * 0.98, 1.2, f"{peak} queued ahead of the GPU", ha="right",
                   va="center", fontsize=SMALL_PT, color=colors["text"])
        first.text(window / scale * 0.98, 2, "product 1 runs  ", ha="right", va="center",
                   fontsize=SMALL_PT, color=colors["text"])
        first.text(launch_end / 2 / scale, -0.48, f"{kernels} launches", ha="center",
                   va="center", fontsize=SMALL_PT, color=colors["text"])

    return _drawings(plot, 5.4)


# --- Drawing, in both themes ----------------------------------------------------------------------

# Filled shapes are the palette's colours at a third of their strength (FILL, an alpha), so the
# theme's own text colour (charts.THEMES) reads on them in both themes.
FILL = "59"
BACKGROUND = {"light": "#ffffff", "dark": "#1e2129"}


def _drawings(plot: Callable, height_in: float) -> dict[str, dict[str, str]]:
    """{theme: {"wide": svg}}: one drawing per theme, shown at any width."""
    svgs: dict[str, dict[str, str]] = {}
    for theme, base in charts.THEMES.items():
        colors = {**base, "back": BACKGROUND[theme]}
        with charts._themed(colors), plt.rc_context({"font.size": FONT_PT}):
            fig = plt.figure(figsize=(WIDTH_IN, height_in))
            plot(fig, colors)
            fig.patch.set_alpha(0)
            for ax in fig.axes:
                ax.patch.set_alpha(0)
            fig.tight_layout()
            svg = charts._svg(fig)
        svgs[theme] = {"wide": svg.replace("<svg ", f'<svg style="color-scheme: {theme}" ', 1)}
    return svgs


def _with_words(svg: str, alt: str, description: str) -> str:
    """The SVG with its name and description as <title> and <desc>, its first children."""
    opening = re.search(r"<svg\b[^>]*>", svg)
    words = f"<title>{html.escape(alt)}</title><desc>{html.escape(description)}</desc>"
    return svg[:opening.end()] + words + svg[opening.end():]


def embed(build, page, name: str, svgs: dict[str, dict[str, str]], alt: str, caption: str,
          description: str) -> str:
    """<figure> with one <object> per theme (role img, named by `alt`, described by the text under
    it), the caption, and the description in words."""
    ident = f"figure-{name}-words"
    label = html.escape(alt, quote=True)
    objects = []
    for theme, layouts in svgs.items():
        svg = _with_words(layouts["wide"], alt, description)
        path = f"assets/charts/{name}-{hashlib.sha256(svg.encode()).hexdigest()[:12]}-{theme}.svg"
        build.figures[path] = svg
        objects.append(f'<object class="timing-wide timing-any-width only-{theme}" '
                       f'type="image/svg+xml" data="{relative_url(path, page.url)}" role="img" '
                       f'aria-label="{label}" aria-describedby="{ident}">{label}</object>')
    # On a phone the drawing keeps a readable size (PHONE_WIDTH_PX: its smallest text at 12 px
    # or more) and its frame scrolls sideways; a keyboard reaches the frame to scroll it.
    frame = (f'<div class="fieldguide-diagram-frame" tabindex="0" role="group" '
             f'aria-label="{label} (scrolls sideways on a narrow screen)">')
    return (f'\n<figure class="timing-chart fieldguide-diagram" id="figure-{name}">\n'
            + frame + "\n" + "\n".join(objects) + "\n</div>"
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

    def plot(fig, colors):
        ax = fig.subplots()
        diagram.draw(ax, colors)

    return _drawings(plot, diagram.height_in)


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


def draw_trace(ax, colors):
    """Two steps as Perfetto or chrome://tracing shows them: the Python thread's spans nested
    (user annotation, aten:: operator, CUDA runtime call), the CUDA stream's kernels, the flow
    arrow from each launch to its kernel, the loss's copy to the host that .item() waits for,
    and the gap where the GPU waits for the host."""
    cpu, gpu, wait = charts.PALETTE[0], charts.PALETTE[1], charts.PALETTE[3]
    _canvas(ax, 10, 6.0)
    top, mid, low, stream = 0.45, 0.92, 1.39, 2.75
    ax.text(0, 0.15, "python thread (CPU)", fontsize=SMALL_PT, color=colors["text"], va="center")
    ax.text(0, 2.42, "CUDA stream 7 (GPU)", fontsize=SMALL_PT, color=colors["text"], va="center")
    ax.plot([0, 10], [2.2, 2.2], color=colors["grid"], linewidth=0.8)
    # step 1: forward queues two products; loss.item() waits until they are done
    _box(ax, TRACE_FORWARD[0], top, TRACE_FORWARD[1] - TRACE_FORWARD[0], 0.42, "forward", cpu,
         colors)
    launches = []
    for i in range(2):
        x = 0.15 + i * 2.05
        _box(ax, x, mid, 1.95, 0.42, "aten::mm", cpu, colors)
        _box(ax, x + 1.3, low, 0.22, 0.42, "", cpu, colors)
        launches.append(x + 1.41)
    ax.text(4.4, low + 0.21, "← cudaLaunchKernel(ExC)", fontsize=SMALL_PT, color=colors["text"],
            va="center")
    kernels = TRACE_KERNELS
    _box(ax, 4.4, top, 2.1, 0.42, "aten::item", cpu, colors)
    _box(ax, 4.45, mid, 2.15, 0.42, "cudaStream…", wait, colors, dashed=True)
    # step 2 starts after the host's own work; meanwhile the GPU has nothing queued
    _box(ax, 6.6, top, 1.45, 0.42, "host code", cpu, colors)
    _box(ax, 8.15, top, 1.8, 0.42, "forward", cpu, colors)
    for i in range(3):
        x = 8.2 + i * 0.58
        _box(ax, x, mid, 0.52, 0.42, "", cpu, colors)
        _box(ax, x + 0.2, low, 0.16, 0.42, "", cpu, colors)
    for i, (start, stop) in enumerate(kernels):
        _box(ax, start, stream, stop - start - 0.05, 0.42, "gemm", gpu, colors)
        _arrow(ax, (launches[i], low + 0.42), (start + 0.08, stream), colors, width=0.8)
    for i in range(2):
        start = 8.5 + i * 0.6
        _box(ax, start, stream, 0.55, 0.42, "", gpu, colors)
        _arrow(ax, (8.48 + i * 0.58, low + 0.42), (start + 0.08, stream), colors, width=0.8)
    # .item() copies the loss to the host: a thin copy after the last kernel, then the wait ends
    _box(ax, 6.45, stream, 0.12, 0.42, "", wait, colors)
    ax.text(6.51, stream - 0.2, "Memcpy DtoH", ha="center", va="center", fontsize=SMALL_PT,
            color=colors["text"])
    ax.annotate("", xy=(6.6, stream + 0.21), xytext=(8.5, stream + 0.21),
                arrowprops={"arrowstyle": "<->", "color": colors["text"], "linewidth": 0.8})
    ax.text(7.7, stream + 0.7, "GPU idle", ha="center", va="center", fontsize=SMALL_PT,
            color=colors["text"])
    _callout(ax, 4.0, 0.15, 1, colors)
    _callout(ax, 5.45, 0.15, 2, colors)
    _callout(ax, 0.6, stream + 0.21, 3, colors)
    _callout(ax, 6.75, stream + 0.7, 4, colors)
    _notes(ax, 0, 4.05, TRACE_NOTES, colors)


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


def draw_memory(ax, colors):
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
    ax.text(MEMORY_EVENTS / 2, 1.5, "parameters (allocated before recording)", ha="center",
            va="center", fontsize=SMALL_PT, color=colors["text"],
            bbox={"facecolor": colors["back"], "edgecolor": "none", "pad": 1.5, "alpha": 0.85})
    for x, label in ((3.0, "forward"), (13.5, "backward"), (23.0, "optimizer")):
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
    heads = {1: "reduce-scatter: add the chunk that arrives", n: "all-gather: keep the chunk that arrives"}
    rows = len(stages) + len(heads)
    _canvas(ax, width, 0.75 + row_h * rows + 1.3)
    for rank in range(n):
        x = left + rank * (n * cell + gap)
        ax.text(x + n * cell / 2, 0.35, f"rank {rank}", ha="center", va="center",
                fontsize=SMALL_PT, color=colors["text"], fontweight="bold")
    shade, done = charts.PALETTE[0], charts.PALETTE[2]
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
                summed = len(state[rank][chunk])
                full = summed == n
                alpha = format(int(40 + 180 * summed / n), "02x")
                ax.add_patch(plt.Rectangle((x + 0.02, y), cell - 0.04, cell,
                                           facecolor=(done if full else shade) + alpha,
                                           edgecolor=colors["text"] if (rank, chunk) in sent
                                           else (done if full else shade),
                                           linewidth=1.6 if (rank, chunk) in sent else 0.6))
                ax.text(x + cell / 2, y + cell / 2, f"{CHUNKS[chunk]}{summed}", ha="center",
                        va="center", fontsize=TINY_PT, color=colors["text"])
        y += row_h
    y += 0.2
    for i, line in enumerate([
        f"A{n}: chunk A, summed over {n} ranks' data. Outlined: sent to",
        f"the next rank (rank {n - 1} to rank 0). Each rank sends {2 * (n - 1)} chunks",
        f"of 1/{n} of the tensor: 2(n − 1)/n = {_fraction(2 * (n - 1), n)} times its size.",
    ]):
        ax.text(0, y + i * 0.36, line, ha="left", va="center", fontsize=SMALL_PT,
                color=colors["text"])


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

def draw_fsdp(ax, colors):
    comm, compute, memory = charts.PALETTE[4], charts.PALETTE[0], charts.PALETTE[2]
    _canvas(ax, 10, 6.95)
    w, h = 2.15, 1.05
    xs = [0.05, 2.6, 5.15, 7.7]
    rows = [("forward, for each unit in turn", 0.45, [
                ("sharded:\n1/N of its\nparameters", memory, 1), ("all-gather\n(NCCL)", comm, 4),
                ("forward\nwith full\nparameters", compute, 4),
                ("free full\nparameters\n(reshard)", comm, 1)]),
            ("backward, units in reverse order", 2.5, [
                ("all-gather\nagain", comm, 4), ("backward:\nfull\ngradients", compute, 4),
                ("free full\nparameters", comm, 1), ("reduce-scatter\ngradients:\n1/N each", comm, 1)])]
    for title, top, boxes in rows:
        ax.text(0.05, top - 0.22, title, fontsize=SMALL_PT, color=colors["text"],
                fontweight="bold", va="center")
        for i, (text, color, shards) in enumerate(boxes):
            skipped_by_root = (top, i) in ((0.45, 3), (2.5, 0))
            _box(ax, xs[i], top, w, h, text, color, colors, dashed=skipped_by_root)
            if i:
                _arrow(ax, (xs[i - 1] + w, top + h / 2), (xs[i], top + h / 2), colors)
            # under each box: the unit's parameters held afterwards, in shards of N = 4 ranks
            for k in range(4):
                ax.add_patch(plt.Rectangle((xs[i] + 0.55 + k * 0.27, top + h + 0.12), 0.24, 0.26,
                                           facecolor=memory + ("99" if k < shards else "00"),
                                           edgecolor=memory, linewidth=0.7,
                                           linestyle="-" if k < shards else ":"))
    ax.text(0.05, 4.45, "under each box: the unit's parameters held after it, of N = 4 shards",
            fontsize=SMALL_PT, color=colors["text"], va="center")
    for i, line in enumerate([
        "Dashed: skipped for the root, which keeps its full parameters after",
        "forward (reshard_after_forward=None is False for the root only).",
        "Prefetch: the next unit's all-gather runs while this unit computes.",
        "The shard stays allocated beside the gathered copy (1/N + N/N).",
        "Then the optimizer updates each rank's shards: no communication.",
    ]):
        ax.text(0.05, 4.95 + i * 0.42, line, fontsize=SMALL_PT, color=colors["text"], va="center")


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


def draw_decision(ax, colors):
    """take_trace and read_trace, then each branch's share of the step against MIN_SHARE: the
    branches listed largest first, each with where to look; the busy branch when none is."""
    fix = charts.PALETTE[2]
    _canvas(ax, 10, 7.55)
    _box(ax, 0.05, 0.05, 9.9, 0.75, "one trace of a few steps: take_trace(), then read_trace():\n"
         "the GPU's idle time by cause, and the float32 products", charts.PALETTE[0], colors)
    _arrow(ax, (5, 0.8), (5, 1.2), colors)
    ax.text(0.05, 1.45, "costs the step (its share of it)", fontsize=SMALL_PT,
            color=colors["text"], fontweight="bold", va="center")
    ax.text(5.75, 1.45, "where to look", fontsize=SMALL_PT, color=colors["text"],
            fontweight="bold", va="center")
    top, step, h = 1.75, 0.8, 0.66
    for i, (symptom, where, color) in enumerate(DECISION_ROWS):
        y = top + i * step
        _box(ax, 0.05, y, 4.6, h, symptom, charts.PALETTE[color], colors)
        _arrow(ax, (4.7, y + h / 2), (5.7, y + h / 2), colors)
        _box(ax, 5.75, y, 4.2, h, where, fix, colors)
    below = top + len(DECISION_ROWS) * step
    ax.text(0.05, below + 0.15, "each listed when it costs at least MIN_SHARE of the step,\n"
            "the largest first; several can apply", fontsize=SMALL_PT, color=colors["text"],
            va="top")
    _box(ax, 0.05, below + 0.95, 9.9, 0.7, DECISION_BUSY, fix, colors, dashed=True)


DIAGRAMS: dict[str, Diagram] = {
    "slow-step-decision": Diagram(
        draw=draw_decision, height_in=3.9, page="docs/start-here/slow-training.md",
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
        draw=draw_trace, height_in=3.9, page="docs/execution/profiling.md",
        alt="Schematic of a torch.profiler trace in the trace viewer: the Python thread's "
            "spans above the CUDA stream's kernels",
        caption="What a <code>torch.profiler</code> trace shows in Perfetto or "
                "<code>chrome://tracing</code>, drawn as a schematic (not measured): the rows, "
                "the flow arrows, and the four things to look for.",
        description=(
            "A schematic of the trace viewer with two rows. The upper row is the Python thread: "
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
        draw=draw_memory_with_notes, height_in=3.7, page="docs/memory/memory-over-time.md",
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
        draw=draw_ring, height_in=4.3, page="docs/several-gpus/ways-to-use-several-gpus.md",
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
            "size: 2(n − 1)/n with n = 4, the factor between algorithm and bus bandwidth.")),
    "fsdp-unit-cycle": Diagram(
        draw=draw_fsdp, height_in=4.1, page="docs/several-gpus/fsdp2.md",
        alt="FSDP2's cycle for one unit: all-gather, compute and free in forward and in "
            "backward, then reduce-scatter of gradients",
        caption="What each <code>fully_shard</code> unit does in one training step, and what it "
                "keeps in GPU memory after each stage: a schematic of FSDP2's default, "
                "<code>reshard_after_forward=None</code>.",
        description=(
            "Two rows of four boxes. Forward, for each unit in turn: the unit holds a shard, one "
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
