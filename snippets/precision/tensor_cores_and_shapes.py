"""Tensor Cores: which dtypes use them, what TF32 costs in accuracy, and shapes that slow them.

Run it anywhere: python -m snippets.precision.tensor_cores_and_shapes
(on a CPU the same code runs with small matrices; TF32 is a CUDA setting and changes nothing)
"""

GPUS_NEEDED = 0  # picks CUDA at run time; the speed claims are checked on a GPU

# --8<-- [start:setup]
import contextlib
import statistics
import time

import torch
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def sync():
    if device.type == "cuda":
        torch.cuda.synchronize()


def median_seconds(fn, *args, repeats=10, warmup=3):
    """Median time of fn(*args), with the GPU drained before and after every call."""
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn(*args)
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
# --8<-- [end:setup]


# --8<-- [start:tf32]
@contextlib.contextmanager
def fp32_matmul_precision(mode):
    """'tf32': float32 products may round their inputs to TF32 and use Tensor Cores.
    'ieee': full float32 (PyTorch's default for matrix products)."""
    saved = torch.backends.cuda.matmul.fp32_precision
    torch.backends.cuda.matmul.fp32_precision = mode
    try:
        yield
    finally:
        torch.backends.cuda.matmul.fp32_precision = saved
# --8<-- [end:tf32]


# --8<-- [start:precisions]
PRECISIONS = {  # name: (dtype the tensors are stored in, float32 matmul mode)
    "fp32": (torch.float32, "ieee"),
    "tf32": (torch.float32, "tf32"),
    "fp16": (torch.float16, "ieee"),
    "bf16": (torch.bfloat16, "ieee"),
}


def matmul(a, b, precision):
    """a @ b in the given precision; the float32 setting is restored afterwards."""
    with fp32_matmul_precision(PRECISIONS[precision][1]):
        return a @ b
# --8<-- [end:precisions]


# --8<-- [start:accuracy]
# How far each precision's product may be from the exact one (relative, Frobenius norm),
# for standard-normal inputs of size 1024 to 4096. The tests hold every precision to it.
TOLERANCE = {"fp32": 1e-5, "tf32": 5e-3, "fp16": 2e-3, "bf16": 1e-2}


def relative_error(n, precision, seed=0):
    """Error of an n x n product against float64 arithmetic on the same float32 data."""
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(n, n, device=device, generator=g)
    b = torch.randn(n, n, device=device, generator=g)
    exact = a.double() @ b.double()
    dtype = PRECISIONS[precision][0]
    result = matmul(a.to(dtype), b.to(dtype), precision).double()
    return ((result - exact).norm() / exact.norm()).item()
# --8<-- [end:accuracy]


# --8<-- [start:sweep]
def operands(n, dtype):
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    return a, b


def tflops(n, precision):
    """Achieved rate of an n x n product: 2 n^3 floating-point operations."""
    a, b = operands(n, PRECISIONS[precision][0])
    return 2 * n**3 / median_seconds(matmul, a, b, precision) / 1e12
# --8<-- [end:sweep]


# --8<-- [start:waves]
def tiles_and_waves(m, n, tile=(128, 256)):
    """Output tiles of an (m x k) @ (k x n) product, and how many rounds ("waves")
    the GPU's SMs need to work through them, one tile per SM at a time."""
    tiles = -(-m // tile[0]) * -(-n // tile[1])
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return tiles, -(-tiles // sms)


def wide_product(m, k=8192, n=8192, dtype=torch.bfloat16):
    """Operands of an (m x k) @ (k x n) product: m rows of output, n columns."""
    return (torch.randn(m, k, device=device, dtype=dtype),
            torch.randn(k, n, device=device, dtype=dtype))
# --8<-- [end:waves]


# --8<-- [start:reduced_precision]
def reduced_precision_reductions():
    """Whether cuBLAS may sum partial results of float16 and bfloat16 products in
    the 16-bit format (split-K), rather than only in float32."""
    matmul = torch.backends.cuda.matmul
    return {"fp16": matmul.allow_fp16_reduced_precision_reduction,
            "bf16": matmul.allow_bf16_reduced_precision_reduction}
# --8<-- [end:reduced_precision]


# --8<-- [start:padding]
def pad_to(x, multiple):
    """Zero-pad both dimensions of a matrix up to the next multiple."""
    rows, cols = x.shape
    return F.pad(x, (0, -cols % multiple, 0, -rows % multiple))


def padded_matmul(a, b, multiple=64):
    """a @ b computed on zero-padded copies; the extra rows and columns are cut off."""
    m, n = a.shape[0], b.shape[1]
    return (pad_to(a, multiple) @ pad_to(b, multiple))[:m, :n]
# --8<-- [end:padding]


if __name__ == "__main__":
    # --8<-- [start:main]
    big = device.type == "cuda"
    print(f"device: {device}")
    for precision in PRECISIONS:
        error = relative_error(2048 if big else 256, precision)
        print(f"{precision}: relative error {error:.1e} (tolerance {TOLERANCE[precision]})")
    sizes = (8184, 8191, 8192, 8193, 8200) if big else (248, 255, 256)
    for precision in ("fp16", "bf16"):
        rates = ", ".join(f"{n}: {tflops(n, precision):.3g}" for n in sizes)
        print(f"{precision} TFLOP/s by size: {rates}")
    odd = sizes[1]
    a, b = operands(odd, torch.float16)
    seconds = median_seconds(padded_matmul, a, b)
    print(f"fp16 {odd} padded to a multiple of 64: {2 * odd**3 / seconds / 1e12:.3g} "
          f"TFLOP/s of useful work")
    # --8<-- [end:main]
