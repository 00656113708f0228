"""Asynchronous execution: what returns at once, what makes the CPU wait, and what waiting costs.

Run it: python -m snippets.execution.async_execution
"""

GPUS_NEEDED = 0  # runs anywhere; the sync-debug and CUDA_LAUNCH_BLOCKING parts need CUDA

# --8<-- [start:setup]
import contextlib
import functools
import statistics
import time
import warnings

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def sync():
    """Block the CPU until all work queued on the GPU is done (a CPU has no queue)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


n = 4096 if device.type == "cuda" else 256  # keep the CPU run short
a = torch.randn(n, n, device=device)
# --8<-- [end:setup]


# --8<-- [start:queue]
def launch(a, repeats=10):
    """Queue `repeats` matrix products. On a GPU this returns long before they run."""
    for _ in range(repeats):
        a @ a


def launch_and_wait(a, repeats=10):
    """The same products, and then wait until the GPU has finished them."""
    launch(a, repeats)
    sync()
# --8<-- [end:queue]


# --8<-- [start:hidden]
x = torch.randn(1_000_000, device=device)

# Each needs a value or a shape that only the GPU knows: the CPU must wait for it.
SYNCHRONIZING = {
    "x.sum().item()": lambda x: x.sum().item(),
    "float(x.sum())": lambda x: float(x.sum()),
    "x.cpu()": lambda x: x.cpu(),
    "x[:4].tolist()": lambda x: x[:4].tolist(),
    "str(x[:4]), what print() shows": lambda x: str(x[:4]),
    "if (x > 3).any(): ...": lambda x: bool((x > 3).any()),
    "x[x > 0]": lambda x: x[x > 0],
    "x.nonzero()": lambda x: x.nonzero(),
}

# These produce tensors whose shape is known in advance: they are only queued.
QUEUED = {
    "x.sum()": lambda x: x.sum(),
    "(x > 3).any()": lambda x: (x > 3).any(),
    "torch.where(x > 0, x, 0)": lambda x: torch.where(x > 0, x, 0),
    "x.clamp(min=0)": lambda x: x.clamp(min=0),
}
# --8<-- [end:hidden]


# --8<-- [start:sync_debug]
@contextlib.contextmanager
def sync_debug_mode(mode):
    """In the block, each synchronizing CUDA call warns ("warn") or raises ("error")."""
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode(mode)
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(previous)


def count_syncs(fn):
    """How many synchronizing calls PyTorch's debug mode saw while fn() ran."""
    with warnings.catch_warnings(record=True) as caught, sync_debug_mode("warn"):
        warnings.simplefilter("always")
        fn()
    return sum("called a synchronizing" in str(w.message) for w in caught)
# --8<-- [end:sync_debug]


# --8<-- [start:masks]
def positive_sum_with_mask(x):
    """x[x > 0] has a data-dependent length: PyTorch must ask the GPU for it first."""
    return x[x > 0].sum()


def positive_sum_without_sync(x):
    """Same result, fixed shape: zeros instead of dropped elements. Nothing waits."""
    return torch.where(x > 0, x, 0).sum()
# --8<-- [end:masks]


# --8<-- [start:model]
width = 2048 if device.type == "cuda" else 64  # on a GPU, enough work to set the pace
batch = 4096 if device.type == "cuda" else 64


def make_model(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, 1),
    ).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def make_batches(count=8, seed=1):
    """A few fixed batches, already on the device, so no data loading is timed."""
    generator = torch.Generator(device=device).manual_seed(seed)
    xs = torch.randn(count, batch, width, device=device, generator=generator)
    ys = xs.sin().sum(dim=2, keepdim=True) / width**0.5
    return list(zip(xs, ys, strict=True))


def train_step(model, optimizer, x, y):
    """One ordinary training step. Nothing in it synchronizes: it is all queued."""
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()


def host_work():
    """What the host does every step besides queuing kernels: preparing the next batch,
    bookkeeping, logging. Here a stand-in: a couple of milliseconds of plain Python."""
    return sum(i * i for i in range(40_000))
# --8<-- [end:model]


# --8<-- [start:loops]
def train_reading_every_step(model, optimizer, batches, steps):
    """The usual loop: loss.item() at every step makes the CPU wait for the GPU."""
    losses = []
    for step in range(steps):
        x, y = batches[step % len(batches)]
        loss = train_step(model, optimizer, x, y)
        losses.append(loss.item())  # a synchronization point: the GPU drains its queue
        host_work()                 # ...and idles while the host does this
    return losses


def train_reading_every(model, optimizer, batches, steps, every=50):
    """Keep the losses on the GPU and read them in one go every `every` steps."""
    losses, pending = [], []
    for step in range(steps):
        x, y = batches[step % len(batches)]
        pending.append(train_step(model, optimizer, x, y))  # stays on the GPU
        host_work()  # runs while the GPU works through the step just queued
        if len(pending) == every or step == steps - 1:
            losses += torch.stack(pending).tolist()  # one sync per `every` steps
            pending.clear()
    return losses
# --8<-- [end:loops]


# --8<-- [start:per_step]
timed_steps = 200 if device.type == "cuda" else 50  # keep the CPU run short


def seconds_per_step(every, steps=timed_steps, repeats=3):
    """Median wall-clock time per step when the loss is read every `every` steps."""
    model, optimizer = make_model()
    batches = make_batches()
    if every == 1:
        loop = train_reading_every_step
    else:
        loop = functools.partial(train_reading_every, every=every)
    loop(model, optimizer, batches, 20)  # warm-up: cuBLAS, kernel loading, allocator
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        loop(model, optimizer, batches, steps)
        sync()
        times.append((time.perf_counter() - start) / steps)
    return statistics.median(times)
# --8<-- [end:per_step]


# --8<-- [start:allocator]
alloc_bytes = 256 * 2**20 if device.type == "cuda" else 2**20


def allocate(nbytes):
    """Allocate a block and drop it: the memory returns to PyTorch's cache, not CUDA."""
    block = torch.empty(nbytes, dtype=torch.uint8, device=device)
    sync()
    del block


def allocation_seconds(nbytes, cached, repeats=10):
    """Median time of one allocation from the cache, or by cudaMalloc (cached=False)."""
    allocate(nbytes)  # now one block of this size sits in the cache
    times = []
    for _ in range(repeats):
        if not cached and device.type == "cuda":
            torch.cuda.empty_cache()  # give cached blocks back: the pool must regrow
        start = time.perf_counter()
        allocate(nbytes)
        times.append(time.perf_counter() - start)
    return statistics.median(times)
# --8<-- [end:allocator]


# --8<-- [start:launch_blocking]
import json
import os
import subprocess
import sys

STEP_TIMER = """
import json, time, torch
x = torch.randn(2**20, device="cuda")
def step(x):                      # 40 small kernels, each about as long as its launch
    for _ in range(20):
        x = x * 1.0001 + 0.0001
    return x
step(x)
torch.cuda.synchronize()
start = time.perf_counter()
for _ in range(200):
    x = step(x)
torch.cuda.synchronize()
print(json.dumps((time.perf_counter() - start) / 200))
"""


def seconds_per_step_in_fresh_process(launch_blocking):
    """CUDA reads CUDA_LAUNCH_BLOCKING once, when a process first uses the GPU, so the
    variable has to be in the environment of a new process: it does nothing later."""
    env = {k: v for k, v in os.environ.items() if k != "CUDA_LAUNCH_BLOCKING"}
    if launch_blocking:
        env["CUDA_LAUNCH_BLOCKING"] = "1"
    out = subprocess.run([sys.executable, "-c", STEP_TIMER], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])
# --8<-- [end:launch_blocking]


if __name__ == "__main__":
    # --8<-- [start:main]
    print(f"device: {device}")
    launch_and_wait(a)  # warm-up: the first product also creates the cuBLAS handle
    sync()
    start = time.perf_counter()
    launch(a)
    queued = time.perf_counter() - start
    sync()
    done = time.perf_counter() - start
    print(f"10 products of {n}x{n}: queued after {queued * 1e3:.2f} ms, "
          f"done after {done * 1e3:.2f} ms")

    if device.type == "cuda":
        for name, op in SYNCHRONIZING.items():
            print(f"  syncs {count_syncs(lambda op=op: op(x))}x  {name}")
        for name, op in QUEUED.items():
            print(f"  syncs {count_syncs(lambda op=op: op(x))}x  {name}")
    else:
        print("sync debug mode needs a CUDA device; skipped")

    masked, where = positive_sum_with_mask(x), positive_sum_without_sync(x)
    same = torch.allclose(masked, where, rtol=1e-4)
    print(f"masked sum equals where() sum: {same}")

    per_step = seconds_per_step(every=1)
    per_50 = seconds_per_step(every=50)
    print(f"loss.item() every step: {per_step * 1e6:.0f} µs/step; "
          f"every 50 steps: {per_50 * 1e6:.0f} µs/step")

    fresh = allocation_seconds(alloc_bytes, cached=False)
    cached = allocation_seconds(alloc_bytes, cached=True)
    print(f"allocating {alloc_bytes // 2**20} MiB: {fresh * 1e6:.0f} µs when the pool "
          f"grows, {cached * 1e6:.0f} µs from the cache")

    if device.type == "cuda":
        normal = seconds_per_step_in_fresh_process(launch_blocking=False)
        blocking = seconds_per_step_in_fresh_process(launch_blocking=True)
        print(f"CUDA_LAUNCH_BLOCKING=1: {blocking * 1e6:.0f} µs/step "
              f"instead of {normal * 1e6:.0f}")
    # --8<-- [end:main]
