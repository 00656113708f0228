"""CUDA events: ordering work across streams, polling, timing, waiting, and what an event costs.

Run it on a CUDA machine: python -m snippets.execution.events
"""

GPUS_NEEDED = 1  # events are markers in CUDA streams

# --8<-- [start:setup]
import time

import torch

device = torch.device("cuda")
a = torch.randn(4096, 4096, device=device)


def long_gpu_work(a, repeats=10):
    """Ten 4096 x 4096 products: milliseconds of GPU work, microseconds to queue."""
    for _ in range(repeats):
        a @ a
# --8<-- [end:setup]


# --8<-- [start:order]
side = torch.cuda.Stream()


def produce_on_side_stream(x, rounds=10):
    """Compute on a side stream; the current stream uses it only after an event."""
    side.wait_stream(torch.cuda.current_stream())  # x was written on the current stream
    with torch.cuda.stream(side):
        y = x
        for _ in range(rounds):
            y = torch.tanh(y @ x)
    ready = torch.cuda.Event()
    ready.record(side)  # a marker behind the last kernel queued on `side`
    torch.cuda.current_stream().wait_event(ready)  # the GPU waits; the CPU carries on
    y.record_stream(torch.cuda.current_stream())  # allocated on `side`, used here too
    return y.sum(dim=0)


def same_on_one_stream(x, rounds=10):
    """The reference: the same computation, all on the current stream."""
    y = x
    for _ in range(rounds):
        y = torch.tanh(y @ x)
    return y.sum(dim=0)
# --8<-- [end:order]


# --8<-- [start:poll]
def cpu_work():
    """Stand-in for host work (the next batch, logging): about a millisecond."""
    return sum(i * i for i in range(20_000))


def work_until_done(event):
    """Keep the CPU busy until the GPU has reached `event`; query() never blocks."""
    chunks = 0
    while not event.query():
        cpu_work()
        chunks += 1
    return chunks
# --8<-- [end:poll]


# --8<-- [start:overlap]
def gpu_then_cpu(a, chunks=20):
    """Wait for the GPU, then do the CPU's own work: the two take turns."""
    long_gpu_work(a)
    torch.cuda.synchronize()
    for _ in range(chunks):
        cpu_work()


def gpu_and_cpu(a, chunks=20):
    """Mark the end of the GPU work with an event; wait on it only when needed."""
    long_gpu_work(a)
    done = torch.cuda.Event()
    done.record()
    for _ in range(chunks):
        cpu_work()
    done.synchronize()  # returns at once if the GPU finished while the CPU worked
# --8<-- [end:overlap]


# --8<-- [start:timing]
def gpu_seconds(fn, *args):
    """GPU time between two events around fn; needs enable_timing=True."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn(*args)
    end.record()
    end.synchronize()  # elapsed_time is only valid once both events have completed
    return start.elapsed_time(end) / 1000  # milliseconds -> seconds


def wall_seconds(fn, *args):
    """The same measured with a host clock and a synchronization on both sides."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn(*args)
    torch.cuda.synchronize()
    return time.perf_counter() - start
# --8<-- [end:timing]


# --8<-- [start:host_gap]
def timed_host_pause(a, pause_s=0.01, queued=0):
    """Two timed events with no GPU work between them, only a pause of the host.

    `queued` products are put in the stream first. With none, the GPU passes `start`
    at once and waits for the host to record `end`: the pause is timed. With enough
    of them, the GPU is still busy when both are recorded and passes them back to back.
    """
    torch.cuda.synchronize()  # start from an idle GPU
    long_gpu_work(a, repeats=queued)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    time.sleep(pause_s)  # the host does something else; nothing is queued meanwhile
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000
# --8<-- [end:host_gap]


# --8<-- [start:wait]
def wait_for_event(a):
    """Wait for one small result while slow, unrelated work runs on the side stream."""
    small = a[:, :64].sum(dim=0)  # what the CPU needs next, on the current stream
    ready = torch.cuda.Event()
    ready.record()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        long_gpu_work(a)  # slow, and not needed yet
    side_done = torch.cuda.Event()
    side_done.record(side)
    ready.synchronize()  # waits until the GPU has passed `ready`, for nothing else
    return small, side_done


def wait_for_device(a):
    """The same, but torch.cuda.synchronize() also waits for the side stream."""
    small = a[:, :64].sum(dim=0)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        long_gpu_work(a)
    torch.cuda.synchronize()  # every stream on the device, the slow one included
    return small
# --8<-- [end:wait]


# --8<-- [start:cost]
def record_many(event, n=1000):
    """Record one event n times; each record moves the marker to the stream's end."""
    for _ in range(n):
        event.record()
    event.synchronize()


def query_many(event, n=1000):
    """Ask n times whether the GPU has passed the event; never waits."""
    for _ in range(n):
        event.query()
# --8<-- [end:cost]


if __name__ == "__main__":
    # --8<-- [start:main]
    two_streams, one_stream = produce_on_side_stream(a), same_on_one_stream(a)
    ok = torch.allclose(two_streams, one_stream, rtol=1e-4, atol=1e-3)
    print(f"side stream + event gives the one-stream result: {ok}")

    long_gpu_work(a)
    finished = torch.cuda.Event()
    finished.record()
    print(f"query() right after queuing: {finished.query()}")
    print(f"the CPU did {work_until_done(finished)} chunks of work while the GPU ran")

    print(f"events: {gpu_seconds(long_gpu_work, a) * 1e3:.1f} ms, "
          f"wall clock: {wall_seconds(long_gpu_work, a) * 1e3:.1f} ms")
    idle, busy = timed_host_pause(a), timed_host_pause(a, queued=20)
    print(f"10 ms host pause between two events: {idle * 1e3:.2f} ms on an idle GPU, "
          f"{busy * 1e3:.3f} ms behind 20 queued products")

    for name, overlap in (("synchronize, then CPU work", gpu_then_cpu),
                          ("CPU work, then event.synchronize()", gpu_and_cpu)):
        print(f"{name}: {wall_seconds(overlap, a) * 1e3:.1f} ms")

    torch.cuda.synchronize()
    start = time.perf_counter()
    _, side_done = wait_for_event(a)
    waited = time.perf_counter() - start
    print(f"event.synchronize() returned after {waited * 1e3:.2f} ms; "
          f"side stream done then: {side_done.query()}")
    torch.cuda.synchronize()
    start = time.perf_counter()
    wait_for_device(a)
    waited = time.perf_counter() - start
    print(f"torch.cuda.synchronize() returned after {waited * 1e3:.2f} ms")

    for timing in (True, False):
        event = torch.cuda.Event(enable_timing=timing)
        event.record()
        torch.cuda.synchronize()
        start = time.perf_counter()
        record_many(event)
        per_record = (time.perf_counter() - start) / 1000
        print(f"record() with enable_timing={timing}: {per_record * 1e6:.2f} µs")
    # --8<-- [end:main]
