"""Exercises for first steps: port a NumPy pipeline to PyTorch on the GPU, fix a `.to()` that
does nothing, and make a NumPy function run on CuPy arrays where they live.

Run it anywhere: python -m snippets.first_steps.first_steps_exercises
(without a GPU, PyTorch runs on the CPU and the CuPy parts fall back to NumPy)
"""

GPUS_NEEDED = 0  # picks CUDA at run time; CuPy only where it is installed

# --8<-- [start:setup]
import numpy as np
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# --8<-- [end:setup]


# --8<-- [start:port_task]
# Exercise 1: port this NumPy pipeline to PyTorch on the GPU. The arrays arrive
# as NumPy and the caller wants NumPy back; compute in float32 on the GPU.
def standardize_numpy(x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


def predict_numpy(x, w1, w2):
    h = np.maximum(standardize_numpy(x) @ w1, 0)
    return (h @ w2).argmax(axis=1)


rng = np.random.default_rng(0)
x = rng.standard_normal((4096, 256)) * 3 + 1  # float64, like every NumPy default
w1 = rng.standard_normal((256, 512))
w2 = rng.standard_normal((512, 10))
print("NumPy:", predict_numpy(x, w1, w2)[:8])
# --8<-- [end:port_task]


# --8<-- [start:port_solution]
def standardize_torch(x):
    # NumPy's std divides by n; torch's, by default, by n - 1 (correction=1)
    return (x - x.mean(dim=0)) / x.std(dim=0, correction=0)


def predict_torch(x, w1, w2):
    x, w1, w2 = (torch.as_tensor(a, dtype=torch.float32, device=device)
                 for a in (x, w1, w2))  # one copy each, converted to float32
    h = torch.relu(standardize_torch(x) @ w1)
    return (h @ w2).argmax(dim=1).cpu().numpy()  # one copy back, of the answer


same = (predict_torch(x, w1, w2) == predict_numpy(x, w1, w2)).mean()
print(f"PyTorch on {device.type}: the same class for {same:.2%} of the rows")
# --8<-- [end:port_solution]


# --8<-- [start:to_task]
# Exercise 2: on a GPU this fails with "Expected all tensors to be on the same
# device". Why, when both lines call .to(device)? Fix it.
def prepare_and_run(model, batch, device, dtype=torch.float32):
    model.to(device, dtype)
    batch.to(device, dtype)
    return model(batch)


model = torch.nn.Linear(8, 2)
batch = torch.randn(4, 8)
# --8<-- [end:to_task]


# --8<-- [start:to_solution]
def prepare_and_run_fixed(model, batch, device, dtype=torch.float32):
    model.to(device, dtype)  # a module is changed in place (and returned)
    batch = batch.to(device, dtype)  # a tensor is not: .to() returns a new one
    return model(batch)


out = prepare_and_run_fixed(model, batch, device)
print(f"output on {out.device}, {out.dtype}")
# --8<-- [end:to_solution]


# --8<-- [start:either_task]
# Exercise 3: make this work on CuPy arrays too, computing where the labels live
# (no copy to the host), and still on NumPy arrays where CuPy is not installed.
def one_hot(labels, classes):
    out = np.zeros((len(labels), classes), dtype=np.float32)
    out[np.arange(len(labels)), labels] = 1
    return out


labels = rng.integers(0, 10, size=1000)
# --8<-- [end:either_task]


# --8<-- [start:either_solution]
try:
    import cupy as cp
except ImportError:  # no CuPy: the same function runs on NumPy arrays
    cp = None


def one_hot_anywhere(labels, classes):
    xp = cp.get_array_module(labels) if cp is not None else np  # numpy or cupy
    out = xp.zeros((len(labels), classes), dtype=xp.float32)  # made where labels are
    out[xp.arange(len(labels)), labels] = 1
    return out


on_host = one_hot_anywhere(labels, 10)
print(type(on_host).__module__, "array, same as before:",
      np.array_equal(on_host, one_hot(labels, 10)))
if cp is not None and cp.cuda.is_available():
    on_gpu = one_hot_anywhere(cp.asarray(labels), 10)
    print(type(on_gpu).__module__, "array, same values:",
          np.array_equal(cp.asnumpy(on_gpu), on_host))
# --8<-- [end:either_solution]
