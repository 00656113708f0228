"""The core ideas drawn (fieldguide/rendering/diagrams.py): each figure on its page with a name, a caption
and a description; drawn in both colour schemes with the scheme's own text colours; the host
queue drawn from a named run; and what the schematics draw agrees with PyTorch and the ring
algorithm."""

from __future__ import annotations

import html
import inspect
import re
from fractions import Fraction
from pathlib import Path

import pytest

from fieldguide import ROOT
from fieldguide.measuring.timings import TimingError
from fieldguide.rendering import charts, diagrams, labels
from fieldguide.rendering.shortcodes import Build, find

QUEUE_PAGE = "execution/async-execution.md"
QUEUE_BENCHES = ("async_execution.queue[launch]", "async_execution.queue[launch-and-wait]")


def _source(page: str) -> str:
    return (ROOT / "docs" / page).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def rendered() -> tuple[Build, dict[str, str]]:
    """Each page with a figure, rendered as the build renders it (shortcodes only)."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    default = re.search(r"timings:\s*([\w-]+)", config)[1]   # fieldguide.rendering.render's default GPU
    build = Build(ROOT, default)
    pages = {d.page.removeprefix("docs/") for d in diagrams.DIAGRAMS.values()} | {QUEUE_PAGE}
    out = {}
    for page in sorted(pages):
        text, result = build.render_page(_source(page), page, page.removesuffix(".md") + "/")
        assert not result.problems, (page, result.problems)
        out[page] = text
    return build, out


def _figures(text: str) -> list[str]:
    return re.findall(r'<figure class="timing-chart fieldguide-diagram".*?</figure>\s*\?\?\? .*?'
                      r"\{: #[\w-]+ \}", text, re.S)


def test_every_diagram_is_shown_once_on_the_page_the_registry_names():
    for name, diagram in diagrams.DIAGRAMS.items():
        codes = [c for _, c in find(_source(diagram.page.removeprefix("docs/")))
                 if c.kind == "diagram"]
        assert [c.args for c in codes].count([name]) == 1, (name, diagram.page)
    queue = [c for _, c in find(_source(QUEUE_PAGE)) if c.kind == "queue"]
    assert [c.args for c in queue] == [list(QUEUE_BENCHES)]


def test_each_figure_has_a_name_a_caption_and_a_description(rendered):
    """Every drawing is an image named by aria-label and described by the words under it."""
    _, pages = rendered
    for page, text in pages.items():
        figures = _figures(text)
        assert figures, f"{page}: no figure"
        for figure in figures:
            objects = re.findall(r"<object [^>]*>", figure)
            # each theme drawn wide and narrow (issue 45), the stylesheet picks one of the four
            drawn = [(re.search(r"only-(\w+)", o)[1], re.search(r"timing-(wide|narrow)", o)[1])
                     for o in objects]
            assert sorted(drawn) == sorted((t, w) for t in ("light", "dark")
                                           for w in diagrams.LAYOUTS), (page, drawn)
            assert "timing-any-width" not in figure and "diagram-frame" not in figure, page
            for obj in objects:
                assert 'role="img"' in obj
                label = re.search(r'aria-label="([^"]+)"', obj)[1]
                assert len(label.split()) >= 5, (page, label)
                described = re.search(r'aria-describedby="([^"]+)"', obj)[1]
                words = re.search(rf"\n    (.+)\n    {{: #{described} }}", figure)
                assert words and len(words[1].split()) >= 60, (page, described)
            caption = re.search(r"<figcaption>(.+?)</figcaption>", figure, re.S)[1]
            said = html.unescape(re.sub(r"<[^>]+>", "", caption))
            assert len(said.split()) >= 12, (page, caption)
            # one sentence, and no run id, benchmark name or source file (issue 45)
            assert len(re.findall(r"[.!?](?:\s|$)", said)) == 1, (page, said)
            assert not re.search(r"\d{8}T\d{6}Z|\w+\.\w+\[|\.py\b", said), (page, said)


def _texts(svg: str) -> list[tuple[str, str]]:
    """(fill colour, text) of every text the drawing shows."""
    found = []
    for match in re.finditer(r"<text ([^>]*)>(.*?)</text>", svg, re.S):
        fill = re.search(r"fill:\s*(#[0-9a-fA-F]{6})", match[1])
        found.append(((fill[1] if fill else "inherited").lower(), re.sub(r"<[^>]+>", "", match[2])))
    return found


def test_each_drawing_takes_its_text_colours_from_its_scheme(rendered):
    """Both schemes drawn; every text in the scheme's text colour (or its background colour,
    on a mark of the text colour); none shared by the two schemes, so no text is black or
    white in both; each drawing carries its name and description as <title> and <desc>."""
    build, pages = rendered
    svgs = {path: svg for path, svg in build.figures.items()
            if re.search(r"/(host-queue|" + "|".join(diagrams.DIAGRAMS) + r")-", path)}
    names = {re.search(r"charts/(.+)-[0-9a-f]{12}-", p)[1] for p in svgs}
    assert names == {"host-queue", *diagrams.DIAGRAMS}
    by_scheme: dict[str, set[str]] = {"light": set(), "dark": set()}
    for path, svg in svgs.items():
        scheme = re.search(r"-(light|dark)(?:-narrow)?\.svg$", path)[1]
        allowed = {charts.THEMES[scheme]["text"], diagrams.BACKGROUND[scheme]}
        texts = _texts(svg)
        assert texts, path
        fills = {fill for fill, _ in texts}
        assert fills <= allowed, (path, fills - allowed)
        by_scheme[scheme] |= fills
        assert f'style="color-scheme: {scheme}"' in svg, path
        assert re.search(r"<svg\b[^>]*><title>[^<]{20,}</title><desc>[^<]{200,}</desc>", svg), path
    assert not by_scheme["light"] & by_scheme["dark"]


def test_the_queue_figure_names_its_gpu_and_run(rendered):
    build, pages = rendered
    (figure,) = _figures(pages[QUEUE_PAGE])
    timings = build.timings(None)
    launch, wait = (timings.benchmark(n) for n in QUEUE_BENCHES)
    both = [r.run for r in launch.records if r.run.id in {w.run.id for w in wait.records}]
    run = both[-1]
    gpu = labels.gpu_label(timings.gpu)
    caption = html.unescape(re.search(r"<figcaption>(.+?)</figcaption>", figure, re.S)[1])
    # the caption is one sentence a reader takes in at a glance: the GPU, and that it is one run
    assert gpu in caption and run.id not in caption and len(re.findall(r"\.(?:\s|$)", caption)) == 1
    assert not any(name in caption for name in QUEUE_BENCHES)
    assert gpu in re.search(r'aria-label="([^"]+)"', figure)[1]
    words = re.search(r"\n    (.+)\n    \{: #figure-host-queue-words \}", figure)[1]
    # the words name the run, its date and its benchmarks
    assert gpu in words and run.id in words and run.date[:10] in words
    assert all(name in words for name in QUEUE_BENCHES)
    # the text and table quote every run; the figure says it draws one of them, and that the
    # per-launch and per-product times are the measured totals spread evenly
    assert f"one of the {len(both)} runs" in caption or (len(both) == 1 and "the one run" in caption)
    assert "of the remaining time" in words and words.count("on average") == 2


def test_the_queue_is_the_two_measured_totals_spread_evenly():
    events = diagrams.queue_events(200e-6, 26e-3, 10)
    launches = [e for e in events if e["name"].startswith("launch")]
    products = [e for e in events if e["lane"] == "GPU"]
    assert sum(e["duration"] for e in launches) == pytest.approx(200e-6)
    assert max(e["start"] + e["duration"] for e in events) == pytest.approx(26e-3)
    assert products[0]["start"] == pytest.approx(launches[0]["duration"])  # starts on launch
    assert all(a["start"] + a["duration"] == pytest.approx(b["start"])       # back to back
               for a, b in zip(products, products[1:], strict=False))
    assert diagrams.queue_depth(events, 200e-6) == 9  # all launched, one running
    assert diagrams.queue_depth(events, 26e-3) == 0
    with pytest.raises(TimingError, match="launches must take less time"):
        diagrams.queue_events(30e-3, 26e-3, 10)
    with pytest.raises(TimingError, match="no queue"):
        diagrams.queue_events(10e-3, 11e-3, 10)


def test_a_trace_becomes_the_rows_of_a_timeline():
    """bench_queue_timeline's conversion: launches and the synchronize on the CPU, kernels on the
    GPU, in seconds from the first launch; other events (operators, flows) left out."""
    trace = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1000.0, "dur": 30.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1010.0, "dur": 5.0},
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "ts": 1040.0, "dur": 5.0},
        {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "ts": 1020.0, "dur": 2000.0},
        {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "ts": 3020.0, "dur": 2000.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "ts": 1050.0,
         "dur": 3975.0},
        {"ph": "s", "cat": "ac2g", "name": "launch", "ts": 1010.0, "id": 1},
    ]
    rows = diagrams.timeline_from_trace(trace)
    assert [(r["lane"], r["name"]) for r in rows] == [
        ("CPU: Python", "launch"), ("CPU: Python", "launch"), ("CPU: Python", "synchronize"),
        ("GPU: stream", "kernel"), ("GPU: stream", "kernel")]
    assert rows[0]["start"] == 0 and rows[3]["start"] == pytest.approx(10e-6)
    assert rows[2]["duration"] == pytest.approx(3975e-6)
    with pytest.raises(TimingError, match="no kernel launch or no kernel"):
        diagrams.timeline_from_trace(trace[:1])


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_the_ring_all_reduces_and_each_rank_sends_2_n_minus_1_over_n(n):
    stages = diagrams.ring_all_reduce(n)
    assert len(stages) == 1 + 2 * (n - 1)
    everyone = frozenset(range(n))
    _, after_reduce_scatter, _ = stages[n - 1]
    for rank in range(n):   # each rank ends the reduce-scatter with one chunk summed over all
        full = [c for c in range(n) if after_reduce_scatter[rank][c] == everyone]
        assert full == [(rank + 1) % n]
    _, final, _ = stages[-1]
    assert all(chunk == everyone for row in final for chunk in row)
    for _, _, sends in stages[1:]:   # every rank sends one chunk to the next in every stage
        assert sorted(rank for rank, _ in sends) == list(range(n))
    assert diagrams.ring_traffic(n) == pytest.approx(float(Fraction(2 * (n - 1), n)))


def test_the_ring_description_says_what_the_simulation_holds():
    words = diagrams.DIAGRAMS["ring-all-reduce"].description
    _, state, _ = diagrams.ring_all_reduce(4)[3]
    held = {rank: next(diagrams.CHUNKS[c] for c in range(4) if len(state[rank][c]) == 4)
            for rank in range(4)}
    assert "rank 0 holds B4, rank 1 C4, rank 2 D4 and rank 3 A4" in words
    assert held == {0: "B", 1: "C", 2: "D", 3: "A"}
    assert "six chunks" in words and diagrams.ring_traffic(4) == 1.5


def test_fsdp_default_reshards_every_unit_but_the_root():
    """The schematic's dashed boxes: reshard_after_forward defaults to None, which PyTorch
    documents as True for non-root modules and False for the root."""
    from torch.distributed.fsdp import fully_shard

    parameter = inspect.signature(fully_shard).parameters["reshard_after_forward"]
    assert parameter.default is None
    doc = " ".join(inspect.getdoc(fully_shard).split())
    assert "If ``None``, it is set to ``True`` for non-root modules and ``False`` for root modules" in doc
    words = diagrams.DIAGRAMS["fsdp-unit-cycle"].description
    assert "reshard_after_forward=None" in words and "root" in words
    # prefetch overlaps the next unit's all-gather with this unit's compute; the shard stays
    assert "prefetches" in words and "shard stays allocated beside the gathered copy" in words


def test_the_trace_schematic_draws_what_callout_1_says():
    """Forward ends while its last product still runs on the GPU (its first kernel, drawn
    shorter, has ended by then): the note and the description say "last", as drawn."""
    forward_end = diagrams.TRACE_FORWARD[1]
    first_end = diagrams.TRACE_KERNELS[0][1] - 0.05  # _box draws each kernel 0.05 short
    last_end = diagrams.TRACE_KERNELS[-1][1] - 0.05
    assert first_end < forward_end < last_end
    assert "before its last kernel does" in diagrams.TRACE_NOTES[0]
    assert "before its last kernel does" in diagrams.DIAGRAMS["profiler-trace"].description
    assert "first kernel" not in diagrams.DIAGRAMS["profiler-trace"].description


def test_the_memory_schematic_follows_the_memory_pages_loop():
    """Parameters before recording, AdamW's state added, gradients freed by zero_grad: as the
    page's record_steps does; and freeing a tensor below others slides the ones above down."""
    code = (ROOT / "snippets" / "memory" / "memory_over_time.py").read_text(encoding="utf-8")
    record = code[code.index("def record_steps"):]
    assert "torch.optim.AdamW" in code and "zero_grad(set_to_none=True)" in record
    assert record.index("_record_memory_history(") < record.index("model(x)")
    lows, totals = diagrams.memory_stack()
    last = diagrams.MEMORY_EVENTS
    live = {name for name, start, end, _ in diagrams.MEMORY_BANDS
            if start <= last and (end is None or last < end)}
    parameters = {f"parameter {i}" for i in (1, 2, 3)}
    state = {f"{name} {i}" for i in (1, 2, 3) for name in ("exp_avg", "exp_avg_sq")}
    assert live == parameters | state  # two state tensors per parameter
    bands = {name: (start, end, size) for name, start, end, size in diagrams.MEMORY_BANDS}
    # foreach AdamW (the CUDA default) allocates a parameter-sized temporary and frees it
    start, end, size = bands["update temporary"]
    assert size == sum(bands[p][2] for p in parameters) and end is not None and end < last
    assert start > max(bands[s][0] for s in state)
    from torch.optim import AdamW, adam

    assert issubclass(AdamW, adam.Adam)  # AdamW runs Adam's foreach update
    assert "_foreach_sqrt(" in inspect.getsource(adam._multi_tensor_adam)
    words = diagrams.DIAGRAMS["memory-timeline"].description
    assert "two state tensors per parameter" in words and "temporary" in words
    assert dict(lows["gradient 1"])[17] < dict(lows["gradient 1"])[16]  # activation 1 freed


@pytest.mark.gpus(1)
def test_a_real_trace_has_the_rows_and_names_the_schematic_shows(tmp_path):
    """On a GPU: torch.profiler's trace of two products and an .item() holds the spans the
    profiler schematic draws, and flow events from launches to kernels."""
    import json

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    x = torch.randn(1024, 1024, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function("forward"):
            y = x @ x @ x
        y.sum().item()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    names = {e.get("name") for e in events}
    seen = sorted(n for n in names if n and ("cu" in n or "aten" in n))
    assert {"forward", "aten::mm", "aten::item", "cudaStreamSynchronize"} <= names, seen
    assert any(n.startswith(("cudaLaunchKernel", "cuLaunchKernel")) for n in seen), seen
    assert any(e.get("cat") == "kernel" for e in events)
    assert any(e.get("ph") in ("s", "f") for e in events), "no flow events"
    rows = diagrams.timeline_from_trace(events)   # what bench_queue_timeline records
    kernels = [r for r in rows if r["lane"] == "GPU: stream"]
    launches = [r for r in rows if r["name"] == "launch"]
    assert len(kernels) >= 3 and len(launches) >= len(kernels)
    assert all(k["start"] >= 0 for k in kernels)


def test_a_notebook_points_to_the_page_for_a_schematic_and_for_numbers(tmp_path):
    """A schematic has no number: its notebook line says a diagram is on the page; the queue
    figure is measured, so its line is the measured-numbers pointer, as for any timing figure."""
    from fieldguide.notebooks import generate as notebooks

    (tmp_path / "docs" / "demo").mkdir(parents=True)
    (tmp_path / "docs" / "demo" / "ring.md").write_text(
        "# Ring\n\nText.\n\n<!-- timing-diagram: ring-all-reduce -->\n\nMore text.\n\n"
        "<!-- timing-queue: a b -->\n\n```python\nprint(1)\n```\n", encoding="utf-8")
    converter = notebooks._Converter(tmp_path, "demo/ring.md", notebooks.Repo("a", "b", "main"),
                                     "Ring")
    text = converter.markdown((tmp_path / "docs" / "demo" / "ring.md").read_text().splitlines()[2:9])
    assert text.count("A diagram for this part is on the page") == 1
    assert text.count("measured numbers for this part are on the page") == 1
    assert "<!--" not in text


def _drawn(build, name: str) -> dict[tuple[str, str], str]:
    """{(theme, layout): svg} of one figure of the rendered pages."""
    found = {}
    for path, svg in build.figures.items():
        match = re.search(rf"charts/{name}-[0-9a-f]{{12}}-(light|dark)(-narrow)?\.svg$", path)
        if match:
            found[match[1], "narrow" if match[2] else "wide"] = svg
    return found


def _svg_words(svg: str, ticks: bool = True) -> set[str]:
    """The words the drawing shows (arrows and other signs left out); without its axes' tick
    labels if not `ticks` (a narrower axis may number fewer ticks)."""
    import xml.etree.ElementTree as ET

    namespace = "{http://www.w3.org/2000/svg}"
    texts = []

    def walk(element):
        if not ticks and element.get("id", "").startswith("matplotlib.axis"):
            return
        if element.tag == namespace + "text":
            texts.append("".join(element.itertext()))
        elif element.tag not in (namespace + "title", namespace + "desc"):
            for child in element:
                walk(child)

    walk(ET.fromstring(svg[svg.index("<svg"):]))
    return {w for t in texts for w in t.split() if re.search(r"\w", w)}


def _svg_size(svg: str) -> tuple[float, float]:
    """(drawing width in CSS px at its natural size, its smallest text in CSS px at that size)."""
    width_pt = float(re.search(r'<svg[^>]*\swidth="([\d.]+)pt"', svg)[1])
    view_width = float(re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+) [\d.]+"', svg)[1])
    smallest = min(float(s) for s in re.findall(r"font-size:\s*([\d.]+)px", svg))
    px = width_pt * 4 / 3 / view_width   # CSS px per unit of the drawing
    return view_width * px, smallest * px


@pytest.mark.parametrize("name", ["host-queue", *diagrams.DIAGRAMS])
def test_each_drawing_has_a_narrow_layout_that_says_the_same_words(rendered, name):
    """Issue 45: every drawn idea is drawn for a phone too, in both themes, taller and narrower,
    with the words of the wide drawing (the queue's tick labels aside: its narrower axes number
    fewer ticks) and none other."""
    build, _ = rendered
    drawn = _drawn(build, name)
    assert set(drawn) == {(t, w) for t in ("light", "dark") for w in diagrams.LAYOUTS}, name
    ticks = name != "host-queue"
    for theme in ("light", "dark"):
        wide, narrow = drawn[theme, "wide"], drawn[theme, "narrow"]
        assert _svg_words(narrow, ticks) == _svg_words(wide, ticks), (name, theme)
        assert len(_svg_words(wide, ticks)) >= 8, name
        (wide_px, _), (narrow_px, _) = _svg_size(wide), _svg_size(narrow)
        height = [float(re.search(r'<svg[^>]*\sheight="([\d.]+)pt"', svg)[1]) for svg in (wide, narrow)]
        assert narrow_px < wide_px and height[1] > height[0], (name, theme)


def test_the_narrow_layout_is_drawn_narrow_enough_for_12_px_text_on_a_phone():
    """Below the stylesheet's breakpoint a narrow drawing fills the column: on a 390 px phone,
    PHONE_COLUMN_PX, the viewport less Material's side margins (read from its stylesheet). Drawn
    NARROW_WIDTH_IN wide, its text of SMALL_PT (its smallest) or FONT_PT shows there at 12 px or
    more; the wide drawing shows FONT_PT at about the body's 16 px on a desktop."""
    material = pytest.importorskip("material")  # the docs toolchain; a GPU machine lacks it

    css = (ROOT / "docs" / "assets" / "extra.css").read_text(encoding="utf-8")
    assert f"max-width: {diagrams.DESKTOP_WIDTH_PX}px;" in css
    assert "fieldguide-diagram-frame" not in css   # nothing scrolls sideways any more
    # the narrow drawings are the ones shown below the breakpoint, and a 390 px phone is below it
    narrow_rule = re.search(r"@media screen and \(max-width: (\d+)px\) \{[^@]*?"
                            r"object\.timing-narrow\.only-light[^}]*display: block", css)
    assert narrow_rule and diagrams.PHONE_VIEWPORT_PX <= int(narrow_rule[1])
    sheets = (Path(material.__file__).parent / "templates" / "assets" / "stylesheets").glob("main.*.min.css")
    material_css = next(sheets).read_text(encoding="utf-8")
    root_px = 16 * int(re.search(r"html\{[^}]*font-size:(\d+)%", material_css)[1]) / 100
    margin_rem = float(re.search(r"\.md-content__inner\{[^}]*margin:0 ([\d.]+)rem", material_css)[1])
    assert diagrams.PHONE_COLUMN_PX == diagrams.PHONE_VIEWPORT_PX - 2 * margin_rem * root_px

    def shown(points, drawn_in, width_px):
        return points * 4 / 3 * width_px / (drawn_in * 96)

    # the widest the narrow layout can be drawn for its smallest text to show at 12 px
    widest_in = diagrams.SMALL_PT * 4 / 3 * diagrams.PHONE_COLUMN_PX / diagrams.PHONE_TEXT_PX / 96
    assert diagrams.NARROW_WIDTH_IN <= widest_in
    for points in (diagrams.SMALL_PT, diagrams.FONT_PT):
        assert shown(points, diagrams.NARROW_WIDTH_IN, diagrams.PHONE_COLUMN_PX) >= diagrams.PHONE_TEXT_PX
    assert shown(diagrams.FONT_PT, diagrams.WIDTH_IN, diagrams.DESKTOP_WIDTH_PX) <= 16.5


@pytest.mark.parametrize("name", ["host-queue", *diagrams.DIAGRAMS])
def test_each_narrow_drawing_shows_its_smallest_text_at_12_px_on_a_phone(rendered, name):
    """As drawn (bbox_inches="tight" crops or widens the figure): the narrow SVG's natural
    width and smallest text, scaled to PHONE_COLUMN_PX, give text of PHONE_TEXT_PX or more."""
    build, _ = rendered
    for (theme, layout), svg in _drawn(build, name).items():
        natural_px, smallest_px = _svg_size(svg)
        if layout == "narrow":
            assert natural_px <= diagrams.NARROW_WIDTH_IN * 96 + 1, (name, theme, natural_px)
            shown = smallest_px * diagrams.PHONE_COLUMN_PX / natural_px
            assert shown >= diagrams.PHONE_TEXT_PX, (name, theme, round(shown, 1))
        else:
            shown = smallest_px * diagrams.DESKTOP_WIDTH_PX / natural_px   # a desktop's column
            assert shown >= 11, (name, theme, round(shown, 1))   # the browser test's desktop floor
