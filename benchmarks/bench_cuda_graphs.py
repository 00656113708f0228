"""Benchmarks behind docs/execution/cuda-graphs.md.

Budget on an H100: 8 cases x 110 rounds of at most ~2 ms, plus one interleaved comparison:
about 2 s. torch.compile is deliberately not benchmarked (its compile time would dominate).
"""

import pytest
import torch

from snippets.execution import cuda_graphs as snippet

pytestmark = pytest.mark.snippet("snippets/execution/cuda_graphs.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {"chain": "Chain of {ops} operations, {mode}"}
WORDS = {"eager": "eager", "graph": "CUDA graph"}

# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {
    "chain[eager-*]": "Python and kernel launches",
    "chain[graph-4ops]": "Python and one graph launch",
}

CASES = [(mode, steps) for steps in (1, 5, 25, snippet.STEPS) for mode in ("eager", "graph")]


def run_and_wait(fn):
    fn()
    torch.cuda.synchronize()


@pytest.mark.parametrize(("mode", "steps"), CASES, ids=[f"{m}-{4 * s}ops" for m, s in CASES])
def bench_chain(benchmark, mode, steps):
    """A chain of 4 * steps tiny elementwise operations, launched one by one or replayed."""
    if mode == "eager":
        def fn():
            snippet.chain(snippet.x, steps)
    else:
        graph, _ = snippet.capture(lambda t: snippet.chain(t, steps), snippet.static_x)
        fn = graph.replay
    benchmark.extra_info.update(ops=4 * steps, mode=mode)
    benchmark.pedantic(run_and_wait, args=(fn,), setup=torch.cuda.synchronize,
                       rounds=100, warmup_rounds=10)
    if mode == "graph" and steps == snippet.STEPS:
        eager, replay = snippet.per_op_times(steps)
        benchmark.extra_info.update(eager_per_op_s=eager, graph_per_op_s=replay,
                                    eager_over_graph=eager / replay)
