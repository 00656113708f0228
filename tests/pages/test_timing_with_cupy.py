"""Claims of docs/execution/timing-gpu-code.md about cupyx.profiler.benchmark."""

import pytest

pytestmark = [pytest.mark.snippet("snippets/execution/timing_with_cupy.py"), pytest.mark.timed]


def test_gpu_time_is_the_product_not_the_launch():
    from snippets.execution import timing_with_cupy as snippet

    gpu, cpu = snippet.time_cupy_matmul(repeats=10)
    flops = 2 * snippet.n**3
    assert 0 < gpu < 1.0
    assert flops / gpu < 2e15, "faster than any GPU can multiply: the GPU time was not measured"
