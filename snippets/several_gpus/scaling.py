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
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

LAYOUTS = ("ddp", "fsdp2")


def lay_out(model, layout, device, mesh):
    """The same model, replicated (DDP) or sharded (FSDP2) over the 1-D `mesh`.

    DDP keeps a whole copy per GPU and all-reduces gradients; FSDP2 keeps 1/n of
    every layer, all-gathers a layer before using it and reduce-scatters its
    gradients, so each GPU ends with the gradients and Adam state of its shard.
    FSDP2 here gathers fp32 parameters (autocast casts them after the gather);
    `mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16)` would halve that.
    The mesh names the device type: left to itself, fully_shard takes the GPU
    whenever the machine has one, also for gloo processes on the CPU.
    """
    model = model.to(device)
    if layout == "ddp":
        # gradient_as_bucket_view: the gradients live in DDP's all-reduce buckets;
        # without it DDP keeps a second copy of every gradient there
        return DDP(model, device_ids=[device.index] if device.type == "cuda" else None,
                   gradient_as_bucket_view=True)
    if layout == "fsdp2":
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)  # one all-gather per layer, freed after
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


def model_flops_utilisation(flops_per_gpu, step_seconds, peak_flops_per_s):
    """Model FLOPs utilisation (MFU): the step's useful matmul FLOP/s over a peak.

    PaLM and torchtitan divide by the GPU's datasheet peak; divided by the fastest
    product measured on the same GPU instead, it says how close the step came to
    what that GPU does in practice. Name the one you divide by."""
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


# The page shows `start_mesh` from the tensor-parallelism page just before `main`.
from snippets.several_gpus.tensor_parallelism import start_mesh  # noqa: E402

if __name__ == "__main__":
    # --8<-- [start:main]
    import gc

    import torch.distributed as dist

    mesh, device = start_mesh(names=("dp",))
    try:
        n, on_gpu = dist.get_world_size(), device.type == "cuda"
        width, batch = (4096, 4096) if on_gpu else (256, 64)  # small on CPUs
        x = torch.randn(batch, width, device=device)
        y = torch.randn(batch, 1, device=device)
        for layout in LAYOUTS:
            model = lay_out(make_mlp(width), layout, device, mesh)
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
