"""train.py: a complete DistributedDataParallel training script, one process per GPU.

Run it:
    python train.py                                  # one process, a group of one
    torchrun --standalone --nproc-per-node gpu train.py --epochs 3 --checkpoint ckpt.pt

Each process uses one GPU and NCCL where the machine has a GPU for every process, and
the CPU with gloo otherwise: the same file trains on two GPUs and on two CPU processes.
(In this repository: python -m snippets.several_gpus.ddp_with_torchrun.)
"""

GPUS_NEEDED = 0  # a GPU per process where there are enough; else gloo on the CPU

# --8<-- [start:setup]
import os

import torch
import torch.distributed as dist


def start():
    """Join the process group that torchrun described; return this process's device.

    torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
    MASTER_PORT, among others, for every process it starts. Without torchrun (python
    train.py, a notebook) the script runs as a group of one.
    """
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    per_machine = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    on_gpus = torch.cuda.device_count() >= per_machine  # a GPU for every local process
    if on_gpus:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)  # first, before any CUDA work: not all on GPU 0
        backend, device_id = "nccl", device
    else:
        device, backend, device_id = torch.device("cpu"), "gloo", None
    if "RANK" in os.environ:  # started by torchrun: it says where to meet the others
        dist.init_process_group(backend, device_id=device_id)
    else:  # alone: a group of one, in memory
        dist.init_process_group(backend, store=dist.HashStore(), rank=0,
                                world_size=1, device_id=device_id)
    return device
# --8<-- [end:setup]


# --8<-- [start:data]
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_dataset(n=4096, features=32, seed=0):
    """Synthetic regression data; every rank builds the same set from the same seed."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    y = x @ torch.randn(features, 1, generator=g) + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


def make_loader(dataset, batch_size, seed=0):
    """Each rank reads its own 1/world_size of the data; batch_size is per process."""
    # Every rank gets as many samples as the others either way: drop_last=True leaves
    # out the tail that does not divide evenly, the default repeats samples to fill it
    sampler = DistributedSampler(dataset, shuffle=True, seed=seed, drop_last=True)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True,
                      pin_memory=torch.cuda.is_available())
# --8<-- [end:data]


# --8<-- [start:model]
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model(features=32, width=256, depth=4):
    """A plain MLP; any nn.Module works the same way."""
    layers = []
    for i in range(depth):
        layers += [nn.Linear(features if i == 0 else width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 1))


def wrap(model, device):
    """DDP copies rank 0's parameters to every rank, then averages gradients."""
    model = model.to(device)
    return DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
# --8<-- [end:model]


# --8<-- [start:train]
import contextlib


def forward_backward(model, x, y, scale=1.0):
    """Loss of one batch; its gradient, times `scale`, is added to .grad."""
    on_gpu = x.device.type == "cuda"
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=on_gpu):
        loss = nn.functional.mse_loss(model(x), y)
    (loss * scale).backward()  # DDP averages the gradients across ranks in here
    return loss.detach()


def train_epoch(model, loader, optimizer, device, accumulate=1):
    """One pass over this rank's shard: a step every `accumulate` batches."""
    model.train()
    optimizer.zero_grad(set_to_none=True)
    total = torch.zeros((), device=device)
    for i, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        step_now = (i + 1) % accumulate == 0
        # no_sync: gradients stay local for all but the last batch of a step,
        # so ranks talk once per step instead of once per batch
        with contextlib.nullcontext() if step_now else model.no_sync():
            total += forward_backward(model, x, y, scale=1 / accumulate)
        if step_now:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    dist.all_reduce(total)  # sum over ranks: the mean loss of the epoch, for the log
    return total.item() / (len(loader) * dist.get_world_size())
# --8<-- [end:train]


# --8<-- [start:uneven]
def train_epoch_uneven(model, loader, optimizer, device):
    """One pass when ranks may hold different numbers of batches (your own split of
    the data, an IterableDataset): a rank that runs out early keeps answering the
    others' all-reduces (with zeros) until every rank is done. Returns batches run."""
    from torch.distributed.algorithms.join import Join

    model.train()
    batches = 0
    # average over the ranks still training, not over all the ranks that started
    with Join([model], divide_by_initial_world_size=False):
        for x, y in loader:
            optimizer.zero_grad(set_to_none=True)
            forward_backward(model, x.to(device), y.to(device))
            optimizer.step()
            batches += 1
    return batches
# --8<-- [end:uneven]


# --8<-- [start:checkpoint]
def save_checkpoint(path, model, optimizer, epoch):
    """Rank 0 writes the file; the other ranks wait until it is complete."""
    if dist.get_rank() == 0:
        state = {"model": model.module.state_dict(),  # .module: without DDP's wrapper
                 "optimizer": optimizer.state_dict(), "epoch": epoch}
        torch.save(state, f"{path}.tmp")
        os.replace(f"{path}.tmp", path)  # a crash never leaves half a checkpoint
    dist.barrier()


def load_checkpoint(path, model, optimizer, device):
    """Every rank reads the same file onto its own device; returns the next epoch."""
    state = torch.load(path, map_location=device, weights_only=True)
    model.module.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["epoch"] + 1


def stop_requested(path, device):
    """True on every rank once a file `<checkpoint>.stop` exists: a job script makes it
    when its time limit is near. Rank 0 looks, and tells the others."""
    asked = dist.get_rank() == 0 and bool(path) and os.path.exists(f"{path}.stop")
    flag = torch.tensor(float(asked), device=device)
    dist.broadcast(flag, src=0)  # every rank stops after the same epoch
    return bool(flag.item())
# --8<-- [end:checkpoint]


# --8<-- [start:main]
import argparse
import gc


def train(args, device):
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = wrap(make_model(), device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = make_loader(make_dataset(), args.batch_size)
    first = 0
    if args.checkpoint and os.path.exists(args.checkpoint):
        first = load_checkpoint(args.checkpoint, model, optimizer, device)
        if rank == 0:
            print(f"resumed from {args.checkpoint} at epoch {first}", flush=True)
    for epoch in range(first, args.epochs):
        loader.sampler.set_epoch(epoch)  # new order each epoch, same on all ranks
        loss = train_epoch(model, loader, optimizer, device, args.accumulate)
        if args.checkpoint:
            save_checkpoint(args.checkpoint, model, optimizer, epoch)
        if rank == 0:
            print(f"epoch {epoch}: loss {loss:.4f} ({world} process(es), "
                  f"{device.type}, {dist.get_backend()})", flush=True)
        if stop_requested(args.checkpoint, device):  # saved above: safe to stop here
            if rank == 0:
                print(f"stopping after epoch {epoch}, as asked", flush=True)
            break


def main(argv=None):
    parser = argparse.ArgumentParser(description="DDP training, started by torchrun")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--accumulate", type=int, default=1, help="batches per step")
    parser.add_argument("--checkpoint", help="save here every epoch; resume from it")
    args, _ = parser.parse_known_args(argv)  # known ones only: a notebook adds its own

    device = start()
    try:
        train(args, device)  # the model and optimizer live, and die, in there
    finally:
        gc.collect()  # free DDP's reference cycles now, not while Python shuts down
        dist.destroy_process_group()  # then leave the group: a clean exit


if __name__ == "__main__":
    main()
# --8<-- [end:main]
