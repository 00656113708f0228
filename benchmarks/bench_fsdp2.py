"""Benchmarks behind docs/several-gpus/fsdp2.md: FSDP2 on two GPUs, step time and per-GPU memory,
beside DDP on the same workload (ddp_with_torchrun.step[2gpus-4096] measures DDP).

Needs two GPUs. The workload (benchmarks/two_ranks.py): an 8-layer MLP of 4096 x 4096, about 134
million parameters, bf16 autocast, Adam, 4096 samples per GPU. Budget on two H200s: ~15 s.
"""

import time

import pytest
import torch
import torch.distributed as dist

from benchmarks import two_ranks
from snippets.several_gpus import ddp_timeline, fsdp2
from snippets.several_gpus import ddp_with_torchrun as ddp

pytestmark = pytest.mark.snippet("snippets/several_gpus/fsdp2.py",
                                 "snippets/several_gpus/ddp_with_torchrun.py",
                                 "snippets/several_gpus/ddp_timeline.py", "benchmarks/two_ranks.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/labels.py)
LABELS = {"step": "FSDP2 on 2 GPUs: a training step of {batch_per_gpu} samples per GPU"}
WORDS = {}

_state = {}  # this rank's sharded model, optimizer and batch


def prepare():
    device = two_ranks.device()
    model = fsdp2.build_sharded(two_ranks.workload_model, device)  # meta, shard, then fill
    _state.update(device=device, model=model, batch=two_ranks.workload_batch(device),
                  optimizer=torch.optim.Adam(model.parameters()),  # after sharding
                  cpu_group=dist.new_group(backend="gloo"))  # to line the ranks up
    step()  # the first step creates Adam's state, on each rank's shard
    torch.cuda.reset_peak_memory_stats(device)


def step():
    _state["optimizer"].zero_grad(set_to_none=True)
    ddp.forward_backward(_state["model"], *_state["batch"])
    _state["optimizer"].step()
    torch.cuda.synchronize(_state["device"])


def host_seconds(repeats=5):
    """Both ranks: the median time the host takes to issue one step's forward and backward
    passes, and its optimizer step, starting with the GPU idle (no waiting for the GPU at
    the end); [(rank 0's two), (rank 1's two)]."""
    passes, optimizer = [], []
    for _ in range(repeats):
        torch.cuda.synchronize(_state["device"])
        dist.barrier(group=_state["cpu_group"])
        start = time.perf_counter()
        _state["optimizer"].zero_grad(set_to_none=True)
        ddp.forward_backward(_state["model"], *_state["batch"])
        middle = time.perf_counter()
        _state["optimizer"].step()
        passes.append(middle - start)
        optimizer.append(time.perf_counter() - middle)
    torch.cuda.synchronize(_state["device"])
    median = len(passes) // 2
    return two_ranks.everyones((sorted(passes)[median], sorted(optimizer)[median]))


def aligned_step():
    """step(), once both ranks are here (a CPU barrier: no kernel in the profile)."""
    dist.barrier(group=_state["cpu_group"])
    step()


def profiled_step():
    """One more step on both ranks, each recording its GPU kernels: [rank 0's, rank 1's]."""
    return two_ranks.everyones(ddp_timeline.step_timeline(aligned_step, limit=2000))


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
    host = pair.call(host_seconds)
    timelines = pair.call(profiled_step)
    held, peaks = pair.call(held_peaks_and_release)
    events = timelines[0]  # rank 0's; NCCL's kernels here are all-gathers and reduce-scatters
    for e in events:
        e["lane"] = "NCCL" if e["lane"] == "all-reduce" else e["lane"]
    nccl = [e for e in events if e["lane"] == "NCCL"]
    benchmark.extra_info.update(
        timeline=events, timeline_rank1=timelines[1],
        host_passes_ms=max(p for p, _ in host) * 1e3,
        host_optimizer_ms=max(o for _, o in host) * 1e3,
        host_ms=max(p + o for p, o in host) * 1e3,
        nccl_ms=sum(e["duration"] for e in nccl) * 1e3,
        all_gather_ms=sum(e["duration"] for e in nccl if "AllGather" in e["name"]) * 1e3,
        reduce_scatter_ms=sum(e["duration"] for e in nccl if "ReduceScatter" in e["name"]) * 1e3,
        compute_ms=sum(e["duration"] for e in events if e["lane"] == "compute") * 1e3,
        idle_ms=ddp_timeline.idle_seconds(events) * 1e3,
        span_ms=(max(e["start"] + e["duration"] for e in events) - events[0]["start"]) * 1e3)
    benchmark.extra_info.update({f"peak_gpu{rank}_gib": gib for rank, gib in enumerate(peaks)})
    for what, key in (("parameters", "params"), ("gradients", "grads"),
                      ("optimizer state", "optimizer")):
        benchmark.extra_info[f"{key}_gib_per_gpu"] = max(h[what] for h in held) / 2**30
