"""The 2-D diffusion (heat) equation on a periodic grid: the original NumPy and torch.roll versions,
then steps that move fewer bytes and launch fewer kernels.

Run it: python -m snippets.case_studies.diffusion
"""

GPUS_NEEDED = 0  # NumPy and PyTorch; uses CUDA when present

# --8<-- [start:setup]
import statistics
import time

import numpy as np
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
DT, D = 0.1, 1.0  # the original time step and diffusion coefficient (DT * D <= 1/4)


def initial_grid(shape):
    """The original start, float32 on the host: cold everywhere but one warm square."""
    grid = np.zeros(shape, dtype=np.float32)
    low, high = int(shape[0] * 0.4), int(shape[0] * 0.5)
    grid[low:high, low:high] = 0.005
    return grid


def sync():
    """Wait for queued GPU work (PyTorch's and CuPy's alike); a no-op on a CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds_per_step(run, steps, repeats=5):
    """Median synchronized wall time per step of `run(steps)`, after a warm-up call."""
    run(steps)
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(steps)
        sync()
        times.append((time.perf_counter() - start) / steps)
    return statistics.median(times)
# --8<-- [end:setup]


# --8<-- [start:numpy_seed]
def laplacian_numpy(grid):
    """5-point Laplacian; np.roll wraps around, so the grid is periodic."""
    return (np.roll(grid, +1, 0) + np.roll(grid, -1, 0)
            + np.roll(grid, +1, 1) + np.roll(grid, -1, 1) - 4 * grid)


def evolve_numpy(grid, dt, D=1.0):
    return grid + dt * D * laplacian_numpy(grid)


def run_numpy(grid, steps):
    for _ in range(steps):
        grid = evolve_numpy(grid, DT, D)
    return grid
# --8<-- [end:numpy_seed]


# --8<-- [start:torch_seed]
def laplacian(grid):
    """The original PyTorch version: the NumPy code with torch.roll."""
    return (torch.roll(grid, +1, 0) + torch.roll(grid, -1, 0)
            + torch.roll(grid, +1, 1) + torch.roll(grid, -1, 1) - 4 * grid)


def evolve(grid, dt, D=1.0):
    return grid + dt * D * laplacian(grid)


def run_torch(grid, steps):
    for _ in range(steps):
        grid = evolve(grid, DT, D)
    return grid
# --8<-- [end:torch_seed]


# --8<-- [start:count_kernels]
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile


def kernels_per_call(fn, *args):
    """How many GPU kernels one call of `fn` launches, as torch.profiler sees it."""
    fn(*args)  # warm-up: compilation and one-off work stay out of the count
    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn(*args)
        sync()
    return sum(1 for event in prof.events() if event.device_type == DeviceType.CUDA)
# --8<-- [end:count_kernels]


# --8<-- [start:slices]
def evolve_into(grid, out, dt, D=1.0):
    """One step written into `out`: slices instead of roll, no temporary arrays.

    u + c*(up + down + left + right - 4u) is computed as (1 - 4c)*u + c*up + ...
    The `[:1]` / `[-1:]` lines are the periodic wrap-around.
    """
    c = dt * D
    torch.mul(grid, 1 - 4 * c, out=out)
    out[1:].add_(grid[:-1], alpha=c)  # neighbour above
    out[:1].add_(grid[-1:], alpha=c)
    out[:-1].add_(grid[1:], alpha=c)  # neighbour below
    out[-1:].add_(grid[:1], alpha=c)
    out[:, 1:].add_(grid[:, :-1], alpha=c)  # neighbour to the left
    out[:, :1].add_(grid[:, -1:], alpha=c)
    out[:, :-1].add_(grid[:, 1:], alpha=c)  # neighbour to the right
    out[:, -1:].add_(grid[:, :1], alpha=c)
    return out


def run_inplace(grid, spare, steps):
    """Ping-pong between two preallocated grids; returns the one holding the result."""
    for _ in range(steps):
        evolve_into(grid, spare, DT, D)
        grid, spare = spare, grid
    return grid
# --8<-- [end:slices]


# --8<-- [start:compiled]
@torch.compile(dynamic=False, fullgraph=True)
def evolve_compiled(grid):
    """The original step, unchanged; TorchInductor fuses it into one kernel."""
    return evolve(grid, DT, D)


def run_compiled(grid, steps):
    for _ in range(steps):
        grid = evolve_compiled(grid)
    return grid
# --8<-- [end:compiled]


# --8<-- [start:ceiling]
def run_copy(src, dst, steps):
    """The floor under any step: read every cell once, write it once, nothing else."""
    for _ in range(steps):
        dst.copy_(src)
    return dst
# --8<-- [end:ceiling]


if __name__ == "__main__":
    # --8<-- [start:main]
    n, steps = 640, 100
    start = initial_grid((n, n))
    reference = run_numpy(start, steps)
    u = torch.from_numpy(start).to(device)
    results = {
        "torch.roll (seed)": run_torch(u, steps),
        "slices, in place": run_inplace(u.clone(), torch.empty_like(u), steps),
    }
    if device.type == "cuda":  # on a CPU, Inductor needs a C++ compiler and is slow
        results["torch.compile"] = run_compiled(u, steps)
    print(f"{n}x{n} grid, {steps} steps on {device}; heat before {start.sum():.4f}, "
          f"after {reference.sum():.4f} (NumPy)")
    for name, grid in results.items():
        worst = np.abs(grid.cpu().numpy() - reference).max()
        print(f"  {name:18s} max |difference| from NumPy: {worst:.1e}")
    numpy_s = seconds_per_step(lambda k: run_numpy(start, k), 10)
    torch_s = seconds_per_step(lambda k: run_torch(u, k), 10)
    print(f"  per step: NumPy {numpy_s * 1e3:.2f} ms, torch.roll {torch_s * 1e6:.0f} µs")
    if device.type == "cuda":
        print(f"  kernels per step: seed {kernels_per_call(evolve, u, DT)}, "
              f"compiled {kernels_per_call(evolve_compiled, u)}")
    # --8<-- [end:main]
