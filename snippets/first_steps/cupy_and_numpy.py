"""CuPy next to NumPy: arrays on a device, moving data, timing a matrix product right,
zero-copy exchange with PyTorch, and a fused elementwise kernel.

Run it on a CUDA machine: python -m snippets.first_steps.cupy_and_numpy
"""

GPUS_NEEDED = 1  # CuPy arrays live in GPU memory

# --8<-- [start:setup]
import cupy as cp
import numpy as np

x = cp.arange(12, dtype=cp.float32).reshape(3, 4)  # allocated in GPU memory
total = x.sum()  # runs on the GPU; the result is a 0-d CuPy array, still on the GPU
# --8<-- [end:setup]


# --8<-- [start:devices]
gpu = cp.cuda.Device(0)  # the first GPU this process can see
free_bytes, total_bytes = gpu.mem_info
capability = gpu.compute_capability  # e.g. "90" for an H100

with cp.cuda.Device(0):  # arrays created in this block live on GPU 0
    y = cp.zeros((1024, 1024), dtype=cp.float32)

assert y.device.id == 0 and x.device.id == 0
# --8<-- [end:devices]


# --8<-- [start:moving]
host = np.linspace(0.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
on_gpu = cp.asarray(host)  # host -> device copy
back = cp.asnumpy(on_gpu)  # device -> host copy; on_gpu.get() does the same

try:
    np.asarray(on_gpu)  # NumPy cannot read GPU memory; CuPy won't copy behind your back
except TypeError as err:
    refused = str(err)
# --8<-- [end:moving]


# --8<-- [start:to_host]
def host_array_like(a, pinned):
    """A host array for copies of `a`, made once and reused; its pages are touched."""
    import cupyx  # cupyx.empty_pinned is np.empty in page-locked memory

    out = (cupyx.empty_pinned if pinned else np.empty)(a.shape, dtype=a.dtype)
    out.fill(0)  # the OS maps a page at its first write: now, not during a copy
    return out


def to_host_fresh(a):
    """cp.asnumpy(a) allocates a new host array, then copies into it: every call."""
    return cp.asnumpy(a)


def to_host_into(a, out):
    """Only the copy: into a host array allocated once (pageable or pinned)."""
    return cp.asnumpy(a, out=out)
# --8<-- [end:to_host]


# --8<-- [start:matmul]
def random_matrix(n, dtype, seed=0):
    """The classic test matrix (uniform in [0, 1)), generated on the GPU in `dtype`."""
    cp.random.seed(seed)
    return cp.random.rand(n, n, dtype=dtype)


def cupy_product(a, out):
    """a @ a on the GPU, into a preallocated `out`, and wait until it is really done."""
    cp.matmul(a, a, out=out)  # queues the work and returns at once
    cp.cuda.Device().synchronize()  # without this a timer would only see the launch
    return out


def numpy_product(a, out):
    """The same product on the CPU, through the BLAS library NumPy was built with."""
    return np.matmul(a, a, out=out)
# --8<-- [end:matmul]


# --8<-- [start:profiler]
from cupyx.profiler import benchmark


def gpu_and_cpu_seconds(a, repeats=5):
    """Median GPU time (CUDA events) and CPU time (time to return) of `a @ a`."""
    result = benchmark(cp.matmul, (a, a), n_repeat=repeats, n_warmup=1, name="matmul")
    return float(np.median(result.gpu_times[0])), float(np.median(result.cpu_times))
# --8<-- [end:profiler]


# --8<-- [start:first_call]
import statistics
import time


def timed(fn, *args):
    cp.cuda.Device().synchronize()
    start = time.perf_counter()
    fn(*args)  # cupy_product synchronizes before it returns
    return time.perf_counter() - start


def first_call_vs_steady(n, dtype, repeats=3):
    """The first product in a process pays one-off costs (cuBLAS handle, kernels)."""
    a = random_matrix(n, dtype)
    out = cp.empty_like(a)
    first = timed(cupy_product, a, out)
    steady = statistics.median(timed(cupy_product, a, out) for _ in range(repeats))
    return first, steady
# --8<-- [end:first_call]


# --8<-- [start:dlpack]
import torch

c = cp.arange(6, dtype=cp.float32)
t = torch.from_dlpack(c)  # a PyTorch tensor over the *same* GPU memory: no copy
t[0] = 42.0  # a write through PyTorch...
assert float(c[0]) == 42.0  # ...is visible through CuPy

back_to_cupy = cp.from_dlpack(t * 2)  # and the other way round
assert t.data_ptr() == c.data.ptr  # same address
# --8<-- [end:dlpack]


# --8<-- [start:elementwise]
affine_clamp = cp.ElementwiseKernel(
    "T x, T a, T b, T lo, T hi",  # inputs: T is taken from the array argument
    "T y",  # output
    "T v = a * x + b; y = v < lo ? lo : (v > hi ? hi : v);",  # C++, once per element
    "affine_clamp",
)


def fused(x, a, b, lo, hi):
    """y = clip(a*x + b, lo, hi) in one pass: read x once, write y once."""
    return affine_clamp(x, a, b, lo, hi)


def unfused(x, a, b, lo, hi):
    """The same with CuPy operators: three kernels and two temporary arrays."""
    return cp.clip(a * x + b, lo, hi)


def reference(x, a, b, lo, hi):
    """NumPy on the host: what both GPU versions must agree with."""
    return np.clip(a * x + b, lo, hi)
# --8<-- [end:elementwise]


if __name__ == "__main__":
    # --8<-- [start:main]
    print(f"GPU {gpu.id}: compute capability {capability}, "
          f"{free_bytes / 2**30:.1f} of {total_bytes / 2**30:.1f} GiB free")
    print(f"x.sum() = {float(total)} computed on {x.device}; NumPy refused: {refused!r}")

    first, steady = first_call_vs_steady(4096, cp.float64)
    print(f"4096x4096 fp64 product: first call {first * 1e3:.1f} ms, "
          f"later {steady * 1e3:.2f} ms")

    for dtype in (cp.float64, cp.float32):
        a = random_matrix(4096, dtype)
        gpu_s, cpu_s = gpu_and_cpu_seconds(a)
        a_host = cp.asnumpy(a)
        start = time.perf_counter()
        numpy_product(a_host, np.empty_like(a_host))
        numpy_s = time.perf_counter() - start
        print(f"{np.dtype(dtype).name}: GPU {gpu_s * 1e3:.2f} ms (the call returned after "
              f"{cpu_s * 1e6:.0f} µs), NumPy {numpy_s * 1e3:.0f} ms")

    v = cp.random.rand(1_000_000, dtype=cp.float32) * 4 - 2
    same = np.allclose(cp.asnumpy(fused(v, 2.0, 0.5, -1.0, 1.0)),
                       reference(cp.asnumpy(v), 2.0, 0.5, -1.0, 1.0), rtol=1e-6, atol=1e-6)
    print(f"ElementwiseKernel matches NumPy: {same}; DLPack shares memory: "
          f"{t.data_ptr() == c.data.ptr}")
    # --8<-- [end:main]
