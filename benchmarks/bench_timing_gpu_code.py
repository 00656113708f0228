"""Benchmarks behind docs/execution/timing-gpu-code.md."""

import json
import statistics
import subprocess
import sys

import pytest

from snippets.execution import timing_gpu_code as snippet

pytestmark = [pytest.mark.snippet("snippets/execution/timing_gpu_code.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "launch_only": "Matrix product, wall clock without synchronization (the launch)",
    "synchronized": "Matrix product, synchronized before and after",
    "first_call": "Fresh interpreter: the first product and the ones after it",
    "cupyx_benchmark": "Matrix product through `cupyx.profiler.benchmark`",
    "kernel_times": "100 sums of {input_bytes} through `kernel_times`, L2 cache {cache}",
}
WORDS = {}

# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {
    "launch_only": "Python and kernel launches",
    "first_call": "loading CUDA libraries and modules on the host",
}

ROUNDS = 50


def bench_launch_only(benchmark):
    """What an unsynchronized wall clock reports: the time to queue the product."""
    benchmark.extra_info["flops"] = 2 * snippet.n**3
    # plain benchmark: times how long the call takes to return, not the GPU work
    benchmark.pedantic(snippet.time_launch_only, args=(snippet.a, snippet.b),
                       setup=snippet.sync, rounds=ROUNDS, warmup_rounds=5)
    snippet.sync()


def bench_synchronized(gpu_benchmark):
    """The product itself, measured with synchronization on both sides."""
    gpu_benchmark.extra_info["flops"] = 2 * snippet.n**3
    gpu_benchmark(snippet.time_synchronized, snippet.a, snippet.b, rounds=ROUNDS, warmup_rounds=5)


def bench_first_call(benchmark):
    """First product in a fresh interpreter vs later ones; each round is a new process."""
    code = (
        "import json; from snippets.execution import timing_gpu_code as s; "
        "print(json.dumps(s.first_call_vs_steady(s.a, s.b)))"
    )
    firsts, steadies = [], []

    def fresh_process():
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout
        first, steady = json.loads(out.splitlines()[-1])
        firsts.append(first)
        steadies.append(steady)

    # plain benchmark: times whole child processes; nothing is queued on the GPU here
    benchmark.pedantic(fresh_process, rounds=5, warmup_rounds=0)
    benchmark.extra_info["first_call_s"] = statistics.median(firsts)
    benchmark.extra_info["steady_s"] = statistics.median(steadies)
    benchmark.extra_info["first_over_steady"] = statistics.median(
        f / s for f, s in zip(firsts, steadies, strict=True))


@pytest.mark.snippet("snippets/execution/timing_with_cupy.py")
def bench_cupyx_benchmark(gpu_benchmark):
    """The same product through cupyx.profiler.benchmark; its own GPU timing goes in extra_info."""
    from snippets.execution import timing_with_cupy

    results = []
    gpu_benchmark(lambda: results.append(timing_with_cupy.time_cupy_matmul(repeats=20)),
                  rounds=3, warmup_rounds=1)  # the first call also warms CuPy up
    gpu_times = sorted(gpu for gpu, _ in results)
    gpu_benchmark.extra_info["cupyx_gpu_s"] = gpu_times[len(gpu_times) // 2]
    gpu_benchmark.extra_info["cupyx_cpu_s"] = sorted(cpu for _, cpu in results)[len(results) // 2]


@pytest.mark.parametrize("cache", ["warm", "flushed"])
def bench_kernel_times(gpu_benchmark, cache):
    """torch.sum over 8 MiB of float32 through kernel_times, with the L2 warm or flushed.

    A round is one kernel_times call (100 sums behind 5 large products); what the page quotes is
    `kernel_s`, the median GPU time of one sum, and `wall_s`, a synchronized host clock's median.
    """
    import statistics
    import time

    import torch

    x = torch.randn(2**21, device="cuda")
    medians = []

    def timed():
        medians.append(statistics.median(snippet.kernel_times(torch.sum, x,
                                                              flush_l2=cache == "flushed")))

    gpu_benchmark(timed, rounds=5, warmup_rounds=1)
    walls = []
    for _ in range(100):
        snippet.sync()
        start = time.perf_counter()
        torch.sum(x)
        snippet.sync()
        walls.append(time.perf_counter() - start)
    gpu_benchmark.extra_info.update(cache=cache, input_bytes=x.nbytes,
                                    kernel_s=statistics.median(medians[1:]),
                                    wall_s=statistics.median(walls))
