"""Benchmarks behind docs/several-gpus/ddp-with-torchrun.md: weak scaling from one GPU to two at
two batch sizes, per-GPU memory, and a profiler timeline of one DDP step (the all-reduce beside
the backward pass); where the memory peaks, phase by phase (fsdp2.md); and a budget of DDP's
step, with parts of DDP taken away.

Needs two GPUs. The workload (benchmarks/two_ranks.py): an 8-layer MLP of 4096 x 4096, about 134
million parameters, bf16 autocast, Adam, 4096 and 16384 samples per GPU. The gradients' all-reduce
costs the same at both sizes; the compute that can hide it grows four times. Budget on two H200s:
starting the follower and NCCL ~10 s, then 4 x (3 + 20) steps of 8-35 ms and four profiled steps;
then memory (3 x 8 steps) and budget (5 x 25 steps of ~10 ms): ~10 s more.
"""

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from benchmarks import two_ranks
from snippets.several_gpus import ddp_timeline
from snippets.several_gpus import ddp_with_torchrun as ddp

pytestmark = pytest.mark.snippet("snippets/several_gpus/ddp_with_torchrun.py",
                                 "snippets/several_gpus/ddp_timeline.py", "benchmarks/two_ranks.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "step[1gpu-4096]": "One GPU, no DDP: a training step of {batch_per_gpu} samples",
    "step[2gpus-4096]": "DDP on 2 GPUs: a training step of {batch_per_gpu} samples per GPU",
    "step[1gpu-16384]": "One GPU, no DDP: a training step of {batch_per_gpu} samples",
    "step[2gpus-16384]": "DDP on 2 GPUs: a training step of {batch_per_gpu} samples per GPU",
    "step_bucket_view": "DDP on 2 GPUs, `gradient_as_bucket_view=True`: a training step of "
                        "{batch_per_gpu} samples per GPU",
    "memory": "Memory of a training step of {batch_per_gpu} samples per GPU: {case}",
    "budget": "DDP on 2 GPUs, a training step of {batch_per_gpu} samples per GPU: {case}",
}
WORDS = {"1gpu": "one GPU, no DDP", "2gpus": "DDP on 2 GPUs",
         "2gpus-bucket-view": "DDP on 2 GPUs, `gradient_as_bucket_view=True`",
         "no-sync": "inside `no_sync()`, nothing sent or copied",
         "noop-hook": "a hook that sends nothing, buckets copied in and out",
         "ddp": "plain DDP", "static-graph": "`static_graph=True`",
         "find-unused": "`find_unused_parameters=True`"}

_state = {}  # this process's model, optimizer and batch (each rank has its own)


def prepare(gpus, batch, bucket_view=False):
    """Build the workload on this rank's GPU (under DDP for two GPUs) and take a first step.
    bucket_view: DDP with gradient_as_bucket_view=True (gradients live in the buckets)."""
    device = torch.device("cuda", 0) if gpus == 1 else two_ranks.device()
    model = two_ranks.workload_model().to(device)
    if gpus == 2 and bucket_view:
        model = DistributedDataParallel(model, device_ids=[device.index],
                                        gradient_as_bucket_view=True)
    elif gpus == 2:
        model = ddp.wrap(model, device)
    if gpus == 2:  # a CPU group to line the ranks up before a profiled step
        _state["cpu_group"] = dist.new_group(backend="gloo")
    _state.update(device=device, model=model, batch=two_ranks.workload_batch(device, batch),
                  optimizer=torch.optim.Adam(model.parameters()))
    step()  # the first step creates Adam's state
    torch.cuda.reset_peak_memory_stats(device)


def step():
    """One training step on this rank, waited for."""
    _state["optimizer"].zero_grad(set_to_none=True)
    ddp.forward_backward(_state["model"], *_state["batch"])
    _state["optimizer"].step()
    torch.cuda.synchronize(_state["device"])


def aligned_step():
    """step(), once both ranks are here: a barrier on the CPU (gloo, no kernel), so that
    neither rank's profile starts with an all-reduce waiting for a late partner."""
    dist.barrier(group=_state["cpu_group"])
    step()


def profiled_step():
    """One more step on both ranks, each recording its GPU timeline: [rank 0's, rank 1's]."""
    return two_ranks.everyones(ddp_timeline.step_timeline(aligned_step))


def waits_ms(timelines):
    """How long each rank's all-reduce kernels ran beyond the other rank's, bucket by
    bucket: an all-reduce ends on both GPUs at about the same moment, so the longer one
    is the rank that arrived first and waited. [rank 0's total, rank 1's total], in ms."""
    kernels = [[e["duration"] for e in t if e["lane"] == "all-reduce"] for t in timelines]
    if len(kernels) < 2 or len(kernels[0]) != len(kernels[1]):
        return None
    return [sum(max(0.0, mine - theirs) for mine, theirs in zip(a, b, strict=True)) * 1e3
            for a, b in ((kernels[0], kernels[1]), (kernels[1], kernels[0]))]


def release():
    _state.clear()
    torch.cuda.empty_cache()


def peaks_and_release():
    """Both ranks: every rank's peak memory since prepare(), then free the workload."""
    peaks = two_ranks.everyones(two_ranks.peak_gib(_state["device"]))
    release()
    return peaks


@pytest.fixture(scope="module")
def pair():
    with two_ranks.Pair() as running:
        yield running


BATCHES = [two_ranks.BATCH_PER_GPU, 4 * two_ranks.BATCH_PER_GPU]  # 4096: the chapter's workload


def timeline_extras(timelines):
    """What the profiled step's kernels say, from rank 0's timeline (and rank 1's, if any):
    kernel time per lane, the all-reduce time no compute kernel ran beside (exposed), and
    how long the GPU sat idle inside the step."""
    events = timelines[0]
    all_reduce = sum(e["duration"] for e in events if e["lane"] == "all-reduce")
    overlap = ddp_timeline.overlap_seconds(events)
    extras = dict(timeline=events, overlap_ms=overlap * 1e3, all_reduce_ms=all_reduce * 1e3,
                  exposed_all_reduce_ms=(all_reduce - overlap) * 1e3,
                  compute_ms=sum(e["duration"] for e in events if e["lane"] == "compute") * 1e3,
                  idle_ms=ddp_timeline.idle_seconds(events) * 1e3)
    if len(timelines) > 1:
        extras["timeline_rank1"] = timelines[1]
        extras["all_reduce_wait_ms"] = waits_ms(timelines)
    return extras


def run_step_benchmark(benchmark, request, gpus, batch, bucket_view=False):
    benchmark.extra_info.update(gpus=gpus, batch_per_gpu=batch)
    if gpus == 1:
        prepare(1, batch)
        benchmark.extra_info["parameters"] = two_ranks.parameter_count(_state["model"])
        # plain benchmark: the baseline of the 2-GPU case below, timed the same way
        benchmark.pedantic(step, setup=torch.cuda.synchronize, rounds=20, warmup_rounds=3)
        timelines = [ddp_timeline.step_timeline(step)]
        peaks = [two_ranks.peak_gib(_state["device"])]
        release()
    else:
        pair = request.getfixturevalue("pair")
        pair.call(prepare, 2, batch, bucket_view)
        benchmark.extra_info["parameters"] = two_ranks.parameter_count(_state["model"])
        # plain benchmark: two ranks; pair.announcer starts each round on the other rank too
        benchmark.pedantic(step, setup=pair.announcer(step), rounds=20, warmup_rounds=3)
        timelines = pair.call(profiled_step)
        peaks = pair.call(peaks_and_release)
    benchmark.extra_info.update({f"peak_gpu{rank}_gib": gib for rank, gib in enumerate(peaks)},
                                **timeline_extras(timelines))


@pytest.mark.parametrize("batch", BATCHES, ids=[str(b) for b in BATCHES])
@pytest.mark.parametrize("gpus", [1, 2], ids=["1gpu", "2gpus"])
def bench_step(benchmark, request, gpus, batch):
    """Weak scaling: the same step per GPU on one GPU and on two; efficiency = t(1) / t(2)."""
    run_step_benchmark(benchmark, request, gpus, batch)


def bench_step_bucket_view(benchmark, request):
    """The 2-GPU step at 4096 samples per GPU with gradient_as_bucket_view=True: no second
    copy of the gradients (the fair DDP baseline for FSDP2's memory)."""
    run_step_benchmark(benchmark, request, 2, two_ranks.BATCH_PER_GPU, bucket_view=True)


# --- Where DDP's memory peaks: the step that rebuilds the buckets, then a steady step, phase by
# phase (docs/several-gpus/fsdp2.md). bench_step's peak covers every step after the first, the
# second among them, in which DDP rebuilds its buckets; these record that step apart.

MEMORY_CASES = ["1gpu", "2gpus", "2gpus-bucket-view"]


def _gib(value):
    return value / 2**30


def memory_by_phase():
    """This rank, after prepare() (one step taken): the peak of the second step (in which DDP
    rebuilds its buckets) and its time (one sample, ms), then, in a third step, what is held
    at its start and the peak of its forward pass, its backward pass and its optimizer step,
    in GiB."""
    import time

    device, model, (x, y) = _state["device"], _state["model"], _state["batch"]
    optimizer = _state["optimizer"]
    found = {}
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    step()  # the second step: DDP rebuilds its buckets in its forward pass
    found["second_step_ms"] = (time.perf_counter() - start) * 1e3
    found["peak_second_step"] = two_ranks.peak_gib(device)
    optimizer.zero_grad(set_to_none=True)  # a third step, as ddp.forward_backward runs it
    torch.cuda.synchronize(device)
    found["held_at_start"] = _gib(torch.cuda.memory_allocated(device))
    torch.cuda.reset_peak_memory_stats(device)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.mse_loss(model(x), y)
    found["peak_forward"] = two_ranks.peak_gib(device)
    torch.cuda.reset_peak_memory_stats(device)
    loss.backward()
    del loss
    found["peak_backward"] = two_ranks.peak_gib(device)
    found["held_after_backward"] = _gib(torch.cuda.memory_allocated(device))
    torch.cuda.reset_peak_memory_stats(device)
    optimizer.step()
    found["peak_optimizer"] = two_ranks.peak_gib(device)
    torch.cuda.reset_peak_memory_stats(device)  # what follows: steady steps
    return found


def everyones_memory_by_phase():
    return two_ranks.everyones(memory_by_phase())


@pytest.mark.parametrize("case", MEMORY_CASES)
def bench_memory(benchmark, request, case):
    """Per-GPU memory of the 4096-sample step: the second step (DDP rebuilds its buckets),
    then a steady step phase by phase; the time is of steady steps."""
    gpus, bucket_view = (1, False) if case == "1gpu" else (2, case.endswith("bucket-view"))
    benchmark.extra_info.update(gpus=gpus, batch_per_gpu=two_ranks.BATCH_PER_GPU,
                                bucket_view=bucket_view, case=case)
    if gpus == 1:
        prepare(1, two_ranks.BATCH_PER_GPU)
        phases = [memory_by_phase()]
        benchmark.pedantic(step, setup=torch.cuda.synchronize, rounds=5, warmup_rounds=0)
        peaks = [two_ranks.peak_gib(_state["device"])]
        benchmark.extra_info["parameters"] = two_ranks.parameter_count(_state["model"])
        release()
    else:
        pair = request.getfixturevalue("pair")
        pair.call(prepare, 2, two_ranks.BATCH_PER_GPU, bucket_view)
        phases = pair.call(everyones_memory_by_phase)
        benchmark.pedantic(step, setup=pair.announcer(step), rounds=5, warmup_rounds=0)
        benchmark.extra_info["parameters"] = two_ranks.parameter_count(_state["model"])
        peaks = pair.call(peaks_and_release)  # steady steps only
    for rank, found in enumerate(phases):  # second_step_ms -> second_step_gpu0_ms
        benchmark.extra_info.update({(f"{k[:-3]}_gpu{rank}_ms" if k.endswith("_ms")
                                      else f"{k}_gpu{rank}_gib"): v for k, v in found.items()})
    benchmark.extra_info.update({f"peak_steady_gpu{rank}_gib": p for rank, p in enumerate(peaks)})


# --- A budget of DDP's step beyond one GPU's (docs/several-gpus/ddp-with-torchrun.md): the same
# 2-GPU step with parts of DDP taken away, each timed as bench_step times the step.

BUDGET_CASES = ["no-sync", "noop-hook", "ddp", "static-graph", "find-unused"]


def prepare_budget(case):
    """This rank's workload under DDP as `case` sets it up, two steps taken (the first creates
    Adam's state, the second rebuilds DDP's buckets):
    no-sync: every step inside model.no_sync(), so DDP's hooks send and copy nothing;
    noop-hook: a communication hook that returns each bucket untouched (no all-reduce, but
    the copies into the buckets and back); ddp: plain DDP, as bench_step[2gpus-4096];
    static-graph: DDP(static_graph=True); find-unused: DDP(find_unused_parameters=True)."""
    from torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks import noop_hook

    device = two_ranks.device()
    options = {"static-graph": {"static_graph": True},
               "find-unused": {"find_unused_parameters": True}}.get(case, {})
    model = DistributedDataParallel(two_ranks.workload_model().to(device),
                                    device_ids=[device.index], **options)
    if case == "noop-hook":
        model.register_comm_hook(None, noop_hook)
    _state.update(device=device, model=model, batch=two_ranks.workload_batch(device),
                  optimizer=torch.optim.Adam(model.parameters()), no_sync=case == "no-sync")
    budget_step()
    budget_step()


def budget_step():
    """One training step on this rank, waited for; inside no_sync() for the no-sync case."""
    import contextlib

    model = _state["model"]
    _state["optimizer"].zero_grad(set_to_none=True)
    with model.no_sync() if _state["no_sync"] else contextlib.nullcontext():
        ddp.forward_backward(model, *_state["batch"])
    _state["optimizer"].step()
    torch.cuda.synchronize(_state["device"])


def host_ms_and_release(repeats=5):
    """Both ranks: the median time the host takes to issue one step (GPU idle at the start,
    no waiting at the end), in ms; then free the workload."""
    import time

    times = []
    for _ in range(repeats):
        torch.cuda.synchronize(_state["device"])
        start = time.perf_counter()
        _state["optimizer"].zero_grad(set_to_none=True)
        ddp.forward_backward(_state["model"], *_state["batch"])  # the ddp case only
        _state["optimizer"].step()
        times.append((time.perf_counter() - start) * 1e3)
    torch.cuda.synchronize(_state["device"])
    found = two_ranks.everyones(sorted(times)[len(times) // 2])
    release()
    return found


def release_only():
    release()


@pytest.mark.parametrize("case", BUDGET_CASES)
def bench_budget(benchmark, request, case):
    """The 2-GPU step of 4096 samples per GPU with parts of DDP taken away (see
    prepare_budget); the one-GPU step is bench_step[1gpu-4096]."""
    benchmark.extra_info.update(gpus=2, batch_per_gpu=two_ranks.BATCH_PER_GPU, case=case)
    pair = request.getfixturevalue("pair")
    pair.call(prepare_budget, case)
    benchmark.pedantic(budget_step, setup=pair.announcer(budget_step), rounds=20,
                       warmup_rounds=3)
    if case == "ddp":
        host = pair.call(host_ms_and_release)
        benchmark.extra_info.update(host_ms_gpu0=host[0], host_ms_gpu1=host[1])
    else:
        pair.call(release_only)
