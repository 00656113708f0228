"""Processes, threads, coroutines and the GIL: what runs in parallel in CPython, and what only takes turns.

Run it: python -m snippets.foundations.processes_threads_gil
"""

GPUS_NEEDED = 0  # all of this is about the CPU side of a GPU program

# --8<-- [start:setup]
import os
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor


def usable_cpus():
    """Logical CPUs this process may run on (a hyper-threaded core counts twice)."""
    if hasattr(os, "process_cpu_count"):  # Python 3.13+: honours the affinity mask
        return os.process_cpu_count()
    if hasattr(os, "sched_getaffinity"):  # Linux: what a scheduler or taskset left us
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def timed(fn, *args, **kwargs):
    """Run fn once; return its result and the wall-clock seconds it took."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start
# --8<-- [end:setup]


# --8<-- [start:cpu_bound]
def cpu_bound(n):
    """Pure-Python arithmetic: every step runs in the interpreter, holding the GIL."""
    total = 0
    for i in range(n):
        total += i * i % 7
    return total
# --8<-- [end:cpu_bound]


# --8<-- [start:runners]
def run_serial(fn, tasks):
    return [fn(task) for task in tasks]


def run_threads(fn, tasks, workers):
    """Threads share one interpreter: their Python code takes turns holding the GIL."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, tasks))


def run_processes(fn, tasks, workers, mp_context=None):
    """Processes each have their own interpreter and GIL. Includes starting the pool."""
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp_context) as pool:
        return list(pool.map(fn, tasks))
# --8<-- [end:runners]


# --8<-- [start:reuse_pool]
def run_in_pool(pool, fn, tasks, chunksize=1):
    """Reuse a pool that is already running: no start-up cost per call."""
    return list(pool.map(fn, tasks, chunksize=chunksize))
# --8<-- [end:reuse_pool]


# --8<-- [start:numpy_threads]
import numpy as np


def make_arrays(count, size, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.random(size) for _ in range(count)]


def sort_copy(a):
    """np.sort runs in compiled code and releases the GIL while it sorts."""
    return np.sort(a)
# --8<-- [end:numpy_threads]


# --8<-- [start:asyncio]
import asyncio


async def fake_request(i, delay):
    """Stands in for a network call: while it waits, the event loop runs others."""
    await asyncio.sleep(delay)
    return i


async def one_after_another(count, delay):
    return [await fake_request(i, delay) for i in range(count)]


async def all_at_once(count, delay):
    return await asyncio.gather(*(fake_request(i, delay) for i in range(count)))


def run_coroutine(coro):
    """asyncio.run in a script; in a notebook, whose event loop is already running,
    the same in a helper thread that has a loop of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
# --8<-- [end:asyncio]


# --8<-- [start:blocking_io]
def blocking_request(delay):
    """A blocking wait, like reading a file or a socket: it releases the GIL."""
    time.sleep(delay)
    return delay
# --8<-- [end:blocking_io]


# --8<-- [start:free_threading]
import sys
import sysconfig


def gil_status():
    """(built free-threaded?, GIL enabled right now?) for this interpreter."""
    free_threaded_build = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    if hasattr(sys, "_is_gil_enabled"):     # Python 3.13+
        return free_threaded_build, sys._is_gil_enabled()
    return free_threaded_build, True        # before 3.13 every CPython has a GIL
# --8<-- [end:free_threading]


# --8<-- [start:chunks]
def split_evenly(items, parts):
    """Contiguous pieces whose sizes differ by at most one: a fair share each."""
    size, extra = divmod(len(items), parts)
    pieces, start = [], 0
    for p in range(parts):
        stop = start + size + (1 if p < extra else 0)
        pieces.append(items[start:stop])
        start = stop
    return pieces


def sum_of_cpu_bound(ns):
    """One task made of many small ones: pays the inter-process cost once."""
    return sum(cpu_bound(n) for n in ns)
# --8<-- [end:chunks]


if __name__ == "__main__":  # required: with spawn, every worker imports this file
    # --8<-- [start:main]
    workers = min(4, usable_cpus())
    tasks = [1_000_000] * 4
    print(f"{usable_cpus()} usable logical CPUs; {workers} workers; GIL: {gil_status()}")

    serial, t_serial = timed(run_serial, cpu_bound, tasks)
    threaded, t_threads = timed(run_threads, cpu_bound, tasks, workers)
    in_processes, t_processes = timed(run_processes, cpu_bound, tasks, workers)
    assert serial == threaded == in_processes
    print(f"pure Python, {len(tasks)} tasks: serial {t_serial:.2f} s, "
          f"threads {t_threads:.2f} s, processes {t_processes:.2f} s (with start-up)")

    arrays = make_arrays(len(tasks), 4_000_000)
    _, t_sort = timed(run_serial, sort_copy, arrays)
    _, t_sort_threads = timed(run_threads, sort_copy, arrays, workers)
    print(f"np.sort, {len(arrays)} arrays: serial {t_sort:.2f} s, "
          f"threads {t_sort_threads:.2f} s")

    _, t_one_by_one = timed(run_coroutine, one_after_another(10, 0.05))
    _, t_gather = timed(run_coroutine, all_at_once(10, 0.05))
    print(f"10 waits of 50 ms: one after another {t_one_by_one:.2f} s, "
          f"gathered {t_gather:.2f} s")

    tiny = [1_000] * 4_000  # many small tasks
    with ProcessPoolExecutor(max_workers=workers) as pool:
        run_in_pool(pool, cpu_bound, tasks)  # start the workers before timing
        _, t_one_each = timed(run_in_pool, pool, cpu_bound, tiny, chunksize=1)
        pieces = split_evenly(tiny, workers)
        _, t_chunked = timed(run_in_pool, pool, sum_of_cpu_bound, pieces)
    print(f"{len(tiny)} tiny tasks in a warm pool: one per message {t_one_each:.2f} s, "
          f"one chunk per worker {t_chunked:.2f} s")
    # --8<-- [end:main]
