"""Claims of docs/foundations/processes-threads-gil.md (all on the CPU; CI has 2 cores)."""

import asyncio
import multiprocessing
import os
import pickle
import time

import numpy as np
import pytest

from snippets.foundations import processes_threads_gil as snippet

pytestmark = pytest.mark.snippet("snippets/foundations/processes_threads_gil.py")

SPAWN = multiprocessing.get_context("spawn")  # the strictest start method: what macOS and Windows use
needs_two_cpus = pytest.mark.skipif(snippet.usable_cpus() < 2, reason="fewer than 2 usable CPUs")


def _busy_ticks():
    """CPU time every process on the machine has used since boot (idle and iowait left out)."""
    with open("/proc/stat") as stat:
        user, nice, system, idle, iowait, irq, softirq, steal = map(int, stat.readline().split()[1:9])
    return user + nice + system + irq + softirq + steal


def _tree_ticks(pid):
    """CPU time of process `pid`, its threads and its living children (the pool's workers)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        if int(entry) == pid or int(fields[1]) == pid:  # fields[1]: the parent's pid
            total += int(fields[11]) + int(fields[12])  # utime + stime
    return total


def others_cpu_share(measure):
    """Run measure(); return its result and the cores that other jobs kept busy meanwhile.

    A speed-up from two workers needs two free cores. The load average lags by a minute, so
    this counts the CPU time that processes outside this one (and its workers) used while the
    measurement ran, from /proc (0.0 where there is no /proc: nothing can be told apart then).
    """
    if not os.path.exists("/proc/stat"):
        return measure(), 0.0
    busy, own, start = _busy_ticks(), _tree_ticks(os.getpid()), time.perf_counter()
    result = measure()
    wall = time.perf_counter() - start
    others = (_busy_ticks() - busy) - (_tree_ticks(os.getpid()) - own)
    return result, max(0, others) / os.sysconf("SC_CLK_TCK") / wall


QUIET = 0.25  # other jobs used less than a quarter of a core: a failure then is the claim's


def assert_speedup_unless_contended(measure, holds, attempts=3):
    """Pass on the first attempt where `holds(result)`. After `attempts` misses, skip if other
    jobs kept the cores busy during any of them, else fail: contention can hide a speed-up,
    never fake one, so a skip is all it can cause. (A hypervisor's neighbours are invisible
    here: a 2-core CI VM once gave 1.18x on one quiet attempt and 1.4x on the next.)"""
    seen = []
    for _ in range(attempts):
        result, others = others_cpu_share(measure)
        seen.append((result, round(others, 2)))
        if holds(result):
            return
        time.sleep(1)
    if any(others >= QUIET for _, others in seen):
        pytest.skip(f"other jobs kept the cores busy: (result, other jobs' cores) {seen}")
    pytest.fail(f"missed on a quiet machine in every attempt: (result, other jobs' cores) {seen}")


def cores_used_by_this_process(fn):
    """CPU time of all this process's threads per second of wall time while fn() runs."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return (time.process_time() - cpu) / (time.perf_counter() - wall)


def best_of_interleaved(repeats, a, b):
    """Shortest times of two zero-argument callables, run alternately so both see the same noise."""
    times_a, times_b = [], []
    for _ in range(repeats):
        times_a.append(snippet.timed(a)[1])
        times_b.append(snippet.timed(b)[1])
    return min(times_a), min(times_b)


def test_usable_cpus_is_sane():
    assert 1 <= snippet.usable_cpus() <= os.cpu_count()


def test_cpu_bound_matches_a_closed_form():
    # i*i % 7 repeats with period 7: 0, 1, 4, 2, 2, 4, 1 (sum 14)
    n = 7 * 1000 + 3
    assert snippet.cpu_bound(n) == 14 * 1000 + (0 + 1 + 4)


def test_every_runner_returns_the_same_results_in_order():
    tasks = [1_000 + k for k in range(6)]
    expected = [snippet.cpu_bound(n) for n in tasks]
    assert snippet.run_serial(snippet.cpu_bound, tasks) == expected
    assert snippet.run_threads(snippet.cpu_bound, tasks, 3) == expected
    assert snippet.run_processes(snippet.cpu_bound, tasks, 2, mp_context=SPAWN) == expected
    with snippet.ProcessPoolExecutor(max_workers=2, mp_context=SPAWN) as pool:
        assert snippet.run_in_pool(pool, snippet.cpu_bound, tasks, chunksize=4) == expected


def test_module_level_functions_work_under_spawn_and_lambdas_do_not():
    # spawn pickles the function by name; the worker imports its module to find it.
    with snippet.ProcessPoolExecutor(max_workers=1, mp_context=SPAWN) as pool:
        assert snippet.run_in_pool(pool, snippet.cpu_bound, [10]) == [snippet.cpu_bound(10)]
        # PicklingError, or before Python 3.14 "AttributeError: Can't pickle local object"
        with pytest.raises((pickle.PicklingError, AttributeError)):
            snippet.run_in_pool(pool, lambda n: n, [1])


def test_numpy_sort_in_threads_gives_the_serial_results():
    arrays = snippet.make_arrays(3, 10_000)
    serial = snippet.run_serial(snippet.sort_copy, arrays)
    threaded = snippet.run_threads(snippet.sort_copy, arrays, 3)
    for s, t, a in zip(serial, threaded, arrays, strict=True):
        assert np.array_equal(s, t)
        assert np.all(np.diff(t) >= 0)
        assert not np.array_equal(a, t), "sort_copy must leave its input alone"


@pytest.mark.timed
def test_gathered_waits_overlap():
    delay, count = 0.1, 10
    results, total = snippet.timed(asyncio.run, snippet.all_at_once(count, delay))
    assert results == list(range(count))
    # Waited one after another they would take count * delay; gathered, about one delay.
    assert total < 0.5 * count * delay, f"{count} gathered waits of {delay} s took {total:.3f} s"


def test_run_coroutine_works_in_a_script_and_inside_a_running_loop():
    assert snippet.run_coroutine(snippet.all_at_once(3, 0.01)) == [0, 1, 2]

    async def in_a_notebook():  # Jupyter runs cells inside an event loop
        return snippet.run_coroutine(snippet.all_at_once(3, 0.01))

    assert asyncio.run(in_a_notebook()) == [0, 1, 2]


@pytest.mark.timed
def test_awaiting_one_after_another_adds_up():
    delay, count = 0.02, 5
    results, total = snippet.timed(asyncio.run, snippet.one_after_another(count, delay))
    assert results == list(range(count))
    assert total >= 0.9 * count * delay


@pytest.mark.timed
def test_threads_overlap_blocking_waits():
    delay, count = 0.1, 8
    results, total = snippet.timed(snippet.run_threads, snippet.blocking_request, [delay] * count,
                                   count)
    assert results == [delay] * count
    assert total < 2 * delay


def test_gil_status_reports_this_interpreter():
    free_threaded_build, gil_enabled = snippet.gil_status()
    assert isinstance(free_threaded_build, bool) and isinstance(gil_enabled, bool)
    if not free_threaded_build:
        assert gil_enabled, "a standard build always has its GIL"


@pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 100])
@pytest.mark.parametrize("parts", [1, 3, 4])
def test_split_evenly_covers_everything_fairly(count, parts):
    items = list(range(count))
    pieces = snippet.split_evenly(items, parts)
    assert len(pieces) == parts
    assert [x for piece in pieces for x in piece] == items
    sizes = [len(p) for p in pieces]
    assert max(sizes) - min(sizes) <= 1


def test_chunked_task_computes_the_same_total():
    ns = [100 + k for k in range(50)]
    pieces = snippet.split_evenly(ns, 4)
    assert sum(snippet.sum_of_cpu_bound(p) for p in pieces) == sum(map(snippet.cpu_bound, ns))


@pytest.mark.skipif(not snippet.gil_status()[1], reason="free-threaded Python: the GIL is off")
@pytest.mark.timed
def test_threads_do_not_speed_up_pure_python():
    # With the GIL only one thread runs Python at a time, so two busy threads use one core's
    # worth of CPU time per second of wall time, never two. Measured as a ratio of the same run's
    # CPU and wall time, this holds on a loaded machine too, where wall-time speedups do not
    # (a busy CI machine once timed threads 0.104 s against a serial 0.153 s).
    cores = cores_used_by_this_process(lambda: snippet.run_threads(snippet.cpu_bound, [1_000_000] * 2, 2))
    assert cores < 1.4, f"{cores:.2f} cores' worth of CPU time: threads ran Python in parallel"


@needs_two_cpus
@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="counts the workers' CPU time in /proc")
@pytest.mark.timed
def test_processes_run_pure_python_at_the_same_time():
    # Two processes are two interpreters with a GIL each: both run Python at once, so the pool
    # uses about two cores' worth of CPU time per second of wall time, where threads use one
    # (the test above). The same check as the threads', for the same reason: a wall-clock
    # speedup also depends on the host. Two logical CPUs of one hyper-threaded core run both
    # processes, each more slowly: a quiet 16-CPU H100 host timed two workers at 1.1-1.2x the
    # serial loop (2026-11-25), where the same check had passed at 1.3x on two other hosts. The
    # speed-up the page shows is checked in every recorded run below.
    tasks = [5_000_000] * 2  # 0.2-0.4 s: enough clock ticks (10 ms) to count CPU time by
    with snippet.ProcessPoolExecutor(max_workers=2, mp_context=SPAWN) as pool:
        snippet.run_in_pool(pool, snippet.cpu_bound, [10, 10])  # start the workers

        def cores_used():
            ticks, start = _tree_ticks(os.getpid()), time.perf_counter()
            snippet.run_in_pool(pool, snippet.cpu_bound, tasks)
            wall = time.perf_counter() - start
            return (_tree_ticks(os.getpid()) - ticks) / os.sysconf("SC_CLK_TCK") / wall

        assert_speedup_unless_contended(cores_used, lambda cores: cores > 1.6)


@needs_two_cpus
@pytest.mark.timed
def test_threads_sort_numpy_arrays_at_the_same_time():
    # np.sort lets go of the GIL, so two threads sorting use about two cores' worth of CPU time
    # per second of wall time. Checked as CPU time per wall second for the reason given above:
    # a wall-clock speed-up also depends on whether the host's two logical CPUs share a core.
    # The speed-up the page shows is checked in every recorded run below.
    arrays = snippet.make_arrays(2, 10_000_000)  # about 0.1 s of sorting: long against thread start
    snippet.run_threads(snippet.sort_copy, arrays, 2)  # first touch of the result pages

    assert_speedup_unless_contended(
        lambda: cores_used_by_this_process(lambda: snippet.run_threads(snippet.sort_copy, arrays, 2)),
        lambda cores: cores > 1.6)


@needs_two_cpus
@pytest.mark.timed
def test_one_chunk_per_worker_beats_one_message_per_tiny_task():
    tiny = [200] * 2_000
    with snippet.ProcessPoolExecutor(max_workers=2, mp_context=SPAWN) as pool:
        snippet.run_in_pool(pool, snippet.cpu_bound, [10, 10])
        one_each, chunked = best_of_interleaved(
            2, lambda: snippet.run_in_pool(pool, snippet.cpu_bound, tiny),
            lambda: snippet.run_in_pool(pool, snippet.sum_of_cpu_bound,
                                        snippet.split_evenly(tiny, 2)))
    assert chunked < 0.7 * one_each, (one_each, chunked)


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) ---

# Also checked live above, where the tests skip on a busy machine.
def test_threads_do_not_speed_up_pure_python_and_processes_do_in_every_run(measured):
    names = [f"processes_threads_gil.pure_python[{m}]" for m in ("serial", "threads", "processes")]
    for run in measured(*names):
        serial = run.value(names[0])
        assert run.value(names[1]) > 0.8 * serial, run
        assert run.value(names[2]) < 0.5 * serial, run


def test_threads_speed_up_numpy_in_every_run(measured):
    names = ("processes_threads_gil.numpy_sort[threads]", "processes_threads_gil.numpy_sort[serial]")
    for run in measured(*names):
        assert run.value(names[0]) < run.value(names[1]), run
