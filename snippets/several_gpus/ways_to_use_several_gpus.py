"""Ways to use several GPUs: independent jobs, one per GPU, and the link between two GPUs.

Run it: python -m snippets.several_gpus.ways_to_use_several_gpus
The jobs run anywhere (without GPUs they see none); the GPU-to-GPU copy needs two GPUs.
"""

GPUS_NEEDED = 0  # the jobs run anywhere; the copy between GPUs runs where there are two

# --8<-- [start:one_job_per_gpu]
import os
import subprocess
import sys

import torch


def one_job_per_gpu(command, gpus):
    """Start `command` once per GPU; each process sees only its own GPU, as cuda:0."""
    jobs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)})
            for gpu in gpus]
    return [job.communicate()[0] for job in jobs]  # wait for all of them


# each job says what it sees (a real job would be, say, `python train.py --seed N`):
# its CUDA_VISIBLE_DEVICES, its number of GPUs, and the UUID of its cuda:0
# (the GPU's own identity: PCI bus numbers can repeat inside a virtual machine)
REPORT = [sys.executable, "-c",
          "import os, torch; print(os.environ['CUDA_VISIBLE_DEVICES'], "
          "torch.cuda.device_count(), torch.cuda.is_available() and "
          "torch.cuda.get_device_properties(0).uuid)"]
# --8<-- [end:one_job_per_gpu]


# --8<-- [start:peer_copy]
import statistics
import time


def peer_to_peer(a=0, b=1):
    """Can GPU a read and write GPU b's memory directly (over NVLink or PCIe)?"""
    return torch.cuda.can_device_access_peer(a, b)


def copy_and_wait(x, y):
    """Copy x into y (on another GPU) and wait for both GPUs to finish."""
    y.copy_(x)  # never through host memory when the GPUs are peers
    for t in (x, y):
        torch.cuda.synchronize(t.device)


def time_gpu_to_gpu_copy(nbytes, src=0, dst=1, repeats=20):
    """Median seconds for one copy of `nbytes` from GPU src to GPU dst."""
    x = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{src}")
    y = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{dst}")
    copy_and_wait(x, y)  # the first copy between two GPUs also sets up peer access
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy_and_wait(x, y)
        times.append(time.perf_counter() - start)
    return statistics.median(times)
# --8<-- [end:peer_copy]


if __name__ == "__main__":
    # --8<-- [start:main]
    gpus = range(torch.cuda.device_count()) or [0]  # without GPUs: one job, seeing none
    for line in one_job_per_gpu(REPORT, gpus):
        visible, count, uuid = line.split()
        where = f", cuda:0 is GPU {uuid}" if count != "0" else ""
        print(f"job with CUDA_VISIBLE_DEVICES={visible}: sees {count} GPU(s){where}")
    if torch.cuda.device_count() >= 2:
        print(f"peer-to-peer between GPU 0 and 1: {peer_to_peer(0, 1)}")
        for nbytes in (2**20, 2**30):
            seconds = time_gpu_to_gpu_copy(nbytes)
            print(f"GPU 0 -> GPU 1, {nbytes >> 20} MiB: {nbytes / seconds / 1e9:.1f} GB/s")
    else:
        print("one GPU or none: no copy between GPUs to time")
    # --8<-- [end:main]
