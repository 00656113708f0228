"""Parallelisms composed: one stack of transformer blocks laid out as FSDP2, tensor parallelism
(with and without sequence parallelism), FSDP2 + TP on a 2-D mesh, or HSDP, each checked against
one device training the whole stack on the whole batch.

Run it (from the repository root):
    torchrun --standalone --nproc-per-node 4 -m snippets.several_gpus.composing
    python -m snippets.several_gpus.composing   # one process: the 1-D layouts only
NCCL where every process has a GPU, gloo on CPU processes otherwise.
"""

GPUS_NEEDED = 0  # one GPU per process where there are enough; gloo on CPU processes otherwise

# The page shows these before the sections below: the block, the TP plans, `fsdp_and_tp`
# and `start_mesh` from the tensor-parallelism page.
from snippets.several_gpus.tensor_parallelism import (
    Block,
    fsdp_and_tp,
    sequence_parallel,
    start_mesh,
    tensor_parallel,
)

# isort: split
# --8<-- [start:compose]
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.parallel import (
    PrepareModuleInput,
    PrepareModuleOutput,
    parallelize_module,
)

COMPOSED = ("fsdp2", "tp", "sp", "fsdp2+tp", "hsdp")


def make_stack(depth=2, dim=256, heads=8, hidden=1024, seed=0):
    """`depth` transformer blocks, the same on every process for one seed."""
    torch.manual_seed(seed)
    return nn.Sequential(*(Block(dim, heads, hidden) for _ in range(depth)))


def compose(blocks, layout, device, node=2):
    """Lay a stack of transformer blocks (an nn.Sequential) out over every process.

    Returns the model and (which part of the global batch this process trains
    on, how many parts): data parallelism gives each of its groups its own part,
    tensor parallelism gives the processes of one group the same batch. `node`
    GPUs stand for one machine: 2-D layouts keep their inner dimension there.
    """
    if layout not in COMPOSED:
        raise ValueError(f"unknown layout {layout!r}: use one of {COMPOSED}")
    n, kind = dist.get_world_size(), device.type
    blocks = blocks.to(device)
    if layout == "fsdp2":  # every block sharded n ways
        mesh = init_device_mesh(kind, (n,), mesh_dim_names=("dp",))
        for block in blocks:
            fully_shard(block, mesh=mesh)
        return fully_shard(blocks, mesh=mesh), (mesh.get_local_rank(), n)
    if layout == "hsdp":  # sharded inside a machine, replicated across machines
        mesh = init_device_mesh(kind, (n // node, node),
                                mesh_dim_names=("replicate", "shard"))
        for block in blocks:
            fully_shard(block, mesh=mesh)  # a 2-D mesh: (Replicate(), Shard(0))
        return fully_shard(blocks, mesh=mesh), (dist.get_rank(), n)
    if layout == "fsdp2+tp":  # TP inside a machine, FSDP2 across machines
        mesh = init_device_mesh(kind, (n // node, node), mesh_dim_names=("dp", "tp"))
        return fsdp_and_tp(blocks, mesh), (mesh["dp"].get_local_rank(), n // node)
    mesh = init_device_mesh(kind, (n,), mesh_dim_names=("tp",))  # "tp" or "sp":
    split = tensor_parallel if layout == "tp" else sequence_parallel
    for block in blocks:  # every block split n ways; one batch for all
        split(block, mesh)
    if layout == "sp":  # the stack takes and gives the whole sequence
        parallelize_module(blocks, mesh, {
            "0": PrepareModuleInput(input_layouts=(Replicate(),),
                                    desired_input_layouts=(Shard(1),),
                                    use_local_output=True),
            str(len(blocks) - 1): PrepareModuleOutput(
                output_layouts=(Shard(1),), desired_output_layouts=(Replicate(),))})
    return blocks, (0, 1)


def param_groups(model):
    """The parameters as two optimizer groups, DTensors and plain tensors: TP leaves
    the norms plain, and on a GPU the optimizers' default (foreach) kernels refuse
    a list that mixes the two. Use: torch.optim.Adam(param_groups(model))."""
    params = list(model.parameters())
    split = [p for p in params if isinstance(p, DTensor)]
    plain = [p for p in params if not isinstance(p, DTensor)]
    return [{"params": group} for group in (split, plain) if group]
# --8<-- [end:compose]


# --8<-- [start:compose_check]
import copy


def trains_like_one_device(layout, device, steps=2, batch=4, seq=16):
    """SGD steps of a composed stack against the whole stack on one device.

    Every process builds the same stack and the same global batch; the composed
    copy trains on this process's part of the batch, in float32 (no autocast), so
    that only the order of the sums differs. SGD's step is proportional to the
    gradient, so a gradient off by a factor shows (Adam's step would not).
    Returns the largest difference between a parameter's change and one device's,
    relative to that change (0 up to float rounding).
    """
    whole = make_stack().to(device)
    start = {k: v.detach().clone() for k, v in whole.state_dict().items()}
    composed, (part, parts) = compose(copy.deepcopy(whole), layout, device)
    x = torch.randn(batch, seq, 256, device=device)  # the same seed: the same batch
    y = torch.randn(batch, seq, 256, device=device)
    mine = x.chunk(parts)[part], y.chunk(parts)[part]
    for model, data in ((whole, (x, y)), (composed, mine)):
        optimizer = torch.optim.SGD(param_groups(model), lr=0.1)
        for _ in range(steps):
            optimizer.zero_grad()
            nn.functional.mse_loss(model(data[0]), data[1]).backward()
            optimizer.step()
    worst = 0.0
    for name, p in composed.named_parameters():
        full = p.full_tensor() if isinstance(p, DTensor) else p.detach()
        expected = dict(whole.named_parameters())[name].detach() - start[name]
        worst = max(worst, ((full - start[name] - expected).norm()
                            / expected.norm()).item())
    return worst
# --8<-- [end:compose_check]


if __name__ == "__main__":
    # --8<-- [start:main]
    import gc

    mesh, device = start_mesh()
    try:
        n = dist.get_world_size()
        fits = [c for c in COMPOSED if n % 2 == 0 or c in ("fsdp2", "tp", "sp")]
        worst = {layout: trains_like_one_device(layout, device) for layout in fits}
        if dist.get_rank() == 0:
            for layout, error in worst.items():
                print(f"{layout:8} on {n} process(es), {device.type}: parameters "
                      f"change as on one device, to {error:.0e} of their change")
    finally:
        gc.collect()  # free reference cycles now, while Python is whole
        dist.destroy_process_group()
    # --8<-- [end:main]
