"""Code that runs on NumPy or CuPy arrays alike: the array-module pattern, with an honest fallback.

Run it: python -m snippets.first_steps.array_module
"""

GPUS_NEEDED = 0  # falls back to NumPy when CuPy (or a GPU) is missing

# --8<-- [start:array_module]
import numpy as np

try:
    import cupy as cp
except ImportError:  # no CuPy installed: everything below still works, on NumPy arrays
    cp = None


def get_array_module(x):
    """cupy.get_array_module(x) where CuPy is installed, else NumPy."""
    return cp.get_array_module(x) if cp is not None else np


def softmax(x, axis=-1):
    """A numerically stable softmax, computed where `x` lives: no host<->GPU copy."""
    xp = get_array_module(x)  # (1)!
    shifted = x - x.max(axis=axis, keepdims=True)  # (2)!
    e = xp.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def to_numpy(x):
    """A NumPy array from either kind; only a CuPy array is copied (device -> host)."""
    return cp.asnumpy(x) if cp is not None else np.asarray(x)


def gpu_usable():
    """True when CuPy is installed *and* can reach a CUDA device."""
    return cp is not None and cp.cuda.is_available()
# --8<-- [end:array_module]


if __name__ == "__main__":
    # --8<-- [start:array_module_main]
    scores = np.array([[1.0, 2.0, 3.0], [1000.0, 1000.0, 1000.0]], dtype=np.float32)
    on_host = softmax(scores)
    module = get_array_module(scores).__name__
    print(f"NumPy input -> {module}:\n{np.array2string(on_host, precision=4)}")
    if gpu_usable():
        on_gpu = softmax(cp.asarray(scores))
        same = np.allclose(to_numpy(on_gpu), on_host, rtol=1e-6)
        module = get_array_module(on_gpu).__name__
        print(f"CuPy input  -> {module}, agrees with NumPy: {same}")
    else:
        print("CuPy or a GPU is not available here: the same functions ran on NumPy only")
    # --8<-- [end:array_module_main]
