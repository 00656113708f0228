"""Benchmarks behind docs/first-steps/cupy-and-numpy.md.

Budget (H100 host, 16 cores): the two 16000 x 16000 NumPy products dominate (about 10 s in
fp64 and half that in fp32, one round each); everything on the GPU adds a few seconds.
"""

import ctypes
import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fieldguide import ROOT
from snippets.first_steps import cupy_and_numpy as snippet

pytestmark = pytest.mark.snippet("snippets/first_steps/cupy_and_numpy.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "matmul_cupy": "{n} × {n} product in {precision}, CuPy on the GPU",
    "matmul_numpy": "{n} × {n} product in {precision}, NumPy on {threads} CPU threads",
    "first_call": "Fresh process: the first {n} × {n} {precision} product and the ones after it",
    "transfer": "Moving the {n} × {n} float64 matrix {direction}",
    "affine_clamp": "`clip(a * x + b, lo, hi)`, {version}",
    "exchange": "Handing a {bytes} CuPy array to PyTorch, {how}",
    "to_host": "The {n} × {n} float64 matrix back to the host, {into}",
}
WORDS = {
    "fp64": "float64", "fp32": "float32",
    "to_gpu": "to the GPU", "to_host": "back to the host",
    "fused": "one ElementwiseKernel", "unfused": "three CuPy operators",
    "from_dlpack": "`torch.from_dlpack` (no copy)", "copy": "copied first",
    "fresh": "into a new array", "pageable": "into a pageable array made once",
    "pinned": "into a pinned array made once",
}

# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {
    "matmul_numpy": "the host CPU's own work",
    "first_call": "loading CUDA libraries and compiling kernels on the host",
    "transfer": "copies staged through pageable host memory",
    "to_host[fresh]": "allocating and touching new host memory",
    "to_host[pageable]": "copies staged through pageable host memory",
    "exchange[from_dlpack]": "Python wrapping one array in another",
}

cp = snippet.cp
N = 16000  # the seed's matrix size
DTYPES = {"fp64": np.float64, "fp32": np.float32}


def blas_threads():
    """How many threads NumPy's BLAS uses here, and how we know."""
    try:
        from threadpoolctl import threadpool_info

        for pool in threadpool_info():
            if pool.get("user_api") == "blas":
                return pool["num_threads"], f"threadpoolctl: {pool.get('internal_api')}"
    except ImportError:
        pass
    # NumPy's wheels bundle OpenBLAS under numpy.libs; ask it directly.
    for path in glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs",
                                       "*openblas*")):
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                     "scipy_openblas_get_num_threads", "openblas_get_num_threads"):
            getter = getattr(lib, name, None)
            if getter is not None:
                return int(getter()), f"OpenBLAS {name}()"
    return len(os.sched_getaffinity(0)), "cores available to the process (BLAS not queried)"


@pytest.fixture(scope="module")
def matrices():
    """One 16000 x 16000 matrix per precision, on the GPU and a host copy of it (made once)."""
    made = {}

    def get(precision):
        if precision not in made:
            on_gpu = snippet.random_matrix(N, DTYPES[precision])
            made[precision] = (on_gpu, cp.asnumpy(on_gpu))
        return made[precision]

    yield get
    made.clear()
    cp.get_default_memory_pool().free_all_blocks()


@pytest.mark.parametrize("precision", list(DTYPES))
def bench_matmul_cupy(benchmark, matrices, precision):
    """The seed's product on the GPU, steady state (first-call costs excluded by warm-up)."""
    a, _ = matrices(precision)
    out = cp.empty_like(a)
    benchmark.extra_info.update(n=N, precision=precision, library="cupy", flops=2 * N**3)
    # plain benchmark: CuPy work, waited for by CuPy (this file does not import torch)
    benchmark.pedantic(snippet.cupy_product, args=(a, out), setup=cp.cuda.Device().synchronize,
                       rounds=5, warmup_rounds=1)
    gpu_s, cpu_s = snippet.gpu_and_cpu_seconds(a, repeats=3)
    benchmark.extra_info.update(cupyx_gpu_ms=gpu_s * 1e3, cupyx_cpu_us=cpu_s * 1e6)


@pytest.mark.parametrize("precision", list(DTYPES))
def bench_matmul_numpy(benchmark, matrices, precision):
    """The same product with NumPy on all the host's cores: seconds, so one round."""
    _, a = matrices(precision)
    out = np.empty_like(a)
    threads, source = blas_threads()
    benchmark.extra_info.update(n=N, precision=precision, library="numpy", flops=2 * N**3,
                                threads=threads, threads_source=source,
                                cpu_count=os.cpu_count())
    # plain benchmark: NumPy on the CPU, no GPU work
    benchmark.pedantic(snippet.numpy_product, args=(a, out), rounds=1, warmup_rounds=0)


def bench_first_call(benchmark):
    """First fp64 16000^2 product in a fresh process vs the ones after it (one process)."""
    code = ("import json; from snippets.first_steps import cupy_and_numpy as s; "
            f"print(json.dumps(s.first_call_vs_steady({N}, s.cp.float64)))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    seen = {}

    def fresh_process():
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True,
                             capture_output=True, text=True).stdout
        seen["first"], seen["steady"] = json.loads(out.splitlines()[-1])

    # plain benchmark: times a whole child process; nothing is queued on the GPU here
    benchmark.pedantic(fresh_process, rounds=1, warmup_rounds=0)
    benchmark.extra_info.update(n=N, precision="fp64", first_ms=seen["first"] * 1e3,
                                steady_ms=seen["steady"] * 1e3,
                                one_off_ms=(seen["first"] - seen["steady"]) * 1e3,
                                first_over_steady=seen["first"] / seen["steady"])


def to_gpu(host):
    on_gpu = cp.asarray(host)
    cp.cuda.Device().synchronize()
    return on_gpu


def to_host(on_gpu):
    return cp.asnumpy(on_gpu)  # returns when the bytes are on the host


@pytest.mark.parametrize("direction", ["to_gpu", "to_host"])
def bench_transfer(benchmark, matrices, direction):
    """Moving the seed's fp64 matrix (2 GB, ordinary pageable host memory) across PCIe."""
    on_gpu, host = matrices("fp64")
    benchmark.extra_info.update(bytes=host.nbytes, direction=direction, n=N)
    # plain benchmark: CuPy work, waited for by CuPy (this file does not import torch)
    if direction == "to_gpu":
        # One warm-up: the first round also allocates the 2 GB on the GPU (its IQR was 833 ms
        # around a 299 ms median with none, H100 2026-11-21).
        benchmark.pedantic(to_gpu, args=(host,), rounds=3, warmup_rounds=1)
    else:
        benchmark.pedantic(to_host, args=(on_gpu,), rounds=3, warmup_rounds=0)
    cp.get_default_memory_pool().free_all_blocks()


ELEMENTS = 2**26  # 256 MiB of float32
REPEATS = 10


@pytest.mark.parametrize("version", ["fused", "unfused"])
def bench_affine_clamp(benchmark, version):
    """y = clip(a*x + b): one ElementwiseKernel vs three CuPy operators, 256 MiB of float32."""
    x = cp.random.rand(ELEMENTS, dtype=cp.float32)
    fn = getattr(snippet, version)

    def run():
        for _ in range(REPEATS):
            fn(x, 2.0, 0.5, 0.0, 1.0)
        cp.cuda.Device().synchronize()

    # The least any version must move: read x once and write y once, per call.
    benchmark.extra_info.update(version=version, ops=REPEATS, bytes=REPEATS * 2 * x.nbytes)
    # plain benchmark: CuPy work, waited for by CuPy (this file does not import torch)
    benchmark.pedantic(run, setup=cp.cuda.Device().synchronize, rounds=10, warmup_rounds=2)


@pytest.mark.parametrize("how", ["from_dlpack", "copy"])
def bench_exchange(gpu_benchmark, how):
    """Handing a 256 MiB CuPy array to PyTorch: DLPack (no copy) vs a device-to-device copy."""
    torch = snippet.torch
    x = cp.random.rand(ELEMENTS, dtype=cp.float32)

    def exchange():
        return torch.from_dlpack(x if how == "from_dlpack" else x.copy())

    gpu_benchmark.extra_info.update(how=how, bytes=x.nbytes)
    gpu_benchmark(exchange, rounds=50, warmup_rounds=2)


@pytest.mark.parametrize("into", ["fresh", "pageable", "pinned"])
def bench_to_host(benchmark, matrices, into):
    """The seed's fp64 matrix (2 GB) back to the host: `cp.asnumpy` into a new array
    ("fresh": host allocation and first-touch page faults, then the pageable copy) against
    copies into a host array made once, pageable or pinned (the copy alone)."""
    on_gpu, _ = matrices("fp64")
    benchmark.extra_info.update(bytes=on_gpu.nbytes, direction="to_host", into=into, n=N)
    # plain benchmark: CuPy work, waited for by CuPy (this file does not import torch)
    if into == "fresh":
        benchmark.pedantic(snippet.to_host_fresh, args=(on_gpu,), rounds=3, warmup_rounds=0)
    else:
        out = snippet.host_array_like(on_gpu, pinned=into == "pinned")
        benchmark.pedantic(snippet.to_host_into, args=(on_gpu, out), rounds=3,
                           warmup_rounds=1)
        del out
        cp.get_default_pinned_memory_pool().free_all_blocks()
