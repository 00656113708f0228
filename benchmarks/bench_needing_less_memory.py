"""Benchmarks behind docs/memory/needing-less-memory.md.

Budget on an H100: one 34M-parameter model of 16 blocks on 16384 tokens of width 512. A
training step is ~0.1 s in float32 (~0.5 s offloading to the CPU); eight kinds of step and
three kinds of forward pass, 8 rounds each after a warm-up: about 20 s. Then an LSTM of width
512 over 2048 time steps of 64 sequences, trained with full and truncated backpropagation
through time: a few seconds.
"""

import pytest
import torch

from snippets.memory import needing_less_memory as snippet

# The snippet runs on a CPU too, but these numbers are GPU memory: they need CUDA.
pytestmark = [pytest.mark.snippet("snippets/memory/needing_less_memory.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "step": "Training step: {technique}",
    "forward": "Forward pass only: {technique}",
    "sequence": "LSTM over {steps} time steps: {technique}",
}
WORDS = {"baseline": "float32, Adam (the baseline)", "checkpoint": "activation checkpointing",
         "selective": "selective checkpointing (matrix products kept)",
         "offload": "saved activations offloaded to CPU memory",
         "autocast": "mixed precision (autocast to bfloat16, float32 weights)",
         "full": "backpropagation through all of them",
         "truncated": "truncated backpropagation, 64 steps at a time",
         "accumulate": "4 micro-batches of gradient accumulation",
         "sgd": "plain SGD (no optimizer state)", "bf16": "bfloat16 weights and batch",
         "grad": "autograd on", "no_grad": "`torch.no_grad()`",
         "inference_mode": "`torch.inference_mode()`"}

STEPS = {  # technique: keyword arguments of make(), micro-batches, compute dtype
    "baseline": ({}, 1, None),
    "checkpoint": ({"activations": "checkpoint"}, 1, None),
    "selective": ({"activations": "selective"}, 1, None),
    "offload": ({"activations": "offload"}, 1, None),
    "accumulate": ({}, 4, None),
    "sgd": ({"optimizer": "sgd"}, 1, None),
    "autocast": ({}, 1, torch.bfloat16),
    "bf16": ({"dtype": torch.bfloat16}, 1, None),
}

# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {
    "sequence[truncated]": "Python and launches: 32 backward passes of short chunks",
    "step[offload]": "the host's CPU, memory and PCIe link copying saved activations",
}

MiB = 2**20


def describe(benchmark, model, optimizer, x, technique, peak, start):
    benchmark.extra_info.update(
        technique=technique, tokens=snippet.TOKENS, width=snippet.WIDTH, blocks=snippet.BLOCKS,
        dtype=str(x.dtype).removeprefix("torch."),
        parameter_bytes=snippet.parameter_bytes(model),
        optimizer_state_bytes=snippet.state_bytes(optimizer) if optimizer else 0,
        allocated_before_bytes=start, peak_bytes=peak, peak_gib=peak / 2**30,
        added_at_peak_bytes=peak - start,
    )


def libraries_ready():
    """cuBLAS takes a workspace from PyTorch's cache at its first matrix product, one per
    thread (backward runs in autograd's own), and keeps it. Made before `outside` is read, it
    counts as what the process held, not as the first benchmark's model."""
    a = torch.ones(64, 64, device="cuda", requires_grad=True)
    (a @ a).sum().backward()
    torch.cuda.synchronize()


@pytest.mark.parametrize("technique", list(STEPS))
def bench_step(gpu_benchmark, benchmark, technique):
    """One training step (forward, backward, optimizer step, gradients dropped)."""
    options, micro_batches, compute_dtype = STEPS[technique]
    libraries_ready()
    outside = torch.cuda.memory_allocated()  # what earlier benchmarks of this process hold
    model, optimizer, x = snippet.make(**options)
    args = (model, optimizer, x, micro_batches, compute_dtype)
    snippet.train_step(*args)  # creates the optimizer's state
    torch.cuda.synchronize()
    start = torch.cuda.memory_allocated() - outside
    peak = snippet.peak_bytes(snippet.train_step, *args) - outside
    describe(benchmark, model, optimizer, x, technique, peak, start)
    benchmark.extra_info.update(micro_batches=micro_batches,
                                compute_dtype=str(compute_dtype).removeprefix("torch."))
    gpu_benchmark(snippet.train_step, *args, rounds=8, warmup_rounds=1)


@pytest.mark.parametrize("mode", ["grad", "no_grad", "inference_mode"])
def bench_forward(gpu_benchmark, benchmark, mode):
    """One forward pass of the same model and batch, with and without autograd."""
    libraries_ready()
    outside = torch.cuda.memory_allocated()
    model, _, x = snippet.make(optimizer="sgd")
    torch.cuda.synchronize()
    start = torch.cuda.memory_allocated() - outside
    peak = snippet.peak_bytes(snippet.predict, model, x, mode) - outside
    describe(benchmark, model, None, x, mode, peak, start)
    gpu_benchmark(snippet.predict, model, x, mode, rounds=8, warmup_rounds=1)


@pytest.mark.parametrize("technique", ["full", "truncated"])
def bench_sequence(gpu_benchmark, benchmark, technique):
    """One pass of an LSTM over a long sequence, backpropagating through all of it at once
    or through TRUNCATE time steps at a time (an optimizer step after each backward)."""
    k = None if technique == "full" else snippet.TRUNCATE
    libraries_ready()
    outside = torch.cuda.memory_allocated()
    model, optimizer, x, target = snippet.make_sequence()
    # a short pass creates Adam's state and cuDNN's LSTM plans
    snippet.train_sequence(model, optimizer, x[:snippet.TRUNCATE], target[:snippet.TRUNCATE])
    torch.cuda.synchronize()
    start = torch.cuda.memory_allocated() - outside
    peak = snippet.peak_bytes(snippet.train_sequence, model, optimizer, x, target, k) - outside
    benchmark.extra_info.update(
        technique=technique, steps=snippet.SEQUENCE, sequences=snippet.SEQUENCES,
        width=snippet.WIDTH, truncate=k or snippet.SEQUENCE,
        backward_passes=-(-snippet.SEQUENCE // (k or snippet.SEQUENCE)),
        parameter_bytes=snippet.parameter_bytes(model),
        optimizer_state_bytes=snippet.state_bytes(optimizer),
        allocated_before_bytes=start, peak_bytes=peak, peak_gib=peak / 2**30,
        added_at_peak_bytes=peak - start)
    gpu_benchmark(snippet.train_sequence, model, optimizer, x, target, k,
                  rounds=8, warmup_rounds=1)
