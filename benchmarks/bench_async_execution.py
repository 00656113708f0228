"""Benchmarks behind docs/execution/async-execution.md.

Budget on an H100: queue ~1 s, train_loop ~3 s, alloc <1 s, launch_blocking ~4 fresh processes
(~15 s); about 20 s in all.
"""

import functools
import statistics

import pytest
import torch

from snippets.execution import async_execution as snippet

pytestmark = [pytest.mark.snippet("snippets/execution/async_execution.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "queue[launch]": "{kernels} matrix products: until `launch` returns",
    "queue[launch-and-wait]": "{kernels} matrix products: until they are finished",
    "queue_timeline": "{kernels} matrix products under `torch.profiler`: each launch, kernel and the wait",
    "train_loop[every-step]": "{ops} training steps, reading the loss every step",
    "train_loop[every-50]": "{ops} training steps, reading the loss every {every} steps",
    "alloc": "Allocating {size_mib} MiB {source}",
    "launch_blocking[default]": "A step in a fresh process, asynchronous launches (the default)",
    "launch_blocking[blocking]": "A step in a fresh process with `CUDA_LAUNCH_BLOCKING=1`",
}
WORDS = {"cached": "from PyTorch's cache", "fresh": "by growing the pool (`cudaMalloc`)"}

# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {
    "queue[launch]": "Python and kernel launches",
    "alloc": "the caching allocator and cudaMalloc",
    "launch_blocking": "starting processes and CUDA in them",
    "train_loop[every-step]": "Python waiting on the GPU every step",
}

STEPS = 100  # training steps per timed round


@pytest.mark.parametrize("what", ["launch", "launch-and-wait"])
def bench_queue(benchmark, what):
    """Ten 4096 x 4096 products: the time to queue them, and the time until they are done."""
    fn = snippet.launch if what == "launch" else snippet.launch_and_wait
    benchmark.extra_info.update(kernels=10, flops=10 * 2 * snippet.n**3, what=what)
    # plain benchmark: "launch" times how long the call takes to return, not the GPU work
    benchmark.pedantic(fn, args=(snippet.a,), setup=snippet.sync, rounds=20, warmup_rounds=2)
    snippet.sync()


def bench_queue_timeline(benchmark, tmp_path):
    """The ten products of queue[launch-and-wait] under torch.profiler, for the host-queue
    figure: when each launch ran on the CPU, each product on the GPU, and the synchronize, as
    extra_info["timeline"] (fieldguide.rendering.diagrams.timeline_from_trace). The committed runs hold
    only queue's two totals. The profiler adds its own cost to every launch, so the launches here
    are slower than queue[launch]'s; the time of a round is the GPU's work, as in
    queue[launch-and-wait]."""
    import json

    from torch.profiler import ProfilerActivity, profile

    from fieldguide.diagrams import timeline_from_trace

    profiles = []

    def profiled():
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            snippet.launch_and_wait(snippet.a)
        profiles.append(prof)

    # plain benchmark: each round is one profiled launch_and_wait, which synchronizes itself
    benchmark.pedantic(profiled, setup=snippet.sync, rounds=5, warmup_rounds=1)
    path = tmp_path / "queue.json"
    profiles[-1].export_chrome_trace(str(path))
    timeline = timeline_from_trace(json.loads(path.read_text())["traceEvents"])
    benchmark.extra_info.update(kernels=10, timeline=timeline)


@pytest.mark.parametrize("every", [1, 50], ids=["every-step", "every-50"])
def bench_train_loop(gpu_benchmark, every):
    """STEPS training steps of a 3-hidden-layer MLP, reading the loss every step or every 50."""
    model, optimizer = snippet.make_model()
    batches = snippet.make_batches()
    if every == 1:
        loop = functools.partial(snippet.train_reading_every_step, model, optimizer, batches, STEPS)
    else:
        loop = functools.partial(snippet.train_reading_every, model, optimizer, batches, STEPS,
                                 every=every)
    gpu_benchmark.extra_info.update(ops=STEPS, every=every, width=snippet.width,
                                    batch=snippet.batch)
    gpu_benchmark(loop, rounds=5, warmup_rounds=1)


@pytest.mark.parametrize("source", ["cached", "fresh"])
def bench_alloc(benchmark, source):
    """Allocate 256 MiB: served from PyTorch's cache, or by cudaMalloc after empty_cache()."""
    nbytes = snippet.alloc_bytes
    snippet.allocate(nbytes)
    setup = torch.cuda.empty_cache if source == "fresh" else snippet.sync
    benchmark.extra_info.update(size_mib=nbytes // 2**20, source=source)
    # plain benchmark: times the allocator, no GPU work; "fresh" needs empty_cache as setup
    benchmark.pedantic(snippet.allocate, args=(nbytes,), setup=setup, rounds=20, warmup_rounds=1)


@pytest.mark.parametrize("launch_blocking", [False, True], ids=["default", "blocking"])
def bench_launch_blocking(benchmark, launch_blocking, monkeypatch):
    """The every-50 training loop in a fresh process, with and without CUDA_LAUNCH_BLOCKING=1.

    pytest-benchmark times whole processes (start-up included); the loop's own time per step,
    measured inside the child, is in extra_info["step_us"].
    """
    from fieldguide import ROOT

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the child imports the snippet
    inner = []

    def fresh_process():
        inner.append(snippet.seconds_per_step_in_fresh_process(launch_blocking))

    # plain benchmark: times whole child processes; nothing is queued on the GPU here
    benchmark.pedantic(fresh_process, rounds=2, warmup_rounds=0)
    benchmark.extra_info.update(step_us=statistics.median(inner) * 1e6,
                                launch_blocking=launch_blocking)
