"""How things read on a page: the one registry of labels (fields, GPUs) and the labels declared
beside each benchmark, read without running it.

A table column or a chart axis is named by FIELD_LABELS: a field without an entry there fails the
build (`column_label`), so no header shows a code id such as `peak_gpu0_gib`. A GPU is named by
`gpu_label` everywhere it appears (tabs, tags, the "Measured on" line).

A benchmark module may declare, at module level, two plain dicts (literals only):

    LABELS = {"copy": "{direction} copy from {kind} memory, {bytes}",   # per benchmark function
              "return[pinned-non_blocking]": "Pinned, non_blocking=True"}  # or per parameter id
    WORDS = {"h2d": "host→device", "pageable": "pageable"}   # how recorded values read

A table row or a chart series is named by the most specific LABELS entry (`func[param]`, then
`func`), its `{field}`s filled from what the benchmark recorded, each value through WORDS and
the field's unit (bytes read as KiB/MiB/GiB). The site build reads these with `ast`, so it needs
neither torch nor a GPU, and editing a label never makes a timing stale.
"""

from __future__ import annotations

import ast
import string
from functools import cache
from pathlib import Path
from typing import Any

from fieldguide.measuring.numbers import format_value
from fieldguide.measuring.timings import Benchmark, benchmark_location

# Every field a page shows as a table column, an axis or a crossover's variable, as a reader
# reads it. The unit is not part of the label: the values carry it.
FIELD_LABELS: dict[str, str] = {
    # statistics over a benchmark's rounds, and what is derived from them (fieldguide/measuring/timings.py)
    "median": "Median", "iqr": "IQR", "q1": "Q1", "q3": "Q3", "mean": "Mean",
    "stddev": "Std dev", "min": "Min", "max": "Max", "rounds": "Rounds", "runs": "Runs",
    "bandwidth_gbs": "Bandwidth", "tflops": "Rate", "per_op": "Per operation",
    # what benchmarks record (extra_info)
    "bytes": "Size", "message_bytes": "Message size", "elements": "Elements", "n": "n",
    "ops": "Operations", "grid": "Grid size",
    "relative_error": "Relative error",
    "peak_gib": "Peak memory", "peak_memory_gib": "Peak memory", "peak_bytes": "Peak memory",
    "peak_gpu0_gib": "Peak memory, GPU 0", "peak_gpu1_gib": "Peak memory, GPU 1",
    "peak_second_step_gpu0_gib": "Second step's peak, GPU 0",
    "held_at_start_gpu0_gib": "Held as a step starts, GPU 0",
    "peak_forward_gpu0_gib": "Forward pass's peak, GPU 0",
    "peak_backward_gpu0_gib": "Backward pass's peak, GPU 0",
    "held_after_backward_gpu0_gib": "Held after the backward pass, GPU 0",
    "peak_optimizer_gpu0_gib": "Optimizer step's peak, GPU 0",
    "peak_steady_gpu0_gib": "Peak over steady steps, GPU 0",
    "allocated_before_bytes": "Allocated before", "new_blocks": "New blocks",
    "utilization_pct": "GPU utilization", "power_w": "Power",
    "step_us": "Step", "pause_s": "Pause", "overlap_ms": "Overlap", "kernel_s": "Kernel time",
    "kernel_gbs": "Kernel bandwidth",
    "event_s": "Event time", "all_reduce_ms": "All-reduce", "busbw_gbs": "Bus bandwidth",
    "items_per_s": "Items per second", "num_workers": "Worker processes",
    "idle_gpu0": "GPU 0 idle", "idle_gpu1": "GPU 1 idle", "idle_mean": "Idle, both GPUs",
    "final_loss": "Final loss", "cross_entropy": "Cross-entropy",
    "cprofile_forward_ms": "In forward (cProfile)", "cprofile_loss_value_ms": "In loss_value (cProfile)",
    "cprofile_item_ms": "In .item() (cProfile)",
    "device_busy_pct": "GPU busy", "products_pct": "Matrix products", "attention_pct": "Attention",
    "other_pct": "Other GPU work",
    "gpu_idle_pct": "GPU idle", "sync_wait_pct": "Idle: synchronizing",
    "host_work_pct": "Idle: host work", "launch_wait_pct": "Idle: launching",
    "other_idle_pct": "Idle: other",
    "fp32_product_pct": "float32 products",
    "first_call_s": "First call", "second_call_s": "Second call", "graphs": "Graphs compiled",
    "peak_gib_per_gpu": "Peak memory per GPU", "allocated_gib_per_gpu": "Allocated per GPU",
    "state_gib_per_gpu": "Training state per GPU",
    "bubble_formula": "Idle share, (S−1)/(M+S−1)", "gpus": "GPUs",
    # the pipeline-parallelism page: a step read from each GPU's kernel timeline
    "tokens_per_s": "Tokens per second", "mfu_pct": "MFU", "branches": "Where to look",
    "samples_per_s": "Samples per second", "microbatches": "Micro-batches",
    "microbatch_rows": "Samples per micro-batch", "batch": "Samples per step",
    "idle_share": "Idle share, timelines", "idle_share_q1": "Idle share, Q1",
    "idle_share_q3": "Idle share, Q3", "fill_drain_share": "Fill and drain",
    "waits_share": "Waits between chunks", "busy_ms": "Compute kernels, all GPUs",
    "busy_alone_ms": "Compute kernels, stages alone", "compute_inflation": "Compute inflation",
    "peak_gpu2_gib": "Peak memory, GPU 2", "peak_gpu3_gib": "Peak memory, GPU 3",
    # the several-GPUs pages: host time, checkpoints
    "host_ms": "Host, issuing a step", "save_ms": "Save, until written",
    "step_ms": "Training step", "step_during_save_ms": "Training step during the save",
    # the dtype each module ran in (mixed-precision training): PyTorch's own class names
    "Embedding": "Embedding", "LayerNorm": "LayerNorm", "Linear": "Linear",
    "Attention": "Attention", "GELU": "GELU", "Block": "Block",
}


def field_label(field: str) -> str:
    """How a field reads as a header or an axis label; an unregistered field is an error."""
    try:
        return FIELD_LABELS[field]
    except KeyError:
        raise ValueError(f"field {field!r} has no label: add one to FIELD_LABELS in "
                         "fieldguide/rendering/labels.py, so no header shows a code id") from None


column_label = field_label


# The GPUs as pages name them: the product, without the vendor every one shares. A GPU the
# timing run records under a name not listed here reads as that name less "NVIDIA ".
GPU_LABELS: dict[str, str] = {"NVIDIA H100 80GB HBM3": "H100 80GB HBM3", "NVIDIA H200": "H200"}


def gpu_label(gpu: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'H100 80GB HBM3'; '2 × NVIDIA H200' -> '2 × H200'."""
    count, times, name = gpu.rpartition(" × ")
    short = GPU_LABELS.get(name, name.removeprefix("NVIDIA ").strip())
    return f"{count}{times}{short}"


@cache
def declarations(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(LABELS, WORDS) of one benchmark module; empty where it declares none."""
    found: dict[str, dict[str, str]] = {"LABELS": {}, "WORDS": {}}
    if not path.is_file():
        return {}, {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id in found):
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return found["LABELS"], found["WORDS"]


def word(value: Any, words: dict[str, str], field: str = "") -> str:
    if isinstance(value, str | bool | int) and str(value) in words:
        return words[str(value)]
    if field == "bytes" or field.endswith("_bytes"):
        return format_value("bytes", value)
    if isinstance(value, float):
        return format_value(field, value)
    return str(value)


def label(bench: Benchmark, root: Path) -> str | None:
    """The declared label of a benchmark, or None where its module declares none."""
    bench_file, function = benchmark_location(bench.fullname)
    labels, words = declarations(root / bench_file)
    short = bench.name.split(".", 1)[1]
    template = labels.get(short) or labels.get(function.removeprefix("bench_"))
    if template is None:
        return None
    fields = {f for _, f, _, _ in string.Formatter().parse(template) if f}
    extra = bench.extra
    missing = fields - extra.keys()
    if missing:
        raise ValueError(f"label of {bench.name!r} names {', '.join(sorted(missing))}, "
                         "which the benchmark did not record")
    return template.format(**{f: word(extra[f], words, f) for f in fields})


def series_label(bench: Benchmark, field: str, root: Path) -> str:
    """How one value of a chart's series field reads: through the module's WORDS."""
    _, words = declarations(root / benchmark_location(bench.fullname)[0])
    return word(bench.value(field), words, field)
