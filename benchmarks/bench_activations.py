"""Benchmarks behind docs/precision/activations.md.

`forward_backward`: each activation's forward and backward pass on N float32 elements; `bytes`
is the traffic both passes must move (five tensors of N), so `bandwidth_gbs` compares with the
`copy` (read + write of N). `fusion`: x * scale + shift, then an activation, eagerly (three
kernels) and compiled (one); `bytes` is what one fused pass must move (read x, write the result).
Budget on an H100: about 10 s, most of it compiling the fused kernel (in the warm-up rounds).
"""

import pytest
import torch

from snippets.precision import activations as snippet

pytestmark = [pytest.mark.snippet("snippets/precision/activations.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "forward_backward": "{activation}, forward and backward, {elements} float32 values",
    "copy": "Device-to-device copy of {elements} float32 values",
    "fusion": "x * scale + shift, then {activation}: {mode}",
}
WORDS = {"eager": "eager (three kernels)", "compiled": "torch.compile (one kernel)"}


def peak_memory(benchmark):
    benchmark.extra_info["peak_memory_bytes"] = torch.cuda.max_memory_allocated()


@pytest.mark.parametrize("activation", list(snippet.ACTIVATIONS))
def bench_forward_backward(gpu_benchmark, activation):
    n = snippet.N
    x = torch.randn(n, device="cuda", requires_grad=True)
    grad_out = torch.randn(n, device="cuda")
    gpu_benchmark.extra_info.update(
        activation=activation, elements=n, dtype="float32", shape=[n],
        bytes=snippet.activation_bytes(n, x.element_size()))
    torch.cuda.reset_peak_memory_stats()
    gpu_benchmark(snippet.forward_backward, snippet.ACTIVATIONS[activation], x, grad_out,
                  rounds=30, warmup_rounds=3)
    peak_memory(gpu_benchmark)


def bench_copy(gpu_benchmark):
    n = snippet.N
    src = torch.ones(n, device="cuda")
    dst = torch.empty_like(src)
    gpu_benchmark.extra_info.update(elements=n, dtype="float32", shape=[n],
                                    bytes=2 * src.nbytes)
    torch.cuda.reset_peak_memory_stats()
    gpu_benchmark(snippet.copy, src, dst, rounds=30, warmup_rounds=3)
    peak_memory(gpu_benchmark)


FUSION = [("eager", "relu"), ("eager", "gelu"), ("compiled", "gelu")]


@pytest.mark.parametrize(("mode", "activation"), FUSION, ids=[f"{m}-{a}" for m, a in FUSION])
def bench_fusion(gpu_benchmark, mode, activation):
    x, scale, shift = snippet.fusion_inputs()
    fn = snippet.fused if mode == "compiled" else snippet.scale_shift_activation
    gpu_benchmark.extra_info.update(
        mode=mode, activation=activation, elements=x.numel(), dtype="float32",
        shape=list(x.shape), bytes=2 * x.nbytes, passes=3 if mode == "eager" else 1)
    torch.cuda.reset_peak_memory_stats()
    gpu_benchmark(fn, x, scale, shift, snippet.ACTIVATIONS[activation], rounds=30,
                  warmup_rounds=3)
    peak_memory(gpu_benchmark)
