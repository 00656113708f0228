"""Benchmarks behind docs/case-studies/diffusion.md.

Every `step` record times STEPS steps per round (`ops`, so `per_op` is the time per step) and
records in `bytes` the least those steps must move: each cell read once and written once per
step, 2 x 4 bytes x cells. `bandwidth_gbs` is then the bandwidth a step achieves; the
`copy_ceiling` records time a plain device-to-device copy of the same grid, the ceiling.

Budget on an H100: about 3 s of GPU steps, 2 s of NumPy, and two torch.compile compilations
(one per grid shape, done in setup, outside the timed rounds).
"""

import time

import pytest
import torch

from snippets.case_studies import diffusion as snippet

pytestmark = pytest.mark.snippet("snippets/case_studies/diffusion.py")
GPU_ONLY = [pytest.mark.snippet("snippets/case_studies/diffusion_gpu.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "step": "{variant}, {grid} × {grid} grid",
    "copy_ceiling": "Device-to-device copy of the {grid} × {grid} grid (the ceiling)",
}
WORDS = {
    "numpy_seed": "NumPy, original code",
    "torch_seed": "PyTorch, original code",
    "torch_slices": "PyTorch, in-place slices",
    "torch_compile": "torch.compile",
    "cupy_kernel": "CuPy RawKernel",
    "torch_graph": "PyTorch, original code, CUDA graph",
    "cupy_graph": "CuPy RawKernel, CUDA graph",
    "copy": "copy (the ceiling)",
}

# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {
    "step[numpy_seed-*]": "the host CPU's own work",
    "step[torch_compile-*]": "Python and kernel launches",
    "step[torch_seed-320]": "Python and kernel launches",
    "step[torch_seed-640]": "Python and kernel launches",
    "step[torch_seed-1280]": "Python and kernel launches",
    "step[torch_slices-320]": "Python and kernel launches",
    "step[torch_slices-640]": "Python and kernel launches",
    "step[torch_slices-1280]": "Python and kernel launches",
    "step[cupy_kernel-320]": "Python and kernel launches",
    "step[cupy_kernel-640]": "Python and kernel launches",
    "step[cupy_kernel-1280]": "Python and kernel launches",
    "copy_ceiling[320]": "Python and kernel launches",
    "copy_ceiling[640]": "Python and kernel launches",
    "copy_ceiling[1280]": "Python and kernel launches",
}

GRIDS = [320, 640, 1280, 2560, 4096]
STEPS = 100  # steps per timed round: even (ping-pong buffers) and a multiple of PER_GRAPH
PER_GRAPH = 20  # steps recorded in one CUDA graph
ROUNDS, WARMUP = 5, 1

CASES = (
    [("numpy_seed", n, []) for n in (640, 4096)]
    + [(v, n, [pytest.mark.gpus(1)]) for v in ("torch_seed", "torch_slices") for n in GRIDS]
    + [("torch_compile", n, [pytest.mark.gpus(1)]) for n in (640, 4096)]
    + [(v, n, GPU_ONLY) for v in ("cupy_kernel", "torch_graph", "cupy_graph") for n in GRIDS]
)


def numpy_steps(n):
    return 10 if n <= 640 else 1  # the seed's NumPy step takes a sizeable fraction of a second at 4096


def make_run(variant, n, extra):
    """A zero-argument callable that advances the grid by `steps` steps (on a GPU, queues them)."""
    start = snippet.initial_grid((n, n))
    if variant == "numpy_seed":
        steps = numpy_steps(n)
        return (lambda: snippet.run_numpy(start, steps)), steps

    u = torch.from_numpy(start).to("cuda")
    if variant == "torch_seed":
        return (lambda: snippet.run_torch(u, STEPS)), STEPS
    if variant == "torch_slices":
        spare = torch.empty_like(u)
        return (lambda: snippet.run_inplace(u, spare, STEPS)), STEPS
    if variant == "torch_compile":
        begin = time.perf_counter()
        snippet.run_compiled(u, 1)  # compiles for this grid shape
        snippet.sync()
        extra["compile_s"] = time.perf_counter() - begin
        return (lambda: snippet.run_compiled(u, STEPS)), STEPS

    from snippets.case_studies import diffusion_gpu as gpu

    if variant == "torch_graph":
        graph = gpu.capture_torch(u, PER_GRAPH)
        return (lambda: gpu.replay_torch(graph, STEPS // PER_GRAPH)), STEPS
    grid = gpu.cp.asarray(start)
    spare = gpu.cp.empty_like(grid)
    if variant == "cupy_kernel":
        return (lambda: gpu.run_cupy(grid, spare, STEPS)), STEPS
    graph = gpu.capture_cupy(grid, spare, PER_GRAPH)  # cupy_graph
    return (lambda: gpu.replay_cupy(graph, STEPS // PER_GRAPH)), STEPS


@pytest.mark.parametrize(
    ("variant", "n"),
    [pytest.param(v, n, marks=marks, id=f"{v}-{n}") for v, n, marks in CASES],
)
def bench_step(benchmark, gpu_benchmark, variant, n):
    extra = {}
    run, steps = make_run(variant, n, extra)
    rounds, warmup = (3, 1) if (variant == "numpy_seed" and n > 640) else (ROUNDS, WARMUP)
    benchmark.extra_info.update(
        variant=variant, grid=n, cells=n * n, ops=steps, bytes=steps * 2 * 4 * n * n,
        device="cpu" if variant == "numpy_seed" else "cuda", **extra,
    )
    if variant == "numpy_seed":  # plain benchmark: NumPy, runs without CUDA too
        benchmark.pedantic(run, setup=snippet.sync, rounds=rounds, warmup_rounds=warmup)
    else:
        gpu_benchmark(run, rounds=rounds, warmup_rounds=warmup)


@pytest.mark.gpus(1)
@pytest.mark.parametrize("n", GRIDS, ids=str)
def bench_copy_ceiling(gpu_benchmark, n):
    """dst.copy_(src) of one grid: the same 2 x grid bytes a step must move, and nothing else."""
    src = torch.from_numpy(snippet.initial_grid((n, n))).to("cuda")
    dst = torch.empty_like(src)
    gpu_benchmark.extra_info.update(variant="copy", grid=n, cells=n * n, ops=STEPS,
                                    bytes=STEPS * 2 * src.nbytes, device="cuda")
    gpu_benchmark(snippet.run_copy, src, dst, STEPS, rounds=ROUNDS, warmup_rounds=WARMUP)
