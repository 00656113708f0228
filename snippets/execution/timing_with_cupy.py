"""Timing CuPy code with cupyx.profiler.benchmark, which records CPU and GPU time per run.

Run it on a CUDA machine: python -m snippets.execution.timing_with_cupy
"""

GPUS_NEEDED = 1  # CuPy runs on CUDA devices only

# --8<-- [start:cupy]
import cupy as cp
from cupyx.profiler import benchmark

n = 4096
a = cp.random.standard_normal((n, n), dtype=cp.float32)
b = cp.random.standard_normal((n, n), dtype=cp.float32)


def time_cupy_matmul(repeats=50):
    """Median GPU and CPU seconds per product; cupyx warms up and synchronizes."""
    result = benchmark(cp.matmul, (a, b), n_repeat=repeats, n_warmup=5)
    gpu = float(cp.median(cp.asarray(result.gpu_times[0])))  # one row per device
    cpu = float(cp.median(cp.asarray(result.cpu_times)))
    return gpu, cpu
# --8<-- [end:cupy]


if __name__ == "__main__":
    # --8<-- [start:cupy_main]
    gpu, cpu = time_cupy_matmul()
    print(f"cupyx.profiler.benchmark: GPU {gpu * 1e3:.2f} ms, CPU {cpu * 1e3:.2f} ms")
    # --8<-- [end:cupy_main]
