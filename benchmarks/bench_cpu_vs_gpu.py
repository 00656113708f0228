"""Benchmarks behind docs/foundations/cpu-vs-gpu.md.

The GPU's figures as the driver reports them, its latency for one tiny operation against the
CPU's, and its ceilings: device memory bandwidth (a large copy; bytes counted = read + write) and
matrix-multiply rates per precision (8192 x 8192; `flops` = 2 n^3). Benchmarks that record both
`flops` and `bytes` become points on the page's roofline.
Budget on an H100: about 3 s, most of it the CPU triad and the fp32 product.
"""

import pytest
import torch

from snippets.foundations import cpu_vs_gpu as snippet

pytestmark = pytest.mark.snippet("snippets/foundations/cpu_vs_gpu.py")
gpu_only = pytest.mark.gpus(1)

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "device": "The GPU's figures, as the driver reports them",
    "tiny_op": "One operation on one number, {where}",
    "triad": "Triad `a = b + 3c`, {bytes} of memory traffic, {where}",
    "triad[cpu]": "Triad `a = b + 3c`, {bytes} of memory traffic, CPU ({torch_threads} threads)",
    "copy": "Device-to-device copy of a {buffer_bytes} buffer ({bytes} read and written)",
    "matmul": "{n} × {n} matrix product in {precision}",
}
WORDS = {"cpu": "CPU", "gpu": "GPU"}

# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {
    "device": "Python asking the driver for the GPU's properties",
    "tiny_op": "Python, one kernel launch and the wait for it (on the GPU)",
    "triad[cpu]": "the host CPU's own work",
}

COPY_BYTES = 2**30       # 1 GiB buffer: far beyond the L2, so the copy streams from HBM
TRIAD_ELEMENTS = 2**26   # 64 Mi float32 per array, 768 MiB of traffic per call
MATMUL_N = 8192


@gpu_only
def bench_device(benchmark):
    """The device's own figures (the time, of a property query, is not quoted)."""
    # plain benchmark: a property query, no GPU work to wait for
    gpu = benchmark.pedantic(snippet.describe_gpu, rounds=5, warmup_rounds=1)
    host = snippet.describe_cpu()
    benchmark.extra_info.update(
        gpu_name=gpu["name"], compute_capability=gpu["compute_capability"],
        sm_count=gpu["sm_count"], warp_size=gpu["warp_size"],
        max_threads_per_sm=gpu["max_threads_per_sm"], registers_per_sm=gpu["registers_per_sm"],
        warps_per_sm=gpu["max_threads_per_sm"] // gpu["warp_size"],
        resident_threads=gpu["sm_count"] * gpu["max_threads_per_sm"],
        l2_bytes=gpu["l2_bytes"], l2_mib=gpu["l2_bytes"] / 2**20,
        memory_bytes=gpu["memory_bytes"], memory_gib=gpu["memory_bytes"] / 2**30,
        logical_cpus=host["logical_cpus"], torch_threads=host["torch_threads"],
    )


@pytest.mark.parametrize("where", ["cpu", "gpu"])
@gpu_only
def bench_tiny_op(benchmark, where):
    """Latency: add 1 to a one-element tensor and wait for it."""
    x = torch.zeros(1, device="cuda" if where == "gpu" else "cpu")
    benchmark.extra_info.update(where=where)
    # plain benchmark: µs latency, CPU case too; an extra synchronize would be timed in it
    benchmark.pedantic(snippet.tiny_op, args=(x,), setup=snippet.sync, rounds=300, warmup_rounds=20)


@pytest.mark.parametrize("where", ["cpu", "gpu"])
@gpu_only
def bench_triad(benchmark, gpu_benchmark, where):
    """Throughput: a = b + 3c on 2**26 float32 elements, on each side."""
    a, b, c = snippet.make_triad(TRIAD_ELEMENTS, "cuda" if where == "gpu" else "cpu")
    benchmark.extra_info.update(where=where, elements=TRIAD_ELEMENTS, bytes=12 * TRIAD_ELEMENTS)
    if where == "gpu":  # a point on the GPU's roofline
        benchmark.extra_info.update(flops=2 * TRIAD_ELEMENTS, kind="triad (elementwise)",
                                    label="triad")
        gpu_benchmark(snippet.triad, a, b, c, rounds=50, warmup_rounds=2)
    else:
        benchmark.extra_info.update(torch_threads=torch.get_num_threads())
        # plain benchmark: CPU work; a CUDA synchronize does not belong in its timed call
        benchmark.pedantic(snippet.triad, args=(a, b, c), setup=snippet.sync, rounds=10,
                           warmup_rounds=2)


@gpu_only
def bench_copy(gpu_benchmark):
    """Device-to-device copy of 1 GiB; `bytes` counts the read and the write (2 GiB)."""
    src, dst = snippet.make_copy_buffers(COPY_BYTES)
    gpu_benchmark.extra_info.update(buffer_bytes=COPY_BYTES, bytes=2 * COPY_BYTES)
    gpu_benchmark(snippet.copy, src, dst, rounds=30, warmup_rounds=3)


@pytest.mark.parametrize("precision", list(snippet.PRECISIONS))
@gpu_only
def bench_matmul(gpu_benchmark, precision):
    """One 8192 x 8192 product per round; tflops = 2 n^3 / median."""
    n = MATMUL_N
    a, b = snippet.make_operands(n, precision)
    gpu_benchmark.extra_info.update(
        n=n, precision=precision, flops=2 * n**3, bytes=3 * n * n * a.element_size(),
        kind="matmul 8192 x 8192", label=precision, roof=precision,
        relative_error=snippet.relative_error(2048, precision),
    )
    rounds = 10 if precision == "fp32" else 30
    gpu_benchmark(snippet.matmul, a, b, precision, rounds=rounds, warmup_rounds=3)
