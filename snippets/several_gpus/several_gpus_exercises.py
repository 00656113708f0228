"""Exercises on several GPUs: shard a dataset between processes, and average gradients by hand.

Run it anywhere: python -m snippets.several_gpus.several_gpus_exercises
(two CPU processes with gloo; with NCCL on two GPUs the sharding and the sums are the same)
"""

GPUS_NEEDED = 0  # two gloo processes on the CPU, on any machine

# --8<-- [start:setup]
import queue
import sys
import tempfile
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

WORLD_SIZE = 2
DATASET = TensorDataset(torch.arange(64))  # sample i is the number i


def start_method():
    """spawn where it works (the children import __main__, which must be a file);
    fork in a notebook. The children use gloo on the CPU, never CUDA."""
    return "spawn" if hasattr(sys.modules["__main__"], "__file__") else "fork"


def _process(rank, world_size, store, work, results):
    dist.init_process_group("gloo", init_method=store,
                            rank=rank, world_size=world_size)
    # Wait until every process has joined: one whose work sends nothing could
    # otherwise finish and leave while another is still connecting to it.
    dist.barrier()
    try:
        results.put((rank, work(rank, world_size)))
    finally:
        dist.destroy_process_group()


def launch(work, world_size=WORLD_SIZE):
    """work(rank, world_size) in world_size processes of one gloo group; returns
    what each rank returned, in rank order (plain Python values: a tensor's
    storage would be shared with a process that has exited)."""
    method = start_method()
    results = mp.get_context(method).Queue()
    # The processes meet in a file, not on a port: a free port, picked here,
    # can be taken by another program before the first process listens on it.
    with tempfile.TemporaryDirectory() as folder:
        store = (Path(folder) / "store").as_uri()
        with warnings.catch_warnings():  # Python 3.12+ warns about fork() with
            warnings.filterwarnings(  # threads; the children only run `work`
                "ignore", "This process .* is multi-threaded", DeprecationWarning)
            processes = mp.start_processes(
                _process, nprocs=world_size, start_method=method, join=False,
                args=(world_size, store, work, results))
        # Read before joining: a child that puts a large result (over the pipe's
        # buffer, about 64 KiB) waits until it is read, and would never exit.
        found = {}
        while len(found) < world_size:
            try:
                rank, result = results.get(timeout=1)
                found[rank] = result
            except queue.Empty:  # nothing yet: has a child died before its put?
                processes.join(timeout=0)  # then this raises its error
        while not processes.join():  # re-raises a child's exception
            pass
    return [found[rank] for rank in range(world_size)]
# --8<-- [end:setup]


# --8<-- [start:shard_task]
# Exercise 1: each process trains on this loader. Which samples does each one
# see in an epoch? Make them share the dataset, with a new order every epoch.
def samples_seen(rank, world_size, epochs=2):
    loader = DataLoader(DATASET, batch_size=8, shuffle=True)
    return [[int(i) for (batch,) in loader for i in batch] for _ in range(epochs)]


if __name__ == "__main__":  # spawn: each process imports this file
    first, second = (epochs[0] for epochs in launch(samples_seen))
    print(f"epoch 0: {len(set(first) & set(second))} samples seen by both processes")
# --8<-- [end:shard_task]


# --8<-- [start:shard_solution]
def samples_seen_sharded(rank, world_size, epochs=2):
    sampler = DistributedSampler(DATASET, shuffle=True, seed=0)  # rank, world: from
    loader = DataLoader(DATASET, batch_size=8, sampler=sampler)  # the process group
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # a new order each epoch, the same on every rank
        seen.append([int(i) for (batch,) in loader for i in batch])
    return seen


if __name__ == "__main__":
    first, second = launch(samples_seen_sharded)
    for epoch in range(2):
        both = set(first[epoch]) & set(second[epoch])
        every = set(first[epoch]) | set(second[epoch])
        print(f"epoch {epoch}: {len(both)} seen twice, {len(every)} of "
              f"{len(DATASET)} seen, rank 0 starts with {first[epoch][:4]}")
# --8<-- [end:shard_solution]


# --8<-- [start:average_task]
# Exercise 2: a data-parallel step without DDP. After `sync_gradients`, every
# rank must hold the gradients one process would compute from both ranks'
# batches together. What is wrong, and how large is the error?
def make_model():
    torch.manual_seed(0)  # the same initial weights in every process
    return nn.Linear(16, 4)


def batch_of(rank, rows=8):
    generator = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    return (torch.randn(rows, 16, generator=generator),
            torch.randn(rows, 4, generator=generator))


def sync_gradients(model):
    for p in model.parameters():
        dist.all_reduce(p.grad)


def flat_gradients(model):
    return torch.cat([p.grad.flatten() for p in model.parameters()]).tolist()


def gradients_after_sync(rank, world_size, sync=sync_gradients):
    model = make_model()
    inputs, targets = batch_of(rank)
    F.mse_loss(model(inputs), targets).backward()
    sync(model)
    return flat_gradients(model)


def gradients_of_one_process(world_size=WORLD_SIZE):
    """The reference: one process, both ranks' batches as one batch."""
    model = make_model()
    batches = [batch_of(rank) for rank in range(world_size)]
    inputs = torch.cat([x for x, _ in batches])
    targets = torch.cat([y for _, y in batches])
    F.mse_loss(model(inputs), targets).backward()
    return flat_gradients(model)


def reference_gradients(rank, world_size):
    """gradients_of_one_process() in a process of its own (launch it with
    world_size=1): on a machine with a GPU, a backward pass here would start
    autograd's GPU threads, and a child forked after that cannot run one."""
    return gradients_of_one_process()
# --8<-- [end:average_task]


# --8<-- [start:average_solution]
def sync_gradients_averaged(model):
    world_size = dist.get_world_size()
    for p in model.parameters():
        dist.all_reduce(p.grad)  # the sum over the ranks
        p.grad /= world_size  # the mean: each rank's loss is a mean over its rows


def gradients_averaged(rank, world_size):
    return gradients_after_sync(rank, world_size, sync=sync_gradients_averaged)


if __name__ == "__main__":
    reference = torch.tensor(launch(reference_gradients, world_size=1)[0])
    for name, work in (("summed", gradients_after_sync),
                       ("averaged", gradients_averaged)):
        grads = torch.tensor(launch(work)[0])
        ratio = (grads.norm() / reference.norm()).item()
        print(f"{name}: rank 0's gradients are {ratio:.2f}x the one-process gradients")
# --8<-- [end:average_solution]
