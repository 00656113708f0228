"""Benchmarks behind docs/precision/mixed-precision-training.md.

`train_step`: one training step of the page's transformer stack (SIZES, BATCH sequences) in
each of the four variants, from the same initial weights on the same batch. `flops` are the
model's flops per step (snippet.step_flops), so `tflops` is its throughput; `tokens` per step;
`peak_memory_gib` counts everything allocated (weights, optimizer state, activations);
`final_loss` is the loss of the last timed step. The autocast variants also record the dtype
each kind of module produced (fields named after the modules).
`products_pct`, `attention_pct`, `other_pct`: shares of the step's device time (kernels) spent
in matrix products, attention and everything else, from the profiler (snippet.time_shares);
`device_busy_pct`: the share of the profiled steps' wall-clock time the kernels took, so near
100 % says the GPU, not the host launching its kernels, set the step's pace (the profiler adds
host time, so this errs low).
Budget on an H100: about 20 s, most of it the fp32 steps.
"""

import pytest
import torch

from snippets.precision import mixed_precision_training as snippet

pytestmark = [pytest.mark.snippet("snippets/precision/mixed_precision_training.py"),
              pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {"train_step": "{variant}: {description}"}
WORDS = {}
DESCRIPTIONS = {  # recorded with each benchmark, so the table says what each variant is
    "fp32": "float32, full-precision products",
    "tf32": "float32 weights, TF32 products",
    "bf16": "autocast bfloat16",
    "fp16": "autocast float16 with GradScaler",
}


@pytest.mark.parametrize("variant", list(snippet.VARIANTS))
def bench_train_step(gpu_benchmark, variant):
    mode, dtype = snippet.VARIANTS[variant]
    model, optimizer, scaler = snippet.make_training(variant)
    tokens, targets = snippet.make_batches(1)
    info = gpu_benchmark.extra_info
    info.update(variant=variant, description=DESCRIPTIONS[variant],
                dtype=str(dtype).removeprefix("torch.") if dtype else "float32",
                fp32_precision=mode, shape=[snippet.BATCH, snippet.SIZES["seq"]],
                tokens=snippet.BATCH * snippet.SIZES["seq"], **snippet.SIZES,
                flops=snippet.step_flops(snippet.BATCH, **snippet.SIZES))
    if dtype is not None:
        seen = snippet.autocast_dtypes(model, tokens[0], targets[0], dtype)
        info.update({name: str(d).removeprefix("torch.") for name, d in seen.items()})
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    with snippet.fp32_matmul_precision(mode):
        loss = gpu_benchmark(snippet.train_step, model, optimizer, scaler, tokens[0],
                             targets[0], dtype, rounds=20, warmup_rounds=5)
        info.update(peak_memory_gib=torch.cuda.max_memory_allocated() / 2**30,
                    final_loss=loss.item(), steps=25)
        shares, busy = snippet.time_shares(snippet.train_step, model, optimizer, scaler,
                                           tokens[0], targets[0], dtype)
    info.update({f"{kind}_pct": 100 * share for kind, share in shares.items()},
                device_busy_pct=100 * busy)
    if scaler.is_enabled():
        info["final_scale"] = scaler.get_scale()
