"""Benchmarks behind docs/several-gpus/dataparallel-taken-apart.md: nn.DataParallel on two GPUs,
step time and per-GPU memory, beside DDP on the same workload (ddp_with_torchrun.step[2gpus-4096]).

Needs two GPUs. The workload (benchmarks/two_ranks.py): an 8-layer MLP of 4096 x 4096, about 134
million parameters, bf16 autocast, Adam; DataParallel gets 2 x 4096 samples per step, which it
splits in two. Budget on two H200s: ~10 s.
"""

import pytest
import torch
from torch import nn

from benchmarks import two_ranks

pytestmark = pytest.mark.snippet("snippets/several_gpus/dataparallel_taken_apart.py",
                                 "benchmarks/two_ranks.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {"step": "`nn.DataParallel` on 2 GPUs: a training step of {batch_per_gpu} samples per GPU"}
WORDS = {}


def synchronize_both():
    for gpu in (0, 1):
        torch.cuda.synchronize(gpu)


def bench_step(benchmark):
    # imported here: the module builds its small example on two GPUs when it is imported
    from snippets.several_gpus import dataparallel_taken_apart as snippet

    model = two_ranks.workload_model().to("cuda:0")
    dp_model = nn.DataParallel(model, device_ids=[0, 1])
    optimizer = torch.optim.Adam(model.parameters())
    x, y = two_ranks.workload_batch(torch.device("cuda:0"), 2 * two_ranks.BATCH_PER_GPU)

    def step():
        snippet.train_step(dp_model, optimizer, x, y)
        synchronize_both()

    step()  # the first step creates Adam's state
    peaks = snippet.peak_memory_per_gpu(step, [0, 1])
    benchmark.extra_info.update(gpus=2, batch_per_gpu=two_ranks.BATCH_PER_GPU,
                                parameters=two_ranks.parameter_count(model),
                                peak_gpu0_gib=peaks[0], peak_gpu1_gib=peaks[1])
    # plain benchmark: two GPUs; gpu_benchmark synchronizes only the current one
    benchmark.pedantic(step, setup=synchronize_both, rounds=20, warmup_rounds=3)
