"""Benchmarks behind docs/precision/fp8.md.

N x N products (N = 8192, `flops` = 2 N^3): bf16, fp8 (e4m3) from operands quantized
beforehand (per tensor, with and without fast accumulation, and per row), and fp8 including
the quantization of both operands (from bf16) in every call.
Each records the relative error of its kind against float64 (at n = 4096).
Budget on an H100: about 2 s.
"""

import pytest
import torch

from snippets.precision import fp8 as snippet

pytestmark = [pytest.mark.snippet("snippets/precision/fp8.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {"matmul": "{n} × {n} product: {description}"}
WORDS = {}
KINDS = {
    "bf16": "bfloat16",
    "fp8": "fp8 (e4m3), operands quantized beforehand",
    "fp8-quantize": "fp8 (e4m3), quantizing both bfloat16 operands in every call",
    "fp8-fast-accum": "fp8 (e4m3), quantized beforehand, `use_fast_accum=True`",
    "fp8-rowwise": "fp8 (e4m3), a scale per row, quantized beforehand",
}


@pytest.fixture(scope="module")
def errors():
    reason = snippet.fp8_unavailable()
    if reason:
        pytest.skip(reason)
    return snippet.relative_errors(4096)


@pytest.mark.parametrize("kind", list(KINDS))
def bench_matmul(gpu_benchmark, errors, kind):
    n = snippet.N
    x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    if kind == "bf16":
        fn, args, itemsize = snippet.bf16_matmul, (x, w), 2
    elif kind == "fp8":
        fn, args, itemsize = snippet.fp8_matmul, (*snippet.quantize(x), *snippet.quantize(w)), 1
    elif kind == "fp8-fast-accum":
        fn, itemsize = snippet.fp8_matmul, 1
        args = (*snippet.quantize(x), *snippet.quantize(w), True)
    elif kind == "fp8-rowwise":
        fn, itemsize = snippet.fp8_matmul_rowwise, 1
        args = (*snippet.quantize_rows(x), *snippet.quantize_rows(w))
    else:
        fn, args, itemsize = snippet.quantized_matmul, (x, w), 2
    gpu_benchmark.extra_info.update(
        kind=kind, description=KINDS[kind], n=n, shape=[n, n], flops=2 * n**3,
        bytes=2 * n * n * itemsize + 2 * n * n,  # operands in, bfloat16 result out
        dtype="bfloat16" if kind == "bf16" else "float8_e4m3fn",
        relative_error=errors["fp8" if kind == "fp8-quantize" else kind], error_n=4096)
    torch.cuda.reset_peak_memory_stats()
    gpu_benchmark(fn, *args, rounds=20, warmup_rounds=3)
    gpu_benchmark.extra_info["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
