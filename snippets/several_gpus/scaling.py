"""The scaling experiment: one training step under DDP and FSDP2 on 1, 2 or 4 GPUs, what each GPU
holds, and the yardsticks that say how well it scales (efficiency, model FLOPs utilisation).

Run it (from the repository root):
    torchrun --standalone --nproc-per-node 4 -m snippets.several_gpus.scaling
    python -m snippets.several_gpus.scaling   # one process
NCCL where every process has a GPU, gloo on CPU processes otherwise (there with a small model).
"""

GPUS_NEEDED = 0  # one GPU per process where there are enough; gloo on CPU processes otherwise

# --8<-- [start:workload]
import torch
from torch import nn


def make_mlp(width=4096, depth=8, seed=0):
    """`depth` Linear + ReLU layers of width x width and a linear head."""
    torch.manual_seed(seed)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 1))


def matmul_flops(model, samples):
    """FLOPs of one training step's matrix products on `samples` samples.

    Each weight element costs a multiply and an add per sample in the forward
    pass (2 FLOPs), and twice that in the backward pass (the inputs' gradient
    and the weight's): 6 per weight element per sample.
    """
    weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    return 6 * weights * samples


def train_step(model, optimizer, x, y):
    """Forward in bf16 autocast (on a GPU), backward, Adam."""
    optimizer.zero_grad(set_to_none=True)
    on_gpu = x.device.type == "cuda"
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=on_gpu):
        loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()
# --8<-- [end:workload]


# --8<-- [start:layouts]
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

LAYOUTS = ("ddp", "fsdp2")


def lay_out(model, layout, device):
    """The same model, replicated (DDP) or sharded (FSDP2) over the process group.

    DDP keeps a whole copy per GPU and all-reduces gradients; FSDP2 keeps 1/n of
    every layer, all-gathers a layer before using it and reduce-scatters its
    gradients, so each GPU ends with the gradients and Adam state of its shard.
    FSDP2 here gathers fp32 parameters (autocast casts them after the gather);
    `mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16)` would halve that.
    """
    model = model.to(device)
    if layout == "ddp":
        # gradient_as_bucket_view: the gradients live in DDP's all-reduce buckets;
        # without it DDP keeps a second copy of every gradient there
        return DDP(model, device_ids=[device.index] if device.type == "cuda" else None,
                   gradient_as_bucket_view=True)
    if layout == "fsdp2":
        # the mesh names the device type: left to itself, fully_shard takes the GPU
        # whenever the machine has one, also for gloo processes on the CPU
        mesh = init_device_mesh(device.type, (dist.get_world_size(),))
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)  # one all-gather per layer, freed after use
        return fully_shard(model, mesh=mesh)
    raise ValueError(f"unknown layout {layout!r}: use one of {LAYOUTS}")
# --8<-- [end:layouts]


# --8<-- [start:state]
from torch.distributed.tensor import DTensor


def local_bytes(tensor):
    """Bytes this process holds of a tensor: its own shard if it is a DTensor."""
    if isinstance(tensor, DTensor):
        tensor = tensor.to_local()
    return tensor.numel() * tensor.element_size()


def training_state_bytes(model, optimizer):
    """Bytes of parameters, gradients and optimizer state this process holds."""
    params = list(model.parameters())
    moments = [t for state in optimizer.state.values() for t in state.values()
               if torch.is_tensor(t) and t.dim() > 0]  # exp_avg, exp_avg_sq, not step
    return {"parameters": sum(local_bytes(p) for p in params),
            "gradients": sum(local_bytes(p.grad) for p in params if p.grad is not None),
            "optimizer": sum(local_bytes(t) for t in moments)}
# --8<-- [end:state]


# --8<-- [start:yardsticks]
def weak_scaling_efficiency(step_1gpu, step_ngpus):
    """Same work per GPU on n GPUs: 1.0 when a step takes no longer than on one."""
    return step_1gpu / step_ngpus


def strong_scaling_efficiency(step_1gpu, step_ngpus, n):
    """Same global batch split n ways: 1.0 when a step takes 1/n the time."""
    return step_1gpu / (n * step_ngpus)


# Dense bf16 Tensor Core peak of each GPU's datasheet (FLOP/s, without sparsity)
DATASHEET_BF16_FLOPS = {"NVIDIA H100 80GB HBM3": 989e12, "NVIDIA H200": 989e12}


def model_flops_utilisation(flops_per_gpu, step_seconds, peak_flops_per_s):
    """Model FLOPs utilisation (MFU): the step's useful matmul FLOP/s over the
    GPU's peak. PaLM and torchtitan divide by the datasheet's peak; divided by
    the fastest product measured on the same GPU instead, it says how close the
    step came to what that GPU can do in practice."""
    return flops_per_gpu / step_seconds / peak_flops_per_s
# --8<-- [end:yardsticks]


# --8<-- [start:budget]
# Mixed-precision training with Adam keeps, per parameter:
BYTES_PER_PARAMETER = {
    "fp32 parameter (autocast computes in bf16 from it)": 4,
    "fp32 gradient": 4,
    "Adam first moment (fp32)": 4,
    "Adam second moment (fp32)": 4,
}  # 16 bytes; the bf16-weights form (2 + 2 + 4 master + 4 + 4) is 16 too
# Activations come on top and grow with the batch per GPU: data parallelism at a
# fixed global batch gives each GPU 1/n of the samples; TP (without sequence
# parallelism) still replicates the activations between its split layers.


def state_gib_per_gpu(parameters, layout, gpus):
    """GiB of training state each GPU holds: whole under DDP, 1/n under FSDP2
    (FSDP2 also gathers one layer at a time, whole, while it computes)."""
    total = parameters * sum(BYTES_PER_PARAMETER.values()) / 2**30
    shards = {"ddp": 1, "fsdp2": gpus}[layout]
    return total / shards
# --8<-- [end:budget]


# The page shows `start_mesh`, `Block`, the TP plans and `fsdp_and_tp` from the
# tensor-parallelism page before the sections that use them.
from snippets.several_gpus.tensor_parallelism import (  # noqa: E402
    Block,
    fsdp_and_tp,
    sequence_parallel,
    start_mesh,
    tensor_parallel,
)

# isort: split
# --8<-- [start:compose]
from torch.distributed.tensor import Replicate, Shard
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
    copy trains on this process's part of the batch. SGD's step is proportional
    to the gradient, so a gradient off by a factor shows (Adam's step would not).
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
            train_step(model, optimizer, *data)
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

    mesh, device = start_mesh(names=("dp",))
    try:
        n, on_gpu = dist.get_world_size(), device.type == "cuda"
        width, batch = (4096, 4096) if on_gpu else (256, 64)  # small on CPUs
        x = torch.randn(batch, width, device=device)
        y = torch.randn(batch, 1, device=device)
        for layout in LAYOUTS:
            model = lay_out(make_mlp(width), layout, device)
            optimizer = torch.optim.Adam(model.parameters())
            for _ in range(3):
                loss = train_step(model, optimizer, x, y)
            held = training_state_bytes(model, optimizer)
            parameters = sum(p.numel() for p in make_mlp(width).parameters())
            if dist.get_rank() == 0:
                total = sum(held.values())
                print(f"{layout:5} on {n} process(es): loss {loss.item():.3f}, "
                      f"this rank holds {total / 2**20:,.1f} MiB = "
                      f"{total / parameters:.1f} bytes per parameter of the model")
            del model, optimizer
    finally:
        gc.collect()  # free reference cycles now, while Python is whole
        dist.destroy_process_group()
    # --8<-- [end:main]

