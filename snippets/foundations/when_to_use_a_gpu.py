"""When to use a GPU: the four-step check, with the data-movement step measured.

Run it: python -m snippets.foundations.when_to_use_a_gpu
"""

GPUS_NEEDED = 0  # runs anywhere; the CPU-vs-GPU comparisons run only where there is a GPU

# --8<-- [start:setup]
import math
import statistics
import time

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def sync():
    """Wait until the GPU has finished everything queued so far (a CPU has no queue)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_time(fn, *args, repeats=5, warmup=1):
    """Median seconds of fn(*args). fn must wait for its own work before it
    returns: the clock stops when it does, so CPU work is not charged a GPU sync."""
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(repeats):
        sync()  # earlier GPU work finishes outside the clock
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)
# --8<-- [end:setup]


# --8<-- [start:fits]
def tensor_bytes(shape, dtype=torch.float32):
    return math.prod(shape) * dtype.itemsize


def fits_on_gpu(nbytes, headroom=0.8):
    """Step 1: does this working set fit in the GPU memory that is free right now?"""
    free, total = torch.cuda.mem_get_info()
    return nbytes <= headroom * free
# --8<-- [end:fits]


# --8<-- [start:workloads]
def elementwise(x):
    """A few operations per element and nothing else: typical preprocessing code."""
    return torch.sin(x) * 2.0 + 1.0


def matmul(a, b):
    """n**3 multiply-adds on 2 * n**2 inputs: the work grows faster than the data."""
    return a @ b


WORK = {"elementwise": elementwise, "matmul": matmul}


def make_inputs(case, size, where="cpu"):
    """`size` float32 elements for elementwise; two size x size matrices for matmul."""
    if case == "elementwise":
        return (torch.rand(size, device=where),)
    return (torch.rand(size, size, device=where), torch.rand(size, size, device=where))
# --8<-- [end:workloads]


# --8<-- [start:paths]
def with_transfers(fn, *host_inputs):
    """The whole trip: inputs to the GPU, compute, result back to the host."""
    on_gpu = [t.to(device) for t in host_inputs]
    return fn(*on_gpu).cpu()  # .cpu() waits until the result has arrived


def resident(fn, *gpu_inputs):
    """Compute only: the data already lives on the GPU and the result stays there."""
    out = fn(*gpu_inputs)
    sync()
    return out


SETTLE_S = 0.1  # seconds of pause before the GPU is timed (see compare)


def compare(case, size, repeats=5):
    """Median seconds per call: GPU with transfers, GPU alone, then on the CPU."""
    fn, host = WORK[case], make_inputs(case, size)
    times = {}
    if device.type == "cuda":
        on_gpu = [t.to(device) for t in host]
        # The GPU first, after a pause: no CPU run comes right before a GPU measurement,
        # and the slower first call after the idle gap is median_time's warm-up.
        time.sleep(SETTLE_S)
        times["gpu_with_transfers"] = median_time(with_transfers, fn, *host,
                                                  repeats=repeats)
        times["gpu_resident"] = median_time(resident, fn, *on_gpu, repeats=repeats)
    times["cpu"] = median_time(fn, *host, repeats=repeats)
    return times
# --8<-- [end:paths]


# --8<-- [start:crossover]
SWEEPS = {
    "elementwise": [2**k for k in range(10, 27, 2)],  # 1 Ki ... 64 Mi float32 elements
    "matmul": [2**k for k in range(5, 13)],           # n = 32 ... 4096
}


def crossover(case, sizes, repeats=5):
    """The smallest size from which the GPU, transfers included, wins at every size.

    Returns (that size or None, {size: times}).
    """
    results = {size: compare(case, size, repeats) for size in sizes}
    winning_from = None
    for size in sorted(sizes, reverse=True):
        if results[size]["gpu_with_transfers"] >= results[size]["cpu"]:
            break
        winning_from = size
    return winning_from, results
# --8<-- [end:crossover]


# --8<-- [start:sequential]
def first_crossing_loop(x, threshold):
    """Where does the running sum first pass threshold? One element per Python step."""
    total = torch.zeros((), dtype=x.dtype, device=x.device)
    for i in range(len(x)):
        total += x[i]
        if total > threshold:  # `if` on a GPU value: copy it to the host and wait
            return i
    return -1


def first_crossing_vectorized(x, threshold):
    """The same answer from whole-array operations: a scan, a comparison, an argmax."""
    above = torch.cumsum(x, dim=0) > threshold
    return int(above.int().argmax()) if above.any() else -1
# --8<-- [end:sequential]


# --8<-- [start:supported]
def runs_on(where, fn, *example_inputs):
    """Step 4: does this operation have a kernel there? Try it on a small example."""
    try:
        fn(*(t.to(where) for t in example_inputs))
    except (NotImplementedError, RuntimeError) as exc:
        return False, str(exc).splitlines()[0]
    return True, ""
# --8<-- [end:supported]


if __name__ == "__main__":
    # --8<-- [start:main]
    print(f"device: {device}; PyTorch uses {torch.get_num_threads()} CPU threads")
    x = torch.randint(0, 10, (2000,))
    for where in dict.fromkeys(["cpu", device.type]):
        xs = x.to(where)
        loop = median_time(first_crossing_loop, xs, 4 * len(x), repeats=3)
        vectorized = median_time(first_crossing_vectorized, xs, 4 * len(x), repeats=3)
        print(f"{where}: loop {loop * 1e3:.2f} ms, vectorized {vectorized * 1e3:.3f} ms, "
              f"answer {first_crossing_loop(xs, 4 * len(x))}")
    a = torch.ones(2, 2, dtype=torch.int64)
    print("int64 matrix product:", runs_on(device, torch.mm, a, a))
    if device.type == "cuda":
        need = 3 * tensor_bytes((4096, 4096))
        print(f"a 4096 x 4096 product needs {need / 2**20:.0f} MiB;",
              f"fits: {fits_on_gpu(need)}")
        for case, sizes in SWEEPS.items():
            winning_from, results = crossover(case, sizes)
            for size, times in results.items():
                print(f"  {case:11} {size:>9}: " + ", ".join(
                    f"{path} {seconds * 1e3:8.3f} ms" for path, seconds in times.items()))
            print(f"{case}: the GPU, transfers included, wins from size {winning_from}")
    else:
        print("no GPU here; CPU time for a 256 x 256 product:",
              f"{compare('matmul', 256)['cpu'] * 1e3:.2f} ms")
    # --8<-- [end:main]
