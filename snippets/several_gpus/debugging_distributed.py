"""Distributed jobs that go wrong on purpose, and what tells you where: a timeout instead of a
hang, a shape mismatch caught by TORCH_DISTRIBUTED_DEBUG=DETAIL, a worker's traceback in
torchrun's report, a hung rank to find with py-spy, and the flight recorder's record of
each rank's last collectives.

Run it (from the repository root), on CPU processes with gloo:
    torchrun --standalone --nproc-per-node 2 -m snippets.several_gpus.debugging_distributed skip
MODE is one of skip, mismatch, crash, hang, recorded (see `main`); for recorded, set
TORCH_FR_BUFFER_SIZE=2000, then read the records with `python -m ... read flight-record`.
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


# --8<-- [start:flight_recorder]
import pickle


def dump_flight_record():
    """Write this rank's flight record (its last TORCH_FR_BUFFER_SIZE collectives) to
    TORCH_FR_DUMP_TEMP_FILE followed by the rank, the file NCCL's dump would write."""
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE", "flight-record/rank_")
    os.makedirs(os.path.dirname(prefix) or ".", exist_ok=True)
    with open(f"{prefix}{dist.get_rank()}", "wb") as f:
        f.write(torch._C._distributed_c10d._dump_fr_trace())  # a pickled dict


def recorded_skip(rank):
    """skip, with every rank writing its flight record: rank 1 as it goes on with other
    work, rank 0 once its wait in the second all-reduce has timed out."""
    x = torch.ones(4)
    dist.all_reduce(x)
    try:
        if rank == 0:
            dist.all_reduce(x)
    finally:
        dump_flight_record()
    time.sleep(120)


def last_collectives(folder):
    """Every rank's last recorded collective, from the files in folder:
    {rank: (sequence number, operation, the function that called it)}."""
    last = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            entries = pickle.load(f)["entries"]
        if entries:
            entry = entries[-1]
            caller = next(frame["name"] for frame in entry["frames"]  # innermost first
                          if f"{os.sep}torch{os.sep}" not in frame["filename"])
            rank = int(name.rsplit("_", 1)[-1])
            last[rank] = (entry["collective_seq_id"], entry["profiling_name"], caller)
    return last
# --8<-- [end:flight_recorder]


# --8<-- [start:main]
MISTAKES = {"skip": skip, "mismatch": mismatch, "crash": crash, "hang": hang,
            "recorded": recorded_skip}


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
    elif sys.argv[1:2] == ["read"]:  # python debugging.py read FOLDER
        for rank, (seq, op, caller) in sorted(last_collectives(sys.argv[2]).items()):
            print(f"rank {rank}: last collective #{seq}, {op}, called in {caller}")
    else:  # python, or a notebook: no group to join
        print("start it with torchrun --standalone --nproc-per-node 2 debugging.py MODE"
              f" [TIMEOUT_S], MODE one of {', '.join(MISTAKES)}")
# --8<-- [end:main]
