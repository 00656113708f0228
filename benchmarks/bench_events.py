"""Benchmarks behind docs/execution/events.md.

Budget on an H100: record/query well under 1 s, overlap and wait about 1 s each; ~3 s in all.
"""

import pytest
import torch

pytestmark = pytest.mark.snippet("snippets/execution/events.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "record": "{ops} `record()` calls, `enable_timing={enable_timing}`",
    "query": "{ops} `query()` calls on a completed event",
    "overlap[synchronize]": "GPU work, then CPU work, in turn (`gpu_then_cpu`)",
    "overlap[event]": "GPU work and CPU work overlapped with an event (`gpu_and_cpu`)",
    "cpu_work": "CPU work alone",
    "gpu_work": "GPU work alone",
    "wait[event]": "Waiting on the small result's event (`wait_for_event`)",
    "wait[device]": "Waiting for the whole device (`wait_for_device`)",
    "host_pause[idle]": "A host pause between two timed events, GPU idle",
    "host_pause[queued-20]": "A host pause between two timed events, behind {queued} queued products",
}
WORDS = {}

# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {
    "record": "Python recording events",
    "query": "Python polling an event",
    "cpu_work": "the host CPU's own work",
    "wait[event]": "Python waiting on an event",
    "overlap[synchronize]": "the host's work, done after the GPU's",
}

OPS = 1000  # records or queries per timed round


@pytest.fixture(scope="module")
def snippet():
    from snippets.execution import events

    return events


@pytest.mark.parametrize("timing", [True, False], ids=["timing", "no-timing"])
def bench_record(benchmark, snippet, timing):
    """Record one event OPS times, created with or without enable_timing."""
    event = torch.cuda.Event(enable_timing=timing)
    event.record()  # the CUDA event is created lazily, on the first record
    benchmark.extra_info.update(ops=OPS, enable_timing=timing)
    # plain benchmark: times the host-side cost of recording, not the GPU work
    benchmark.pedantic(snippet.record_many, args=(event, OPS), setup=torch.cuda.synchronize,
                       rounds=20, warmup_rounds=2)


def bench_query(benchmark, snippet):
    """query() an event the GPU has already passed, OPS times."""
    event = torch.cuda.Event()
    event.record()
    event.synchronize()
    benchmark.extra_info["ops"] = OPS
    # plain benchmark: times the host-side cost of query(); there is no GPU work
    benchmark.pedantic(snippet.query_many, args=(event, OPS), rounds=20, warmup_rounds=2)


@pytest.mark.parametrize("mode", ["synchronize", "event"])
def bench_overlap(gpu_benchmark, snippet, mode):
    """~25 ms of GPU work and 20 chunks of CPU work: in turn, or overlapped with an event."""
    fn = snippet.gpu_then_cpu if mode == "synchronize" else snippet.gpu_and_cpu
    gpu_benchmark.extra_info["mode"] = mode
    gpu_benchmark(fn, snippet.a, rounds=10, warmup_rounds=1)


def bench_cpu_work(benchmark, snippet):
    """The 20 chunks of CPU work alone."""
    def twenty_chunks():
        for _ in range(20):
            snippet.cpu_work()

    # plain benchmark: CPU work only
    benchmark.pedantic(twenty_chunks, rounds=10, warmup_rounds=1)


def bench_gpu_work(gpu_benchmark, snippet):
    """The GPU work alone, synchronized."""
    gpu_benchmark(snippet.long_gpu_work, snippet.a, rounds=10, warmup_rounds=1)


@pytest.mark.parametrize("mode", ["event", "device"])
def bench_wait(benchmark, snippet, mode):
    """Time until the CPU may use a small result while the side stream runs ~25 ms of work."""
    fn = snippet.wait_for_event if mode == "event" else snippet.wait_for_device
    benchmark.extra_info["mode"] = mode
    # plain benchmark: "event" must not wait for the side stream's work
    benchmark.pedantic(fn, args=(snippet.a,), setup=torch.cuda.synchronize,
                       rounds=10, warmup_rounds=1)
    torch.cuda.synchronize()


@pytest.mark.parametrize("queued", [0, 20], ids=["idle", "queued-20"])
def bench_host_pause(gpu_benchmark, snippet, queued):
    """A 10 ms host pause between two timed events, on an idle GPU or behind 20 products.

    The round's time includes the queued work; what the page quotes is `event_s`, the median of
    what elapsed_time reported, next to `pause_s`.
    """
    import statistics

    pause = 0.01
    reported = []

    def timed():
        reported.append(snippet.timed_host_pause(snippet.a, pause, queued))

    gpu_benchmark(timed, rounds=5, warmup_rounds=1)
    gpu_benchmark.extra_info.update(queued=queued, pause_s=pause,
                                    event_s=statistics.median(reported[1:]))
