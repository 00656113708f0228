"""Cheap and expensive activations: memory-bound all alike, and what fusing them saves.

Run it anywhere: python -m snippets.precision.activations
(on a CPU the same code runs on a smaller tensor, and skips torch.compile)
"""

GPUS_NEEDED = 0  # picks CUDA at run time; the compiled variant runs on a GPU only

# --8<-- [start:setup]
import statistics
import time

import torch
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
N = 2**27 if device.type == "cuda" else 2**18  # elements: 512 MiB of float32 on a GPU


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


# --8<-- [start:activations]
ACTIVATIONS = {
    "relu": torch.relu,
    "gelu": F.gelu,
    "silu": F.silu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
}


def forward_backward(activation, x, grad_out):
    """One activation as training runs it: forward, then backward to the input."""
    y = activation(x)
    (grad_in,) = torch.autograd.grad(y, x, grad_out)
    return grad_in


def activation_bytes(n, itemsize):
    """Forward reads x and writes y; backward reads the incoming gradient and x (or y)
    and writes the gradient of x: five tensors' worth of memory traffic."""
    return 5 * n * itemsize
# --8<-- [end:activations]


# --8<-- [start:copy]
def copy(src, dst):
    """The yardstick: every byte read once and written once, no arithmetic."""
    dst.copy_(src)


def copy_bandwidth_gbs(n):
    src = torch.ones(n, device=device)
    dst = torch.empty_like(src)
    return 2 * src.nbytes / median_seconds(copy, src, dst) / 1e9
# --8<-- [end:copy]


# --8<-- [start:measure]
def activation_bandwidth_gbs(name, n=N):
    x = torch.randn(n, device=device, requires_grad=True)
    grad_out = torch.randn(n, device=device)
    seconds = median_seconds(forward_backward, ACTIVATIONS[name], x, grad_out)
    return activation_bytes(n, x.element_size()) / seconds / 1e9
# --8<-- [end:measure]


# --8<-- [start:fusion]
def scale_shift_activation(x, scale, shift, activation=F.gelu):
    """A normalization's affine step, then the activation. Eagerly that is three
    kernels, each reading and writing the whole tensor: x * scale, + shift, gelu."""
    return activation(x * scale + shift)


# One kernel instead of three: read x once, write the result once.
fused = torch.compile(scale_shift_activation, dynamic=False, fullgraph=True)


def fusion_inputs(n=N, width=4096):
    x = torch.randn(n // width, width, device=device)
    scale = torch.randn(width, device=device)
    shift = torch.randn(width, device=device)
    return x, scale, shift
# --8<-- [end:fusion]


if __name__ == "__main__":
    # --8<-- [start:main]
    print(f"{N} float32 elements on {device}")
    print(f"copy: {copy_bandwidth_gbs(N):.0f} GB/s (read + write)")
    for name in ACTIVATIONS:
        print(f"{name:8s} forward + backward: {activation_bandwidth_gbs(name):.0f} GB/s")
    x, scale, shift = fusion_inputs()
    eager = median_seconds(scale_shift_activation, x, scale, shift)
    print(f"x * scale + shift, then gelu, eager: {eager * 1e3:.2f} ms")
    if device.type == "cuda":  # on a CPU, Inductor needs a C++ compiler and is slow
        compiled = median_seconds(fused, x, scale, shift)
        print(f"the same, torch.compile: {compiled * 1e3:.2f} ms "
              f"({eager / compiled:.1f}x faster)")
    # --8<-- [end:main]
