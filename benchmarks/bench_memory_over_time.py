"""Benchmarks behind docs/memory/memory-over-time.md.

Budget on an H100: two recorded training steps of a 34M-parameter model on 8192 tokens (well
under a second with the allocator's history on), then 12 timed steps of ~10 ms: about 2 s.
"""

import pytest
import torch

from snippets.memory import memory_over_time as snippet

pytestmark = pytest.mark.snippet("snippets/memory/memory_over_time.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "training_step": "One training step: 4 feed-forward blocks, {tokens} tokens of width "
                     "{width}, AdamW",
}
# The chart's first dashed line, short enough to sit clear of the curve at phone width
WORDS = {"parameters, batch, cuBLAS workspaces": "at the start"}


def bench_training_step(gpu_benchmark, tmp_path):
    """The memory timeline of a fresh model's first two steps, then the time of one step.

    extra_info["memory_timeline"]: [{"t", "allocated", "phase", "step"}] (bytes after each
    allocator event, thinned to about 400 rows); never the snapshot itself.
    """
    model, optimizer, x = snippet.make_training()
    before_warm_up = torch.cuda.memory_allocated()
    snippet.warm_up(model, x)
    # what cuBLAS took from PyTorch's cache: its workspaces (forward and backward threads)
    workspace = torch.cuda.memory_allocated() - before_warm_up
    torch.cuda.reset_peak_memory_stats()
    events, start, ends = snippet.record_steps(model, optimizer, x, path=str(tmp_path / "steps.pickle"))
    rows = snippet.timeline(events, start, ends)
    parameters = sum(p.numel() * p.element_size() for p in model.parameters())
    batch = x.numel() * x.element_size()
    state = sum(v.numel() * v.element_size() for s in optimizer.state.values()
                for v in s.values() if torch.is_tensor(v) and v.is_cuda)
    gpu_benchmark.extra_info.update(
        tokens=snippet.TOKENS, width=snippet.WIDTH, events=len(events),
        start_bytes=start, parameter_bytes=parameters, batch_bytes=batch,
        optimizer_state_bytes=state, workspace_bytes=workspace,
        end_bytes=rows[-1]["allocated"], peak_bytes=max(r["allocated"] for r in rows),
        max_memory_allocated_bytes=torch.cuda.max_memory_allocated(),
        memory_timeline=rows,
        # the lines sit where the tensors they name put them; the curve is checked against them
        memory_levels=[["parameters, batch, cuBLAS workspaces", parameters + batch + workspace],
                       ["+ AdamW state", parameters + batch + workspace + state]],
    )

    def step():
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    gpu_benchmark(step, rounds=10, warmup_rounds=2)
