"""Benchmarks behind docs/start-here/slow-training.md: `make timings` runs them on a GPU.

`trace` is the page's example trace: the page's slow step, timed without the profiler, and
what its torch.profiler trace shows (GPU idle time split by cause, the longest gap, tiny
kernels, strict float32 products, the branches `where_to_look` lists), with the events that
`read_trace` reads kept in the run (`trace_events`), so the tests can read the example trace
of every GPU again as the reader's code changes.
Budget on an H200: about two seconds (five profiled steps, twenty timed ones).
"""

import json

import pytest

pytestmark = [pytest.mark.snippet("snippets/start_here/slow_training.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "trace": "The page's slow training step ({kernels} kernels in three traced steps)",
}
WORDS = {}
# The step is small on purpose: the host (making the batch, launching, reading the loss) sets
# its pace, which is what its trace shows.
HOST_BOUND = {"trace": "Python, the batch made on the CPU and the loss read every step"}

KEPT = ("name", "cat", "ph", "ts", "dur", "pid", "tid")  # what read_trace reads of an event


def kept(path, products):
    """The trace's events that read_trace reads, with only the fields it reads: the
    correlation of launches and GPU work, the input types of the products."""
    with open(path, encoding="utf-8") as file:
        events = json.load(file)["traceEvents"]
    out = []
    for e in events:
        if e.get("ph") == "X" and "dur" in e:
            args = e.get("args", {})
            keep = ["correlation"] + (["Input type"] if e["name"] in products else [])
            out.append({**{k: e[k] for k in KEPT if k in e},
                        "args": {k: args[k] for k in keep if k in args}})
    return out


def bench_trace(gpu_benchmark, snippet, tmp_path):
    """One step of the page's slow example, and what its trace says about it."""
    step = lambda: snippet.train_step(*snippet.batch())  # noqa: E731 (the page's own call)
    snippet.take_trace(tmp_path / "trace.json", step)
    symptoms = snippet.read_trace(tmp_path / "trace.json")
    share = {cause: 100 * us / symptoms.span_us for cause, us in symptoms.idle_us.items()}
    gpu_benchmark.extra_info.update(
        kernels=symptoms.kernels,
        tiny_kernels=symptoms.tiny_kernels,
        gpu_idle_pct=100 * symptoms.gpu_idle_share,
        sync_wait_pct=share["sync"],
        host_work_pct=share["host work"],
        launch_wait_pct=share["launch"] + share["kernel wait"],
        other_idle_pct=share["other"],
        longest_gap_us=symptoms.longest_gaps_us[0] if symptoms.longest_gaps_us else 0.0,
        profiled_step_us=symptoms.span_us / 3,  # three recorded steps (take_trace)
        products=symptoms.products,
        fp32_products=symptoms.fp32_products,
        fp32_product_pct=100 * symptoms.fp32_product_us / symptoms.span_us,
        branches=" / ".join(branch for _, branch in snippet.where_to_look(symptoms)),
        trace_events=kept(tmp_path / "trace.json", snippet.MATMULS | snippet.CONVOLUTIONS),
    )
    gpu_benchmark(step, rounds=20, warmup_rounds=3)
