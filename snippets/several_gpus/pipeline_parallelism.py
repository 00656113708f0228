"""Pipeline parallelism with torch.distributed.pipelining: stages of a model on processes.

Run it (from the repository root):
    torchrun --standalone --nproc-per-node 2 -m snippets.several_gpus.pipeline_parallelism
    python -m snippets.several_gpus.pipeline_parallelism   # one process: a single stage
NCCL where every process has a GPU, gloo on CPU processes otherwise. Every rank checks that its
stages' gradients, under each schedule, equal those of the same layers in the unsplit model,
then reads its idle time from its own timeline of a few profiled steps.
"""

GPUS_NEEDED = 0  # one GPU per process where there are enough; gloo on CPU processes otherwise

# --8<-- [start:split]
import torch
from torch import nn


def make_model(width=256, depth=8, seed=0):
    """A stack of `depth` Linear + ReLU layers; every rank builds the same one."""
    torch.manual_seed(seed)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers)


def split_model(model, stage, stages):
    """Stage `stage` of `stages`: its consecutive, equal share of the layers.

    Each rank builds the whole model and keeps its part (for a model too big for
    one device, build it on the "meta" device and materialize only that part).
    """
    layers = list(model)
    if len(layers) % stages:
        raise ValueError(
            f"{len(layers)} layers do not split into {stages} equal stages")
    per_stage = len(layers) // stages
    return nn.Sequential(*layers[stage * per_stage:(stage + 1) * per_stage])
# --8<-- [end:split]


# --8<-- [start:stage]
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe


def loss_fn(output, target):
    return nn.functional.mse_loss(output, target)


def build_pipeline(model, pp_mesh, device, microbatches, schedule=ScheduleGPipe):
    """This rank's stage of `model` and the schedule that runs it.

    The stages are the ranks of `pp_mesh` (a 1-D mesh, or the "pp" dimension of
    a larger one): the rank at position r holds stage r, sends its activations
    to position r + 1 and the gradients of its inputs back to r - 1, within that
    mesh's process group. The schedule cuts each batch into `microbatches`
    pieces along dim 0 and orders every stage's forward and backward passes over
    them (GPipe: all forwards, then all backwards; 1F1B: alternate once the
    pipeline is full, so fewer activations wait in memory). It scales each
    micro-batch's gradients by 1/microbatches (scale_grads=True, the default),
    which matches a loss_fn that averages.
    """
    rank, stages = pp_mesh.get_local_rank(), pp_mesh.size()
    if schedule is Schedule1F1B and microbatches < stages:
        raise ValueError("Schedule1F1B needs at least as many micro-batches as stages: "
                         f"got {microbatches} micro-batches for {stages} stages; "
                         f"pass microbatches >= {stages}, or use ScheduleGPipe")
    part = split_model(model, rank, stages).to(device)
    stage = PipelineStage(part, stage_index=rank, num_stages=stages, device=device,
                          group=pp_mesh.get_group())
    return [stage], schedule(stage, n_microbatches=microbatches, loss_fn=loss_fn)


def pipeline_step(stages, schedule, x, y):
    """Forward and backward of one batch: the rank holding the first stage feeds
    x, the one holding the last compares with y. Returns the micro-batches'
    losses where the last stage is, an empty list elsewhere."""
    for stage in stages:
        stage.submod.zero_grad(set_to_none=True)
    losses = []
    first = any(stage.is_first for stage in stages)
    last = any(stage.is_last for stage in stages)
    inputs = (x,) if first else ()
    targets = {"target": y, "losses": losses} if last else {}
    schedule.step(*inputs, **targets, return_outputs=False)  # keep no outputs
    return losses
# --8<-- [end:stage]


# --8<-- [start:virtual]
from torch.distributed.pipelining import (
    ScheduleDualPipeV,
    ScheduleInterleaved1F1B,
    ScheduleInterleavedZeroBubble,
    ScheduleLoopedBFS,
    ScheduleZBVZeroBubble,
)

V_SHAPED = (ScheduleZBVZeroBubble, ScheduleDualPipeV)


def stages_of_rank(rank, ranks, per_rank, v_shaped=False):
    """The stage indices one rank holds when `ranks` ranks hold `per_rank` each.

    Looped (interleaved schedules): rank r holds r, r + ranks, r + 2 ranks...
    V-shaped (two per rank): rank r holds r and 2 ranks - 1 - r, so rank 0
    holds the first stage and the last.
    """
    if v_shaped:
        return [rank, 2 * ranks - 1 - rank]
    return [rank + k * ranks for k in range(per_rank)]


def build_virtual_pipeline(model, pp_mesh, device, microbatches, schedule,
                           per_rank=2):
    """`per_rank` stages of `model` on this rank, and a schedule that runs a
    list of stages (ScheduleInterleaved1F1B, ScheduleLoopedBFS,
    ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble, ScheduleDualPipeV)."""
    rank, ranks = pp_mesh.get_local_rank(), pp_mesh.size()
    total = ranks * per_rank
    stages = [PipelineStage(split_model(model, i, total).to(device), stage_index=i,
                            num_stages=total, device=device, group=pp_mesh.get_group())
              for i in stages_of_rank(rank, ranks, per_rank, schedule in V_SHAPED)]
    return stages, schedule(stages, n_microbatches=microbatches, loss_fn=loss_fn)
# --8<-- [end:virtual]


# --8<-- [start:check]
def compare_with_unsplit(schedule, pp_mesh, device, microbatches=4, per_rank=1):
    """This rank's stages' gradients against those of the same layers in the
    whole model.

    The schedule averages the micro-batches' gradients (it scales each by
    1/microbatches), so they equal the gradients of the whole batch's mean loss.
    """
    torch.manual_seed(1)
    x, y = torch.randn(16, 256, device=device), torch.randn(16, 256, device=device)
    whole = make_model().to(device)
    loss_fn(whole(x), y).backward()
    if per_rank == 1:
        stages, run = build_pipeline(make_model(), pp_mesh, device, microbatches,
                                     schedule)
    else:
        stages, run = build_virtual_pipeline(make_model(), pp_mesh, device,
                                             microbatches, schedule, per_rank)
    losses = pipeline_step(stages, run, x, y)
    same = True
    for stage in stages:
        mine = split_model(whole, stage.stage_index, stage.num_stages)
        # equal up to rounding: micro-batches add the same sums in another order
        for p, q in zip(stage.submod.parameters(), mine.parameters(), strict=True):
            same &= bool((p.grad - q.grad).norm() <= 1e-4 * q.grad.norm())
    return {"grads_equal": same, "losses": len(losses),
            "stages": [stage.stage_index for stage in stages]}
# --8<-- [end:check]


# --8<-- [start:bubble]
import torch.distributed.pipelining as pipelining


def bubble_fraction(ranks, microbatches, per_rank=1):
    """Share of a GPipe, 1F1B or interleaved 1F1B step each rank sits idle.

    Holds only if every stage takes the same time, sending takes none, the host
    never makes a GPU wait, and the M micro-batches together cost what the
    whole batch costs. `per_rank` stages per rank (interleaved) shorten the
    fill and the drain to 1/per_rank of a micro-batch's time on a rank.
    """
    return (ranks - 1) / (per_rank * microbatches + ranks - 1)


def schedules():
    """The schedule classes this PyTorch offers."""
    return sorted(name for name in dir(pipelining) if name.startswith("Schedule"))
# --8<-- [end:bubble]


# --8<-- [start:timeline]
import json
import os
import tempfile
import time

from torch.profiler import ProfilerActivity, profile


def compute_spans(trace, device):
    """(start, end) in ns since the epoch of this rank's compute in a profiler
    trace: its GPU kernels less NCCL's (they spin while they wait for the
    other GPU), or, on a CPU, its matrix products."""
    base = trace.get("baseTimeNanoseconds", 0)
    spans = []
    for e in trace["traceEvents"]:
        if e.get("ph") != "X":
            continue
        if device.type == "cuda":
            keep = e.get("cat") == "kernel" and "nccl" not in e["name"].lower()
        else:
            keep = e.get("cat") == "cpu_op" and e["name"] in ("aten::addmm", "aten::mm")
        if keep:
            start = base + round(e["ts"] * 1000)
            spans.append((start, start + round(e["dur"] * 1000)))
    return spans


def profiled_steps(step, rounds, device, group=None):
    """Run step() `rounds` times under the profiler, the ranks lined up before
    each; returns this rank's compute spans in each round."""
    activity = ProfilerActivity.CUDA if device.type == "cuda" else ProfilerActivity.CPU
    starts = []
    with profile(activities=[activity]) as prof:
        for _ in range(rounds):
            dist.barrier(group)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            starts.append(time.time_ns())  # the trace's clock: ns since the epoch
            step()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            spans = compute_spans(json.load(f), device)
    starts.append(float("inf"))
    steps = [[s for s in spans if starts[i] <= s[0] < starts[i + 1]]
             for i in range(rounds)]
    if not all(steps):
        raise RuntimeError("a profiled step has no compute spans: does this trace's "
                           "clock read ns since the epoch, as time.time_ns() does?")
    return steps


def busy_ns(spans):
    """How long at least one of these spans ran (overlaps counted once)."""
    busy, reached = 0, None
    for start, end in sorted(spans):
        if reached is None or start > reached:
            busy += end - start
            reached = end
        elif end > reached:
            busy += end - reached
            reached = end
    return busy


def idle_parts(every_ranks_spans):
    """One step's idle time on each rank, from every rank's compute spans.

    The step runs from the first compute on any rank to the last one's end.
    fill_drain: before this rank's first kernel and after its last; waits: the
    gaps between them; busy: its compute. All in ns, per rank.
    """
    start = min(s for spans in every_ranks_spans for s, _ in spans)
    end = max(e for spans in every_ranks_spans for _, e in spans)
    parts = []
    for spans in every_ranks_spans:
        first, last = min(s for s, _ in spans), max(e for _, e in spans)
        busy = busy_ns(spans)
        parts.append({"span": end - start, "busy": busy,
                      "fill_drain": (first - start) + (end - last),
                      "waits": (last - first) - busy})
    return parts
# --8<-- [end:timeline]


# The page shows `start_mesh` from the tensor-parallelism page just before `main`.
from snippets.several_gpus.tensor_parallelism import start_mesh  # noqa: E402

if __name__ == "__main__":
    # --8<-- [start:main]
    import gc

    mesh, device = start_mesh(names=("pp",))
    try:
        rank, ranks = mesh.get_local_rank(), mesh.size()
        microbatches = max(4, 2 * ranks)  # DualPipeV: one at least per stage
        for cls in (ScheduleGPipe, Schedule1F1B, ScheduleInterleaved1F1B,
                    ScheduleLoopedBFS, ScheduleInterleavedZeroBubble,
                    ScheduleZBVZeroBubble, ScheduleDualPipeV):
            per_rank = 1 if cls in (ScheduleGPipe, Schedule1F1B) else 2
            seen = compare_with_unsplit(cls, mesh, device, microbatches, per_rank)
            print(f"rank {rank}, {cls.__name__}: {seen}")
        stages, run = build_pipeline(make_model(), mesh, device, microbatches)
        x, y = torch.randn(64, 256, device=device), torch.randn(64, 256, device=device)
        rounds = profiled_steps(lambda: pipeline_step(stages, run, x, y), 5, device)
        mine = []
        for spans in rounds:
            everyone = [None] * ranks
            dist.all_gather_object(everyone, spans)
            mine.append(idle_parts(everyone)[rank])
        idle = [1 - p["busy"] / p["span"] for p in mine]
        print(f"rank {rank} of {ranks}, {device.type}, {dist.get_backend()}: idle "
              f"{min(idle):.0%} to {max(idle):.0%} of a GPipe step over "
              f"{len(idle)} steps; the formula says "
              f"{bubble_fraction(ranks, microbatches):.0%}")
        if rank == 0:
            print(f"schedules: {', '.join(schedules())}")
    finally:
        gc.collect()  # free reference cycles now, while Python is whole
        dist.destroy_process_group()
    # --8<-- [end:main]
