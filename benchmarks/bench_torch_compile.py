"""Benchmarks behind docs/compilers/torch-compile.md.

`chain`: bias + sigmoid-GELU on a float32 (rows, 4096) tensor, eager (four kernels) and compiled in
each mode; `bytes` is what one fused pass must move (read x, write the result). `mlp`: four
residual feed-forward blocks (width 1024) on 64 tokens, forward only, under `torch.no_grad()`.
`train_step`: the same model on 256 tokens, forward, backward and an AdamW step. No max-autotune
anywhere: its compiles are the longest. Compiling happens
in the warm-up rounds and is not timed. `first_call`: a fresh `python -m
snippets.compilers.torch_compile --first-call` process, with an empty Inductor cache (`cold`) or
one a previous process filled (`warm`); `first_call_s` is the first compiled call as the child
timed it (trace, compile or load, run), `second_call_s` the next one. These measure the host (CPU,
Python, the C compiler and disk) as much as the GPU. Budget on an H100: about 1.5 minutes (a
first version with max-autotune and more rounds took over 3).
"""

import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from snippets.compilers import torch_compile as snippet

pytestmark = [pytest.mark.snippet("snippets/compilers/torch_compile.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "chain": "bias + GELU on {rows} x 4096 float32 values: {mode}",
    "mlp": "4 feed-forward blocks, forward, {tokens} tokens: {mode}",
    "train_step": "4 feed-forward blocks, training step, {tokens} tokens: {mode}",
    "first_call": "First compiled call in a new process, {cache} cache",
}
WORDS = {"eager": "eager", "default": "torch.compile", "reduce-overhead": "reduce-overhead",
         "max-autotune": "max-autotune", "cold": "empty (cold)", "warm": "filled (warm)"}

# What measures the host as much as the GPU (fieldguide/measuring/host_bound.py): each timed call is one
# call from Python, synchronized, so small work times the call's host side and its launches.
HOST_BOUND = {
    "chain[*-16]": "Python, the compiled call's host work and its kernel launches",
    "mlp": "Python, the compiled call's host work and its kernel launches",
    "train_step": "Python and the step's kernel launches",
    "first_call": "the host's compile (Dynamo, Inductor, Triton) in a new process",
}

ROOT = Path(__file__).resolve().parents[1]
BIAS_GELU_FLOPS = 7  # per element: add, multiply, negate, exp, add, divide, multiply


# No max-autotune: its compiles (timing GEMM templates) are the longest, and the whole chapter's
# timing run had to fit a few minutes of GPU time.
@pytest.mark.parametrize("rows", [16, 8192])  # 256 KiB: launches dominate; 128 MiB: memory
@pytest.mark.parametrize("mode", ["eager", "default", "reduce-overhead"])
def bench_chain(gpu_benchmark, mode, rows):
    # Dynamo's caches belong to bias_gelu's code object: without a reset, the second row
    # count would recompile with a symbolic (dynamic) dimension instead of a static one.
    torch.compiler.reset()
    x, bias = snippet.chain_inputs(rows=rows)
    fn = snippet.compiled(snippet.bias_gelu, mode)
    gpu_benchmark.extra_info.update(mode=mode, rows=rows, elements=x.numel(),
                                    dtype="float32", bytes=2 * x.nbytes,
                                    flops=BIAS_GELU_FLOPS * x.numel())
    gpu_benchmark(fn, x, bias, rounds=30, warmup_rounds=3)


def mlp_flops(tokens, width=1024, blocks=4):
    return blocks * 2 * (2 * tokens * width * 4 * width)  # two GEMMs of 2*M*N*K per block


def mlp_bytes(tokens, width=1024, blocks=4, itemsize=4):
    """The least a forward pass must move: every weight once, the input and the output."""
    return itemsize * (blocks * 2 * 4 * width * width + 2 * tokens * width)


@pytest.mark.parametrize("mode", ["eager", "default", "reduce-overhead"])
def bench_mlp(gpu_benchmark, mode):
    tokens = 64
    model = snippet.mlp_model()
    x = torch.randn(tokens, 1024, device="cuda")
    fn = snippet.compiled(model, mode)
    gpu_benchmark.extra_info.update(mode=mode, tokens=tokens, flops=mlp_flops(tokens),
                                    bytes=mlp_bytes(tokens))
    with torch.no_grad():
        gpu_benchmark(fn, x, rounds=50, warmup_rounds=3)


@pytest.mark.parametrize("mode", ["eager", "default", "reduce-overhead"])
def bench_train_step(gpu_benchmark, mode):
    tokens = 256
    step = snippet.make_train_step(snippet.mlp_model(), mode)
    x = torch.randn(tokens, 1024, device="cuda")
    target = torch.randn(tokens, 1024, device="cuda")
    gpu_benchmark.extra_info.update(mode=mode, tokens=tokens, flops=3 * mlp_flops(tokens))
    gpu_benchmark(step, x, target, rounds=30, warmup_rounds=3)


def first_call_in_new_process(cache_dir, seen):
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache_dir)}
    env.pop("TRITON_CACHE_DIR", None)  # Triton's cache then lives inside Inductor's
    out = subprocess.run([sys.executable, "-m", "snippets.compilers.torch_compile",
                          "--first-call"], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True, timeout=300).stdout
    first, second = re.search(r"first call ([\d.]+) s, second call ([\d.]+) ms", out).groups()
    seen.append((float(first), float(second) / 1e3))


@pytest.mark.parametrize("cache", ["cold", "warm"])
def bench_first_call(gpu_benchmark, cache, tmp_path):
    seen = []
    if cache == "cold":
        def run():  # an empty cache directory for every process
            first_call_in_new_process(tempfile.mkdtemp(dir=tmp_path), seen)
        warmup = 0
    else:
        def run():  # one directory: the warm-up process fills it, the timed ones read it
            first_call_in_new_process(tmp_path, seen)
        warmup = 1
    gpu_benchmark(run, rounds=2, warmup_rounds=warmup)  # each round is a process: ~10 s
    timed = seen[warmup:]
    gpu_benchmark.extra_info.update(
        cache=cache, host_bound=True,
        first_call_s=statistics.median(f for f, _ in timed),
        second_call_s=statistics.median(s for _, s in timed))
