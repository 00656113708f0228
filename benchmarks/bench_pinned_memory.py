"""Benchmarks behind docs/data-movement/pinned-memory.md."""

import time

import pytest
import torch

from snippets.data_movement import pinned_memory as snippet

pytestmark = pytest.mark.snippet("snippets/data_movement/pinned_memory.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "copy": "{direction} copy from {kind} memory, {bytes}",
    "pin": "`pin_memory()` of {bytes} again: a cached pinned block, and the copy into it",
    "return": "Until `.to()` returns: {bytes} from {kind} memory, {non_blocking}",
    "overlap": "CPU work and a {bytes} copy from pinned memory, {non_blocking}",
    "cpu_work": "CPU work alone",
    "return_busy": "Until `.to()` returns, GPU busy: {bytes} from {kind} memory, {non_blocking}",
    "pinning": "`pin_memory()` of {bytes}, {cache}",
}
WORDS = {"h2d": "Host → device", "d2h": "Device → host",
         "True": "`non_blocking=True`", "False": "blocking",
         "fresh": "newly page-locked memory", "cached": "a cached pinned block",
         # the series of the busy-queue chart (its `case`): legends show words, not code
         "pageable, non_blocking=True": "pageable, non-blocking",
         "pinned, non_blocking=True": "pinned, non-blocking"}

# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {
    "copy[*-pageable-*]": "copies staged through pageable host memory",
    "copy[*-pinned-*KiB]": "Python and the copy's launch",
    "pin": "the host copying into page-locked memory",
    "pinning": "page-locking host memory",
    "return": "the host until `.to()` returns",
    "return_busy[pinned-non_blocking-*]": "Python queueing a copy",
    "return_busy[pageable-non_blocking-*KiB]": "the host staging a small copy",
    "return_busy[pageable-non_blocking-1MiB]": "the host staging a small copy",
    "cpu_work": "the host CPU's own work",
}

KiB, MiB, GiB = 2**10, 2**20, 2**30
SIZES = [KiB * 4**i for i in range(11)]  # 1 KiB ... 1 GiB


def size_label(nbytes):
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= scale:
            return f"{nbytes // scale}{unit}"
    return f"{nbytes}B"


def rounds_for(nbytes):
    return 100 if nbytes <= MiB else 30 if nbytes <= 64 * MiB else 10


COPIES = [(d, kind, size) for d in ("h2d", "d2h") for kind in ("pageable", "pinned") for size in SIZES]


@pytest.mark.parametrize(("direction", "kind", "nbytes"), COPIES,
                         ids=[f"{d}-{k}-{size_label(s)}" for d, k, s in COPIES])
def bench_copy(benchmark, direction, kind, nbytes):
    src, dst = snippet.make_buffers(nbytes, kind == "pinned", direction)
    benchmark.extra_info.update(bytes=nbytes, kind=kind, direction=direction)
    benchmark.pedantic(snippet.copy_and_wait, args=(src, dst), setup=torch.cuda.synchronize,
                       rounds=rounds_for(nbytes), warmup_rounds=2)
    if direction == "h2d" and kind == "pinned" and nbytes >= 256 * MiB:
        # Right after the copies: an idle GPU may run its link at a lower generation.
        generation, lanes = snippet.pcie_link()
        benchmark.extra_info.update(pcie_generation=generation, pcie_lanes=lanes,
                                    link_gbs=snippet.link_gbs(generation, lanes))


PIN_SIZES = [MiB, 16 * MiB, 256 * MiB]


@pytest.mark.parametrize("nbytes", PIN_SIZES, ids=[size_label(s) for s in PIN_SIZES])
def bench_pin(benchmark, nbytes):
    """The price of `pin_memory()`: page-lock a fresh buffer and copy into it."""
    pageable = torch.ones(nbytes, dtype=torch.uint8)
    benchmark.extra_info["bytes"] = nbytes
    benchmark.pedantic(pageable.pin_memory, rounds=10, warmup_rounds=1)


RETURN_CASES = [("pageable", False), ("pageable", True), ("pinned", False), ("pinned", True)]


@pytest.mark.parametrize(("kind", "non_blocking"), RETURN_CASES,
                         ids=[f"{k}-{'non_blocking' if nb else 'blocking'}" for k, nb in RETURN_CASES])
def bench_return(benchmark, kind, non_blocking):
    """Time until `.to(device)` returns control for a 64 MiB tensor (deliberately no sync inside)."""
    host = torch.ones(64 * MiB, dtype=torch.uint8, pin_memory=kind == "pinned")
    benchmark.extra_info.update(kind=kind, non_blocking=non_blocking, bytes=64 * MiB)
    benchmark.pedantic(snippet.start_copy, args=(host, non_blocking),
                       setup=torch.cuda.synchronize, rounds=30, warmup_rounds=2)
    torch.cuda.synchronize()


@pytest.mark.parametrize("non_blocking", [False, True], ids=["blocking", "non_blocking"])
def bench_overlap(benchmark, non_blocking):
    """Copy 256 MiB from pinned memory while the CPU does unrelated work."""
    host = torch.ones(256 * MiB, dtype=torch.uint8, pin_memory=True)
    benchmark.extra_info.update(non_blocking=non_blocking, bytes=256 * MiB)
    benchmark.pedantic(snippet.copy_while_cpu_works, args=(host, non_blocking),
                       setup=torch.cuda.synchronize, rounds=20, warmup_rounds=2)


def bench_cpu_work(benchmark):
    """The CPU work alone, so the page can show overlap against its parts."""
    benchmark.pedantic(snippet.cpu_work, rounds=20, warmup_rounds=2)


@pytest.mark.parametrize(("kind", "non_blocking", "nbytes"), [
    pytest.param(kind, nb, 4 * KiB * 4**i,
                 id=f"{kind}-{'non_blocking' if nb else 'blocking'}-{size_label(4 * KiB * 4**i)}")
    for kind in ("pageable", "pinned") for nb in (False, True) for i in range(8)])
def bench_return_busy(benchmark, kind, non_blocking, nbytes):
    """Time until `.to(device)` returns while the GPU still works through a queue of
    matrix products (4 KiB to 64 MiB; deliberately no sync inside the timed call)."""
    import statistics

    products = 12  # 4096 x 4096 products: a few tens of ms of queue on an H100
    host = torch.ones(nbytes, dtype=torch.uint8, pin_memory=kind == "pinned")
    snippet.queue_gpu_work(1)  # warm-up: a kernel's first launch can block
    queue_s = statistics.median(snippet.queue_seconds(products) for _ in range(3))

    def busy_gpu():
        torch.cuda.synchronize()  # the previous round's copy is done
        snippet.queue_gpu_work(products)

    benchmark.extra_info.update(
        bytes=nbytes, kind=kind, non_blocking=non_blocking,
        case=f"{kind}, {'non_blocking=True' if non_blocking else 'blocking'}",
        queue_products=products, queue_matrix_n=4096, queue_ms=queue_s * 1e3)
    benchmark.pedantic(snippet.start_copy, args=(host, non_blocking), setup=busy_gpu,
                       rounds=5, warmup_rounds=1)
    torch.cuda.synchronize()


@pytest.mark.parametrize(("cache", "nbytes"), [
    pytest.param(cache, nbytes, id=f"{cache}-{size_label(nbytes)}")
    for cache in ("fresh", "cached") for nbytes in (MiB, 16 * MiB, 256 * MiB)])
def bench_pinning(benchmark, cache, nbytes):
    """`pin_memory()` when PyTorch must page-lock new memory ("fresh": its host cache is
    emptied before every round) and when it hands back a cached block ("cached")."""
    def empty_host_cache():
        # Public since the torch.accelerator API gained it; torch._C._host_emptyCache
        # (private, CUDA only) on releases that predate it.
        release = getattr(torch.accelerator, "empty_host_cache", None)
        (release or torch._C._host_emptyCache)()

    pageable = torch.ones(nbytes, dtype=torch.uint8)
    empty_host_cache()
    blocks_before = torch.cuda.host_memory_stats()["num_host_alloc"]
    rounds, warmup_rounds = (5, 1) if nbytes >= 256 * MiB else (10, 1)
    if cache == "cached":
        # Right after the fresh 256 MiB case, 7 of 10 cached 1 MiB rounds took 6 ms and the
        # rest 0.02 ms (H100, 2026-11-23): warm up for a time, not a count.
        warm_until = time.perf_counter() + 0.2
        while time.perf_counter() < warm_until:
            snippet.pin_once(pageable)
    benchmark.pedantic(snippet.pin_once, args=(pageable,),
                       setup=empty_host_cache if cache == "fresh" else None,
                       rounds=rounds, warmup_rounds=warmup_rounds)
    new_blocks = torch.cuda.host_memory_stats()["num_host_alloc"] - blocks_before
    # Fresh: one new pinned block per round; cached: one, made in the warm-up round.
    benchmark.extra_info.update(bytes=nbytes, cache=cache, new_blocks=new_blocks,
                                rounds_run=rounds + warmup_rounds)
    empty_host_cache()
