"""Getting started with PyTorch on a GPU: finding it, choosing it, and putting tensors and models on it.

Run it anywhere: python -m snippets.first_steps.pytorch_on_a_gpu
(on a machine without a usable GPU it says why, and runs on the CPU)
"""

GPUS_NEEDED = 0  # picks CUDA at run time; every line also runs on a CPU-only machine

# --8<-- [start:setup]
import os
import shutil
import subprocess
import sys

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# --8<-- [end:setup]


# --8<-- [start:diagnose]
# Oldest driver for each CUDA major version (NVIDIA minor-version compatibility, Linux)
MIN_DRIVER = {11: 450, 12: 525, 13: 580}


def driver_version():
    """The NVIDIA driver's version as nvidia-smi reports it, or None if that fails."""
    if shutil.which("nvidia-smi") is None:
        return None
    query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
    out = subprocess.run(query, capture_output=True, text=True)
    lines = out.stdout.split()
    return lines[0] if out.returncode == 0 and lines else None


def why_no_gpu():
    """None when CUDA is usable; otherwise the most likely reason, in words."""
    if torch.cuda.is_available():
        return None
    if torch.version.cuda is None:
        if torch.version.hip is not None:
            return "a ROCm build of PyTorch, but no AMD GPU is visible (check rocm-smi)"
        return (f"this PyTorch ({torch.__version__}) is a CPU-only build: "
                "install a CUDA build (see pytorch.org/get-started)")
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None and hidden.strip() in ("", "-1"):
        return f"CUDA_VISIBLE_DEVICES={hidden!r} hides every GPU from this process"
    if shutil.which("nvidia-smi") is None:
        return ("no NVIDIA driver found (nvidia-smi is not on PATH); in a container, "
                "start it with GPU access (docker run --gpus all ...)")
    driver = driver_version()
    if driver is None:
        return ("nvidia-smi cannot reach a GPU: the driver is not loaded, "
                "or does not match its kernel module (reboot?)")
    need = MIN_DRIVER.get(int(torch.version.cuda.split(".")[0]))
    if need is not None and int(driver.split(".")[0]) < need:
        return (f"driver {driver} is too old for this PyTorch's CUDA "
                f"{torch.version.cuda}: it needs {need} or newer "
                "(or install a PyTorch built for an older CUDA)")
    return (f"driver {driver} should run CUDA {torch.version.cuda}; read the warning "
            "torch.cuda.is_available() printed, and check CUDA_VISIBLE_DEVICES")
# --8<-- [end:diagnose]


# --8<-- [start:properties]
def describe_gpus():
    """One line per visible CUDA device; an empty list when there is none."""
    lines = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        lines.append(f"cuda:{index} {props.name}: "
                     f"compute capability {props.major}.{props.minor}, "
                     f"{props.total_memory / 2**30:.1f} GiB, "
                     f"{props.multi_processor_count} SMs")
    return lines
# --8<-- [end:properties]


# --8<-- [start:choose]
def one_tensor_per_gpu():
    """`cuda:N` names GPU N explicitly; `cuda` alone means the current GPU."""
    return [torch.ones(1, device=f"cuda:{i}") for i in range(torch.cuda.device_count())]


def current_gpu_after_set_device(index):
    """set_device changes what a bare "cuda" means, for this thread, from now on."""
    torch.cuda.set_device(index)
    return torch.ones(1, device="cuda").device


def gpu_inside_context(index):
    """Scoped: inside the block "cuda" means GPU `index`; afterwards, what it was."""
    with torch.cuda.device(index):
        return torch.ones(1, device="cuda").device
# --8<-- [end:choose]


# --8<-- [start:visible_devices]
def device_count_with(visible):
    """How many GPUs a *fresh* Python process sees with CUDA_VISIBLE_DEVICES=visible."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": visible}
    code = "import torch; print(torch.cuda.device_count())"
    out = subprocess.run([sys.executable, "-c", code],
                         env=env, capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])
# --8<-- [end:visible_devices]


# --8<-- [start:create]
def created_on_device(shape):
    """Allocated and filled by the GPU: no host memory, no copy."""
    return torch.randn(shape, device=device)


def created_then_moved(shape):
    """Filled by the CPU in host memory, then copied over PCIe."""
    return torch.randn(shape).to(device)
# --8<-- [end:create]


# --8<-- [start:creation_args]
import numpy as np

zeros = torch.zeros(2, 3, dtype=torch.float16, device=device)
weights = torch.randn(64, 32, device=device, requires_grad=True)
from_list = torch.tensor([[1, 2], [3, 4]], dtype=torch.float32, device=device)
from_numpy = torch.as_tensor(np.arange(6.0), device=device)  # copies only if needed
like = torch.zeros_like(weights)             # same shape, dtype and device
# --8<-- [end:creation_args]


# --8<-- [start:modules]
def where_is(module):
    """Every device that holds one of the module's parameters or buffers."""
    return {t.device for t in (*module.parameters(), *module.buffers())}


model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.BatchNorm1d(64),
                            torch.nn.ReLU(), torch.nn.Linear(64, 10))
same = model.to(device)     # moves parameters and buffers in place...
assert same is model        # ...and returns the module itself

x = torch.randn(8, 32)
x_on_device = x.to(device)  # a tensor's .to() returns a tensor; `x` stays put
y = model(x_on_device)      # inputs and parameters must be on the same device

assert where_is(model) == {y.device}
assert next(model.parameters()).device == x_on_device.device
# --8<-- [end:modules]


# --8<-- [start:to_arguments]
images = torch.rand(16, 3, 32, 32)                # NCHW, float32, on the CPU

a = images.to(device)                             # device only
b = images.to(device, dtype=torch.bfloat16)       # device and dtype in one step
c = images.to(memory_format=torch.channels_last)  # same shape, NHWC strides
staging = images.pin_memory() if device.type == "cuda" else images  # page-locked
d = staging.to(device, non_blocking=True)         # may return before the copy ends
e = images.to("cpu", copy=True)                   # new tensor, though nothing changes

assert c.shape == images.shape and c.is_contiguous(memory_format=torch.channels_last)
assert e is not images and torch.equal(e, images)
# --8<-- [end:to_arguments]


# --8<-- [start:to_returns_self]
t = torch.ones(4, device=device)
assert t.to(device) is t                 # already there: the same tensor, no copy
assert t.to(device, copy=True) is not t  # copy=True always makes a new tensor
assert t.to(torch.float64) is not t      # a real change makes a new tensor
# --8<-- [end:to_returns_self]


# --8<-- [start:gpu_typo]
def message_for_gpu_device():
    """"gpu" is not a device type in PyTorch; the error lists the ones that are."""
    try:
        torch.ones(2).to("gpu")
    except RuntimeError as err:
        return str(err)
    return None
# --8<-- [end:gpu_typo]


# --8<-- [start:accelerator]
def pick_device():
    """CUDA (ROCm too), MPS, XPU...: whichever accelerator this build can use."""
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    return accelerator if accelerator is not None else torch.device("cpu")


def accelerator_summary():
    return {"device": pick_device(), "available": torch.accelerator.is_available(),
            "count": torch.accelerator.device_count()}
# --8<-- [end:accelerator]


# --8<-- [start:numpy_like]
grid = np.linspace(0.0, 1.0, 5)
shared = torch.from_numpy(grid)       # a CPU tensor sharing the array's memory
shared += 1                           # ...so this changes `grid` too
on_device = torch.as_tensor(grid, device=device)
back = (on_device * 2).cpu().numpy()  # .numpy() needs a CPU tensor: .cpu() first


def doubled_until_large(v):
    """Plain Python control flow; autograd records the operations that ran."""
    while v.norm() < 10:              # a Python bool from a GPU value: waits for it
        v = v * 2
    return v.sum()


v = torch.ones(3, device=device, requires_grad=True)
doubled_until_large(v).backward()     # three doublings ran: the gradient is 2**3
# --8<-- [end:numpy_like]


if __name__ == "__main__":
    # --8<-- [start:main]
    print(f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}); device: {device}")
    reason = why_no_gpu()
    print("CUDA is usable" if reason is None else f"no GPU: {reason}")
    for line in describe_gpus():
        print(" ", line)
    print(f"with CUDA_VISIBLE_DEVICES='' a new process sees {device_count_with('')} GPU(s)")
    print(f"torch.accelerator: {accelerator_summary()}")
    print(f"model on {where_is(model)}, output {tuple(y.shape)} on {y.device}")
    print(f".to('gpu') fails: {message_for_gpu_device().splitlines()[0][:70]}...")
    print(f"gradient through a data-dependent loop: {v.grad.tolist()}")
    # --8<-- [end:main]
