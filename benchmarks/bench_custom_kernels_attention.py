"""Benchmarks behind the attention section of docs/compilers/custom-kernels.md.

`attention`: bfloat16 attention on (8, 16, seq, 64) queries, keys and values, six ways: the
formula compiled by torch.compile (`compiled`: Inductor's pattern matcher rewrites it into a
scaled_dot_product_attention call, whose backend is picked when it compiles; the snippet prints
which), the formula compiled with Inductor's pattern rewrites off (`unfused`: the (seq x seq)
scores go to memory), the flash, memory-efficient and cuDNN backends of
scaled_dot_product_attention, and FlexAttention compiled (`flex`).
`kernel_s` is the GPU time of one call (the Triton page's `kernel_time`: CUDA events around each of
20 calls queued behind a few large products, so no host work is in it); `peak_bytes` what a call
allocates at its peak beyond its inputs. A round's own time (its median) is the whole
`kernel_time` call: read `kernel_s`. Each implementation compiles once per length (dynamic=False),
in the warm-up round. Budget on an H200: about 50 s, most of it compiling (`unfused` at 8192 tokens
holds 2 x 16 GiB of scores and probabilities).
"""

import statistics

import pytest

from snippets.compilers import custom_kernels_attention as snippet

pytestmark = [pytest.mark.snippet("snippets/compilers/custom_kernels_attention.py"),
              pytest.mark.snippet("snippets/compilers/triton_kernels.py"),  # kernel_time
              pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {"attention": "Attention, 8 x 16 heads x {seq} tokens x 64, bfloat16: {impl}"}
WORDS = {"compiled": "the formula, torch.compile",
         "unfused": "the formula, torch.compile without pattern rewrites",
         "cudnn": "SDPA, cuDNN backend", "flash": "SDPA, flash backend",
         "efficient": "SDPA, memory-efficient backend", "flex": "FlexAttention, compiled"}

SEQS = [512, 2048, 8192]
IMPLS = ["compiled", "unfused", "flash", "efficient", "cudnn", "flex"]


@pytest.mark.parametrize("seq", SEQS)
@pytest.mark.parametrize("impl", IMPLS)
def bench_attention(gpu_benchmark, impl, seq):
    from snippets.compilers.triton_kernels import kernel_time

    q, k, v = snippet.attention_inputs(seq)
    fn = snippet.implementations()[impl]
    seconds = []
    gpu_benchmark(lambda: seconds.append(kernel_time(fn, q, k, v, repeats=20)),
                  rounds=3, warmup_rounds=1)
    gpu_benchmark.extra_info.update(
        impl=impl, seq=seq,
        kernel_s=statistics.median(seconds[1:]),    # the warm-up round's left out
        peak_bytes=snippet.peak_memory(fn, q, k, v))
