"""Benchmarks behind docs/precision/tensor-cores-and-shapes.md.

`sweep`: fp16 and bf16 products of n x n matrices for every n from 8184 to 8200, around the
multiple of 64 and 128 that 8192 is (`flops` = 2 n^3). `matmul`: the four precisions at 8192,
each with its relative error against float64 (at n = 2048). `padded`: odd sizes computed on
zero-padded copies, padding included in the time, `flops` counting the useful work only.
Budget on an H100: about 15 s, most of it the 34 sweep products and the fp32 one.
"""

import pytest
import torch

from snippets.precision import tensor_cores_and_shapes as snippet

pytestmark = [pytest.mark.snippet("snippets/precision/tensor_cores_and_shapes.py"),
              pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "sweep": "{precision} product, {n} × {n}",
    "matmul": "{n} × {n} product in {precision}",
    "padded": "{precision} product, {n} × {n} padded to {padded_n} × {padded_n}",
    "waves": "bfloat16 product, ({m} × {k}) @ ({k} × {n}): {tiles} tiles of 128 × 256",
}
WORDS = {}


def largest_power_of_two_dividing(n, cap=128):
    power = 1
    while n % (power * 2) == 0 and power < cap:
        power *= 2
    return power


def record(benchmark, precision, n, **extra):
    dtype = snippet.PRECISIONS[precision][0]
    itemsize = torch.empty((), dtype=dtype).element_size()
    benchmark.extra_info.update(
        precision=precision, n=n, dtype=str(dtype).removeprefix("torch."), shape=[n, n],
        flops=2 * n**3, bytes=3 * n * n * itemsize,
        multiple=largest_power_of_two_dividing(n), **extra)


def peak_memory(benchmark):
    benchmark.extra_info["peak_memory_bytes"] = torch.cuda.max_memory_allocated()


SWEEP = [(p, n) for p in ("fp16", "bf16") for n in range(8184, 8201)]


@pytest.mark.parametrize(("precision", "n"), SWEEP, ids=[f"{p}-{n}" for p, n in SWEEP])
def bench_sweep(gpu_benchmark, precision, n):
    """One n x n product; odd and unaligned sizes take slower kernels."""
    a, b = snippet.operands(n, snippet.PRECISIONS[precision][0])
    record(gpu_benchmark, precision, n)
    torch.cuda.reset_peak_memory_stats()
    gpu_benchmark(snippet.matmul, a, b, precision, rounds=15, warmup_rounds=3)
    peak_memory(gpu_benchmark)


@pytest.mark.parametrize("precision", list(snippet.PRECISIONS))
def bench_matmul(gpu_benchmark, precision):
    """8192 x 8192 in each precision, with the accuracy it costs."""
    n = 8192
    a, b = snippet.operands(n, snippet.PRECISIONS[precision][0])
    record(gpu_benchmark, precision, n, relative_error=snippet.relative_error(2048, precision),
           error_n=2048)
    torch.cuda.reset_peak_memory_stats()
    rounds = 8 if precision == "fp32" else 15
    gpu_benchmark(snippet.matmul, a, b, precision, rounds=rounds, warmup_rounds=2)
    peak_memory(gpu_benchmark)


PADDED = [("fp16", 8191), ("bf16", 8191), ("fp16", 8193)]


@pytest.mark.parametrize(("precision", "n"), PADDED, ids=[f"{p}-{n}" for p, n in PADDED])
def bench_padded(gpu_benchmark, precision, n):
    """The fix: pad to a multiple of 64, multiply, cut off the padding; all of it timed."""
    a, b = snippet.operands(n, snippet.PRECISIONS[precision][0])
    multiple = 64
    record(gpu_benchmark, precision, n, padded_n=-(-n // multiple) * multiple,
           pad_multiple=multiple)
    torch.cuda.reset_peak_memory_stats()
    gpu_benchmark(snippet.padded_matmul, a, b, multiple, rounds=15, warmup_rounds=3)
    peak_memory(gpu_benchmark)


WAVE_ROWS = list(range(256, 2049, 128))


@pytest.mark.parametrize("m", WAVE_ROWS, ids=[str(m) for m in WAVE_ROWS])
def bench_waves(gpu_benchmark, m):
    """(m x 8192) @ (8192 x 8192) in bfloat16 for m from 256 to 2048 in steps of 128:
    every size aligned, so only how the output's tiles fill the SMs changes. Ten
    products per round, so that launching and synchronizing are a small part."""
    a, b = snippet.wide_product(m)
    k, n = a.shape[1], b.shape[1]
    tiles, waves = snippet.tiles_and_waves(m, n)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    gpu_benchmark.extra_info.update(
        precision="bf16", m=m, k=k, n=n, tiles=tiles, waves=waves, sms=sms,
        wave_fill=tiles / (waves * sms), ops=10, flops=10 * 2 * m * k * n)

    def ten_products():
        for _ in range(10):
            torch.mm(a, b)

    gpu_benchmark(ten_products, rounds=15, warmup_rounds=3)
