"""Benchmarks behind docs/case-studies/training-made-fast.md: the whole chain of recipes on
one GPU, in the order the page makes its changes, in one module (one device call).

`step[N-...]`: recipe N of the page (snippets/case_studies/training_made_fast.py) trained
from its first step: one warm-up round (the DataLoader's first batches, the compiler's
work for recipes 7 and 8), then timed rounds of READ_EVERY steps each, synchronized before
and after the round, so a round holds exactly one read of the loss for the recipes that
read it every READ_EVERY steps. `ops` is READ_EVERY, so `per_op` is the time of one
training step as the loop runs it (host, data and GPU together); `tokens_per_s` from the
median. `flops`: the model's flops per step (step_flops, the real vocabulary: the padded
classes are no useful work); `mfu_pct`: those flops per second over the GPU's datasheet
peak for the precision the step computes in (fieldguide/datasheets.toml: fp32 for steps
0-2, tf32 for 3, bf16 from 4), `datasheet_tflops` that peak. `peak_memory_gib`: everything
allocated at the peak (weights, AdamW's state, activations). `final_loss`: the last loss
read. Then a short profiler trace of the same loop (take_trace of the Start here page:
three recorded steps) read by read_trace: GPU idle time by cause and where_to_look's
branches (`branches`).
`larger_batch`: recipe 6 at twice the batch (eager: a third compile would not fit the
budget): what a larger batch buys (tokens/s, memory) over step[6-fused], the question
activation checkpointing (recipe 8) answers.
`ddp`: recipe 9 (training_made_fast_ddp.py) on two GPUs, rank 0 timing, rank 1 in step.
Budget on one H200: about 60-80 s: eager recipes 1-4 s each (steps of 5-45 ms, 55 of them,
worker start-up), the two compiled ones 15-30 s each (most of it compiling). On two H200s
(`ddp` alone): about 40 s, the follower's start and both ranks compiling.
"""

import gc
import itertools
import tomllib
from pathlib import Path

import pytest
import torch

from benchmarks import two_ranks
from snippets.case_studies import training_made_fast as snippet
from snippets.start_here import slow_training

pytestmark = [pytest.mark.snippet("snippets/case_studies/training_made_fast.py",
                                  "snippets/start_here/slow_training.py"),
              pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "step": "{number}. {change}",
    "larger_batch": "Step 6 at {batch} sequences a step",
    "ddp": "{number}. {change}: {batch} sequences a step on each",
}
WORDS = {}
# What measures the host as much as the GPU (fieldguide/host_bound.py): from step 5 on, the
# traces show the GPU waiting on kernel launches for a third to two thirds of the step.
HOST_BOUND = {
    "step[5-shapes]": "Python and the step's kernel launches",
    "step[6-fused]": "Python and the step's kernel launches",
    "step[7-compile]": "Python, the compiled code's host work and its kernel launches",
    "step[8-checkpointing]": "Python, the compiled code's host work and its kernel launches",
}

# (number, recipe, the change it makes, in a few words, the precision its products run in)
STEPS = [
    (0, snippet.recipe_0, "baseline", "fp32"),
    (1, snippet.recipe_1, "DataLoader workers, pinned memory", "fp32"),
    (2, snippet.recipe_2, f"loss read every {snippet.READ_EVERY} steps", "fp32"),
    (3, snippet.recipe_3, "TF32", "tf32"),
    (4, snippet.recipe_4, "bf16 autocast", "bf16"),
    (5, snippet.recipe_5, "vocabulary padded to 64", "bf16"),
    (6, snippet.recipe_6, "fused AdamW", "bf16"),
    (7, snippet.recipe_7, "torch.compile", "bf16"),
    (8, snippet.recipe_8, "activation checkpointing", "bf16"),
]
IDS = ["0-baseline", "1-loader", "2-read-every", "3-tf32", "4-bf16", "5-shapes", "6-fused",
       "7-compile", "8-checkpointing"]
TIMED_ROUNDS = 4  # of READ_EVERY steps each, after one warm-up round

DATASHEETS = Path(__file__).resolve().parents[1] / "fieldguide" / "datasheets.toml"


def datasheet_flops(precision):
    """The datasheet peak (flop/s) of this GPU for a precision, or None if none is kept."""
    name = torch.cuda.get_device_name()
    for entry in tomllib.loads(DATASHEETS.read_text(encoding="utf-8"))["gpu"]:
        if name in entry["names"]:
            return entry["flops_per_s"].get(precision)
    return None


def measure(benchmark, gpu_benchmark, tmp_path, recipe, precision, batch):
    """Time `recipe` in rounds of READ_EVERY steps; record what the page shows."""
    torch.backends.cuda.matmul.fp32_precision = "ieee"  # recipes 3 on set TF32 themselves
    torch.compiler.reset()  # each compiled recipe compiles afresh, for its own shapes
    gc.collect()  # the last recipe's DataLoader workers end
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    step, losses = recipe(batch=batch)
    counter = itertools.count()

    def one_round():
        for _ in range(snippet.READ_EVERY):
            step(next(counter))

    gpu_benchmark(one_round, rounds=TIMED_ROUNDS, warmup_rounds=1)
    seconds = benchmark.stats.stats.median / snippet.READ_EVERY
    tokens = batch * snippet.SIZES["seq"]
    flops = snippet.step_flops(batch, **snippet.SIZES)
    peak = datasheet_flops(precision)
    info = benchmark.extra_info
    info.update(ops=snippet.READ_EVERY, batch=batch, tokens=tokens, flops=flops,
                tokens_per_s=tokens / seconds, precision=precision,
                peak_memory_gib=torch.cuda.max_memory_allocated() / 2**30,
                final_loss=losses[-1], steps=len(losses), **snippet.SIZES)
    if peak:
        info.update(datasheet_tflops=peak / 1e12, mfu_pct=100 * flops / seconds / peak)
    slow_training.take_trace(tmp_path / "trace.json", lambda: step(next(counter)))
    symptoms = slow_training.read_trace(tmp_path / "trace.json")
    share = {cause: 100 * us / symptoms.span_us for cause, us in symptoms.idle_us.items()}
    info.update(
        kernels=symptoms.kernels,
        tiny_kernels=symptoms.tiny_kernels,
        gpu_idle_pct=100 * symptoms.gpu_idle_share,
        sync_wait_pct=share["sync"],
        host_work_pct=share["host work"],
        launch_wait_pct=share["launch"] + share["kernel wait"],
        other_idle_pct=share["other"],
        fp32_product_pct=100 * symptoms.fp32_product_us / symptoms.span_us,
        branches=" / ".join(branch for _, branch in slow_training.where_to_look(symptoms)),
    )


@pytest.mark.parametrize("number, recipe, change, precision", STEPS, ids=IDS)
def bench_step(benchmark, gpu_benchmark, tmp_path, number, recipe, change, precision):
    """One recipe of the chain, as the page's loop runs it."""
    benchmark.extra_info.update(number=number, change=change)
    measure(benchmark, gpu_benchmark, tmp_path, recipe, precision, snippet.BATCH)


def bench_larger_batch(benchmark, gpu_benchmark, tmp_path):
    """Recipe 6 at twice the batch: does a larger batch raise tokens/s at all? (Eager, so
    that the module compiles twice, not three times; step[6-fused] is its pair.)"""
    measure(benchmark, gpu_benchmark, tmp_path, snippet.recipe_6, "bf16", 2 * snippet.BATCH)


# --- Step 9: the same job on two GPUs under DDP (benchmarks/two_ranks.py: this process is
# rank 0 on GPU 0, a follower is rank 1 on GPU 1). Each round is READ_EVERY steps on both
# ranks; tokens_per_s counts both GPUs' tokens; mfu_pct is per GPU.

_ddp = {}  # this rank's step, losses and step counter


def ddp_prepare():
    """Recipe 9 on this rank's GPU (the group is two_ranks'); its first step not taken."""
    from snippets.case_studies import training_made_fast_ddp as ddp

    ddp.device = two_ranks.device()  # what the page's launch code sets from LOCAL_RANK
    torch.compiler.reset()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(ddp.device)
    step, losses = ddp.recipe_9()
    _ddp.update(step=step, losses=losses, counter=itertools.count(), device=ddp.device)


def ddp_round():
    """READ_EVERY steps on this rank, waited for."""
    for _ in range(snippet.READ_EVERY):
        _ddp["step"](next(_ddp["counter"]))
    torch.cuda.synchronize(_ddp["device"])


def ddp_finish():
    """Both ranks: [each rank's peak memory], the last loss read; then free the job."""
    peaks = two_ranks.everyones(two_ranks.peak_gib(_ddp["device"]))
    final = _ddp["losses"][-1]
    _ddp.clear()
    gc.collect()
    torch.cuda.empty_cache()
    return peaks, final


@pytest.mark.snippet("snippets/case_studies/training_made_fast_ddp.py", "benchmarks/two_ranks.py")
@pytest.mark.gpus(2)
def bench_ddp(benchmark):
    """Step 9: recipe 7 under DDP on two GPUs, timed on rank 0 in rounds of READ_EVERY."""
    with two_ranks.Pair() as pair:
        pair.call(ddp_prepare)
        benchmark.pedantic(ddp_round, setup=pair.announcer(ddp_round),
                           rounds=TIMED_ROUNDS, warmup_rounds=1)
        peaks, final = pair.call(ddp_finish)
    seconds = benchmark.stats.stats.median / snippet.READ_EVERY
    tokens = 2 * snippet.BATCH * snippet.SIZES["seq"]  # both GPUs
    flops = snippet.step_flops(snippet.BATCH, **snippet.SIZES)  # per GPU
    peak = datasheet_flops("bf16")
    benchmark.extra_info.update(
        number=9, change="DDP on two GPUs", gpus=2, ops=snippet.READ_EVERY,
        batch=snippet.BATCH, tokens=tokens, flops=flops, tokens_per_s=tokens / seconds,
        precision="bf16", final_loss=final, **snippet.SIZES,
        **{f"peak_gpu{rank}_gib": gib for rank, gib in enumerate(peaks)})
    if peak:
        benchmark.extra_info.update(datasheet_tflops=peak / 1e12,
                                    mfu_pct=100 * flops / seconds / peak)
