"""Benchmarks behind docs/memory/where-gpu-memory-goes.md.

Budget on an H100: one fresh Python process (import torch, create a CUDA context, 1.5 GiB of
tensors, a first matrix product, empty_cache), watched from this one: about 5 s.
"""

import pytest

from snippets.memory import where_gpu_memory_goes as snippet

pytestmark = pytest.mark.snippet("snippets/memory/where_gpu_memory_goes.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "fresh_process": "A fresh process: CUDA context, 1 GiB in use and 512 MiB cached, a first "
                     "matrix product, then `empty_cache()` (whole run)",
}
WORDS = {}

# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {"fresh_process": "a process start and CUDA's start-up"}


def bench_fresh_process(benchmark):
    """Memory of a new process at each step, as PyTorch, the driver and nvidia-smi see it.

    The time is the child's whole run (start, import, CUDA context, the steps): what is
    recorded beside it is the point. Fields: <step>_<view>_bytes for the steps context,
    tensors, matmul and empty_cache; <step>_outside_bytes is what the process added to the
    GPU beyond PyTorch's cache (the context, then cuBLAS too).
    """
    MiB = 2**20
    # The timing run gives this module a process of its own: it holds no tensors and no cache,
    # only the CUDA context watch_fresh_process() needs to read the GPU's free memory.
    # plain benchmark: times a whole child process; nothing is queued on the GPU here
    seen = benchmark.pedantic(snippet.watch_fresh_process, rounds=1, iterations=1)
    views = {"allocated": "allocated", "reserved": "reserved", "used on the GPU": "gpu_used",
             "added to the GPU": "added", "nvidia-smi": "nvidia_smi"}
    for step, report in seen.items():
        for view, field in views.items():
            value = report[view]
            benchmark.extra_info[f"{step}_{field}_bytes"] = None if value is None else round(value * MiB)
        benchmark.extra_info[f"{step}_outside_bytes"] = round(snippet.not_pytorchs(report) * MiB)
    benchmark.extra_info["nvidia_smi_lists_the_process"] = (
        "yes" if seen["tensors"]["nvidia-smi"] is not None else "no")
