"""Benchmarks behind docs/start-here/slow-training.md: `make timings` runs them on a GPU.

`trace` is the page's example trace: the page's slow step, timed, and what its torch.profiler
trace shows (GPU idle share, the longest gap, tiny kernels by count and by time, strict
float32 products). Until a GPU has measured it, the page reads a trace as a decision tree
without showing the example's numbers.
Budget on an H100: about two seconds (five profiled steps, twenty timed ones).
"""

import pytest

pytestmark = [pytest.mark.snippet("snippets/start_here/slow_training.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/labels.py)
LABELS = {
    "trace": "The page's slow training step ({kernels} kernels in three traced steps)",
}
WORDS = {}
# The step is small on purpose: the host (making the batch, launching, reading the loss) sets
# its pace, which is what its trace shows. Once a run has recorded it, mark it:
# HOST_BOUND = {"trace": "Python, the batch made on the CPU and the loss read every step"}
# (tests/tooling/test_host_bound.py refuses a key that marks no recorded benchmark).


def bench_trace(gpu_benchmark, snippet, tmp_path):
    """One step of the page's slow example, and what its trace says about it."""
    step = lambda: snippet.train_step(*snippet.batch())  # noqa: E731 (the page's own call)
    snippet.take_trace(tmp_path / "trace.json", step)
    symptoms = snippet.read_trace(tmp_path / "trace.json")
    gpu_benchmark.extra_info.update(
        kernels=symptoms.kernels,
        tiny_kernels=symptoms.tiny_kernels,
        tiny_kernel_pct=100 * symptoms.tiny_kernels / symptoms.kernels,
        tiny_kernel_time_pct=100 * symptoms.tiny_kernel_share,
        gpu_idle_pct=100 * symptoms.gpu_idle_share,
        longest_gap_us=symptoms.longest_gaps_us[0] if symptoms.longest_gaps_us else 0.0,
        products=symptoms.products,
        fp32_products=symptoms.fp32_products,
        fp32_product_pct=100 * symptoms.fp32_product_us / symptoms.span_us,
        branches=" / ".join(snippet.where_to_look(symptoms)),
    )
    gpu_benchmark(step, rounds=20, warmup_rounds=3)
