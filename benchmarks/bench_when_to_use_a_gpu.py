"""Benchmarks behind docs/foundations/when-to-use-a-gpu.md.

Sweeps of an elementwise operation (2**10 ... 2**26 float32 elements) and a float32 matrix product
(n = 32 ... 4096), each timed three ways: on the CPU (all of PyTorch's threads), on the GPU with
the host<->device transfers, and on the GPU with the data already there. Each GPU variant starts
`snippet.SETTLE_S` after whatever ran before it, never right after a CPU run, and its warm-up
rounds take the slower first calls after that idle gap (see `small_gpu_op_isolated`).
`crossover[...]` runs the snippet's own `crossover()` once and records its verdict. `loop[...]`
times sequential, data-dependent work. Budget on an H100 with a 16-core host: about 11 s, mostly
the CPU's big sizes and 5 s of pauses.
"""

import functools
import time

import pytest
import torch

from snippets.foundations import when_to_use_a_gpu as snippet

pytestmark = [pytest.mark.snippet("snippets/foundations/when_to_use_a_gpu.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "elementwise": "`sin(x) * 2 + 1` on {input_bytes} of float32, {variant}",
    "matmul": "{n} × {n} float32 product, {variant}",
    "crossover": "`crossover()` over every {case} size, three ways each",
    "sequential": "Where a running sum of {elements} integers passes a threshold: {how}, {where}",
    "supported": "Whether int64 and complex64 matrix products run on the GPU",
    "small_gpu_op_isolated": "`sin(x) * 2 + 1` on {elements} float32 values on the GPU, {mode}",
}
WORDS = {
    "GPU incl. transfers": "GPU, with transfers",
    "elementwise": "elementwise", "matmul": "matrix product",
    "loop": "Python loop", "vectorized": "vectorized", "cpu": "CPU", "gpu": "GPU",
    "fresh": "alone in a new process",
    "after-cpu": "right after a CPU operation on all threads",
    "after-cpu-settled": "0.1 s after a CPU operation on all threads",
    "after-cpu-passive": "right after a CPU operation, OpenMP threads not spinning",
}

# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {
    "elementwise[cpu-*]": "the host CPU's own work",
    "matmul[cpu-*]": "the host CPU's own work",
    "elementwise[gpu-transfers-*]": "copies staged through pageable host memory",
    "matmul[gpu-transfers-*]": "copies staged through pageable host memory",
    "elementwise[gpu-resident-1024]": "Python and kernel launches",
    "elementwise[gpu-resident-4096]": "Python and kernel launches",
    "elementwise[gpu-resident-16384]": "Python and kernel launches",
    "elementwise[gpu-resident-65536]": "Python and kernel launches",
    "elementwise[gpu-resident-262144]": "Python and kernel launches",
    "elementwise[gpu-resident-1048576]": "Python and kernel launches",
    "elementwise[gpu-resident-4194304]": "Python and kernel launches",
    "matmul[gpu-resident-32]": "Python and kernel launches",
    "matmul[gpu-resident-64]": "Python and kernel launches",
    "matmul[gpu-resident-128]": "Python and kernel launches",
    "matmul[gpu-resident-256]": "Python and kernel launches",
    "matmul[gpu-resident-512]": "Python and kernel launches",
    "matmul[gpu-resident-1024]": "Python and kernel launches",
    "crossover": "the CPU half of the sweep",
    "sequential": "Python and a kernel launch per step",
    "supported": "Python checking the device",
    "small_gpu_op_isolated": "starting a process and CUDA in it",
}

VARIANTS = {"cpu": "CPU", "gpu-transfers": "GPU incl. transfers", "gpu-resident": "GPU, data resident"}


@functools.cache
def inputs(case, size, where):
    """Inputs are made once per size and side, and shared by the benchmarks that time them."""
    return snippet.make_inputs(case, size, where)


@pytest.fixture(scope="module", autouse=True)
def _free_inputs():
    yield
    inputs.cache_clear()
    torch.cuda.empty_cache()


def timed(benchmark, case, variant, size, rounds):
    fn = snippet.WORK[case]
    host = inputs(case, size, "cpu")
    if variant == "cpu":
        target, args = fn, host
    elif variant == "gpu-transfers":
        target, args = snippet.with_transfers, (fn, *host)
    else:
        target, args = snippet.resident, (fn, *inputs(case, size, "cuda"))
    benchmark.extra_info.update(variant=VARIANTS[variant], cpu_threads=torch.get_num_threads())
    if variant != "cpu":
        time.sleep(snippet.SETTLE_S)  # as compare() does: never right after a CPU run
    else:
        # The first CPU calls after other work can be several ms slow for ~80 ms (H100 host,
        # 2026-11-23: 13 of 30 rounds of the 64 x 64 product at 6 ms, the rest at 14 µs), so
        # keep calling until that has passed rather than rely on a count of warm-up rounds.
        warm_until = time.perf_counter() + 0.2
        while time.perf_counter() < warm_until:
            target(*args)
    benchmark.pedantic(target, args=args, setup=snippet.sync, rounds=rounds,
                       warmup_rounds=1 if rounds <= 5 else 2)


ELEMENTWISE = [(v, s) for v in VARIANTS for s in snippet.SWEEPS["elementwise"]]


@pytest.mark.parametrize(("variant", "elements"), ELEMENTWISE, ids=[f"{v}-{s}" for v, s in ELEMENTWISE])
def bench_elementwise(benchmark, variant, elements):
    """sin(x) * 2 + 1 on `elements` float32 values."""
    benchmark.extra_info.update(elements=elements, input_bytes=4 * elements)
    rounds = 50 if elements <= 2**18 else 20 if elements <= 2**22 else 5
    timed(benchmark, "elementwise", variant, elements, rounds)


MATMUL = [(v, n) for v in VARIANTS for n in snippet.SWEEPS["matmul"]]


@pytest.mark.parametrize(("variant", "n"), MATMUL, ids=[f"{v}-{n}" for v, n in MATMUL])
def bench_matmul(benchmark, variant, n):
    """A float32 n x n product (full float32: TF32 is off by default for matmuls)."""
    benchmark.extra_info.update(n=n, input_bytes=2 * 4 * n * n)
    if variant == "gpu-resident":  # a point on the roofline of docs/foundations/cpu-vs-gpu.md
        benchmark.extra_info.update(flops=2 * n**3, bytes=3 * 4 * n * n, roof="fp32",
                                    kind="fp32 matmul, n = 32 ... 4096")
        if n in (32, 4096):
            benchmark.extra_info["label"] = f"n={n}"
    rounds = 30 if n <= 512 else 10 if n <= 1024 else 5 if n <= 2048 else 3
    timed(benchmark, "matmul", variant, n, rounds)


def describe(winning_from, case, largest):
    unit = "elements" if case == "elementwise" else "n"
    if winning_from is None:
        return f"at none of the sizes measured (up to {unit} = {largest})"
    return f"from {unit} = {winning_from} upwards"


@pytest.mark.parametrize("case", ["elementwise", "matmul"])
def bench_crossover(benchmark, case):
    """The snippet's crossover(): every size, three ways, 5 repeats each; the verdict in extra_info."""
    sizes = snippet.SWEEPS[case]
    found = {}

    def run():
        found["result"] = snippet.crossover(case, sizes, repeats=5)

    benchmark.pedantic(run, rounds=1, warmup_rounds=0)
    winning_from, results = found["result"]
    largest, smallest = results[max(sizes)], results[min(sizes)]
    benchmark.extra_info.update(
        case=case, sizes=sizes, cpu_threads=torch.get_num_threads(),
        crossover=winning_from, verdict=describe(winning_from, case, max(sizes)),
        largest=max(sizes), smallest=min(sizes),
        speedup_with_transfers_at_largest=largest["cpu"] / largest["gpu_with_transfers"],
        speedup_resident_at_largest=largest["cpu"] / largest["gpu_resident"],
        transfer_share_at_largest=1 - largest["gpu_resident"] / largest["gpu_with_transfers"],
        cpu_over_gpu_with_transfers_at_smallest=smallest["cpu"] / smallest["gpu_with_transfers"],
        times={str(size): times for size, times in results.items()},
    )


LOOP_N = 2000
LOOPS = [(how, where) for how in ("loop", "vectorized") for where in ("cpu", "gpu")]


@pytest.mark.parametrize(("how", "where"), LOOPS, ids=[f"{h}-{w}" for h, w in LOOPS])
def bench_sequential(benchmark, how, where):
    """First index where the running sum of 2000 small integers passes 4 x 2000."""
    x = torch.randint(0, 10, (LOOP_N,), generator=torch.Generator().manual_seed(0))
    x = x.to("cuda" if where == "gpu" else "cpu")
    fn = snippet.first_crossing_loop if how == "loop" else snippet.first_crossing_vectorized
    answer = snippet.first_crossing_vectorized(x, 4 * LOOP_N)
    benchmark.extra_info.update(how=how, where=where, elements=LOOP_N, answer=answer)
    if how == "loop":  # per_op = time per Python step
        benchmark.extra_info["ops"] = answer + 1
    benchmark.pedantic(fn, args=(x, 4 * LOOP_N), setup=snippet.sync,
                       rounds=5 if how == "loop" else 50, warmup_rounds=1)


def bench_supported(benchmark):
    """Step 4 on the GPU: an int64 and a complex64 matrix product, each tried on a 2 x 2 example."""
    ints = torch.ones(2, 2, dtype=torch.int64)
    complexes = torch.ones(2, 2, dtype=torch.complex64)
    verdicts = {}

    def check():
        verdicts["int64"] = snippet.runs_on("cuda", torch.mm, ints, ints)
        verdicts["complex64"] = snippet.runs_on("cuda", torch.mm, complexes, complexes)

    benchmark.pedantic(check, rounds=3, warmup_rounds=1)
    words = {True: "runs", False: "raises an error"}
    benchmark.extra_info.update(int64_matmul=words[verdicts["int64"][0]],
                                int64_matmul_error=verdicts["int64"][1],
                                complex64_matmul=words[verdicts["complex64"][0]])


@pytest.mark.parametrize("mode", ["fresh", "after-cpu", "after-cpu-settled", "after-cpu-passive"])
def bench_small_gpu_op_isolated(benchmark, mode):
    """The gpu-resident elementwise op on 1024 elements, each round in a fresh interpreter.

    Why an in-session sweep read 118 us where the op alone takes ~41 us. `fresh`: nothing else
    in the process, no CPU thread pool ever started.
    `after-cpu`: each call right after a 16-thread CPU op, as crossover() interleaved them before
    it timed the GPU first. `after-cpu-settled`: the same with snippet.SETTLE_S (0.1 s) in between,
    the pause that compare() and the GPU variants of the sweeps take.
    `after-cpu-passive`: right after, with OMP_WAIT_POLICY=PASSIVE (idle OpenMP threads sleep at
    once instead of spinning). extra_info `gpu_op_s`: the median over rounds of each child's
    median of 50 calls; compare with when_to_use_a_gpu.elementwise[gpu-resident-1024].
    On the H100 (2026-11-23) settled was the slowest and passive did not help: the slow call is
    the first after any idle gap of the GPU, not spinning threads; warm-up calls absorb it.
    """
    import os
    import statistics
    import subprocess
    import sys
    import textwrap

    from fieldguide import ROOT

    code = """
        import statistics, sys, time
        import torch
        from snippets.foundations import when_to_use_a_gpu as s

        mode, elements = sys.argv[1], int(sys.argv[2])
        x = torch.rand(elements, device="cuda")
        host = torch.rand(2**22)  # for a CPU op on all of PyTorch's threads
        for _ in range(20):
            s.resident(s.elementwise, x)
        times = []
        for _ in range(50):
            if mode != "fresh":
                s.elementwise(host)
                if mode == "after-cpu-settled":
                    time.sleep(s.SETTLE_S)  # far longer than OpenMP's spin-wait
            s.sync()
            start = time.perf_counter()
            s.resident(s.elementwise, x)
            times.append(time.perf_counter() - start)
        print(statistics.median(times))
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if mode == "after-cpu-passive":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    medians = []

    def child():
        args = [sys.executable, "-c", textwrap.dedent(code), mode.removesuffix("-passive"), "1024"]
        out = subprocess.run(args, capture_output=True, text=True, check=True, env=env,
                             cwd=ROOT).stdout
        medians.append(float(out.split()[-1]))

    benchmark.pedantic(child, rounds=3, warmup_rounds=0)
    benchmark.extra_info.update(mode=mode, elements=1024, cpu_threads=torch.get_num_threads(),
                                gpu_op_s=statistics.median(medians))
