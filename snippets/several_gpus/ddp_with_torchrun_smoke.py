"""The smoke test to run before train.py: every process joins the group, sums one number
with all the others and says what it got. Save it as smoke_test.py and start it as
train.py is started:

    torchrun --standalone --nproc-per-node gpu smoke_test.py

Run it here: python -m snippets.several_gpus.ddp_with_torchrun_smoke (a group of one).
"""

GPUS_NEEDED = 0  # NCCL where every process has a GPU, gloo on CPU processes otherwise

# --8<-- [start:smoke]
import datetime
import os
import socket
import sys

import torch
import torch.distributed as dist


def smoke_test():
    """One all-reduce on every rank; each prints what it got. True where it is right."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    on_gpus = torch.cuda.device_count() >= int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    device = torch.device("cuda", local_rank) if on_gpus else torch.device("cpu")
    if on_gpus:
        torch.cuda.set_device(device)
    backend, device_id = ("nccl", device) if on_gpus else ("gloo", None)
    wait = datetime.timedelta(seconds=60)  # a rank that never comes: fail, do not hang
    if "RANK" in os.environ:  # started by torchrun
        dist.init_process_group(backend, timeout=wait, device_id=device_id)
    else:  # alone: a group of one
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1,
                                device_id=device_id)
    rank, world = dist.get_rank(), dist.get_world_size()
    value = torch.tensor([rank + 1.0], device=device)
    dist.all_reduce(value)  # 1 + 2 + ... + world on every rank
    expected = world * (world + 1) / 2
    name = torch.cuda.get_device_name(device) if on_gpus else "CPU"
    line = (f"rank {rank} of {world} on {socket.gethostname()}, {device} ({name}), "
            f"{backend}: all_reduce gave {value.item():g}, expected {expected:g}\n")
    # One write for the line and its newline: torchrun runs each process with
    # `python -u`, where print() writes them apart and lines can run into each other.
    sys.stdout.write(line)
    sys.stdout.flush()
    dist.barrier()  # leave together: none goes while another still talks to it
    dist.destroy_process_group()
    return value.item() == expected


if __name__ == "__main__" and not smoke_test():
    raise SystemExit("all_reduce gave a wrong sum")  # exit status 1
# --8<-- [end:smoke]
