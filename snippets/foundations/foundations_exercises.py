"""Exercises on the foundations: keep data on the GPU between steps, judge from flops per byte
whether the GPU is worth the trip, and run pure-Python work in parallel.

Run it anywhere: python -m snippets.foundations.foundations_exercises
(without a GPU the pipelines run on the CPU; the counts and the results are the same)
"""

GPUS_NEEDED = 0  # picks CUDA at run time

# --8<-- [start:setup]
import math
import multiprocessing
import sys
import warnings
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# --8<-- [end:setup]


# --8<-- [start:trips_task]
# Exercise 1: each step of this pipeline takes a NumPy array and returns one. On
# a GPU most of its time is spent on copies. Count them, then remove all but two.
STEPS = (torch.sin, torch.exp, torch.sqrt, torch.log1p)


def pipeline_step_by_step(x):
    for step in STEPS:
        on_device = torch.from_numpy(x).to(device)
        x = step(on_device).cpu().numpy()
    return x


x = np.random.default_rng(0).random(2**20, dtype=np.float32)
if __name__ == "__main__":  # (why the guard: Exercise 3)
    print("first values:", pipeline_step_by_step(x)[:3])
# --8<-- [end:trips_task]


# --8<-- [start:trips_solution]
def pipeline_on_device(x):
    on_device = torch.from_numpy(x).to(device)  # one copy in
    for step in STEPS:
        on_device = step(on_device)  # every step where the data is
    return on_device.cpu().numpy()  # one copy out


if __name__ == "__main__":
    print("same:", np.allclose(pipeline_on_device(x), pipeline_step_by_step(x)))
# --8<-- [end:trips_solution]


# --8<-- [start:intensity_task]
# Exercise 2: the data starts on the host and the result is needed there.
# For which of these, and from what size, can the GPU be worth the trip?
#   sin(x) * 2 + 1 on n float32 numbers
#   a @ b for two n x n float32 matrices
# Write `flops_per_byte_moved(kind, n)`: the work done per byte that crosses
# the host-GPU link (inputs in, result out), and reason from how it grows.
# --8<-- [end:intensity_task]


# --8<-- [start:intensity_solution]
def flops_per_byte_moved(kind, n, bytes_per_number=4):
    if kind == "elementwise":  # about 3 operations per number; 1 in, 1 out
        return 3 * n / (2 * n * bytes_per_number)
    if kind == "matmul":  # 2 n**3 flops (multiply and add); 2 n**2 in, n**2 out
        return 2 * n**3 / (3 * n**2 * bytes_per_number)
    raise ValueError(f"unknown kind {kind!r}: 'elementwise' or 'matmul'")


if __name__ == "__main__":
    sizes = {"elementwise": (2**10, 2**20, 2**26), "matmul": (64, 512, 4096)}
    for kind in sizes:
        for n in sizes[kind]:
            work = flops_per_byte_moved(kind, n)
            print(f"{kind}, n = {n:,}: {work:,.3g} flops per byte moved")
# --8<-- [end:intensity_solution]


# --8<-- [start:gil_task]
# Exercise 3: `count_primes` is pure Python. Running it on four ranges in four
# threads takes about as long as one range after another. Why? Make it faster.
def count_primes(bounds):
    low, high = bounds
    return sum(all(k % d for d in range(2, math.isqrt(k) + 1))
               for k in range(low, high))


ranges = [(2 + i * 25_000, 2 + (i + 1) * 25_000) for i in range(4)]


def in_threads(fn, tasks):
    with ThreadPoolExecutor(max_workers=len(tasks)) as pool:
        return list(pool.map(fn, tasks))
# --8<-- [end:gil_task]


# --8<-- [start:gil_solution]
def start_method():
    """spawn where it can work (the workers import __main__, which must be a file);
    fork in a notebook, whose cells no spawned worker could import."""
    return "spawn" if hasattr(sys.modules["__main__"], "__file__") else "fork"


def in_processes(fn, tasks):
    context = multiprocessing.get_context(start_method())
    with warnings.catch_warnings():  # Python 3.12+ warns about fork() with threads;
        warnings.filterwarnings(  # these workers only run `fn`
            "ignore", "This process .* is multi-threaded", DeprecationWarning)
        with ProcessPoolExecutor(len(tasks), mp_context=context) as pool:
            return list(pool.map(fn, tasks))


# Under spawn every worker imports this file; the guards keep the workers from
# running the module's work again (or starting pools of their own).
if __name__ == "__main__":
    counts = in_processes(count_primes, ranges)
    print("primes per range:", counts)
    print("the same as in threads:", counts == in_threads(count_primes, ranges))
# --8<-- [end:gil_solution]
