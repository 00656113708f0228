"""Benchmarks behind docs/data-movement/data-loading.md."""

import statistics
import time

import pytest

from snippets.data_movement import data_loading as snippet

pytestmark = [pytest.mark.snippet("snippets/data_movement/data_loading.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "loader": "One epoch of {items} items, `num_workers={num_workers}`",
    "first_batch": "First batch from a fresh loader, `num_workers={num_workers}`",
    "augment[dataloader]": "{items} images augmented one at a time, DataLoader with {num_workers} workers",
    "augment[gpu]": "{items} images augmented in whole batches on the GPU",
    "worker_start": "First batch from a fresh loader, {num_workers} workers started by `{context}`",
    "cuda_worker_memory": "GPU memory per spawned worker that uses CUDA, {num_workers} workers",
}
WORDS = {}

# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {
    "loader": "Python producing items, worker processes and page-locking",
    "first_batch": "starting worker processes and Python producing items",
    "augment": "Python and kernel launches per batch",
    "worker_start": "starting worker processes",
    "cuda_worker_memory": "starting processes and CUDA in them",
}

WORKERS = [0, 1, 2, 4, 8]


def timed(fn, durations):
    """fn, recording how long each call took (the benchmark's own stats also need it)."""
    def call():
        start = time.perf_counter()
        fn()
        durations.append(time.perf_counter() - start)
    return call


@pytest.mark.parametrize("num_workers", WORKERS, ids=[str(w) for w in WORKERS])
def bench_loader(gpu_benchmark, num_workers):
    """One epoch of the CPU-bound dataset; the warm-up epoch starts the (persistent) workers."""
    loader = snippet.make_loader(snippet.dataset, num_workers)
    durations, rounds = [], 3
    gpu_benchmark(timed(lambda: snippet.run_epoch(loader), durations), rounds=rounds,
                  warmup_rounds=1)
    items = len(snippet.dataset)
    gpu_benchmark.extra_info.update(
        num_workers=num_workers, items=items, ops=items, fields=snippet.dataset.fields,
        items_per_s=round(items / statistics.median(durations[-rounds:])))


@pytest.mark.parametrize("num_workers", [0, 8], ids=["0", "8"])
def bench_first_batch(benchmark, num_workers):
    """A fresh loader until its first batch: what starting the worker processes costs.

    The benchmark's own time also includes shutting the workers down again; the page quotes
    first_batch_ms, which the function measures up to the first batch only.
    """
    waits = []

    def first_batch():
        waits.append(snippet.time_to_first_batch(snippet.dataset, num_workers))

    # plain benchmark: worker start-up on the CPU, no GPU work
    benchmark.pedantic(first_batch, rounds=3, warmup_rounds=1)
    benchmark.extra_info.update(num_workers=num_workers,
                                first_batch_ms=round(statistics.median(waits[-3:]) * 1e3, 1))


@pytest.mark.parametrize("where", ["dataloader", "gpu"])
def bench_augment(gpu_benchmark, where):
    """Random crop + flip of a 20,000-image dataset: DataLoader workers vs tensor ops on the GPU."""
    images, labels = snippet.random_images(snippet.n_images)
    if where == "gpu":
        epoch = lambda: snippet.gpu_epoch(images, labels)  # noqa: E731
        gpu_benchmark.extra_info["num_workers"] = 0
    else:
        loader = snippet.make_image_loader(images, labels)
        epoch = lambda: snippet.dataloader_epoch(loader)  # noqa: E731
        gpu_benchmark.extra_info["num_workers"] = snippet.workers
    durations, rounds = [], 3
    gpu_benchmark(timed(epoch, durations), rounds=rounds, warmup_rounds=1)
    gpu_benchmark.extra_info.update(
        where=where, items=len(images), ops=len(images),
        items_per_s=round(len(images) / statistics.median(durations[-rounds:])))


@pytest.mark.parametrize("context", ["fork", "spawn"])
def bench_worker_start(benchmark, context):
    """A fresh loader of the CPU dataset with 2 workers started by `context`, to its first batch.

    What spawn adds at start-up: each worker is a new interpreter that imports PyTorch and the
    dataset's module. The page quotes first_batch_ms (up to the first batch; the benchmark's own
    time also includes shutting the workers down).
    """
    from torch.utils.data import DataLoader

    workers, waits = 2, []

    def first_batch():
        start = time.perf_counter()
        loader = DataLoader(snippet.dataset, batch_size=32, num_workers=workers,
                            multiprocessing_context=context)
        next(iter(loader))
        waits.append(time.perf_counter() - start)

    # plain benchmark: worker start-up on the CPU, no GPU work
    benchmark.pedantic(first_batch, rounds=3, warmup_rounds=1)
    benchmark.extra_info.update(context=context, num_workers=workers,
                                first_batch_ms=round(statistics.median(waits[-3:]) * 1e3, 1))


def bench_cuda_worker_memory(benchmark):
    """Device memory that spawned workers using CUDA (GpuInWorker) take, per worker.

    torch.cuda.mem_get_info counts the whole device, so the drop in free memory while two
    persistent workers are alive, each having produced a batch, is their CUDA contexts plus what
    their caching allocators hold. Quoted as context_bytes_per_worker.
    """
    import torch
    from torch.utils.data import DataLoader

    workers, per_worker = 2, []

    def with_workers():
        torch.cuda.synchronize()
        free_before, _ = torch.cuda.mem_get_info()
        loader = DataLoader(snippet.GpuInWorker(), batch_size=16, num_workers=workers,
                            multiprocessing_context="spawn", persistent_workers=True)
        batches = iter(loader)
        for _ in range(workers):  # batches come from the workers in turn: both have run CUDA
            next(batches)
        free_during, _ = torch.cuda.mem_get_info()
        per_worker.append((free_before - free_during) / workers)
        del batches, loader  # shuts the workers down; their contexts go with them

    # plain benchmark: what is quoted is memory; the CUDA work is in the workers
    benchmark.pedantic(with_workers, rounds=3, warmup_rounds=1)
    benchmark.extra_info.update(num_workers=workers,
                                context_bytes_per_worker=statistics.median(per_worker[-3:]))
