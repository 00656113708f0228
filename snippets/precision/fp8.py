"""fp8 matrix products with per-tensor scales: speed against bf16, error against float64.

Run it anywhere: python -m snippets.precision.fp8
(a GPU needs compute capability 8.9 or newer; on a CPU, PyTorch's own fp8 kernels run it slowly)
"""

GPUS_NEEDED = 0  # CUDA when present (8.9 or newer), else PyTorch's CPU kernels

# --8<-- [start:setup]
import statistics
import time

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
N = 8192 if device.type == "cuda" else 256  # square products: N x N times N x N


def sync():
    if device.type == "cuda":
        torch.cuda.synchronize()


def median_seconds(fn, *args, repeats=20, warmup=3):
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


# --8<-- [start:support]
def fp8_unavailable():
    """None where fp8 matrix products can run; otherwise the reason, in words."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability()
        if (major, minor) < (8, 9):
            return (f"fp8 matrix products need compute capability 8.9 or newer "
                    f"(Ada, Hopper and later); this GPU has {major}.{minor}")
    return None
# --8<-- [end:support]


# --8<-- [start:quantize]
FP8 = torch.float8_e4m3fn  # 4 exponent bits, 3 mantissa bits: range +-448
FP8_MAX = torch.finfo(FP8).max


def to_fp8(x):
    """Clamp, then cast: what a value past +-448 becomes changed between PyTorch
    releases (NaN up to 2.11, the largest fp8 value from 2.12), so never cast one."""
    return x.clamp(-FP8_MAX, FP8_MAX).to(FP8)


def quantize(x):
    """Per-tensor scaling: the largest |x| maps to fp8's largest value, then round.
    Returns the fp8 tensor and the scale that decodes it: x ~ x_fp8 * scale."""
    scale = x.abs().max().float().clamp(min=1e-12) / FP8_MAX
    return to_fp8(x / scale), scale
# --8<-- [end:quantize]


# --8<-- [start:overflow]
def cast_past_the_range():
    """What an unclamped cast makes of values past each format's largest value."""
    past = [464.0, 465.0, 1000.0, float("inf")]  # inf: an overflow further up
    e4m3 = torch.tensor(past, device=device).to(FP8)
    e5m2 = torch.tensor([1e6], device=device).to(torch.float8_e5m2)
    return e4m3.float().tolist(), e5m2.float().item()
# --8<-- [end:overflow]


# --8<-- [start:matmul]
def bf16_matmul(x, w):
    """The baseline: x @ w.T in bfloat16, as a Linear layer under autocast does it."""
    return x @ w.t()


def fp8_matmul(x8, x_scale, w8, w_scale, fast_accum=False):
    """x @ w.T from fp8 operands on fp8 Tensor Cores, accumulated in float32 and
    returned in bfloat16. w is stored as a Linear layer stores its weight (out x in),
    so w8.t() is the column-major right operand the kernel requires.
    torch._scaled_mm is private (the leading underscore): it may change any time."""
    return torch._scaled_mm(x8, w8.t(), scale_a=x_scale, scale_b=w_scale,
                            out_dtype=torch.bfloat16, use_fast_accum=fast_accum)


def fp8_matmul_public(x8, x_scale, w8, w_scale):
    """The same product through the public wrapper of recent releases, which names the
    scaling recipe instead of inferring it from the scales' shapes."""
    F = torch.nn.functional
    tensorwise = F.ScalingType.TensorWise
    return F.scaled_mm(x8, w8.t(), x_scale, tensorwise, w_scale, tensorwise,
                       output_dtype=torch.bfloat16)


def quantized_matmul(x, w):
    """What a layer pays per call when it quantizes its input on the fly."""
    x8, x_scale = quantize(x)
    w8, w_scale = quantize(w)  # a real layer would keep its weight quantized
    return fp8_matmul(x8, x_scale, w8, w_scale)
# --8<-- [end:matmul]


# --8<-- [start:rowwise]
def quantize_rows(x):
    """Row-wise scaling: one scale per row, so one large row does not cost every
    other row its precision. Returns the fp8 tensor and an (rows x 1) scale."""
    scale = x.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12) / FP8_MAX
    return to_fp8(x / scale), scale


def fp8_matmul_rowwise(x8, x_scale, w8, w_scale):
    """x @ w.T with a scale per row of x (m x 1) and per row of w, which are
    the columns of w.T (1 x n)."""
    return torch._scaled_mm(x8, w8.t(), scale_a=x_scale, scale_b=w_scale.t(),
                            out_dtype=torch.bfloat16)
# --8<-- [end:rowwise]


# --8<-- [start:pairs]
FORMATS = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def supported_pairs():
    """The (first operand, second operand) formats the scaled product accepts here."""
    one = torch.ones((), device=device)
    pairs = []
    for a, b in [(a, b) for a in FORMATS for b in FORMATS]:
        left = torch.zeros(16, 16, device=device).to(FORMATS[a])
        right = torch.zeros(16, 16, device=device).to(FORMATS[b])
        try:
            torch._scaled_mm(left, right.t(), scale_a=one, scale_b=one,
                             out_dtype=torch.bfloat16)
            pairs.append((a, b))
        except (RuntimeError, ValueError):  # a pair these kernels do not implement
            pass
    return pairs
# --8<-- [end:pairs]


# --8<-- [start:error]
# Relative error (Frobenius norm) each may reach for standard-normal inputs; the tests
# hold both to it. fp8 keeps 3 mantissa bits to bf16's 7: about 16 times the error.
TOLERANCE = {"bf16": 1e-2, "fp8": 8e-2, "fp8-rowwise": 8e-2, "fp8-fast-accum": 8e-2}


def relative_errors(n, seed=0):
    """bf16 and fp8 products against float64 arithmetic on the same float32 inputs."""
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(n, n, device=device, generator=g)
    w = torch.randn(n, n, device=device, generator=g)
    exact = x.double() @ w.double().t()

    def error(result):
        return ((result.double() - exact).norm() / exact.norm()).item()

    bf16 = bf16_matmul(x.bfloat16(), w.bfloat16())
    tensorwise = (*quantize(x), *quantize(w))
    rowwise = (*quantize_rows(x), *quantize_rows(w))
    return {"bf16": error(bf16), "fp8": error(fp8_matmul(*tensorwise)),
            "fp8-fast-accum": error(fp8_matmul(*tensorwise, fast_accum=True)),
            "fp8-rowwise": error(fp8_matmul_rowwise(*rowwise))}
# --8<-- [end:error]


if __name__ == "__main__":
    # --8<-- [start:main]
    reason = fp8_unavailable()
    if reason:
        print(f"skipped: {reason}")
    else:
        print(f"464, 465, 1000 cast to e4m3 without a clamp: {cast_past_the_range()[0]}")
        print(f"fp8 formats the product takes here: {supported_pairs()}")
        errors = relative_errors(min(N, 4096))
        print("relative error: " + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()))
        x = torch.randn(N, N, device=device)
        w = torch.randn(N, N, device=device)
        x8, x_scale = quantize(x)
        w8, w_scale = quantize(w)
        x16, w16 = x.bfloat16(), w.bfloat16()
        flops = 2 * N**3
        bf16 = flops / median_seconds(bf16_matmul, x16, w16) / 1e12
        fp8 = flops / median_seconds(fp8_matmul, x8, x_scale, w8, w_scale) / 1e12
        print(f"{N}x{N} products on {device}: bf16 {bf16:.3g} TFLOP/s, "
              f"fp8 {fp8:.3g} TFLOP/s ({fp8 / bf16:.2f}x)")
        if hasattr(torch.nn.functional, "scaled_mm"):
            same = torch.equal(fp8_matmul(x8, x_scale, w8, w_scale),
                               fp8_matmul_public(x8, x_scale, w8, w_scale))
            print(f"public torch.nn.functional.scaled_mm gives the same result: {same}")
    # --8<-- [end:main]
