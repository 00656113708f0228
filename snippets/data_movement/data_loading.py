"""Feeding the GPU: DataLoader worker processes, pinned batches, the CUDA-in-a-worker trap, and a
small dataset kept (and augmented) entirely on the GPU.

Run it: python -m snippets.data_movement.data_loading
"""

GPUS_NEEDED = 0  # runs anywhere; the CUDA trap is only shown when a GPU is present

# --8<-- [start:dataset]
import os
import random
import time

import torch
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def sync():
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class ParsedRecords(Dataset):
    """Each item costs real CPU time in pure Python: it parses a text record into
    numbers, as decoding a JPEG or tokenizing text costs time before the GPU sees it."""

    def __init__(self, n_items, fields):
        self.n_items, self.fields = n_items, fields

    def __len__(self):
        return self.n_items

    def __getitem__(self, index):
        rng = random.Random(index)  # item `index` is the same in every process
        line = ",".join(f"{rng.random():.6f}" for _ in range(self.fields))  # the file
        values = [float(v) for v in line.split(",")]  # the parsing
        return torch.tensor(values), index  # the index stands in for a label


# About a millisecond of work per item on a server core; far less for a CPU-only run.
n_items, fields = (512, 1536) if device.type == "cuda" else (64, 128)
dataset = ParsedRecords(n_items, fields)
# --8<-- [end:dataset]


# --8<-- [start:loader]
def make_loader(dataset, num_workers, batch_size=32, shuffle=True):
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle,
        num_workers=num_workers,             # worker *processes*; 0: this process
        pin_memory=device.type == "cuda",    # batches arrive in page-locked memory
        persistent_workers=num_workers > 0,  # keep the workers between epochs
        prefetch_factor=2 if num_workers > 0 else None,  # batches ahead, per worker
    )


def run_epoch(loader, train_step=lambda x, y: None):
    """One pass over the data. The batch moves to the GPU here, in the main process."""
    seen = 0
    for x, y in loader:
        x = x.to(device, non_blocking=True)  # returns at once: the batch is pinned
        y = y.to(device, non_blocking=True)
        train_step(x, y)
        seen += len(y)
    sync()
    return seen
# --8<-- [end:loader]


# --8<-- [start:throughput]
def items_per_second(dataset, num_workers, epochs=2):
    """Steady-state throughput: the first epoch (it starts the workers) is not timed."""
    loader = make_loader(dataset, num_workers)
    run_epoch(loader)
    start = time.perf_counter()
    items = sum(run_epoch(loader) for _ in range(epochs))
    return items / (time.perf_counter() - start)


def time_to_first_batch(dataset, num_workers):
    """What starting the workers costs: a fresh loader, until its first batch."""
    start = time.perf_counter()
    next(iter(make_loader(dataset, num_workers)))
    return time.perf_counter() - start
# --8<-- [end:throughput]


# --8<-- [start:trap]
class GpuInWorker(Dataset):
    """Uses CUDA in __getitem__: fine without workers, a trap with them."""

    def __len__(self):
        return 64

    def __getitem__(self, index):
        x = torch.full((256,), float(index), device="cuda")  # CUDA inside the worker
        return (x * 2).cpu()


def load_on_gpu_in_workers(start_method, num_workers=2):
    torch.zeros(1, device="cuda")  # the parent has used CUDA (a model on the GPU, say)
    loader = DataLoader(GpuInWorker(), batch_size=16, num_workers=num_workers,
                        multiprocessing_context=start_method)
    return torch.cat(list(loader))
# --8<-- [end:trap]


# --8<-- [start:gpu_resident]
import torch.nn.functional as F


def crop_and_flip(images, top, left, flip, pad=4):
    """Crop each image of a (B, C, H, W) batch out of a zero-padded copy at its own
    (top, left), mirrored left-right where `flip` is True: one gather for the whole
    batch, no Python loop."""
    b, c, h, w = images.shape
    padded = F.pad(images, (pad,) * 4).permute(0, 2, 3, 1)  # (B, H+2p, W+2p, C)
    rows = top.view(b, 1, 1) + torch.arange(h, device=images.device).view(1, h, 1)
    cols = torch.arange(w, device=images.device).view(1, 1, w)
    cols = left.view(b, 1, 1) + torch.where(flip.view(b, 1, 1), w - 1 - cols, cols)
    batch = torch.arange(b, device=images.device).view(b, 1, 1)
    return padded[batch, rows, cols].permute(0, 3, 1, 2)  # (B, C, H, W)


def augment(images, pad=4):
    """Random crops and horizontal flips, drawn on the device the images live on."""
    b = images.shape[0]
    top = torch.randint(0, 2 * pad + 1, (b,), device=images.device)
    left = torch.randint(0, 2 * pad + 1, (b,), device=images.device)
    flip = torch.rand(b, device=images.device) < 0.5
    return crop_and_flip(images, top, left, flip, pad)


def gpu_epoch(images, labels, train_step=lambda x, y: None, batch_size=512):
    """The whole dataset lives on the GPU: shuffle, slice, augment with tensor ops."""
    order = torch.randperm(len(images), device=images.device)
    seen = 0
    for batch in order.split(batch_size):
        x = augment(images[batch]).float().div_(255)
        y = labels[batch]
        train_step(x, y)
        seen += len(y)
    sync()
    return seen


def random_images(n):
    """A stand-in for a small image dataset (like CIFAR-10: 3 x 32 x 32 bytes)."""
    images = torch.randint(0, 256, (n, 3, 32, 32), dtype=torch.uint8, device=device)
    return images, torch.randint(0, 10, (n,), device=device)


n_images = 20_000 if device.type == "cuda" else 1_000
# --8<-- [end:gpu_resident]


# --8<-- [start:cpu_augment]
class CropFlipImages(Dataset):
    """The same augmentation done the usual way: one image at a time, on the CPU."""

    def __init__(self, images, labels, pad=4):
        self.images, self.labels, self.pad = images.cpu(), labels.cpu(), pad

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        top, left = torch.randint(0, 2 * self.pad + 1, (2,)).tolist()
        flip = torch.rand(()) < 0.5
        _, h, w = self.images[index].shape
        padded = F.pad(self.images[index], (self.pad,) * 4)
        image = padded[:, top:top + h, left:left + w]
        return (image.flip(-1) if flip else image), self.labels[index]


def dataloader_epoch(loader, train_step=lambda x, y: None):
    seen = 0
    for x, y in loader:
        x = x.to(device, non_blocking=True)  # uint8 over PCIe...
        x = x.float().div_(255)  # ...converted on the GPU
        y = y.to(device, non_blocking=True)
        train_step(x, y)
        seen += len(y)
    sync()
    return seen


workers = min(8, os.cpu_count() or 1)


def make_image_loader(images, labels):
    return make_loader(CropFlipImages(images, labels), workers, batch_size=512)
# --8<-- [end:cpu_augment]


if __name__ == "__main__":
    # --8<-- [start:main]
    print(f"device: {device}, {os.cpu_count()} CPU cores")
    for num_workers in (0, 2):
        rate = items_per_second(dataset, num_workers)
        print(f"num_workers={num_workers}: {rate:8.0f} items/s")
    wait = time_to_first_batch(dataset, 2)
    print(f"first batch from 2 fresh workers: {wait * 1e3:.0f} ms")

    images, labels = random_images(n_images)
    image_loader = make_image_loader(images, labels)

    for name, epoch in (("DataLoader", lambda: dataloader_epoch(image_loader)),
                        ("on the GPU", lambda: gpu_epoch(images, labels))):
        epoch()  # warm-up (starts the workers)
        start = time.perf_counter()
        seen = epoch()
        print(f"crop + flip, {name}: {seen / (time.perf_counter() - start):10.0f} images/s")

    if device.type == "cuda":
        try:
            load_on_gpu_in_workers("fork")
        except RuntimeError as error:
            print("fork + CUDA in a worker:", str(error).splitlines()[-1])
    # --8<-- [end:main]
