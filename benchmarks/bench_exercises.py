"""Benchmarks behind docs/precision/exercises.md: each exercise's setup before and after the fix.

`mlp`: one training step of exercise 1's classifier: hidden width 4095 in float32 (before),
4095 under bfloat16 autocast (the dtype fix alone), 4096 under autocast (both fixes).
`loader`: one epoch of exercise 2 (num_workers=0, pageable, blocking / workers, pinned,
non_blocking); `ops` = images, so `per_op` is the time per image. It measures the host (Python
producing images, worker processes, pinning): HOST_BOUND says so on the page.
`tokens`: one training step of exercise 3's model: vocabulary 50257 and width 1000 in float32,
the same under bfloat16 autocast, then 50304 and 1024 under autocast.
`loop`: exercise 4's 20 steps, float32 / fp16 with GradScaler.
`device_busy_pct` (mlp, tokens, loop): the share of the wall-clock time of two profiled calls
that kernels took, so near 100 % says the GPU, not the host launching its kernels, set the pace
(the profiler adds host time, so this errs low).
Budget on an H100: about 40 s, most of it exercise 2's epochs without workers and exercise 4's
float32 loop.
"""

import time

import pytest
import torch

from snippets.precision import exercises as snippet

pytestmark = [pytest.mark.snippet("snippets/precision/exercises.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "mlp": "Exercise 1, one training step: {version}, hidden width {hidden}, {dtype}",
    "loader": "Exercise 2, one epoch of {images} images: {version}, {loading}",
    "tokens": "Exercise 3, one training step: {version}, vocabulary {vocab}, width {width}, "
              "{dtype}",
    "loop": "Exercise 4, {steps} training steps: {version}",
}
WORDS = {"before": "before", "after": "after", "autocast-only": "autocast alone",
         "fp32": "float32 loop", "mixed": "mixed precision (fp16, GradScaler)",
         "num_workers=0, pageable memory, blocking copies":
             "`num_workers=0`, pageable memory, blocking copies",
         "num_workers=4, pinned memory, non_blocking copies":
             "`num_workers=4`, pinned memory, `non_blocking` copies"}


# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {
    "loader": "Python producing images, worker processes and page-locking batches",
}


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.01)


def device_busy(fn, *args, calls=2):
    """The share of the wall-clock time of `calls` calls of fn(*args) that kernels took,
    from the profiler (after one warm-up call): near 1, the GPU set the pace."""
    from torch.profiler import ProfilerActivity, profile

    fn(*args)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        torch.cuda.synchronize()
        wall_us = (time.perf_counter() - start) * 1e6
    kernels_us = sum(op.self_device_time_total for op in prof.key_averages()
                     if op.device_type == torch.autograd.DeviceType.CPU)
    return kernels_us / wall_us


def record_device_busy(gpu_benchmark, fn, *args):
    gpu_benchmark.extra_info["device_busy_pct"] = 100 * device_busy(fn, *args)


MLP = {"before": ("mlp_before", "mlp_step_before", "float32"),
       "autocast-only": (None, "mlp_step_after", "bfloat16"),  # width 4095, as before
       "after": ("mlp_after", "mlp_step_after", "bfloat16")}


@pytest.mark.parametrize("version", list(MLP))
def bench_mlp(gpu_benchmark, version):
    model_name, step_name, dtype = MLP[version]
    model = getattr(snippet, model_name) if model_name else snippet.make_mlp(hidden=4095)
    step = getattr(snippet, step_name)
    gpu_benchmark.extra_info.update(
        version=version, hidden=model[2].in_features, rows=snippet.ROWS,
        dtype=dtype, shape=list(snippet.table.shape))
    torch.cuda.reset_peak_memory_stats()
    gpu_benchmark(step, model, sgd(model), rounds=20, warmup_rounds=3)
    gpu_benchmark.extra_info["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
    record_device_busy(gpu_benchmark, step, model, sgd(model))


@pytest.mark.parametrize("version", ["before", "after"])
def bench_loader(gpu_benchmark, version):
    loader = snippet.loader_before if version == "before" else snippet.loader_after
    model = snippet.make_cnn()
    loading = ("num_workers=0, pageable memory, blocking copies" if version == "before" else
               f"num_workers={loader.num_workers}, pinned memory, non_blocking copies")
    gpu_benchmark.extra_info.update(
        version=version, loading=loading, images=len(snippet.dataset),
        ops=len(snippet.dataset), num_workers=loader.num_workers, dtype="float32",
        shape=[loader.batch_size, 3, snippet.SIDE, snippet.SIDE])
    gpu_benchmark(snippet.cnn_epoch, model, sgd(model), loader, version == "after", rounds=5,
                  warmup_rounds=1)


TOKENS = {"before": ("token_model_before", "token_step_before", "float32"),
          "autocast-only": (None, "token_step_after", "bfloat16"),  # sizes as before
          "after": ("token_model_after", "token_step_after", "bfloat16")}


@pytest.mark.parametrize("version", list(TOKENS))
def bench_tokens(gpu_benchmark, version):
    model_name, step_name, dtype = TOKENS[version]
    model = (getattr(snippet, model_name) if model_name else
             snippet.TokenModel(snippet.VOCAB, width=1000).to(snippet.device))
    step = getattr(snippet, step_name)
    vocab, width = model.head.out_features, model.head.in_features
    gpu_benchmark.extra_info.update(
        version=version, vocab=vocab, width=width, tokens=snippet.TOKENS, dtype=dtype,
        flops=6 * snippet.TOKENS * (width * width + width * vocab))
    torch.cuda.reset_peak_memory_stats()
    gpu_benchmark(step, model, sgd(model), snippet.tokens, snippet.targets, rounds=20,
                  warmup_rounds=3)
    gpu_benchmark.extra_info["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
    record_device_busy(gpu_benchmark, step, model, sgd(model), snippet.tokens, snippet.targets)


@pytest.mark.parametrize("version", ["fp32", "mixed"])
def bench_loop(gpu_benchmark, version):
    model, optimizer, batches = snippet.make_problem()
    train = snippet.train_fp32 if version == "fp32" else snippet.train_mixed
    gpu_benchmark.extra_info.update(
        version=version, steps=len(batches), shape=list(batches[0][0].shape),
        dtype="float32" if version == "fp32" else "float16")
    torch.cuda.reset_peak_memory_stats()
    gpu_benchmark(train, model, optimizer, batches, rounds=5, warmup_rounds=1)
    gpu_benchmark.extra_info["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
    record_device_busy(gpu_benchmark, train, model, optimizer, batches)
