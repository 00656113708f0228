"""Benchmarks behind docs/compilers/graph-breaks.md: `make timings` runs them on a GPU.

Budget on an H100: replace with how long these take (well under a second now).
"""

import pytest

pytestmark = [pytest.mark.snippet("snippets/compilers/graph_breaks.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/labels.py)
LABELS = {
    "scaled_sum": "Scaled sum of {n} numbers",
}
WORDS = {}


@pytest.mark.parametrize("n", [2**10, 2**20, 2**24])
def bench_scaled_sum(gpu_benchmark, snippet, n):
    """scaled_sum(n): launch-bound for small n, memory-bound for large n."""
    gpu_benchmark.extra_info["n"] = n
    gpu_benchmark(snippet.scaled_sum, n, rounds=20, warmup_rounds=2)
