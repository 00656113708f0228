"""Benchmarks behind docs/several-gpus/model-parallelism.md: a model split over two GPUs, one
training step naive and pipelined with 2 to 16 micro-batches; each GPU's idle share of the step
and a two-lane timeline from the profiler.

Needs two GPUs. Workload: 8 layers of 4096 x 4096 (float32), four per GPU, a batch of 8192, SGD.
Budget on two H200s: 5 variants x (2 + 10) steps of ~50-100 ms, plus one profiled step each: ~10 s.
"""

import pytest
import torch

from snippets.several_gpus import model_parallelism as snippet

pytestmark = [pytest.mark.snippet("snippets/several_gpus/model_parallelism.py"), pytest.mark.gpus(2)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "step[naive]": "Naive: all {batch} samples through GPU 0's half, then GPU 1's",
    "step": "Pipelined: {micro_batches} micro-batches of {micro_batch} samples",
}
WORDS = {}

WIDTH, DEPTH, BATCH = 4096, 8, 8192
MICRO_BATCHES = [1, 2, 4, 8, 16]


@pytest.fixture(scope="module")
def workload():
    torch.manual_seed(0)
    model = snippet.TwoStages(width=WIDTH, depth=DEPTH)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(BATCH, WIDTH, device=snippet.devices[0])
    y = torch.randn(BATCH, 1, device=snippet.devices[1])
    return model, optimizer, x, y


def synchronize_both():
    for device in snippet.devices:
        torch.cuda.synchronize(device)


@pytest.mark.parametrize("micro_batches", MICRO_BATCHES,
                         ids=["naive" if m == 1 else f"{m}-micro-batches" for m in MICRO_BATCHES])
def bench_step(benchmark, workload, micro_batches):
    model, optimizer, x, y = workload

    def step():
        snippet.train_step(model, optimizer, x, y, micro_batches)
        synchronize_both()

    # plain benchmark: two GPUs; gpu_benchmark synchronizes only the current one
    benchmark.pedantic(step, setup=synchronize_both, rounds=10, warmup_rounds=2)
    bars = snippet.busy_timeline(step)
    idle = [snippet.idle_fraction(bars, f"GPU {d.index}") for d in snippet.devices]
    benchmark.extra_info.update(
        micro_batches=micro_batches, micro_batch=BATCH // micro_batches, batch=BATCH,
        idle_gpu0=idle[0], idle_gpu1=idle[1], idle_mean=sum(idle) / 2, timeline=bars)
