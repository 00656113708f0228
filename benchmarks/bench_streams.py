"""Benchmarks behind docs/execution/streams.md.

Budget on an H100: the module's 2 GiB of pinned data (~1-2 s), each pipeline run ~40-90 ms;
serial 12 rounds + overlapped 12 rounds + 11 interleaved rounds of all four + two profiled runs:
about 8 s in all.
"""

import pytest

from snippets.execution import streams as snippet

pytestmark = pytest.mark.snippet("snippets/execution/streams.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "serial": "Serial: copy all {chunks} chunks of {chunk_mib} MiB, then compute",
    "overlapped": "Pipelined: {chunks} chunks of {chunk_mib} MiB, copies on a second stream",
}
WORDS = {}

ROUNDS = 10


@pytest.fixture(scope="module")
def matmuls():
    return snippet.matmuls_to_balance()


def describe(benchmark, matmuls):
    benchmark.extra_info.update(
        chunks=snippet.CHUNKS,
        chunk_mib=snippet.ROWS * snippet.FEATURES * 4 // 2**20,
        matmuls_per_chunk=matmuls,
    )


def bench_serial(gpu_benchmark, matmuls):
    """Copy all chunks, then compute on all chunks, on one stream."""
    args = (snippet.host, snippet.weight, matmuls, snippet.out)
    describe(gpu_benchmark, matmuls)
    gpu_benchmark(snippet.serial, *args, rounds=ROUNDS, warmup_rounds=2)
    gpu_benchmark.extra_info["timeline"] = snippet.gpu_timeline(lambda: snippet.serial(*args))


def bench_overlapped(gpu_benchmark, matmuls):
    """The chunked pipeline; also the four-way comparison and the overlap efficiency."""
    args = (snippet.host, snippet.weight, matmuls, snippet.out)
    describe(gpu_benchmark, matmuls)
    gpu_benchmark(snippet.overlapped, *args, rounds=ROUNDS, warmup_rounds=2)
    info = gpu_benchmark.extra_info
    times = snippet.compare(matmuls, rounds=ROUNDS)
    info.update({f"{name}_ms": seconds * 1e3 for name, seconds in times.items()})
    info["overlap_efficiency"] = snippet.overlap_efficiency(times)
    info["speedup"] = times["serial"] / times["overlapped"]
    copied = snippet.host.numel() * snippet.host.element_size()  # bytes moved per run
    info["copy_gbs"] = copied / times["copy"] / 1e9
    events = snippet.gpu_timeline(lambda: snippet.overlapped(*args))
    info["timeline"] = events
    info["overlap_ms"] = snippet.overlap_seconds(events) * 1e3
