"""Pipeline parallelism with torch.distributed.pipelining: one stage of a model per process.

Run it (from the repository root):
    torchrun --standalone --nproc-per-node 4 -m snippets.several_gpus.pipeline_parallelism
    python -m snippets.several_gpus.pipeline_parallelism   # one process: a single stage
NCCL where every process has a GPU, gloo on CPU processes otherwise. Every rank checks that its
stage's gradients, under GPipe and under 1F1B, equal those of the same layers in the unsplit model.
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
    return stage, schedule(stage, n_microbatches=microbatches, loss_fn=loss_fn)


def pipeline_step(stage, schedule, x, y):
    """Forward and backward of one batch: the first stage feeds x, the last
    compares with y. Returns the micro-batches' losses on the last stage."""
    losses = []
    inputs = (x,) if stage.is_first else ()
    targets = {"target": y, "losses": losses} if stage.is_last else {}
    schedule.step(*inputs, **targets)
    return losses
# --8<-- [end:stage]


# --8<-- [start:check]
def compare_with_unsplit(schedule, pp_mesh, device, microbatches=4):
    """This stage's gradients against those of the same layers in the whole model.

    The schedule averages the micro-batches' gradients (it scales each by
    1/microbatches), so they equal the gradients of the whole batch's mean loss.
    """
    torch.manual_seed(1)
    x, y = torch.randn(16, 256, device=device), torch.randn(16, 256, device=device)
    whole = make_model().to(device)
    loss_fn(whole(x), y).backward()
    stage, run = build_pipeline(make_model(), pp_mesh, device, microbatches, schedule)
    losses = pipeline_step(stage, run, x, y)
    mine = split_model(whole, pp_mesh.get_local_rank(), pp_mesh.size())
    # equal up to rounding: micro-batches add up the same sums in another order
    pairs = zip(stage.submod.parameters(), mine.parameters(), strict=True)
    same = all((p.grad - q.grad).norm() <= 1e-4 * q.grad.norm() for p, q in pairs)
    return {"grads_equal": bool(same), "losses": len(losses)}
# --8<-- [end:check]


# --8<-- [start:bubble]
import torch.distributed.pipelining as pipelining


def bubble_fraction(stages, microbatches):
    """Share of a GPipe or 1F1B step each stage sits idle, if every forward and
    backward of a micro-batch takes the same time and sending takes none."""
    return (stages - 1) / (microbatches + stages - 1)


def schedules():
    """The schedule classes this PyTorch offers."""
    return sorted(name for name in dir(pipelining) if name.startswith("Schedule"))
# --8<-- [end:bubble]


# The page shows `start_mesh` from the tensor-parallelism page just before `main`.
from snippets.several_gpus.tensor_parallelism import start_mesh  # noqa: E402

if __name__ == "__main__":
    # --8<-- [start:main]
    import gc

    mesh, device = start_mesh(names=("pp",))
    try:
        rank, stages = mesh.get_local_rank(), mesh.size()
        microbatches = max(4, stages)  # 1F1B needs one per stage at least
        results = {name: compare_with_unsplit(cls, mesh, device, microbatches)
                   for name, cls in (("GPipe", ScheduleGPipe), ("1F1B", Schedule1F1B))}
        print(f"stage {rank} of {stages}: {results}")
        if rank == 0:
            print(f"{stages} stage(s), {device.type}, {dist.get_backend()}")
            for m in (4, 16):
                print(f"  {m:2} micro-batches: idle {bubble_fraction(stages, m):.0%}")
            print(f"schedules: {', '.join(schedules())}")
    finally:
        gc.collect()  # free reference cycles now, while Python is whole
        dist.destroy_process_group()
    # --8<-- [end:main]
