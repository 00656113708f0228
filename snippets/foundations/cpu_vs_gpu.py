"""CPU vs GPU: what a GPU is made of, read from the device, and its ceilings, measured.

Run it: python -m snippets.foundations.cpu_vs_gpu
"""

GPUS_NEEDED = 0  # runs anywhere; on a CPU the same code measures the CPU, with smaller sizes

# --8<-- [start:setup]
import contextlib
import os
import statistics
import time

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def sync():
    """Wait until the GPU has finished everything queued so far (a CPU has no queue)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def wait_for(x):
    """Wait for the device that holds x; a CPU tensor is ready when the call returns."""
    if x.is_cuda:
        torch.cuda.synchronize(x.device)


def median_time(fn, *args, repeats=10, warmup=2):
    """Median seconds of fn(*args). fn must wait for its own work before it
    returns: the clock stops when it does, so CPU work is not charged a GPU sync."""
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(repeats):
        sync()  # earlier GPU work finishes outside the clock
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)
# --8<-- [end:setup]


# --8<-- [start:properties]
def describe_gpu(index=0):
    """What the GPU is made of, as the CUDA driver reports it."""
    p = torch.cuda.get_device_properties(index)
    return {
        "name": p.name,
        "compute_capability": f"{p.major}.{p.minor}",
        "sm_count": p.multi_processor_count,  # streaming multiprocessors
        "warp_size": p.warp_size,  # threads that issue one instruction together
        "max_threads_per_sm": p.max_threads_per_multi_processor,
        "registers_per_sm": p.regs_per_multiprocessor,  # 32-bit, shared by its threads
        "l2_bytes": p.L2_cache_size,
        "memory_bytes": p.total_memory,
    }


def describe_cpu():
    """The host: logical CPUs, and how many threads PyTorch gives one CPU operation."""
    return {"logical_cpus": os.cpu_count(), "torch_threads": torch.get_num_threads()}
# --8<-- [end:properties]


# --8<-- [start:latency]
def tiny_op(x):
    """One operation on one number: the time is all overhead (launch, queue, sync)."""
    x.add_(1.0)
    wait_for(x)
# --8<-- [end:latency]


# --8<-- [start:copy]
def make_copy_buffers(nbytes):
    src = torch.ones(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return src, dst


def copy(src, dst):
    """Device memory to device memory: every byte is read once and written once."""
    dst.copy_(src)
    sync()


def copy_bandwidth_gbs(nbytes):
    """Memory bandwidth in GB/s, counting read + write: 2 x nbytes per copy."""
    src, dst = make_copy_buffers(nbytes)
    return 2 * nbytes / median_time(copy, src, dst) / 1e9
# --8<-- [end:copy]


# --8<-- [start:triad]
def make_triad(n, where=device):
    b = torch.rand(n, device=where)
    c = torch.rand(n, device=where)
    return torch.empty_like(b), b, c


def triad(a, b, c, scalar=3.0):
    """a = b + scalar * c: 2 flops per element for 12 bytes of float32 traffic."""
    torch.add(b, c, alpha=scalar, out=a)
    wait_for(a)
# --8<-- [end:triad]


# --8<-- [start:matmul]
PRECISIONS = {  # name -> (tensor dtype, how cuBLAS may compute float32 products)
    "fp32": (torch.float32, "ieee"),
    "tf32": (torch.float32, "tf32"),
    "fp16": (torch.float16, "ieee"),
    "bf16": (torch.bfloat16, "ieee"),
}


@contextlib.contextmanager
def fp32_matmul_precision(mode):
    """'ieee': full float32 products; 'tf32': Tensor Cores round the inputs to TF32."""
    saved = torch.backends.cuda.matmul.fp32_precision
    torch.backends.cuda.matmul.fp32_precision = mode
    try:
        yield
    finally:
        torch.backends.cuda.matmul.fp32_precision = saved


def make_operands(n, precision):
    dtype, _ = PRECISIONS[precision]
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    return a, b


def matmul(a, b, precision):
    """One n x n product in the given precision; the setting is restored afterwards."""
    _, mode = PRECISIONS[precision]
    with fp32_matmul_precision(mode):
        c = a @ b  # the mode is read here, when the product is queued
    sync()
    return c


def matmul_tflops(n, precision):
    """Achieved TFLOP/s: an n x n product is n**3 multiply-adds, 2 * n**3 flops."""
    a, b = make_operands(n, precision)
    return 2 * n**3 / median_time(matmul, a, b, precision) / 1e12


def relative_error(n, precision):
    """Distance from a float64 product of the same (already rounded) inputs."""
    a, b = make_operands(n, precision)
    exact = a.double() @ b.double()
    return ((matmul(a, b, precision).double() - exact).norm() / exact.norm()).item()
# --8<-- [end:matmul]


# --8<-- [start:roofline]
def arithmetic_intensity(flops, nbytes):
    """Work per byte moved: the x axis of a roofline."""
    return flops / nbytes


def attainable_flops(intensity, bandwidth, peak):
    """The roofline: memory limits the rate below the ridge point, arithmetic above."""
    return min(peak, bandwidth * intensity)


def matmul_intensity(n, itemsize):
    """An n x n product reads A and B and writes C: 2n^3 flops over 3n^2 elements."""
    return arithmetic_intensity(2 * n**3, 3 * n * n * itemsize)
# --8<-- [end:roofline]


if __name__ == "__main__":
    # --8<-- [start:main]
    big = device.type == "cuda"
    print(f"device: {device}; host: {describe_cpu()}")
    if big:
        for key, value in describe_gpu().items():
            print(f"  {key}: {value}")
    elements = 2**26 if big else 2**20
    for where in dict.fromkeys(["cpu", device.type]):
        one = torch.zeros(1, device=where)
        tiny = median_time(tiny_op, one, repeats=100)
        seconds = median_time(triad, *make_triad(elements, where))
        print(f"{where}: one tiny op {tiny * 1e6:.1f} µs; triad on {elements} floats "
              f"{seconds * 1e3:.2f} ms ({12 * elements / seconds / 1e9:.0f} GB/s)")
    nbytes = 2**30 if big else 2**24
    gbs = copy_bandwidth_gbs(nbytes)
    print(f"copy {nbytes // 2**20} MiB: {gbs:.0f} GB/s (read + write)")
    n = 8192 if big else 256
    for precision in PRECISIONS:
        print(f"{precision} matmul {n}x{n}: {matmul_tflops(n, precision):.3g} TFLOP/s, "
              f"relative error {relative_error(min(n, 2048), precision):.1e}")
    print(f"fp16 {n}x{n} product: {matmul_intensity(n, 2):.0f} flop/byte; "
          f"triad: {arithmetic_intensity(2, 12):.2f} flop/byte")
    # --8<-- [end:main]
