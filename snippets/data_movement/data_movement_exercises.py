"""Exercises on moving data: copy while the host works, read a copy back safely, and keep a
small dataset on the GPU.

Run it anywhere: python -m snippets.data_movement.data_movement_exercises
(on a CPU there is nothing to copy or pin; the code and its results are the same)
"""

GPUS_NEEDED = 0  # picks CUDA at run time; pinned memory only where there is a GPU

# --8<-- [start:setup]
import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
PIN = device.type == "cuda"  # page-locked memory is a CUDA feature


def cpu_work():
    """Stand-in for host work such as preparing the next batch (a few ms of math)."""
    x = torch.ones(2**18, dtype=torch.float64)
    for _ in range(6):
        x = torch.sqrt(x * x + 1.0)
# --8<-- [end:setup]


# --8<-- [start:upload_task]
# Exercise 1: each step copies a batch to the GPU, does host work for the next
# step, then computes. Make the copy run while the host works.
torch.manual_seed(0)
batches = [torch.randn(1024, 1024) for _ in range(8)]  # made on the host
weight = torch.randn(1024, 64, device=device)


def steps_waiting(batches, weight):
    sums = []
    for batch in batches:
        x = batch.to(device)
        cpu_work()
        sums.append((x @ weight).sum())
    return torch.stack(sums)


print("sums:", steps_waiting(batches, weight)[:3].tolist())
# --8<-- [end:upload_task]


# --8<-- [start:upload_solution]
pinned = [b.pin_memory() if PIN else b for b in batches]  # once, before the loop


def steps_overlapped(batches, weight):
    sums = []
    for batch in batches:
        x = batch.to(device, non_blocking=True)  # queued: returns at once
        cpu_work()  # runs while the copy engine moves the batch
        sums.append((x @ weight).sum())  # same stream: runs after the copy
    return torch.stack(sums)


print("same sums:", torch.equal(steps_overlapped(pinned, weight),
                                steps_waiting(batches, weight)))
# --8<-- [end:upload_solution]


# --8<-- [start:readback_task]
# Exercise 2: this returns the per-row sums of a product to the host without
# waiting for the copy. On a GPU it can return numbers that were never computed.
# Why? Fix it so that the host still does its own work (cpu_work()) while the
# GPU computes and copies.
def row_sums_too_early(a):
    result = (a @ a).sum(dim=1)
    host = torch.empty(result.shape, pin_memory=PIN)
    host.copy_(result, non_blocking=True)
    return host.tolist()


a = torch.randn(2048, 2048, device=device)
# --8<-- [end:readback_task]


# --8<-- [start:readback_solution]
def row_sums(a):
    result = (a @ a).sum(dim=1)
    host = torch.empty(result.shape, pin_memory=PIN)
    host.copy_(result, non_blocking=True)
    if device.type == "cuda":
        copied = torch.cuda.Event()
        copied.record()  # queued right after the copy: it marks the copy's end
    cpu_work()  # the host works while the GPU computes and copies
    if device.type == "cuda":
        copied.synchronize()  # waits for that point only
    return host.tolist()


print("first row sums:", [round(s, 2) for s in row_sums(a)[:3]])
# --8<-- [end:readback_solution]


# --8<-- [start:resident_task]
# Exercise 3: a dataset of 20,000 rows that fits on the GPU many times over,
# served by a DataLoader that copies every batch. Serve the same epochs (every
# row once per epoch, in a new random order) with no copy and no DataLoader.
features = torch.randn(20_000, 32)
labels = torch.randint(10, (20_000,))


def epoch_with_loader(features, labels, batch_size=500):
    loader = DataLoader(TensorDataset(features, labels), batch_size=batch_size,
                        shuffle=True, pin_memory=PIN)
    for x, y in loader:
        yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)
# --8<-- [end:resident_task]


# --8<-- [start:resident_solution]
features_on_device = features.to(device)  # once
labels_on_device = labels.to(device)


def epoch_on_device(features, labels, batch_size=500):
    order = torch.randperm(len(features), device=features.device)  # drawn on the GPU
    for start in range(0, len(features), batch_size):
        rows = order[start:start + batch_size]
        yield features[rows], labels[rows]


seen = sum(len(y) for _, y in epoch_on_device(features_on_device, labels_on_device))
print(f"{seen} rows in one epoch")
# --8<-- [end:resident_solution]
