"""Sharded data parallel with FSDP2 (`fully_shard`): the DDP page's training script, with every
rank keeping only its slice of the parameters, gradients and optimizer state.

Run it (from the repository root):
    torchrun --standalone --nproc-per-node 2 -m snippets.several_gpus.fsdp2 --epochs 3
    python -m snippets.several_gpus.fsdp2                 # one process, a group of one
NCCL on GPUs, gloo on CPU processes.
"""

GPUS_NEEDED = 0  # one GPU per process where there are enough; gloo on CPU processes otherwise

# The page shows these, from the DDP page's script, before the sections below.
from snippets.several_gpus.ddp_with_torchrun import make_dataset, make_loader, make_model, start, train_epoch

# isort: split
# --8<-- [start:shard]
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


def shard(model, device):
    """Every Linear layer becomes a unit of its own, then the whole model."""
    # The mesh names the device type: left to itself, fully_shard picks the GPU whenever
    # the machine has one, also for gloo processes that train on the CPU.
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)  # 1/world_size of its parameters per rank
    fully_shard(model, mesh=mesh)  # the root: the rest, and the forward/backward hooks
    return model
# --8<-- [end:shard]


# --8<-- [start:build]
def build_sharded(make_model, device, seed=0):
    """make_model()'s model, sharded, without the whole of it ever on one device."""
    with torch.device("meta"):
        model = make_model()  # shapes only: no memory, no values yet
    shard(model, device)
    model.to_empty(device=device)  # memory for this rank's shards, uninitialised
    # On a GPU mesh, DTensor's random generator gives every shard its own stretch of one
    # stream for the whole tensor: one seed for all ranks. A CPU mesh has no such
    # generator, and ranks with one seed would draw identical shards: one seed per rank.
    torch.manual_seed(seed + (dist.get_rank() if device.type == "cpu" else 0))
    for module in model.modules():
        if hasattr(module, "reset_parameters"):  # nn.Linear: its usual initialisation
            module.reset_parameters()
    return model
# --8<-- [end:build]


# --8<-- [start:memory]
from torch.distributed.tensor import DTensor


def local_bytes(tensors):
    """Bytes this rank holds of these tensors: only its own shard of a sharded one."""
    total = 0
    for t in tensors:
        local = t.to_local() if isinstance(t, DTensor) else t
        total += local.numel() * local.element_size()
    return total


def held_by_this_rank(model, optimizer):
    """What one rank keeps between steps: parameters, gradients, optimizer state."""
    params = list(model.parameters())
    state = [v for s in optimizer.state.values() for v in s.values()
             if torch.is_tensor(v) and v.dim() > 0]  # Adam: exp_avg, exp_avg_sq
    return {"parameters": local_bytes(params),
            "gradients": local_bytes(p.grad for p in params if p.grad is not None),
            "optimizer state": local_bytes(state)}
# --8<-- [end:memory]


# --8<-- [start:checkpoint]
import glob
import os

import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_state_dict,
)


def save_sharded(folder, model, optimizer, epoch):
    """Every rank writes its own shards, at the same time, into folder/epoch-N."""
    model_state, optimizer_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optimizer": optimizer_state, "epoch": epoch},
             checkpoint_id=os.path.join(folder, f"epoch-{epoch}"))


def latest_checkpoint(folder):
    """The newest complete checkpoint in `folder` (.metadata is written last)."""
    done = [d for d in glob.glob(os.path.join(folder, "epoch-*"))
            if os.path.exists(os.path.join(d, ".metadata"))]
    return max(done, key=lambda d: int(d.rsplit("-", 1)[1]), default=None)


def load_sharded(path, model, optimizer):
    """Every rank reads the pieces of its own shards; returns the next epoch."""
    model_state, optimizer_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optimizer": optimizer_state, "epoch": 0}
    dcp.load(state, checkpoint_id=path)  # fills `state` in place
    set_state_dict(model, optimizer, model_state_dict=state["model"],
                   optim_state_dict=state["optimizer"])
    return state["epoch"] + 1


def export_full(path, model):
    """One ordinary file for inference: gathered on rank 0, in CPU memory."""
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    state = get_model_state_dict(model, options=options)  # every rank must call it
    if dist.get_rank() == 0:
        torch.save(state, path)
    dist.barrier()
# --8<-- [end:checkpoint]


# --8<-- [start:async_checkpoint]
def save_sharded_async(folder, model, optimizer, epoch, group, pending=None):
    """save_sharded, returning as soon as the state is copied to CPU memory; a
    thread writes the files while training goes on.

    `group` is a process group on the CPU (gloo), for async_save's own messages.
    One save at a time: the previous one (`pending`) is waited for first. Returns
    a Future: .result() waits until the files are written.
    """
    if pending is not None:
        pending.result()
    model_state, optimizer_state = get_state_dict(model, optimizer)
    return dcp.async_save(
        {"model": model_state, "optimizer": optimizer_state, "epoch": epoch},
        checkpoint_id=os.path.join(folder, f"epoch-{epoch}"), process_group=group)
# --8<-- [end:async_checkpoint]


# --8<-- [start:main]
import argparse
import gc


def train_sharded(args, device):
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build_sharded(make_model, device)  # no rank ever holds all of it
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # after sharding
    loader = make_loader(make_dataset(), args.batch_size)
    first = 0
    latest = args.checkpoint and latest_checkpoint(args.checkpoint)
    if latest:
        first = load_sharded(latest, model, optimizer)
        if rank == 0:
            print(f"resumed from {latest} at epoch {first}")
    for epoch in range(first, args.epochs):
        loader.sampler.set_epoch(epoch)
        loss = train_epoch(model, loader, optimizer, device)
        if args.checkpoint:
            save_sharded(args.checkpoint, model, optimizer, epoch)
        if rank == 0:
            print(f"epoch {epoch}: loss {loss:.4f} "
                  f"({world} process(es), {device.type})")
    held = held_by_this_rank(model, optimizer)  # between steps: no gradients
    if rank == 0:
        kib = {k: v // 2**10 for k, v in held.items()}
        print(f"rank 0 holds {kib['parameters']} KiB of parameters and "
              f"{kib['optimizer state']} KiB of optimizer state")


def main(argv=None):
    parser = argparse.ArgumentParser(description="FSDP2 training, started by torchrun")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--checkpoint", help="folder for sharded checkpoints; resumes")
    args, _ = parser.parse_known_args(argv)  # known ones only: a notebook adds its own

    device = start()
    try:
        train_sharded(args, device)
    finally:
        gc.collect()  # free the sharded model's reference cycles while Python is whole
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
# --8<-- [end:main]
