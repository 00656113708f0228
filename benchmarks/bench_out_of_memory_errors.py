"""Benchmarks behind docs/memory/out-of-memory-errors.md.

Budget on an H100: the capped recovery (each round: three out-of-memory errors, then a step
that fits), 4 rounds, about 2 s; three fresh processes for the growing batches, about 4 s
each: about 15 s in all.
"""

import pytest
import torch

from snippets.memory import out_of_memory_errors as snippet

pytestmark = pytest.mark.snippet("snippets/memory/out_of_memory_errors.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "recover": "`fit_step({tried_batch})` with PyTorch limited to {cap_bytes}: out-of-memory "
               "errors, then a step with a batch of {fitted_batch}",
    "growing_batches": "Growing batches in a fresh process, {setting}",
}
WORDS = {
    "default": "no allocator setting",
    "PYTORCH_ALLOC_CONF=expandable_segments:True": "`PYTORCH_ALLOC_CONF=expandable_segments:True`",
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True":
        "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`",
}

# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {"growing_batches[*]": "a process start, CUDA's start-up and the allocator's retries"}

CAP_GIB = 2
TRIED = 65536


def bench_recover(gpu_benchmark):
    """Out-of-memory errors under a 2 GiB limit: the message, the memory the failed step
    holds inside the except block, and the time fit_step takes to find a batch that fits."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    # A cap counts every tensor of the process. The timing run gives this module a process of
    # its own, so what is there before the first step is the page's model; it is recorded
    # beside the model's size so the page can say what the cap came on top of.
    outside = torch.cuda.memory_allocated()
    model_bytes = sum(p.numel() * p.element_size() for p in snippet.model.parameters())
    snippet.train_step(256)  # AdamW's state exists from here on
    snippet.limit_memory(CAP_GIB + outside / 2**30)
    try:
        message = snippet.out_of_memory_message(TRIED)
        before, inside, after = snippet.held_while_handling(TRIED)
        _, fitted = gpu_benchmark(snippet.fit_step, TRIED, rounds=4, warmup_rounds=1)
        stats = torch.cuda.memory_stats()
    finally:
        snippet.unlimit_memory()
        torch.cuda.empty_cache()  # give back what the failed steps left cached
    gpu_benchmark.extra_info.update(
        cap_bytes=CAP_GIB * 2**30, outside_bytes=outside, model_bytes=model_bytes,
        tried_batch=TRIED, fitted_batch=fitted,
        message=message,
        before_bytes=before, inside_bytes=inside, after_bytes=after,
        held_bytes=inside - before, num_ooms=stats["num_ooms"],
        num_alloc_retries=stats["num_alloc_retries"],
    )


SETTINGS = {"default": None, "PYTORCH_ALLOC_CONF": "PYTORCH_ALLOC_CONF",
            "PYTORCH_CUDA_ALLOC_CONF": "PYTORCH_CUDA_ALLOC_CONF"}


@pytest.mark.parametrize("setting", list(SETTINGS))
def bench_growing_batches(benchmark, setting):
    """The fragmentation demo in a fresh process: default allocator, or expandable segments
    asked for through the new or the old variable. The time is the child's whole run."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # leave the GPU to the child
    # plain benchmark: times a whole child process; nothing is queued on the GPU here
    report = benchmark.pedantic(snippet.growing_batches, args=(SETTINGS[setting],),
                                rounds=1, iterations=1)
    benchmark.extra_info.update(
        setting=setting if setting == "default" else f"{setting}=expandable_segments:True",
        variable=setting,
        allocated_bytes=report["allocated"], reserved_bytes=report["reserved"],
        gap_bytes=report["gap"], inactive_split_bytes=report["inactive_split"],
        reserved_after_empty_cache_bytes=report["reserved_after_empty_cache"],
        segments=report["segments"],
        expandable="yes" if report["expandable"] else "no",
        deprecation_warning="yes" if report["warned"] else "no",
        torch_version=torch.__version__,
    )
