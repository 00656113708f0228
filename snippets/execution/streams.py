"""CUDA streams: a race between streams, overlapping copies with compute, and `record_stream`.

Run it on a CUDA machine: python -m snippets.execution.streams
"""

GPUS_NEEDED = 1  # streams are a CUDA feature

# --8<-- [start:setup]
import torch

device = torch.device("cuda")
side = torch.cuda.Stream()            # a second queue of work on the same GPU

n = 4096
a = torch.randn(n, n, device=device)
busy = torch.empty(n, n, device=device)  # scratch output for "keep a stream busy" work
# --8<-- [end:setup]


# --8<-- [start:race]
def sum_on_side_stream(wait):
    """The default stream writes x after a long queue of work; a side stream sums x."""
    x = torch.zeros(n, n, device=device)
    torch.cuda.synchronize()          # x really holds zeros
    with torch.cuda.stream(side):
        x.sum()                       # warm-up, so the race below needs no new memory
    torch.cuda.synchronize()          # both streams are idle
    for _ in range(20):
        torch.matmul(a, a, out=busy)  # tens of milliseconds of work queued
    x.fill_(1.0)                      # and only then the producer writes x
    if wait:
        # THE FIX: the side stream waits for everything queued so far
        side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        total = x.sum()               # the consumer, queued on the side stream
    # hand the result back: the default stream waits for the side stream
    torch.cuda.current_stream().wait_stream(side)
    return total.item()  # n * n if the consumer waited, 0.0 if it raced ahead
# --8<-- [end:race]


# --8<-- [start:data]
# 32 chunks of 16384 x 1024 float32 values, 64 MiB each
CHUNKS, ROWS, FEATURES = 32, 16384, 1024

host = torch.empty(CHUNKS, ROWS, FEATURES, pin_memory=True)  # 2 GiB, page-locked
host.copy_(torch.randn(CHUNKS, ROWS, FEATURES, device=device))  # fast: from the GPU
weight = torch.randn(FEATURES, FEATURES, device=device) / FEATURES**0.5
out = torch.empty(CHUNKS, ROWS, FEATURES, device=device)  # one result per chunk
# --8<-- [end:data]


# --8<-- [start:process]
def process(chunk, weight, matmuls, result):
    """Stand-in for real work: `matmuls` products with a 1024 x 1024 matrix."""
    for _ in range(matmuls - 1):
        chunk = chunk @ weight
    torch.matmul(chunk, weight, out=result)


def copy_only(host):
    """Every chunk host -> device, nothing else (queued on the current stream)."""
    return [h.to(device, non_blocking=True) for h in host]


def compute_only(chunks, weight, matmuls, out):
    """Every chunk's work on data that is already on the GPU."""
    for chunk, result in zip(chunks, out, strict=True):
        process(chunk, weight, matmuls, result)
# --8<-- [end:process]


# --8<-- [start:serial]
def serial(host, weight, matmuls, out):
    """Copy everything, then compute everything: one stream, nothing overlaps."""
    chunks = copy_only(host)
    compute_only(chunks, weight, matmuls, out)
# --8<-- [end:serial]


# --8<-- [start:overlapped]
copy_stream = torch.cuda.Stream()


def overlapped(host, weight, matmuls, out):
    """Copy chunk i+1 on copy_stream while the current stream computes on chunk i."""
    compute = torch.cuda.current_stream()
    for h, result in zip(host, out, strict=True):
        with torch.cuda.stream(copy_stream):
            # queued on copy_stream; its memory comes from copy_stream's pool
            chunk = h.to(device, non_blocking=True)
        # compute waits for this copy (and earlier ones), not for later ones
        compute.wait_stream(copy_stream)
        # chunk is read on `compute`: don't recycle its memory before that is done
        chunk.record_stream(compute)
        process(chunk, weight, matmuls, result)
# --8<-- [end:overlapped]


# --8<-- [start:measure]
import statistics
import time


def wall_time(fn):
    """Seconds for fn() including all the GPU work it queued."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def compare(matmuls, rounds=10):
    """Median times of the four runs, interleaved so that drift affects all alike."""
    on_gpu = copy_only(host)
    runs = {
        "copy": lambda: copy_only(host),
        "compute": lambda: compute_only(on_gpu, weight, matmuls, out),
        "serial": lambda: serial(host, weight, matmuls, out),
        "overlapped": lambda: overlapped(host, weight, matmuls, out),
    }
    times = {name: [] for name in runs}
    for _ in range(rounds + 1):              # round 0 is a warm-up and is dropped
        for name, run in runs.items():
            times[name].append(wall_time(run))
    return {name: statistics.median(t[1:]) for name, t in times.items()}


def overlap_efficiency(t):
    """Share of the shorter phase that the pipeline hid: 1.0 is perfect, 0.0 is none."""
    return (t["serial"] - t["overlapped"]) / min(t["copy"], t["compute"])
# --8<-- [end:measure]


# --8<-- [start:balance]
def matmuls_to_balance(repeats=10):
    """How many products per chunk take about as long as copying one chunk."""
    chunk = host[0].to(device)
    copy = [wall_time(lambda: host[0].to(device, non_blocking=True))
            for _ in range(repeats)]
    one = [wall_time(lambda: process(chunk, weight, 1, out[0]))
           for _ in range(repeats)]
    return max(1, round(statistics.median(copy) / statistics.median(one)))
# --8<-- [end:balance]


# --8<-- [start:reuse]
def free_while_in_use(record):
    """Free a tensor that a side stream has yet to read. Is its memory recycled?"""
    m = 3_000_000                             # 12 MB, a size only this example uses
    x = torch.ones(m, device=device)          # allocated on the default stream
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x * 2                                 # warm-up, so `y` finds cached memory
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        for _ in range(20):
            torch.matmul(a, a, out=busy)      # the side stream is busy for a while
        y = x * 2                             # before it reads x
    if record:
        x.record_stream(side)                 # x is in use on `side` too
    address = x.data_ptr()
    del x                                     # the Python object goes away now
    z = torch.full((m,), 7.0, device=device)  # a new tensor on the default stream
    reused = z.data_ptr() == address
    torch.cuda.current_stream().wait_stream(side)
    # without record_stream, y is all 14.0 (it read z's 7s) instead of 2.0
    return y.cpu(), reused
# --8<-- [end:reuse]


# --8<-- [start:timeline]
import json
import os
import tempfile

from torch.profiler import ProfilerActivity, profile

# trace category -> lane of the chart
LANES = {"gpu_memcpy": "copy", "kernel": "compute"}


def gpu_timeline(fn, limit=200):
    """What the GPU ran during fn(): lane, name, start and duration in seconds."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)["traceEvents"]
    gpu = [e for e in trace if e.get("ph") == "X" and e.get("cat") in LANES]
    gpu.sort(key=lambda e: e["ts"])
    t0 = gpu[0]["ts"]                         # trace times are in microseconds
    return [{"lane": LANES[e["cat"]],
             "name": e["name"].removeprefix("void ")[:48],
             "start": (e["ts"] - t0) / 1e6,
             "duration": e["dur"] / 1e6} for e in gpu[:limit]]


def spans(events, lane):
    """(start, end) of every event in one lane."""
    return [(e["start"], e["start"] + e["duration"])
            for e in events if e["lane"] == lane]


def overlap_seconds(events):
    """Total time during which a copy and a kernel ran at the same moment."""
    return sum(max(0.0, min(c1, k1) - max(c0, k0))
               for c0, c1 in spans(events, "copy")
               for k0, k1 in spans(events, "compute"))
# --8<-- [end:timeline]


if __name__ == "__main__":
    # --8<-- [start:main]
    print(f"without wait_stream: {sum_on_side_stream(wait=False):.0f}, "
          f"with it: {sum_on_side_stream(wait=True):.0f} (right answer: {n * n})")
    matmuls = matmuls_to_balance()
    times = compare(matmuls)
    print(f"{CHUNKS} chunks of 64 MiB, {matmuls} products per chunk")
    for name, seconds in times.items():
        print(f"  {name:>10}: {seconds * 1e3:6.1f} ms")
    print(f"overlap efficiency {overlap_efficiency(times):.2f}, "
          f"speedup {times['serial'] / times['overlapped']:.2f}x")
    for label, run in (("serial", serial), ("overlapped", overlapped)):
        events = gpu_timeline(lambda run=run: run(host, weight, matmuls, out))
        both = overlap_seconds(events) * 1e3
        print(f"{label}: copies and kernels ran together for {both:.1f} ms")
    for record in (False, True):
        y, reused = free_while_in_use(record)
        print(f"record_stream={record}: memory reused early: {reused}, "
              f"y holds {y.unique().tolist()}")
    # --8<-- [end:main]
