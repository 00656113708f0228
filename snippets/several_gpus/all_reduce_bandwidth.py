"""All-reduce bus bandwidth as nccl-tests defines it, measured with torch.distributed.

Run it (from the repository root):
    torchrun --standalone --nproc-per-node 2 -m snippets.several_gpus.all_reduce_bandwidth
    python -m snippets.several_gpus.all_reduce_bandwidth     # one process: nothing to exchange
NCCL on GPUs, gloo on CPU processes (there with sizes up to 16 MiB).
"""

GPUS_NEEDED = 0  # NCCL where every process has a GPU, gloo on CPU processes otherwise

# --8<-- [start:measure]
import time

import torch
import torch.distributed as dist


def bus_bandwidth(nbytes, seconds, world_size):
    """nccl-tests' bus bandwidth of an all-reduce, in bytes per second.

    The algorithm bandwidth is nbytes / seconds. A ring all-reduce over n processes
    sends and receives 2(n-1)/n of the data on every link, so this factor turns it
    into what the busiest link carried, comparable with the link's own speed.
    """
    return nbytes / seconds * 2 * (world_size - 1) / world_size


def all_reduce_many(x, repeats):
    """`repeats` all-reduces (sums over all processes) of x, queued back to back."""
    for _ in range(repeats):
        dist.all_reduce(x)


def time_all_reduce(nbytes, device, dtype=torch.bfloat16, repeats=20):
    """Seconds per all-reduce of `nbytes`: the slowest process's average."""
    x = torch.zeros(nbytes // dtype.itemsize, dtype=dtype, device=device)
    all_reduce_many(x, 5)  # warm-up: NCCL sets up its buffers on first use
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    dist.barrier()  # everyone starts the clock together
    start = time.perf_counter()
    all_reduce_many(x, repeats)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = torch.tensor((time.perf_counter() - start) / repeats, device=device)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
    return seconds.item()


def sweep(device, sizes):
    """(bytes, seconds, algorithm GB/s, bus GB/s) for every message size."""
    world = dist.get_world_size()
    rows = []
    for nbytes in sizes:
        seconds = time_all_reduce(nbytes, device)
        rows.append((nbytes, seconds, nbytes / seconds / 1e9,
                     bus_bandwidth(nbytes, seconds, world) / 1e9))
    return rows
# --8<-- [end:measure]


# The page shows `start` from the DDP page's script just before the sections above.
from snippets.several_gpus.ddp_with_torchrun import start  # noqa: E402

if __name__ == "__main__":
    # --8<-- [start:main]
    device = start()
    try:
        largest = 2**30 if device.type == "cuda" else 2**24  # 1 GiB on GPUs, 16 MiB on CPUs
        sizes = [2**k for k in range(10, largest.bit_length(), 2)]  # 1 KiB, 4 KiB, ...
        world, backend = dist.get_world_size(), dist.get_backend()
        if world == 1:
            print("one process: nothing to exchange (start it with torchrun)")
        else:
            rows = sweep(device, sizes)
            if dist.get_rank() == 0:
                print(f"all-reduce, {world} processes, {backend}:")
                for nbytes, seconds, algbw, busbw in rows:
                    print(f"  {nbytes:>11,} bytes  {seconds * 1e6:9.1f} us  "
                          f"algbw {algbw:8.2f} GB/s  busbw {busbw:8.2f} GB/s")
    finally:
        dist.destroy_process_group()
    # --8<-- [end:main]
