"""Timing GPU code: what a wall clock sees around asynchronous work, and how to time it right.

Run it: python -m snippets.execution.timing_gpu_code
"""

GPUS_NEEDED = 0  # runs anywhere: on a CPU every synchronization is a no-op

# --8<-- [start:setup]
import statistics
import time

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def sync():
    """Block until all work queued on the GPU is done (a CPU has no queue)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


n = 4096 if device.type == "cuda" else 512  # keep the CPU run short
a = torch.randn(n, n, device=device)
b = torch.randn(n, n, device=device)
# --8<-- [end:setup]


# --8<-- [start:wrong]
def time_launch_only(a, b):
    """WRONG on a GPU: the clock stops when the product is queued, not done."""
    start = time.perf_counter()
    a @ b
    return time.perf_counter() - start
# --8<-- [end:wrong]


# --8<-- [start:synchronized]
def time_synchronized(a, b):
    """Right: drain the queue before starting; wait for the work before stopping."""
    sync()
    start = time.perf_counter()
    a @ b
    sync()
    return time.perf_counter() - start
# --8<-- [end:synchronized]


# --8<-- [start:events]
def time_with_events(a, b):
    """CUDA events are timestamps taken by the GPU itself, in its stream's order."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    a @ b
    end.record()
    end.synchronize()  # wait for the GPU to reach `end`, not for the whole device
    return start.elapsed_time(end) / 1000  # elapsed_time is in milliseconds
# --8<-- [end:events]


# --8<-- [start:microsecond]
def kernel_times(fn, *args, repeats=100, flush_l2=False):
    """GPU seconds of each of `repeats` calls of fn, the host's gaps left out.

    Every call is queued behind a few large products, so the GPU never waits for the
    host between a `start` and its `end`. With flush_l2, a buffer twice the size of
    the L2 cache is zeroed before each call: fn then reads its inputs from device
    memory, as it does after other work, not from the cache its previous call filled.
    """
    l2_bytes = torch.cuda.get_device_properties(device).L2_cache_size
    scratch = torch.empty(2 * l2_bytes, dtype=torch.uint8, device=device)
    fn(*args)  # warm-up: kernels loaded, memory allocated, clocks raised
    pairs = [[torch.cuda.Event(enable_timing=True) for _ in range(2)]
             for _ in range(repeats)]  # a (start, end) pair per call
    sync()
    for _ in range(5):
        a @ b  # milliseconds of GPU work ahead of the first `start`
    for start, end in pairs:
        if flush_l2:
            scratch.zero_()
        start.record()
        fn(*args)
        end.record()
    sync()
    return [start.elapsed_time(end) / 1000 for start, end in pairs]
# --8<-- [end:microsecond]


# --8<-- [start:timer]
from torch.utils.benchmark import Timer


def time_with_timer(a, b):
    """torch.utils.benchmark synchronizes CUDA for you, warms up, and repeats."""
    timer = Timer(stmt="a @ b", globals={"a": a, "b": b})
    measurement = timer.blocked_autorange(min_run_time=0.5)
    return measurement.median, measurement.iqr
# --8<-- [end:timer]


# --8<-- [start:first_call]
def first_call_vs_steady(a, b, repeats=20):
    """The first product pays one-off costs (library handles, kernel loading)."""
    first = time_synchronized(a, b)
    steady = [time_synchronized(a, b) for _ in range(repeats)]
    return first, statistics.median(steady)
# --8<-- [end:first_call]


# --8<-- [start:median]
def summarize(times):
    """Median and spread: one slow outlier drags the mean, not the median."""
    q1, median, q3 = statistics.quantiles(times, n=4)
    return {"median": median, "iqr": q3 - q1, "mean": statistics.fmean(times)}
# --8<-- [end:median]


if __name__ == "__main__":
    # --8<-- [start:main]
    first, steady = first_call_vs_steady(a, b)
    print(f"device: {device}")
    print(f"first call {first * 1e3:.2f} ms, later calls {steady * 1e3:.2f} ms (median)")
    launch = time_launch_only(a, b)
    sync()
    real = time_synchronized(a, b)
    print(f"unsynchronized clock {launch * 1e6:.0f} µs, synchronized {real * 1e6:.0f} µs")
    if device.type == "cuda":
        print(f"CUDA events: {time_with_events(a, b) * 1e3:.2f} ms")
        x = torch.randn(2**21, device=device)  # 8 MiB: fits in the L2 cache
        for flush in (False, True):
            seconds = statistics.median(kernel_times(torch.sum, x, flush_l2=flush))
            print(f"sum of 8 MiB, L2 {'flushed' if flush else 'warm'}: "
                  f"{seconds * 1e6:.1f} µs per call on the GPU")
    median, iqr = time_with_timer(a, b)
    print(f"torch.utils.benchmark: median {median * 1e3:.2f} ms, IQR {iqr * 1e3:.3f} ms")
    times = [time_synchronized(a, b) for _ in range(30)]
    print({k: f"{v * 1e3:.2f} ms" for k, v in summarize([first, *times]).items()})
    # --8<-- [end:main]
