"""Benchmarks behind docs/compilers/graph-breaks.md.

`call`: one compiled call on 2**24 float32 values (64 MiB) of a function with a graph break
(`broken`: a `.item()` or a data-dependent `if` in the middle) and of its fixed version (`fixed`,
one graph); compiling happens in the warm-up rounds. `bytes` is what one fused pass must move (read
x, write the result). `recompiles`: a fresh compile of `scale_by_max` called on 4 lengths, with
`dynamic=False` (one graph per length), the default (a static graph, then a dynamic one) and
`mark_dynamic` (one dynamic graph); `graphs` is how many graphs Dynamo made. Each round starts
from `torch.compiler.reset()`, empty Inductor and Triton caches on disk and in memory
(`torch._inductor.utils.fresh_cache`) and lengths no earlier round used, in a process that has
compiled before (warm imports): each compiles its kernels for real. It measures compile time:
the host (CPU, Python, the C compiler) more than the GPU. Budget on an H100: about 40 s.
"""

import itertools

import pytest
import torch

from snippets.compilers import graph_breaks as snippet

pytestmark = [pytest.mark.snippet("snippets/compilers/graph_breaks.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "call": "{case}, {version}, 2^24 float32 values",
    "recompiles": "Compile and call on 4 lengths: {shapes}",
}
# Runs on two H200 leases (2026-11-28) lay 1.2-2.4x apart: a compile from a fresh cache is the
# host's work (Dynamo, Inductor, Triton's compilers), and a 2^24-element call is short enough
# for its guards and launches to set its pace.
HOST_BOUND = {"recompiles": "compiling from a fresh cache: Dynamo, Inductor and Triton on the host",
              "call": "Python, the compiled call's guards and its launches"}
WORDS = {"item": ".item() in the middle", "branch": "if on a tensor's value",
         "broken": "with the graph break", "fixed": "fixed, one graph",
         "static": "`dynamic=False`", "default": "default", "marked": "`mark_dynamic`"}

CASES = {"item": (snippet.scale_by_max_item, snippet.scale_by_max),
         "branch": (snippet.branch_on_sum, snippet.branch_free)}
LENGTHS = [2**20, 2**20 + 2**18, 2**20 + 2**19, 2**21]


@pytest.mark.parametrize("version", ["broken", "fixed"])
@pytest.mark.parametrize("case", list(CASES))
def bench_call(gpu_benchmark, case, version):
    torch.compiler.reset()
    fn = torch.compile(CASES[case][version == "fixed"])
    x = torch.randn(2**24, device="cuda")
    graphs, _, _ = snippet.explain(CASES[case][version == "fixed"], x)
    gpu_benchmark.extra_info.update(case=case, version=version, graphs=graphs,
                                    elements=x.numel(), bytes=2 * x.nbytes)
    gpu_benchmark(fn, x, rounds=30, warmup_rounds=3)


SHAPES = {"static": {"dynamic": False}, "default": {}, "marked": {"mark_dynamic": True}}


@pytest.mark.parametrize("shapes", list(SHAPES))
def bench_recompiles(gpu_benchmark, shapes, tmp_path):
    gpu_benchmark.extra_info.update(
        shapes=shapes, calls=len(LENGTHS), host_bound=True,
        graphs=snippet.graphs_for_lengths(LENGTHS, **SHAPES[shapes]))
    from torch._inductor.utils import fresh_cache

    rounds = itertools.count(1 + 10 * list(SHAPES).index(shapes))  # lengths unique to a round

    def compile_new_lengths():
        # Empty Inductor and Triton caches, on disk and in memory: a kernel an earlier round
        # compiled (the dynamic one has the same source for every length) compiles again.
        with fresh_cache(dir=str(tmp_path)):
            lengths = [n + 4096 * next(rounds) for n in LENGTHS]
            snippet.call_with_lengths(lengths, **SHAPES[shapes])

    gpu_benchmark(compile_new_lengths, rounds=2, warmup_rounds=0)
