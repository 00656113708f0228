"""Benchmarks behind docs/compilers/triton-kernels.md.

`softmax`: a row-wise softmax of a float32 (rows, 4096) tensor, four ways: the Triton kernel of the
page (`triton`), the formula written in PyTorch run eagerly (`eager`, five kernels) and compiled by
Inductor (`compiled`, one kernel), and PyTorch's own `torch.softmax` (`torch`). `copy`: the same
tensor copied, the ceiling a one-pass kernel can reach. `bytes` is what one pass must move (read the
input, write the output), so `bandwidth_gbs` compares every variant with the copy; `flops` counts
5 operations per element (max, subtract, exp, add, divide) for the roofline. The autotuner
and Inductor compile in the warm-up rounds. These time whole calls from Python, each waited for.

`launch`: the same kernel launched plainly (`launch_softmax`, no custom operator), timed the same
way. `kernel`: the GPU time of one call of each (`kernel_s`, the snippet's `kernel_time`: CUDA
events around each of 50 calls queued behind a few large products, so no host work is in it), and
`kernel_gbs`, the bytes of one pass over that time. A `kernel` round's own time (its median) is
the whole `kernel_time` call, products ahead included: read `kernel_s`, not the median.
Budget on an H100: about 30 s.
"""

import pytest
import torch

from snippets.compilers import triton_kernels as snippet

pytestmark = [pytest.mark.snippet("snippets/compilers/triton_kernels.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "softmax": "Softmax of {rows} x {cols} float32 values: {impl}",
    "copy": "Device-to-device copy of {rows} x {cols} float32 values",
    "launch": "Softmax of {rows} x {cols} float32 values: {impl}",
    "kernel": "Softmax of {rows} x {cols} float32 values, GPU time: {impl}",
    "kernel[copy-*]": "Copy of {rows} x {cols} float32 values, GPU time",
}
WORDS = {
    "triton": "the Triton operator",
    "launch": "the Triton kernel, launched plainly",
    "eager": "PyTorch formula, eager",
    "compiled": "PyTorch formula, torch.compile",
    "torch": "torch.softmax",
    "copy": "copy (the ceiling)",
}

# What measures the host as much as the GPU (fieldguide/measuring/host_bound.py): at 8 MiB a copy takes
# about as long as one call's launch, and the Triton operator's and the compiled formula's
# per-call host work (dispatch, the autotuner's lookup, the launcher) still shows at 64 MiB.
HOST_BOUND = {
    "softmax[*-512]": "Python, each call's dispatch and its kernel launches",
    "copy[512]": "Python and one kernel launch",
    "softmax[triton-4096]": "the operator's dispatch, the autotuner's lookup and the launcher",
    "softmax[compiled-4096]": "the compiled call's host work and its launch",
    "launch[512]": "Python, the autotuner's lookup and Triton's launcher",
    "launch[4096]": "the autotuner's lookup and Triton's launcher",
}

COLS = 4096
SOFTMAX_FLOPS = 5  # per element: max, subtract, exp, add, divide
ROWS = [512, 4096, 32768, 131072]  # 8 MiB, 64 MiB, 512 MiB, 2 GiB of float32
IMPLS = {
    "triton": snippet.softmax,
    "eager": snippet.naive_softmax,
    "compiled": snippet.compiled_softmax,
    "torch": lambda x: torch.softmax(x, dim=-1),
}


def describe(benchmark, x, impl):
    rows, cols = x.shape
    benchmark.extra_info.update(impl=impl, rows=rows, cols=cols, elements=x.numel(),
                                dtype="float32", bytes=snippet.softmax_bytes(x),
                                mib=x.nbytes / 2**20,
                                flops=0 if impl == "copy" else SOFTMAX_FLOPS * x.numel())


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("impl", list(IMPLS))
def bench_softmax(gpu_benchmark, impl, rows):
    x = torch.randn(rows, COLS, device="cuda")
    describe(gpu_benchmark, x, impl)
    gpu_benchmark(IMPLS[impl], x, rounds=30, warmup_rounds=3)


@pytest.mark.parametrize("rows", ROWS)
def bench_copy(gpu_benchmark, rows):
    x = torch.randn(rows, COLS, device="cuda")
    dst = torch.empty_like(x)
    describe(gpu_benchmark, x, "copy")
    gpu_benchmark(snippet.copy, x, dst, rounds=30, warmup_rounds=3)


@pytest.mark.parametrize("rows", ROWS)
def bench_launch(gpu_benchmark, rows):
    x = torch.randn(rows, COLS, device="cuda")
    describe(gpu_benchmark, x, "launch")
    gpu_benchmark(snippet.launch_softmax, x, rounds=30, warmup_rounds=3)


KERNEL_IMPLS = {**IMPLS, "launch": snippet.launch_softmax}


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("impl", [*KERNEL_IMPLS, "copy"])
def bench_kernel(gpu_benchmark, impl, rows):
    import statistics  # here, not at the top: a module-level import is timed code for all

    x = torch.randn(rows, COLS, device="cuda")
    describe(gpu_benchmark, x, impl)
    del gpu_benchmark.extra_info["flops"]  # a roofline point would read the round's time
    fn, args = ((snippet.copy, (x, torch.empty_like(x))) if impl == "copy"
                else (KERNEL_IMPLS[impl], (x,)))
    seconds = []
    gpu_benchmark(lambda: seconds.append(snippet.kernel_time(fn, *args)),
                  rounds=3, warmup_rounds=1)
    kernel_s = statistics.median(seconds[1:])  # the warm-up round's left out
    gpu_benchmark.extra_info.update(kernel_s=kernel_s,
                                    kernel_gbs=snippet.softmax_bytes(x) / kernel_s / 1e9)
