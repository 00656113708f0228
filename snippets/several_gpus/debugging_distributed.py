"""Distributed jobs that go wrong on purpose, and what tells you where: a timeout instead of a
hang, a shape mismatch caught by TORCH_DISTRIBUTED_DEBUG=DETAIL, a worker's traceback in
torchrun's report, and a hung rank to find with py-spy.

Run it (from the repository root), on CPU processes with gloo:
    torchrun --standalone --nproc-per-node 2 -m snippets.several_gpus.debugging_distributed skip
MODE is one of skip, mismatch, crash, hang (see `main`).
"""

GPUS_NEEDED = 0  # gloo on CPU processes: the failures are the same as with NCCL on GPUs

# --8<-- [start:timeout]
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


def start(timeout_s):
    """Join the group; a collective that some rank never reaches fails after timeout_s
    seconds (default: 10 minutes with NCCL, 30 with gloo) instead of waiting on."""
    dist.init_process_group("gloo", timeout=timedelta(seconds=timeout_s))
    return dist.get_rank()
# --8<-- [end:timeout]


# --8<-- [start:mistakes]
def skip(rank):
    """Rank 1 never joins the second all-reduce (it goes on with other work): rank 0
    waits in it until the timeout."""
    x = torch.ones(4)
    dist.all_reduce(x)
    if rank == 0:
        dist.all_reduce(x)
    else:
        time.sleep(120)


def mismatch(rank):
    """Every rank joins, with tensors of different sizes (4 and 5 elements)."""
    dist.all_reduce(torch.ones(4 + rank))


def crash(rank):
    """Rank 1 raises while rank 0 works on: torchrun stops rank 0 and reports rank 1."""
    if rank == 1:
        raise ValueError("rank 1 failed on purpose")
    time.sleep(120)


def load_next_batch_forever():
    """Stands for a data loader, a file system or a deadlock that never returns."""
    while True:
        time.sleep(0.1)


def hang(rank):
    """Rank 1 is stuck before the all-reduce; rank 0 waits in it."""
    print(f"rank {rank} ready (pid {os.getpid()})", flush=True)
    if rank == 1:
        load_next_batch_forever()
    dist.all_reduce(torch.ones(4))
# --8<-- [end:mistakes]


# --8<-- [start:main]
MISTAKES = {"skip": skip, "mismatch": mismatch, "crash": crash, "hang": hang}


@record  # an exception in a worker reaches torchrun's report, with its traceback
def main(mode, timeout_s=30):
    rank = start(timeout_s)
    try:
        MISTAKES[mode](rank)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    if "RANK" in os.environ and sys.argv[1:2] and sys.argv[1] in MISTAKES:  # torchrun
        main(sys.argv[1], *map(int, sys.argv[2:3]))  # MODE [TIMEOUT_S]
    else:  # python, or a notebook: no group to join
        print("start it with torchrun --standalone --nproc-per-node 2 debugging.py MODE"
              f" [TIMEOUT_S], MODE one of {', '.join(MISTAKES)}")
# --8<-- [end:main]
