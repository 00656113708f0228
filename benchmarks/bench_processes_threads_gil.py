"""Benchmarks behind docs/foundations/processes-threads-gil.md (CPU only: they time the host).

The timing run happens on the GPU machine, so these numbers describe its host CPU; every record
carries `workers` and `cpu_count` so the page can say how many cores there were.
"""

import asyncio
import multiprocessing
import os
import platform

import pytest

from snippets.foundations import processes_threads_gil as snippet

pytestmark = pytest.mark.snippet("snippets/foundations/processes_threads_gil.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "single_task": "One pure-Python task on its own",
    "pure_python[serial]": "{tasks} pure-Python tasks, one after another",
    "pure_python[threads]": "{tasks} pure-Python tasks in {workers} threads",
    "pure_python[processes]": "{tasks} pure-Python tasks in a running pool of {workers} processes",
    "pure_python[processes-with-startup]":
        "{tasks} pure-Python tasks, starting a pool of {workers} processes ({start_method})",
    "numpy_sort[serial]": "Sorting {tasks} NumPy arrays, one after another",
    "numpy_sort[threads]": "Sorting {tasks} NumPy arrays in {workers} threads",
    "io_wait[asyncio-one-by-one]": "{waits} waits, awaited one after another (asyncio)",
    "io_wait[asyncio-gather]": "{waits} waits, gathered (`asyncio.gather`)",
    "io_wait[threads]": "{waits} waits in {waits} threads",
    "tiny_tasks[serial]": "{tasks} small tasks, a plain loop in one process",
    "tiny_tasks[chunksize-1]": "{tasks} small tasks to {workers} processes, `chunksize=1`",
    "tiny_tasks[chunksize-250]": "{tasks} small tasks to {workers} processes, `chunksize=250`",
    "tiny_tasks[one-chunk-per-worker]":
        "{tasks} small tasks to {workers} processes, one chunk per worker",
    "speedup_interleaved":
        "{tasks} pure-Python tasks, serially and in a running pool of {workers}, alternated",
}
WORDS = {}

# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {
    "pure_python": "the host CPU's own work",
    "single_task": "the host CPU's own work",
    "numpy_sort": "the host CPU's own work",
    "tiny_tasks": "Python and inter-process messages",
    "speedup_interleaved": "the host CPU's own work",
}

WORKERS = 4
TASKS = [1_000_000] * WORKERS            # four equal pure-Python tasks
SORT_SIZE = 4_000_000                    # float64 elements per array (32 MB)
TINY = [1_000] * 4_000                   # many small tasks
SPAWN = multiprocessing.get_context("spawn")  # the portable start method, and the default on macOS


def describe(benchmark, **extra):
    free_threaded, gil_enabled = snippet.gil_status()
    benchmark.extra_info.update(
        workers=WORKERS, cpu_count=os.cpu_count(), usable_cpus=snippet.usable_cpus(),
        python=platform.python_version(), free_threaded_build=free_threaded,
        gil_enabled=gil_enabled, **extra)


@pytest.fixture(scope="module")
def warm_pool():
    """One pool for the module, its workers started before anything is timed."""
    with snippet.ProcessPoolExecutor(max_workers=WORKERS, mp_context=SPAWN) as pool:
        snippet.run_in_pool(pool, snippet.blocking_request, [0.3] * WORKERS)  # all workers up
        yield pool


@pytest.mark.parametrize("how", ["serial", "threads", "processes", "processes-with-startup"])
def bench_pure_python(benchmark, request, how):
    """Four pure-Python tasks; `processes` reuses a warm pool, `-with-startup` starts one each time."""
    describe(benchmark, tasks=len(TASKS), n=TASKS[0], how=how)
    if how.startswith("processes"):
        benchmark.extra_info["start_method"] = "spawn"
    expected = snippet.run_serial(snippet.cpu_bound, TASKS[:1]) * len(TASKS)
    if how == "serial":
        result = benchmark.pedantic(snippet.run_serial, args=(snippet.cpu_bound, TASKS),
                                    rounds=4, warmup_rounds=1)
    elif how == "threads":
        result = benchmark.pedantic(snippet.run_threads, args=(snippet.cpu_bound, TASKS, WORKERS),
                                    rounds=4, warmup_rounds=1)
    elif how == "processes":
        pool = request.getfixturevalue("warm_pool")
        result = benchmark.pedantic(snippet.run_in_pool, args=(pool, snippet.cpu_bound, TASKS),
                                    rounds=5, warmup_rounds=1)
    else:
        result = benchmark.pedantic(snippet.run_processes,
                                    args=(snippet.cpu_bound, TASKS, WORKERS, SPAWN),
                                    rounds=4, warmup_rounds=0)
    assert result == expected


def bench_single_task(benchmark):
    """One of the four tasks alone: the floor any parallel version can reach."""
    describe(benchmark, n=TASKS[0])
    benchmark.pedantic(snippet.cpu_bound, args=(TASKS[0],), rounds=5, warmup_rounds=1)


@pytest.mark.parametrize("how", ["serial", "threads"])
def bench_numpy_sort(benchmark, how):
    """np.sort of four separate arrays; NumPy releases the GIL while it sorts."""
    arrays = snippet.make_arrays(WORKERS, SORT_SIZE)
    describe(benchmark, tasks=len(arrays), size=SORT_SIZE, how=how)
    if how == "serial":
        benchmark.pedantic(snippet.run_serial, args=(snippet.sort_copy, arrays),
                           rounds=5, warmup_rounds=1)
    else:
        benchmark.pedantic(snippet.run_threads, args=(snippet.sort_copy, arrays, WORKERS),
                           rounds=5, warmup_rounds=1)


IO_COUNT, IO_DELAY = 10, 0.05


@pytest.mark.parametrize("how", ["asyncio-one-by-one", "asyncio-gather", "threads"])
def bench_io_wait(benchmark, how):
    """Ten simulated 50 ms waits (sleeps standing in for network or disk I/O)."""
    describe(benchmark, waits=IO_COUNT, delay_s=IO_DELAY, how=how)
    if how == "asyncio-one-by-one":
        def run():
            return asyncio.run(snippet.one_after_another(IO_COUNT, IO_DELAY))
    elif how == "asyncio-gather":
        def run():
            return asyncio.run(snippet.all_at_once(IO_COUNT, IO_DELAY))
    else:
        def run():
            return snippet.run_threads(snippet.blocking_request, [IO_DELAY] * IO_COUNT, IO_COUNT)
    slow = how == "asyncio-one-by-one"
    benchmark.pedantic(run, rounds=3 if slow else 10, warmup_rounds=0 if slow else 1)


@pytest.mark.parametrize("how", ["serial", "chunksize-1", "chunksize-250", "one-chunk-per-worker"])
def bench_tiny_tasks(benchmark, request, how):
    """4000 small tasks in a warm pool: how the work is cut decides the overhead."""
    describe(benchmark, tasks=len(TINY), n=TINY[0], how=how, ops=len(TINY))
    if how == "serial":
        benchmark.pedantic(snippet.run_serial, args=(snippet.cpu_bound, TINY),
                           rounds=3, warmup_rounds=1)
        return
    pool = request.getfixturevalue("warm_pool")
    if how == "one-chunk-per-worker":
        args = (pool, snippet.sum_of_cpu_bound, snippet.split_evenly(TINY, WORKERS))
        kwargs = {}
    else:
        args = (pool, snippet.cpu_bound, TINY)
        kwargs = {"chunksize": int(how.removeprefix("chunksize-"))}
    benchmark.pedantic(snippet.run_in_pool, args=args, kwargs=kwargs, rounds=5, warmup_rounds=1)


def bench_speedup_interleaved(benchmark, request):
    """The serial loop and the warm pool alternated pair by pair, so that drift in the host's
    speed (turbo, other tenants) hits both alike. A round is one pair; which of the two runs
    first alternates. extra_info: the median and quartiles of the per-pair speedups, and the
    per-task time of the serial loop next to a single task timed inside the same pairs."""
    import statistics
    import time

    pool = request.getfixturevalue("warm_pool")
    describe(benchmark, tasks=len(TASKS), n=TASKS[0], start_method="spawn")
    speedups, per_task, single = [], [], []

    def seconds(fn, *args):
        start = time.perf_counter()
        fn(*args)
        return time.perf_counter() - start

    def pair():
        serial_first = len(speedups) % 2 == 0
        if serial_first:
            serial = seconds(snippet.run_serial, snippet.cpu_bound, TASKS)
        parallel = seconds(snippet.run_in_pool, pool, snippet.cpu_bound, TASKS)
        if not serial_first:
            serial = seconds(snippet.run_serial, snippet.cpu_bound, TASKS)
        single.append(seconds(snippet.cpu_bound, TASKS[0]))
        speedups.append(serial / parallel)
        per_task.append(serial / len(TASKS))

    benchmark.pedantic(pair, rounds=10, warmup_rounds=1)
    q1, median, q3 = statistics.quantiles(speedups[1:], n=4)
    benchmark.extra_info.update(
        pairs=len(speedups) - 1, speedup_median=median, speedup_q1=q1, speedup_q3=q3,
        serial_per_task_s=statistics.median(per_task[1:]),
        single_task_s=statistics.median(single[1:]))
