""""Predict, then run" prompts: a question the page then answers with its own measurement.

A prompt is one collapsible block of one admonition type, `predict` (styled in
docs/assets/extra.css; pymdownx.details makes it a native <details>, so the question is a
<summary> a keyboard reaches and a screen reader names):

    ??? predict "How much faster is the pinned copy of 64 MiB than the pageable one?"
        <!-- timing-ratio: pinned_memory.copy[...] pinned_memory.copy[...] .1f -->× on this page's
        GPU: ...

The answer is the page's own number, written with the timing shortcodes like every number on the
site (never typed), or, for a claim without a number, the page's explanation in a sentence or
two. It sits above the code block that produces the result, so the reader predicts first. In
a page's notebook a prompt keeps its question, moved down above the first code cell that runs
and prints, and points at the page for the measured answer (fieldguide/notebooks/generate.py).

Where the page's code only defines and one long cell (often "The whole script") prints the
answers of several prompts, a prompt names the line of that code where the part that prints its
answer begins, in an HTML comment of its body, which the page does not show:

    ??? predict "Reading the loss every step instead of every 50: how much slower is the loop?"
        <!-- timing-ratio: ... -->× the time ...

        <!-- notebook-part: per_step = seconds_per_step(every=1) -->

The notebook then cuts that cell before the top-level statement holding the line, and asks the
question right above the part (fieldguide/notebooks/generate.py, `split_for_prompts`), and says
to run it to check. A prompt whose answer no cell prints is listed in `NOT_PRINTED`, with why:
the notebook asks it above the code the page shows it with and points at the page. Standard
library only: the notebooks are generated without MkDocs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KIND = "predict"   # the admonition type: `??? predict "Question?"`, one registry for prompts
# A prompt opens collapsed (`???`, not `???+`): the answer shows only once the reader asks.
BLOCK = re.compile(rf'^\?\?\? {KIND} "(?P<question>[^"]*)"[ \t]*\n'
                   r'(?P<body>(?:(?:[ \t]*|    .*)\n)*)', re.M)
# `<!-- notebook-part: LINE -->` in a prompt's body: LINE starts the one line of the notebook's
# code, after the prompt, that begins (or lies in) the part printing the prompt's answer.
PART = re.compile(r"^[ \t]*<!--\s*notebook-part:[ \t]*(?P<line>.*?)[ \t]*-->[ \t]*$", re.M)


@dataclass(frozen=True)
class Prompt:
    question: str
    answer: str   # the block's body, dedented, as Markdown (shortcodes unrendered)
    part: str | None = None   # where its part of the notebook's code begins (`PART`), if named


def prompts(markdown: str) -> list[Prompt]:
    """Every prompt on a page, in page order."""
    found = []
    for match in BLOCK.finditer(markdown if markdown.endswith("\n") else markdown + "\n"):
        body = "\n".join(line[4:] for line in match["body"].splitlines())
        parts = [m["line"] for m in PART.finditer(body)]
        if len(parts) > 1:
            raise ValueError(f"prompt {match['question']!r} names {len(parts)} notebook parts: "
                             "one at most")
        answer = re.sub(r"\n{3,}", "\n\n", PART.sub("", body)).strip()
        found.append(Prompt(match["question"].strip(), answer, parts[0] if parts else None))
    return found


# The notebook asks a prompt right above the part of the code that prints its answer
# (`<!-- notebook-part: LINE -->` in the prompt names where that part begins, and the notebook
# cuts a long cell there: fieldguide/notebooks/generate.py). Where the notebook prints no answer
# at all (the number is a benchmark's, on the page), the prompt stays above the code the page
# shows it with (`<!-- notebook-part: LINE -->` naming that code's first line), which may print
# nothing, or print something that is not the answer: each such prompt is listed here, with
# why; prompts all listed here may wait above one cell together, as the page asks them. A
# strict list (tests/site/test_prompts.py): an entry that names no prompt of the notebook fails.
NOT_PRINTED = {
    ("case-studies/diffusion.md", "What share of a plain copy's bandwidth"):
        "the notebook times the 640 × 640 grid only; the 4096 × 4096 step's share is the "
        "benchmark's",
    ("case-studies/diffusion.md", "The same step under torch.compile"):
        "the notebook prints kernel counts and 640 × 640 step times; the 4096 × 4096 speed-up "
        "is the benchmark's",
    ("compilers/custom-kernels.md", "On rows of 4096 float32"):
        "the check cell prints that the kernels match, and no time; the GPU times are the "
        "benchmark's",
    ("compilers/torch-compile.md", "How many times longer than the second call"):
        "the cell below times a function an earlier cell compiled in this process, not a new "
        "process's first call; the ratio is the benchmark's",
    ("memory/needing-less-memory.md", "Activation checkpointing keeps"):
        "the whole script prints each way's peak but times no step: half the answer; the "
        "peaks and the step times are the benchmark's",
    ("precision/activations.md", "Scale, shift and GELU compiled"):
        "the cell compares eager GELU with compiled GELU, not with eager ReLU; that ratio is "
        "the benchmark's",
    ("precision/tensor-cores-and-shapes.md", "A float32 product with TF32"):
        "the whole script prints each format's error but times none: half the answer; the "
        "speed-up and the errors are the benchmark's",
    ("several-gpus/ddp-with-torchrun.md", "The step time on one GPU"):
        "the timeline cell runs one step on one GPU and prints its kernels per lane, no time; "
        "the times are the two-GPU benchmark's",
    ("several-gpus/ddp-with-torchrun.md", "Does each GPU need more memory"):
        "the timeline cell runs one step on one GPU and measures no memory; the peaks are the "
        "two-GPU benchmark's",
    ("several-gpus/fsdp2.md", "FSDP2 keeps half"):
        "the notebook runs main() as one process, which shards nothing and runs no DDP; the "
        "peaks are the two-GPU benchmark's",
    ("several-gpus/pipeline-parallelism.md", "A batch of 16384"):
        "the whole script, one process in the notebook, times no step; the times are the "
        "two-GPU benchmark's",
    ("several-gpus/pipeline-parallelism.md", "With 16 micro-batches"):
        "the whole script measures no memory; the peaks are the two-GPU benchmark's",
    ("several-gpus/pipeline-parallelism.md", "With two stages on each GPU"):
        "the whole script, one process in the notebook, has no pipeline to idle in; the idle "
        "shares are the two-GPU benchmark's",
    ("several-gpus/tensor-parallelism.md", "Split over two GPUs"):
        "the whole script checks the split against one device and times nothing; the times "
        "are the two-GPU benchmark's",
    ("several-gpus/tensor-parallelism.md", "Sequence parallelism sends"):
        "the whole script times nothing, and one process splits no activations; the times "
        "and peaks are the two-GPU benchmark's",
    ("several-gpus/many-machines.md", "A multi-machine job"):
        "an explanation the page asks above the script, which a notebook cannot launch",
    ("several-gpus/many-machines.md", "One worker of the job crashes"):
        "an explanation the page asks above the script, which a notebook cannot launch",
    ("several-gpus/scaling-to-four-gpus.md", "FSDP2 on two GPUs, with four times"):
        "the whole script checks that each layout trains as on one device, and times nothing; "
        "the times are the benchmark's",
    ("several-gpus/ways-to-use-several-gpus.md", "Copying 1 MiB from one GPU"):
        "the cell times copies of 1 MiB and 1 GiB, not of 1 KiB; the ratio is the two-GPU "
        "benchmark's",
    ("several-gpus/ways-to-use-several-gpus.md", "An all-reduce of 1 GiB"):
        "the notebook's one process has nothing to exchange; the bandwidths are the two-GPU "
        "benchmark's",
    ("case-studies/training-made-fast.md", "Which branch of the Start here"):
        "the notebook takes no trace of recipe_0; the branch is read from the page's profile",
    ("case-studies/training-made-fast.md", "How many times faster than the first"):
        "the whole chain prints each recipe's losses, not its step time: the benchmark's",
    ("compilers/graph-breaks.md", "On 64 MiB, how much longer"):
        "no cell times either version; the times are the benchmark's",
    ("compilers/torch-compile.md", "On 128 MiB, what share"):
        "the modes cell compiles and prints nothing; the timings are the benchmark's",
    ("compilers/torch-compile.md", "On 256 KiB, does reduce-overhead"):
        "the modes cell compiles and prints nothing; the timings are the benchmark's",
    ("compilers/triton-kernels.md", "At 512 MiB"):
        "kernel_time defines and prints nothing; the timings are the benchmark's",
    ("compilers/triton-kernels.md", "At 8 MiB"):
        "the plain launch defines and prints nothing; the timings are the benchmark's",
    ("data-movement/pinned-memory.md", "pin_memory() of a 256"):
        "the whole script does not time pin_memory(); the times are the benchmark's",
    ("data-movement/pinned-memory.md", "A step copies 256 MiB"):
        "the whole script does not time the overlapped step; the times are the benchmark's",
    ("execution/cuda-graphs.md", "Is a graph's speed-up"):
        "the whole script times the chain of 200 only; the chain of 4 is the benchmark's",
    ("first-steps/cupy-and-numpy.md", "Copying a 2 GB float64 matrix to the GPU"):
        "no cell copies a 2 GB matrix; the times are the benchmark's",
    ("first-steps/cupy-and-numpy.md", "Copying a 2 GB float64 matrix from the GPU"):
        "no cell copies a 2 GB matrix; the times are the benchmark's",
    ("first-steps/pytorch-on-a-gpu.md", "A 64 MiB tensor"):
        "no cell times the creation; the times are the benchmark's",
    ("memory/needing-less-memory.md", "A forward pass with autograd"):
        "the whole script measures no inference peak; the peaks are the benchmark's",
    ("precision/channels-last.md", "cudnn.benchmark = True"):
        "the whole script runs the autotuner nowhere; the times are the benchmark's",
    ("precision/mixed-precision-training.md", "The same transformer trained"):
        "the whole script prints each variant's losses, not its step time: the benchmark's",
    ("precision/mixed-precision-training.md", "What share of the GPU's time"):
        "the whole script profiles no step; the breakdown is the benchmark's",
    ("precision/tensor-cores-and-shapes.md", "A bfloat16 product with 896"):
        "the whole script times no 896-row product; the rates are the benchmark's",
    ("several-gpus/dataparallel-taken-apart.md", "The same training step on two GPUs"):
        "the whole script times no step beside DDP's; the times are the two-GPU benchmark's",
    ("several-gpus/fsdp2.md", "FSDP2 on two GPUs against DDP"):
        "the notebook runs one process and times no step; the times are the two-GPU benchmark's",
    ("several-gpus/fsdp2.md", "How long does dcp.async_save"):
        "the notebook saves no checkpoint; the times are the two-GPU benchmark's",
    ("several-gpus/model-parallelism.md", "The same model split over two GPUs"):
        "the whole script draws idle time and times no step; the times are the benchmark's",
    ("start-here/will-it-fit.md", "An estimate sums"):
        "its code only defines the estimators; the site draws the comparisons with the runs",
    ("start-here/will-it-fit.md", "From pageable memory"):
        "its code only defines the estimators; the site draws the comparisons with the runs",
    ("start-here/will-it-fit.md", "With the latency of a run's"):
        "its code only defines the estimators; the site draws the comparisons with the runs",
}


def not_printed(page: str, question: str) -> bool:
    """Whether `page`'s (relative to docs/) prompt `question` is one whose answer no cell of the
    notebook prints (`NOT_PRINTED`): the notebook points at the page for it, and never says that
    the cell below checks it."""
    return any(path == page and question.startswith(start) for path, start in NOT_PRINTED)
