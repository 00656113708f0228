"""Benchmarks behind docs/several-gpus/fsdp2.md: FSDP2 on two GPUs, step time and per-GPU memory,
beside DDP on the same workload (ddp_with_torchrun.step[2gpus-4096] measures DDP).

Needs two GPUs. The workload (benchmarks/two_ranks.py): an 8-layer MLP of 4096 x 4096, about 134
million parameters, bf16 autocast, Adam, 4096 samples per GPU. Budget on two H200s: ~15 s.
`checkpoint`: the same sharded model and Adam state (about 1 GiB per rank) saved with dcp.save and
with dcp.async_save into the machine's temporary folder, 4 rounds each after one to warm up;
budget ~30 s.
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

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {"step": "FSDP2 on 2 GPUs: a training step of {batch_per_gpu} samples per GPU",
          "checkpoint": "{mode} save of the sharded model and Adam's state, 2 GPUs"}
WORDS = {"blocking": "`dcp.save` (blocking)", "async": "`dcp.async_save`"}

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


# --- Checkpoints: dcp.save against dcp.async_save ---------------------------------------------

# (the imports of these benchmarks stay in their functions: a module-level import would make
# the published fsdp2.step stale, being part of every benchmark's code key in this file)
STEPS_DURING_SAVE = 5


def checkpoints():
    """The folder the saves go to, the same on both ranks: in the machine's temporary folder."""
    import os
    import tempfile

    return os.path.join(tempfile.gettempdir(), "fieldguide-fsdp2-checkpoints")


def sync():
    if _state["device"].type == "cuda":
        torch.cuda.synchronize(_state["device"])


def prepare_checkpoint():
    """Both ranks: the sharded workload, Adam's state after one step, a gloo group (for
    async_save and to line the ranks up) and an empty folder. Returns the bytes of model and
    optimizer state each rank holds (the larger of the two)."""
    import shutil

    device = two_ranks.device()
    model = fsdp2.build_sharded(two_ranks.workload_model, device)
    _state.update(device=device, model=model, batch=two_ranks.workload_batch(device),
                  optimizer=torch.optim.Adam(model.parameters()),
                  cpu_group=dist.new_group(backend="gloo"), rounds=0, pending=None, saves=[])
    train_step()
    if dist.get_rank() == 0:
        shutil.rmtree(checkpoints(), ignore_errors=True)
    dist.barrier(group=_state["cpu_group"])
    held = fsdp2.held_by_this_rank(model, _state["optimizer"])
    return max(two_ranks.everyones(held["parameters"] + held["optimizer state"]))


def train_step():
    _state["optimizer"].zero_grad(set_to_none=True)
    ddp.forward_backward(_state["model"], *_state["batch"])
    _state["optimizer"].step()
    sync()


def start_save(mode):
    """Both ranks: one save into a new folder. Timed on rank 0: the time the training loop is
    held (all of dcp.save; async_save until the state is copied to CPU memory)."""
    import os

    sync()
    dist.barrier(group=_state["cpu_group"])
    _state["rounds"] += 1
    folder = os.path.join(checkpoints(), f"round-{_state['rounds']}")
    started = time.perf_counter()
    if mode == "blocking":
        fsdp2.save_sharded(folder, _state["model"], _state["optimizer"], epoch=0)
        _state["saves"].append(time.perf_counter() - started)
    else:
        returned = fsdp2.save_sharded_async(folder, _state["model"], _state["optimizer"],
                                            epoch=0, group=_state["cpu_group"])
        # a Future; with a stager that copies in the background too, a response holding two
        future = getattr(returned, "upload_completion", returned)
        future.add_done_callback(lambda _: _state["saves"].append(time.perf_counter() - started))
        _state["pending"] = future


def finish_save():
    """Both ranks, outside the timed region: STEPS_DURING_SAVE training steps while an async
    save writes (each timed), then wait for the save and remove its folder."""
    import shutil

    steps = []
    if _state["pending"] is not None:
        for _ in range(STEPS_DURING_SAVE):
            started = time.perf_counter()
            train_step()
            steps.append(time.perf_counter() - started)
        _state["pending"].result()
        _state["pending"] = None
    dist.barrier(group=_state["cpu_group"])
    if dist.get_rank() == 0:
        shutil.rmtree(checkpoints(), ignore_errors=True)
    dist.barrier(group=_state["cpu_group"])
    _state.setdefault("steps_during", []).extend(steps)


def steps_alone():
    """Both ranks: STEPS_DURING_SAVE training steps with no save in flight, each timed."""
    steps = []
    for _ in range(STEPS_DURING_SAVE):
        started = time.perf_counter()
        train_step()
        steps.append(time.perf_counter() - started)
    return steps


def save_times_and_release():
    """Both ranks: [(median save time, median step during an async save), ...]; then free."""
    import statistics

    while len(_state["saves"]) < _state["rounds"]:  # the last callback may still be running
        time.sleep(0.01)
    during = _state.get("steps_during") or [float("nan")]
    found = (statistics.median(_state["saves"][1:]), statistics.median(during))  # warm-up out
    _state.clear()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return two_ranks.everyones(found)


@pytest.mark.parametrize("mode", ["blocking", "async"])
def bench_checkpoint(benchmark, pair, mode):
    """The training loop held by a save of the sharded state, and the save's own time."""
    import statistics

    state_bytes = pair.call(prepare_checkpoint)
    alone = pair.call(steps_alone)

    def setup():  # outside the timed region: the previous round's save ends, then announce
        pair.call(finish_save)
        pair.announce(start_save, mode)

    # plain benchmark: two ranks; setup starts each round on the other rank too
    benchmark.pedantic(start_save, args=(mode,), setup=setup, rounds=4, warmup_rounds=1)
    pair.call(finish_save)
    found = pair.call(save_times_and_release)
    benchmark.extra_info.update(mode=mode, gpus=2, bytes=state_bytes,
                                save_ms=max(f[0] for f in found) * 1e3,
                                step_ms=statistics.median(alone) * 1e3)
    if mode == "async":  # the training steps taken while the thread wrote
        benchmark.extra_info["step_during_save_ms"] = max(f[1] for f in found) * 1e3
