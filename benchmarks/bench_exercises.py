"""Benchmarks behind docs/precision/exercises.md: each exercise's setup before and after the fix.

`mlp`: one training step of exercise 1's classifier (hidden 4095, float32 / 4096, bf16).
`loader`: one epoch of exercise 2 (num_workers=0, pageable, blocking / workers, pinned,
non_blocking); `ops` = images, so `per_op` is the time per image.
`tokens`: one training step of exercise 3's model (vocabulary 50257 and width 1000, float32 /
50304 and 1024, bf16). `loop`: exercise 4's 20 steps, float32 / fp16 with GradScaler.
Budget on an H100: about 15 s, most of it exercise 2's epochs without workers.
"""

import pytest
import torch

from snippets.precision import exercises as snippet

pytestmark = [pytest.mark.snippet("snippets/precision/exercises.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/labels.py)
LABELS = {
    "mlp": "Exercise 1, one training step: {version}, hidden width {hidden}, {dtype}",
    "loader": "Exercise 2, one epoch of {images} images: {version}, {loading}",
    "tokens": "Exercise 3, one training step: {version}, vocabulary {vocab}, width {width}, "
              "{dtype}",
    "loop": "Exercise 4, {steps} training steps: {version}",
}
WORDS = {"before": "before", "after": "after",
         "fp32": "float32 loop", "mixed": "mixed precision (fp16, GradScaler)",
         "num_workers=0, pageable memory, blocking copies":
             "`num_workers=0`, pageable memory, blocking copies",
         "num_workers=4, pinned memory, non_blocking copies":
             "`num_workers=4`, pinned memory, `non_blocking` copies"}


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.01)


@pytest.mark.parametrize("version", ["before", "after"])
def bench_mlp(gpu_benchmark, version):
    model = snippet.mlp_before if version == "before" else snippet.mlp_after
    step = snippet.mlp_step_before if version == "before" else snippet.mlp_step_after
    gpu_benchmark.extra_info.update(
        version=version, hidden=model[2].in_features, rows=snippet.ROWS,
        dtype="float32" if version == "before" else "bfloat16", shape=list(snippet.table.shape))
    torch.cuda.reset_peak_memory_stats()
    gpu_benchmark(step, model, sgd(model), rounds=20, warmup_rounds=3)
    gpu_benchmark.extra_info["peak_memory_bytes"] = torch.cuda.max_memory_allocated()


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


@pytest.mark.parametrize("version", ["before", "after"])
def bench_tokens(gpu_benchmark, version):
    model = snippet.token_model_before if version == "before" else snippet.token_model_after
    step = snippet.token_step_before if version == "before" else snippet.token_step_after
    vocab, width = model.head.out_features, model.head.in_features
    gpu_benchmark.extra_info.update(
        version=version, vocab=vocab, width=width, tokens=snippet.TOKENS,
        dtype="float32" if version == "before" else "bfloat16",
        flops=6 * snippet.TOKENS * (width * width + width * vocab))
    torch.cuda.reset_peak_memory_stats()
    gpu_benchmark(step, model, sgd(model), snippet.tokens, snippet.targets, rounds=20,
                  warmup_rounds=3)
    gpu_benchmark.extra_info["peak_memory_bytes"] = torch.cuda.max_memory_allocated()


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
