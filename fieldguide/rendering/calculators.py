"""Markdown extension: the estimators' calculators, and their errors against the GPU runs.

    <!-- calculator: NAME -->          the calculator NAME of CALCULATORS (a form, offline)
    <!-- estimate-table: CHECK -->     estimate beside measurement for each case of a check
    <!-- estimate-error: CHECK [worst|low|high|share_low|share_high] -->   over every run

A calculator is a small form whose script is the estimator itself: fieldguide/rendering/pyjs.py
translates the function of snippets/start_here/will_it_fit.py that the calculator names, with
what it calls, into JavaScript as the page is built, and a short driver (below, no formula in
it) reads the inputs and writes the outputs. Nothing is fetched: the page works offline.
`tests/site/test_estimators_js.py` runs the translated functions with node on a grid of inputs
and compares them with Python's.

A check (fieldguide/measuring/estimates.py) compares an estimator with every committed run that measured
the same case. Its table shows the default GPU's machines (`timings:` of fieldguide.rendering.render:
one GPU, and two or four of it), one row per case, with the error's range over the runs; the
line under it the range over every run of every GPU. An error reads as a signed percentage of
the measurement: -9% is an estimate 9% under what the GPU measured.

Pages put `<!-- calculator: NAME -->` on a line of its own, near the end of the section the
calculator belongs to; the calculator's own text lives in `includes/calculators/NAME.md`,
which this extension puts in that line's place (before fieldguide.rendering.render, so shortcodes in it
are rendered like the page's). Problems (an unknown name or check, a check no current run
measured) join the page's problems, which the guard (fieldguide/rendering/unrendered.py) raises.
"""

from __future__ import annotations

import html
import inspect
import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from markdown import Extension
from markdown.preprocessors import Preprocessor

from fieldguide import ROOT
from fieldguide.measuring import estimates
from fieldguide.measuring.numbers import format_bytes, format_number, format_seconds
from fieldguide.measuring.timings import TimingError
from fieldguide.rendering import glossary, pyjs, unrendered
from snippets.start_here import will_it_fit

INCLUDES = Path("includes/calculators")
CALCULATOR = re.compile(r"^(?P<indent>[ \t]*)<!--\s*calculator:\s*(?P<name>[\w-]+)\s*-->\s*$")
FORM = re.compile(r"^(?P<indent>[ \t]*)<!--\s*calculator-form:\s*(?P<name>[\w-]+)\s*-->\s*$")
TABLE = re.compile(r"^(?P<indent>[ \t]*)<!--\s*estimate-table:\s*(?P<name>\w+)\s*-->\s*$")
ERROR = re.compile(r"(?<!`)<!--\s*estimate-error:\s*(?P<name>\w+)(?P<args>[^>]*?)\s*-->")


@dataclass(frozen=True)
class Input:
    """One labelled input: a number (`scale` multiplies what the reader types into the
    argument's unit: 1e6 for "millions"), a choice, or a checkbox."""

    param: str
    label: str
    default: float | str | bool
    scale: float = 1
    choices: tuple[tuple[str, str], ...] = ()   # (value, how it reads)
    step: str = "any"
    help: str = ""


@dataclass(frozen=True)
class Output:
    """One result: `key` of the dict the function returns (None: the number it returns),
    shown in `unit`: "bytes", "seconds", "share" or "number"."""

    key: str | None
    label: str
    unit: str


@dataclass(frozen=True)
class Calculator:
    title: str
    function: str
    inputs: tuple[Input, ...]
    outputs: tuple[Output, ...]
    fixed: dict = field(default_factory=dict)   # arguments the form does not ask for
    chart: str | None = None   # CHARTS: measured points drawn beside the estimate


# Options read without the glossary's terms: an <option> holds text only, no tooltip.
PRECISIONS = (("fp32", "float32"), ("autocast", "mixed: bfloat16 products"),
              ("bf16", "bfloat16 throughout"))
OPTIMIZERS = (("adam", "Adam / AdamW"), ("sgd_momentum", "SGD with momentum"),
              ("sgd", "plain SGD"))
PARALLEL = (("ddp", "data parallel: all on each"), ("fsdp2", "FSDP2: state sharded"),
            ("tp", "tensor parallel"))

CALCULATORS: dict[str, Calculator] = {
    "memory": Calculator(
        "Will it fit? Memory of a training step per GPU", "training_memory",
        (Input("parameters", "Parameters (millions)", 1000, scale=1e6),
         Input("layers", "Layers", 24, step="1"),
         Input("tokens", "Tokens per GPU per step (samples × sequence length)", 16384,
               step="1"),
         Input("width", "Hidden width", 2048, step="1"),
         Input("saved_widths", "Numbers saved per token per layer, in widths", 10,
               help="10 for a feed-forward block with a 4× hidden layer; 1 for Linear + ReLU; "
               "17 for a pre-norm transformer block with fused attention, no dropout"),
         Input("optimizer", "Optimizer", "adam", choices=OPTIMIZERS),
         Input("precision", "Precision (mixed: autocast, float32 weights and state)",
               "autocast", choices=PRECISIONS),
         Input("checkpoint", "Activation checkpointing (keep each layer's input only)", False),
         Input("micro_batches", "Micro-batches of gradient accumulation", 1, step="1"),
         Input("gpus", "GPUs", 1, step="1"),
         Input("parallel", "Split over the GPUs (data parallel: DDP)", "ddp",
               choices=PARALLEL),
         Input("bucket_view", "DDP's gradients in its buckets "
               "(gradient_as_bucket_view=True)", False),
         Input("whole_widths", "Of the numbers saved, widths each GPU keeps whole under tensor "
               "parallelism", 0, help="4 in a transformer block (both norms' inputs and "
               "outputs); 2 with sequence parallelism")),
        (Output("total", "At the peak, per GPU", "bytes"),
         Output("weights", "Weights", "bytes"), Output("gradients", "Gradients", "bytes"),
         Output("optimizer", "Optimizer state", "bytes"),
         Output("buckets", "DDP's gradient buckets", "bytes"),
         Output("gathered", "FSDP2's gathered layers (this and the next)", "bytes"),
         Output("copies", "autocast's bfloat16 weight copies", "bytes"),
         Output("activations", "Saved activations", "bytes"))),
    "collective": Calculator(
        "How long will the all-reduce take?", "collective_seconds",
        (Input("nbytes", "Tensor size (MiB)", 256, scale=2**20),
         Input("gpus", "GPUs", 4, step="1"),
         Input("bus_bandwidth", "Bus bandwidth (GB/s)", "busbw", scale=1e9),
         Input("op", "Collective: all-reduce, all-gather or reduce-scatter", "all_reduce",
               choices=(("all_reduce", "the sum, on every GPU"),
                        ("all_gather", "every GPU's piece, on every GPU"),
                        ("reduce_scatter", "a piece of the sum, on each GPU"))),
         Input("latency", "Latency (µs)", "latency", scale=1e-6)),
        (Output(None, "Time", "seconds"),), chart="all_reduce"),
    "roofline": Calculator(
        "How fast can it be? A step's lower bound", "step_lower_bound",
        (Input("flops", "Floating-point operations (GFLOP)", 1000, scale=1e9),
         Input("nbytes", "Bytes read and written (GB)", 10, scale=1e9),
         Input("peak_flops", "Peak rate (TFLOP/s)", "peak", scale=1e12),
         Input("bandwidth", "Memory bandwidth (GB/s)", "bandwidth", scale=1e9)),
        (Output("bound_s", "Lower bound", "seconds"),
         Output("compute_s", "Compute at the peak rate", "seconds"),
         Output("memory_s", "Memory at full bandwidth", "seconds"),
         Output("intensity", "Arithmetic intensity (FLOP per byte)", "number"),
         Output("ridge", "Ridge point (FLOP per byte)", "number"))),
    "waves": Calculator(
        "Tiles and waves of a matrix product", "matmul_waves",
        (Input("m", "m (rows of the output)", 1056, step="1"),
         Input("n", "n (columns of the output)", 8192, step="1"),
         Input("tile_m", "Tile rows", 128, step="1"),
         Input("tile_n", "Tile columns", 256, step="1"),
         Input("sms", "SMs", "sms", step="1")),
        (Output("tiles", "Output tiles", "number"), Output("waves", "Waves", "number"),
         Output("fill", "Last wave's SMs with work", "share"),
         Output("useful", "Share of the paid-for work that is useful", "share"))),
    "pipeline": Calculator(
        "The pipeline bubble", "bubble_fraction",
        (Input("stages", "Stages", 4, step="1"),
         Input("micro_batches", "Micro-batches", 16, step="1")),
        (Output(None, "Each stage idle, (S − 1)/(M + S − 1)", "share"),)),
}


# The all-reduces of two GPUs a calculator's defaults come from, the largest and the smallest
# size of one benchmark: the first pair the runs rule admits
ALL_REDUCE_PAIRS = (("scaling.all_reduce[2gpus-1GiB]", "scaling.all_reduce[2gpus-1KiB]"),
                    ("ways_to_use_several_gpus.all_reduce[1GiB]",
                     "ways_to_use_several_gpus.all_reduce[1KiB]"))


def measured_defaults(default_gpu: str | None) -> dict[str, float]:
    """Defaults a calculator takes from the runs, each only where three runs of its current
    code from two leases measured it (estimates.Data.shown): the bus bandwidth and latency of
    two GPUs (the largest and smallest all-reduce; two of the default GPU where measured),
    the default GPU's bfloat16 peak, its bandwidth and its SM count. A default the runs do
    not give yet is left for the reader to type (the field starts at 0)."""
    data = estimates._data(str(ROOT))
    gpu = default_gpu or "nvidia-h200"
    found: dict[str, float] = {}
    # two of the default GPU where the runs have them, else two of another
    pairs = sorted(m for m in data.machines if m.startswith("2x-"))
    pair = f"2x-{gpu}" if f"2x-{gpu}" in data.machines else (pairs[0] if pairs else "")

    def take(key, machine, name, fld, scale=1.0):
        value = data.shown(machine, name, fld)
        if value:
            found[key] = float(f"{value * scale:.3g}")

    for large, small in ALL_REDUCE_PAIRS:
        if not (data.short(pair, large) or data.short(pair, small)):
            take("busbw", pair, large, "busbw_gbs")
            take("latency", pair, small, "per_op", 1e6)
            break
    take("peak", gpu, "cpu_vs_gpu.matmul[bf16]", "tflops")
    take("bandwidth", gpu, "cpu_vs_gpu.triad[gpu]", "bandwidth_gbs")
    take("sms", gpu, "tensor_cores_and_shapes.waves[1024]", "sms")
    return found


DRIVER = """\
(function () {
  const root = document.getElementById(%(id)s);
  const spec = %(spec)s;
  const form = root.querySelector("form");
  const words = new Intl.NumberFormat("en", {maximumSignificantDigits: 3});
  function show(value, unit) {
    if (!Number.isFinite(value)) { return "—"; }
    if (unit === "share") { return words.format(value * 100) + "%%"; }
    if (unit === "bytes") {
      const units = [["GiB", 1073741824], ["MiB", 1048576], ["KiB", 1024]];
      for (const [name, size] of units) {
        if (Math.abs(value) >= size) { return words.format(value / size) + " " + name; }
      }
      return words.format(value) + " B";
    }
    if (unit === "seconds") {
      const units = [["s", 1], ["ms", 1 / 1000], ["µs", 1 / 1000000]];
      for (const [name, size] of units) {
        if (Math.abs(value) >= size) { return words.format(value / size) + " " + name; }
      }
      return words.format(value * 1000000000) + " ns";
    }
    return words.format(value);
  }
  function update() {
    const args = spec.params.map(function (param) {
      const input = spec.inputs[param];
      if (!input) { return spec.fixed[param]; }
      const element = form.elements[root.id + "-" + param];
      if (input.kind === "checkbox") { return element.checked; }
      if (input.kind === "choice") { return element.value; }
      return Number(element.value) * input.mul / input.div;
    });
    let result;
    try { result = %(function)s.apply(null, args); } catch (error) { result = NaN; }
    for (const output of spec.outputs) {
      const value = output.key === null ? result : (result || {})[output.key];
      root.querySelector("[data-output='" + (output.key || "result") + "']").textContent =
        show(value, output.unit);
    }
    if (spec.chart) { draw(spec.chart, args); }
  }
  // The estimate over the chart's x range as a line, the measured points beside it;
  // both axes logarithmic. Shapes, not colours alone, tell the series apart.
  function draw(chart, args) {
    const at = spec.params.indexOf(chart.x);
    const line = [];
    for (let i = 0; i <= 48; i++) {
      const x = chart.lo * Math.pow(chart.hi / chart.lo, i / 48);
      const a = args.slice(); a[at] = x;
      let y; try { y = %(function)s.apply(null, a); } catch (error) { y = NaN; }
      if (Number.isFinite(y) && y > 0) { line.push([x, y]); }
    }
    const ys = line.map(p => p[1]);
    const series = chart.series.map(s => s.points.map(p => [p[0], p[1] / 1000000]));
    for (const points of series) { for (const p of points) { ys.push(p[1]); } }
    const ylo = Math.pow(10, Math.floor(Math.log10(Math.min.apply(null, ys))));
    const yhi = Math.pow(10, Math.ceil(Math.log10(Math.max.apply(null, ys))));
    const W = 400, H = 230, L = 58, R = 12, T = 10, B = 34;
    const px = x => L + (W - L - R) * Math.log(x / chart.lo) / Math.log(chart.hi / chart.lo);
    const py = y => H - B - (H - T - B) * Math.log(y / ylo) / Math.log(yhi / ylo);
    const out = [];
    const ink = "fill: var(--md-default-fg-color); font-size: 11px";
    const rule = "stroke: var(--md-default-fg-color--lightest)";
    for (let x = 1024; x <= chart.hi; x *= 1024) {
      if (x < chart.lo) { continue; }
      out.push(`<line x1="${px(x)}" x2="${px(x)}" y1="${T}" y2="${H - B}" style="${rule}"/>`);
      const anchor = x <= chart.lo ? "start" : x >= chart.hi ? "end" : "middle";
      out.push(`<text x="${px(x)}" y="${H - B + 14}" text-anchor="${anchor}" ` +
               `style="${ink}">${show(x, chart.unit_x)}</text>`);
    }
    for (let y = ylo; y <= yhi * 1.0001; y *= 10) {
      out.push(`<line x1="${L}" x2="${W - R}" y1="${py(y)}" y2="${py(y)}" style="${rule}"/>`);
      out.push(`<text x="${L - 4}" y="${py(y) + 4}" text-anchor="end" style="${ink}">` +
               `${show(y, chart.unit_y)}</text>`);
    }
    out.push(`<text x="${(L + W - R) / 2}" y="${H - 4}" text-anchor="middle" ` +
             `style="${ink}">${chart.xlabel}</text>`);
    const path = line.map((p, i) => (i ? "L" : "M") + px(p[0]) + " " + py(p[1])).join(" ");
    out.push(`<path d="${path}" style="fill: none; stroke: var(--md-accent-fg-color); ` +
             `stroke-width: 2"/>`);
    series.forEach(function (points, k) {
      const fill = k ? "var(--md-default-fg-color)" : "var(--md-primary-fg-color)";
      for (const p of points) {
        const x = px(p[0]), y = py(p[1]);
        out.push(k ? `<rect x="${x - 3.5}" y="${y - 3.5}" width="7" height="7" style="fill: ${fill}"/>`
                   : `<circle cx="${x}" cy="${y}" r="4" style="fill: ${fill}"/>`);
      }
    });
    root.querySelector(".fg-chart").innerHTML =
      `<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="${chart.title}">${out.join("")}</svg>`;
  }
  form.addEventListener("input", update);
  form.addEventListener("change", update);
  form.addEventListener("submit", function (event) { event.preventDefault(); update(); });
  update();
})();
"""

STYLE = """\
<style>
.fg-calc form { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 14rem);
  gap: .4rem .8rem; align-items: center; margin: .6rem 0; }
.fg-calc label { font-size: .75rem; }
.fg-calc .fg-help { grid-column: 1 / -1; font-size: .65rem; margin: -.3rem 0 0;
  color: var(--md-default-fg-color--light); }
.fg-calc input, .fg-calc select { font: inherit; font-size: .75rem; width: 100%;
  color: var(--md-default-fg-color); background: var(--md-default-bg-color);
  border: 1px solid var(--md-default-fg-color--light); border-radius: .2rem;
  padding: .2rem .3rem; box-sizing: border-box; }
.fg-calc input[type=checkbox] { width: auto; justify-self: start; }
.fg-calc input:focus-visible, .fg-calc select:focus-visible {
  outline: 2px solid var(--md-accent-fg-color); outline-offset: 1px; }
.fg-calc dl { display: grid; grid-template-columns: minmax(0, 1fr) auto; gap: .2rem .8rem;
  font-size: .75rem; margin: .4rem 0 0; }
.fg-calc dt { margin: 0; } .fg-calc dd { margin: 0; font-weight: 700; text-align: right; }
.fg-calc .fg-chart svg { width: 100%; max-width: 32rem; height: auto; display: block;
  margin: .6rem 0 .2rem; }
@media (max-width: 30em) { .fg-calc form { grid-template-columns: minmax(0, 1fr); } }
</style>"""


def _default(value, defaults: dict[str, float]):
    if isinstance(value, str) and value in defaults:
        return defaults[value]
    return value


CHARTS = {
    "all_reduce": {"x": "nbytes", "unit_x": "bytes", "unit_y": "seconds",
                   "xlabel": "Tensor size", "lo": 1024, "hi": 2**30},
}


def chart_spec(name: str, default_gpu: str | None) -> dict:
    """A chart's measured series, from the default GPU's machines of two and four (or any
    machines of two and four where it has none): each all-reduce's median time per operation
    over the runs, against its size, for the all-reduces the runs rule admits. A GPU count
    none of whose all-reduces it admits yet is named in `pending`."""
    data = estimates._data(str(ROOT))
    gpu = default_gpu or "nvidia-h200"
    series, pending = [], []
    for count in (2, 4):
        machines = sorted(m for m in data.machines if m.startswith(f"{count}x-"))
        machine = f"{count}x-{gpu}" if f"{count}x-{gpu}" in machines else next(iter(machines), None)
        if machine is None:
            continue
        found = [b for pattern in estimates.ALL_REDUCES for _, b in data.current(pattern)
                 if b in data.machines[machine].benchmarks
                 and (b.extra.get("gpus") or b.extra.get("world_size")) == count]
        admitted = [b for b in found if not data.short(machine, b.name)]
        data.used.update((machine, b.name) for b in admitted)
        # microseconds to three figures: no e-notation in the page's text, scripts included
        points = [[b.extra["message_bytes"], float(f"{b.value('per_op') * 1e6:.3g}")]
                  for b in admitted]
        if points:
            series.append({"label": f"measured on {data.machines[machine].gpu}",
                           "points": sorted(points)})
        elif found:
            pending.append(data.machines[machine].gpu)
    if not series:
        raise TimingError(f"chart {name!r}: no all-reduce measured in {estimates.RUNS_WANTED} "
                          f"runs of the current code from {estimates.LEASES_WANTED} leases")
    words = " and ".join(s["label"] for s in series)
    title = (f"All-reduce time against tensor size, both logarithmic: the estimate for the "
             f"inputs above as a line; {words} as points")
    return {**CHARTS[name], "series": series, "title": title, "pending": pending}


def _ratio(scale: float) -> dict[str, int]:
    """A scale as a ratio of whole numbers: the page's text shows no e-notation, not even in
    a script (tests/site/test_numbers_and_labels.py reads it as text)."""
    if scale >= 1:
        return {"mul": round(scale), "div": 1}
    return {"mul": 1, "div": round(1 / scale)}


@cache
def _glossary() -> tuple[re.Pattern[str], dict[str, str]]:
    found = glossary.terms(ROOT / "includes" / "abbreviations.md")
    words = "|".join(map(re.escape, sorted(found, key=len, reverse=True)))
    return re.compile(rf"\b(?:{words})\b"), found


def _text(words: str) -> str:
    """Escaped text whose glossary terms carry their meaning, as the abbr extension gives
    the Markdown around them (raw HTML gets none from it)."""
    pattern, meanings = _glossary()
    out, last = [], 0
    for match in pattern.finditer(words):
        out += [html.escape(words[last:match.start()]),
                f'<abbr title="{html.escape(meanings[match[0]])}">{html.escape(match[0])}</abbr>']
        last = match.end()
    return "".join(out) + html.escape(words[last:])


def calculator_html(name: str, defaults: dict[str, float], with_style: bool,
                    default_gpu: str | None = None) -> str:
    """The calculator's form and script, as one block of raw HTML."""
    calc = CALCULATORS[name]
    fn = getattr(will_it_fit, calc.function)
    params = list(inspect.signature(fn).parameters)
    uid = f"calc-{name}"
    rows, spec_inputs = [], {}
    for item in calc.inputs:
        if item.param not in params:
            raise TimingError(f"calculator {name!r}: {calc.function}() has no argument "
                              f"{item.param!r}")
        field_id = f"{uid}-{item.param}"
        label = f'<label for="{field_id}">{_text(item.label)}</label>'
        default = _default(item.default, defaults)
        if item.choices:
            options = "".join(f'<option value="{v}"{" selected" if v == default else ""}>'
                              f"{html.escape(words)}</option>" for v, words in item.choices)
            control = f'<select id="{field_id}" name="{field_id}">{options}</select>'
            spec_inputs[item.param] = {"kind": "choice"}
        elif isinstance(default, bool):
            checked = " checked" if default else ""
            control = f'<input type="checkbox" id="{field_id}" name="{field_id}"{checked}>'
            spec_inputs[item.param] = {"kind": "checkbox"}
        else:
            if isinstance(default, str):
                default = 0  # no run measured it: the reader types their own
            control = (f'<input type="number" id="{field_id}" name="{field_id}" '
                       f'value="{default:g}" min="0" step="{item.step}" inputmode="decimal">')
            spec_inputs[item.param] = {"kind": "number", **_ratio(item.scale)}
        rows.append(label + control)
        if item.help:
            rows.append(f'<p class="fg-help">{_text(item.help)}</p>')
    outputs = "".join(f"<dt>{_text(o.label)}</dt><dd><output "
                      f'data-output="{o.key or "result"}" aria-live="polite">—</output></dd>'
                      for o in calc.outputs)
    spec = {"params": params, "inputs": spec_inputs, "fixed": calc.fixed,
            "outputs": [{"key": o.key, "unit": o.unit} for o in calc.outputs],
            "chart": chart_spec(calc.chart, default_gpu) if calc.chart else None}
    chart = ""
    if spec["chart"]:
        marks = ["●", "■"]
        legend = "; ".join(f"{marks[i]} {html.escape(s['label'])}"
                           for i, s in enumerate(spec["chart"]["series"]))
        waiting = "".join(f" {html.escape(gpu)}: not yet measured in {estimates.RUNS_WANTED} "
                          f"runs from {estimates.LEASES_WANTED} machine leases."
                          for gpu in spec["chart"]["pending"])
        chart = (f'<div class="fg-chart"></div><p class="fg-help">Line: the estimate for '
                 f"the inputs above, from the smallest size to the largest. {legend}."
                 f"{waiting}</p>")
    script = (pyjs.translate(will_it_fit, [calc.function])
              + DRIVER % {"id": json.dumps(uid), "spec": json.dumps(spec),
                          "function": calc.function})
    # one script block, its own scope: two calculators on a page share no names
    return (f'<div class="fg-calc" id="{uid}">' + (STYLE if with_style else "")
            + f'<p><strong>{_text(calc.title)}</strong></p>'
            + f'<form aria-label="{html.escape(calc.title)}">{"".join(rows)}</form>'
            + f"<dl>{outputs}</dl>" + chart
            + "<script>(function () {\n" + script + "})();</script></div>")


# --- Estimates against measurements -----------------------------------------------------------

def _quantity(value: float, unit: str) -> str:
    if unit == "bytes":
        return format_bytes(value)
    if unit == "seconds":
        return format_seconds(value)
    if unit == "share":
        return f"{format_number(value * 100)}%"
    return format_number(value)


def _percent(error: float) -> str:
    text = f"{format_number(abs(error) * 100)}%"
    return ("−" if error < 0 and text != "0%" else "+" if error > 0 and text != "0%" else "") + text


def _family(machine: str, default_gpu: str) -> bool:
    return machine == default_gpu or machine.endswith("x-" + default_gpu)


def _pending_lines(check: str, known: dict) -> list[str]:
    """The cases of `check` no admitted run measured yet, as a list by machine."""
    by_machine: dict[str, list[str]] = {}
    for p in estimates.pending(check):
        by_machine.setdefault(known[p.machine].gpu, []).append(p.case)
    if not by_machine:
        return []
    return ["", f"Not yet measured in {estimates.RUNS_WANTED} runs of the current code from "
            f"{estimates.LEASES_WANTED} machine leases, so not compared here:", "",
            *(f"- {gpu}: {'; '.join(cases)}" for gpu, cases in sorted(by_machine.items()))]


def table_markdown(check: str, default_gpu: str) -> str:
    """The table of a check's admitted cases and the error over all of them, then the cases
    it waits for; where it admits none, only what it waits for."""
    known = estimates._data(str(ROOT)).machines
    every = estimates.points(check)
    waiting = _pending_lines(check, known)
    title, estimator = estimates.CHECKS[check].title, estimates.CHECKS[check].estimator
    if not every:
        return "\n".join([f"*{title}: `{estimator}()` is not compared with a run yet.*",
                          *waiting])
    rows = estimates.rows(check)
    shown = [r for r in rows if _family(r.machine, default_gpu)] or rows
    lines = ["| Case | Estimate | Measured (median) | Error | Runs |", "|:--|--:|--:|--:|--:|"]
    for r in shown:
        error = (_percent(r.low) if _percent(r.low) == _percent(r.high)
                 else f"{_percent(r.low)} to {_percent(r.high)}")
        lines.append(f"| {r.case} | {_quantity(r.estimate, r.unit)} | "
                     f"{_quantity(r.measured, r.unit)} | {error} | {r.runs} |")
    low, high = min(p.error for p in every), max(p.error for p in every)
    machines = sorted({known[p.machine].gpu for p in every})
    spread = (f"is {_percent(low)} in each of them" if _percent(low) == _percent(high) else
              f"lies between {_percent(low)} and {_percent(high)} over all of them")
    lines += ["", f"*{title}: `{estimator}()` against {len(every)} runs on "
              f"{' and '.join(machines)}; the error {spread}.*", *waiting]
    return "\n".join(lines)


STATS = ("worst", "low", "high", "share_low", "share_high")


def error_text(check: str, args: str) -> str:
    """worst: the largest error either way, unsigned; low, high: the signed extremes;
    share_low, share_high: the estimate as a share of the measurement, at its extremes."""
    words = args.split()
    stat = next((w for w in words if w in STATS), "worst")
    errors = estimates.errors(check)
    if stat in ("share_low", "share_high"):  # the estimate as a share of the measurement
        shares = [1 + e for e in errors]
        return f"{format_number(100 * (min(shares) if stat == 'share_low' else max(shares)))}%"
    if stat == "low":
        return _percent(min(errors))
    if stat == "high":
        return _percent(max(errors))
    return f"{format_number(max(abs(e) for e in errors) * 100)}%"


# --- The extension ----------------------------------------------------------------------------

def _render_config(md) -> dict:
    """fieldguide.rendering.render's settings in mkdocs.yml: the reference GPU (`timings`) and whether a
    number needs three runs from two leases (`require_runs`), which these numbers follow."""
    from fieldguide.rendering.context import context

    ctx = context(md)
    return (ctx.mdx_configs.get("fieldguide.rendering.render") or {}) if ctx else {}


class _Include(Preprocessor):
    """Before fieldguide.rendering.render (34): each `<!-- calculator: NAME -->` line becomes the text
    of includes/calculators/NAME.md, indented like the line, so its shortcodes render."""

    def run(self, lines: list[str]) -> list[str]:
        out = []
        for line in lines:
            match = CALCULATOR.match(line)
            if not match:
                out.append(line)
                continue
            path = ROOT / INCLUDES / f"{match['name']}.md"
            if not path.is_file():
                out.append(line)  # reported by _Render, with the page's other problems
                continue
            out += [match["indent"] + text if text.strip() else ""
                    for text in path.read_text(encoding="utf-8").splitlines()]
        return out


class _Render(Preprocessor):
    """Forms, tables and errors, once the page's own shortcodes are rendered."""

    def run(self, lines: list[str]) -> list[str]:
        from fieldguide.rendering.context import nested

        if nested(self.md):
            return lines
        config = _render_config(self.md)
        default_gpu = config.get("timings") or "nvidia-h200"
        data = estimates._data(str(ROOT))
        data.used.clear()  # what this page reads, for the runs rule below
        problems: list[str] = []
        defaults: dict[str, float] | None = None
        styled = False
        out: list[str] = []
        for line in lines:
            if (match := CALCULATOR.match(line)):
                problems.append(f"no calculator include {INCLUDES}/{match['name']}.md "
                                f"(known: {', '.join(CALCULATORS)})")
                continue
            if (match := FORM.match(line)):
                if match["name"] not in CALCULATORS:
                    problems.append(f"no calculator {match['name']!r} (known: "
                                    f"{', '.join(CALCULATORS)})")
                    continue
                if defaults is None:
                    defaults = measured_defaults(default_gpu)
                try:
                    block = calculator_html(match["name"], defaults, not styled,
                                            default_gpu)
                except (TimingError, pyjs.TranslationError) as exc:
                    problems.append(str(exc))
                    continue
                styled = True
                out.append(match["indent"] + self.md.htmlStash.store(block))
                continue
            if (match := TABLE.match(line)):
                try:
                    table = table_markdown(match["name"], default_gpu)
                except TimingError as exc:
                    problems.append(str(exc))
                    continue
                out += [match["indent"] + t if t else "" for t in table.split("\n")]
                continue

            def error(found: re.Match) -> str:
                try:
                    return error_text(found["name"], found["args"])
                except TimingError as exc:
                    problems.append(str(exc))
                    return found[0]

            out.append(ERROR.sub(error, line))
        if config.get("require_runs"):
            problems += [f"{line}; measure it with `make gpu-round`, or keep the page in "
                         "draft_docs until then" for line in data.thin(default_gpu)]
        if problems:
            self.md.fieldguide_problems = [
                *(getattr(self.md, "fieldguide_problems", None) or []), *problems]
        return out


class CalculatorsExtension(Extension):
    def extendMarkdown(self, md) -> None:  # noqa: N802 (Markdown's API)
        md.preprocessors.register(_Include(md), "fieldguide-calculator-include", 35)
        # After fieldguide.rendering.render (34), which sets the page's problems, and after Markdown's
        # NormalizeWhitespace (30), which strips the raw-HTML placeholders' markers
        md.preprocessors.register(_Render(md), "fieldguide-calculators", 29)
        unrendered.register(md)


def makeExtension(**kwargs):  # noqa: N802 (Markdown's API)
    return CalculatorsExtension(**kwargs)
