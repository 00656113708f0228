"""Benchmarks behind docs/several-gpus/fsdp2.md: FSDP2 on two GPUs, step time and per-GPU memory,
beside DDP on the same workload (ddp_with_torchrun.step[2gpus-4096] measures DDP).

Needs two GPUs. The workload (benchmarks/two_ranks.py): an 8-layer MLP of 4096 x 4096, about 134
million parameters, bf16 autocast, Adam, 4096 samples per GPU. Budget on two H200s: ~15 s.
"""

import pytest
import torch

from benchmarks import two_ranks
from snippets.several_gpus import ddp_with_torchrun as ddp
from snippets.several_gpus import fsdp2

pytestmark = pytest.mark.snippet("snippets/several_gpus/fsdp2.py",
                                 "snippets/several_gpus/ddp_with_torchrun.py", "benchmarks/two_ranks.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/labels.py)
LABELS = {"step": "FSDP2 on 2 GPUs: a training step of {batch_per_gpu} samples per GPU"}
WORDS = {}

_state = {}  # this rank's sharded model, optimizer and batch


def prepare():
    device = two_ranks.device()
    model = fsdp2.shard(two_ranks.workload_model(), device)
    _state.update(device=device, model=model, batch=two_ranks.workload_batch(device),
                  optimizer=torch.optim.Adam(model.parameters()))  # after sharding
    step()  # the first step creates Adam's state, on each rank's shard
    torch.cuda.reset_peak_memory_stats(device)


def step():
    _state["optimizer"].zero_grad(set_to_none=True)
    ddp.forward_backward(_state["model"], *_state["batch"])
    _state["optimizer"].step()
    torch.cuda.synchronize(_state["device"])


def held_peaks_and_release():
    """Both ranks: what each rank holds (bytes) after a step, its peak memory; then free all."""
    held = two_ranks.everyones(fsdp2.held_by_this_rank(_state["model"], _state["optimizer"]))
    peaks = two_ranks.everyones(two_ranks.peak_gib(_state["device"]))
    _state.clear()
    torch.cuda.empty_cache()
    return held, peaks


@pytest.fixture(scope="module")
def pair():
    with two_ranks.Pair() as running:
        yield running


def bench_step(benchmark, pair):
    pair.call(prepare)
    benchmark.extra_info.update(gpus=2, batch_per_gpu=two_ranks.BATCH_PER_GPU)
    # plain benchmark: two ranks; pair.announcer starts each round on the other rank too
    benchmark.pedantic(step, setup=pair.announcer(step), rounds=20, warmup_rounds=3)
    held, peaks = pair.call(held_peaks_and_release)
    benchmark.extra_info.update({f"peak_gpu{rank}_gib": gib for rank, gib in enumerate(peaks)})
    for what, key in (("parameters", "params"), ("gradients", "grads"),
                      ("optimizer state", "optimizer")):
        benchmark.extra_info[f"{key}_gib_per_gpu"] = max(h[what] for h in held) / 2**30
