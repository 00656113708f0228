"""Benchmarks behind docs/compilers/custom-kernels.md.

`bias_gelu`: bias + sigmoid-GELU on a float32 (8192, 4096) array (128 MiB) four ways: CuPy array
operations (six kernels), a CuPy ElementwiseKernel (one), PyTorch eager (four) and compiled
(one). `softmax`: the CuPy RawKernel softmax on float32 (rows, 4096), to set beside the Triton
kernel's `triton_kernels.softmax`. `bytes` is what one fused pass must move (read the input, write
the output); `flops` counts the arithmetic per element (an exp or a division as one), for the
roofline. These time whole calls from Python, each waited for. `kernel`: the GPU time of one call
of each bias + GELU (`kernel_s`, through the Triton page's `kernel_time`: CUDA events around each
of 50 calls queued behind a few large products) and of a copy of the same tensor, the ceiling;
`kernel_gbs` is one pass's bytes over that time. A `kernel` round's median is the whole
`kernel_time` call: read `kernel_s`. Budget on an H100: about 15 s.
"""

import cupy as cp
import pytest
import torch

from snippets.compilers import custom_kernels as snippet
from snippets.compilers import torch_compile

pytestmark = [pytest.mark.snippet("snippets/compilers/custom_kernels.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "bias_gelu": "bias + GELU on 8192 x 4096 float32 values: {impl}",
    "softmax": "Softmax of {rows} x {cols} float32 values: {impl}",
    "kernel": "bias + GELU on 8192 x 4096 float32 values, GPU time: {impl}",
    "kernel[copy]": "Copy of 8192 x 4096 float32 values, GPU time",
    "softmax_kernel": "Softmax of {rows} x {cols} float32 values, GPU time: {impl}",
}
WORDS = {"cupy-eager": "CuPy array operations", "cupy-elementwise": "CuPy ElementwiseKernel",
         "cupy-fuse": "CuPy, cp.fuse",
         "torch-eager": "PyTorch eager", "torch-compiled": "PyTorch, torch.compile",
         "cupy-raw": "CuPy RawKernel"}

BIAS_GELU_FLOPS = 7   # add, multiply, negate, exp, add, divide, multiply
SOFTMAX_FLOPS = 5     # max, subtract, exp, add, divide


def cupy_inputs(rows, cols=4096):
    cp.random.seed(0)
    x = cp.random.standard_normal((rows, cols), dtype=cp.float32)
    bias = cp.random.standard_normal(cols, dtype=cp.float32)
    return x, bias


IMPLS = ["cupy-eager", "cupy-elementwise", "cupy-fuse", "torch-eager", "torch-compiled"]


def bias_gelu_case(benchmark, impl):
    """(function, x, bias) of one implementation on 8192 x 4096 values, described."""
    x, bias = cupy_inputs(8192)
    benchmark.extra_info.update(impl=impl, rows=8192, cols=4096, elements=x.size,
                                bytes=2 * x.nbytes, flops=BIAS_GELU_FLOPS * x.size)
    if impl.startswith("torch"):  # the same memory, seen by PyTorch
        x, bias = torch.from_dlpack(x), torch.from_dlpack(bias)
    fn = {"cupy-eager": snippet.bias_gelu_eager, "cupy-elementwise": snippet.bias_gelu_kernel,
          "cupy-fuse": snippet.bias_gelu_fused, "torch-eager": torch_compile.bias_gelu,
          "torch-compiled": torch_compile.compiled_bias_gelu}[impl]
    return fn, x, bias


@pytest.mark.parametrize("impl", IMPLS)
def bench_bias_gelu(gpu_benchmark, impl):
    fn, x, bias = bias_gelu_case(gpu_benchmark, impl)
    gpu_benchmark(fn, x, bias, rounds=30, warmup_rounds=3)


@pytest.mark.snippet("snippets/compilers/triton_kernels.py")  # kernel_time
@pytest.mark.parametrize("impl", [*IMPLS, "copy"])
def bench_kernel(gpu_benchmark, impl):
    """GPU time of one call (kernel_s), its host work left out; copy: the ceiling."""
    import statistics

    from snippets.compilers.triton_kernels import copy, kernel_time

    if impl == "copy":
        x = torch.from_dlpack(cupy_inputs(8192)[0])
        gpu_benchmark.extra_info.update(impl=impl, rows=8192, cols=4096, elements=x.numel(),
                                        bytes=2 * x.nbytes, flops=0)
        fn, args = copy, (x, torch.empty_like(x))
    else:
        fn, x, bias = bias_gelu_case(gpu_benchmark, impl)
        args = (x, bias)
    del gpu_benchmark.extra_info["flops"]  # a roofline point would read the round's time
    seconds = []
    gpu_benchmark(lambda: seconds.append(kernel_time(fn, *args)), rounds=3, warmup_rounds=1)
    kernel_s = statistics.median(seconds[1:])  # the warm-up round's left out
    gpu_benchmark.extra_info.update(
        kernel_s=kernel_s, kernel_gbs=gpu_benchmark.extra_info["bytes"] / kernel_s / 1e9)


@pytest.mark.parametrize("rows", [4096, 32768])
def bench_softmax(gpu_benchmark, rows):
    x, _ = cupy_inputs(rows)
    gpu_benchmark.extra_info.update(impl="cupy-raw", rows=rows, cols=4096, elements=x.size,
                                    mib=x.nbytes / 2**20, bytes=2 * x.nbytes,
                                    flops=SOFTMAX_FLOPS * x.size)
    gpu_benchmark(snippet.softmax, x, rounds=30, warmup_rounds=3)


@pytest.mark.snippet("snippets/compilers/triton_kernels.py")  # kernel_time
@pytest.mark.parametrize("rows", [4096, 32768])
def bench_softmax_kernel(gpu_benchmark, rows):
    """GPU time of one RawKernel softmax (kernel_s), beside triton_kernels.kernel[*]."""
    import statistics

    from snippets.compilers.triton_kernels import kernel_time

    x, _ = cupy_inputs(rows)
    gpu_benchmark.extra_info.update(impl="cupy-raw", rows=rows, cols=4096, elements=x.size,
                                    mib=x.nbytes / 2**20, bytes=2 * x.nbytes)
    seconds = []
    gpu_benchmark(lambda: seconds.append(kernel_time(snippet.softmax, x)),
                  rounds=3, warmup_rounds=1)
    kernel_s = statistics.median(seconds[1:])  # the warm-up round's left out
    gpu_benchmark.extra_info.update(kernel_s=kernel_s, kernel_gbs=2 * x.nbytes / kernel_s / 1e9)
