"""Exercises on asynchronous execution: fix a timing loop, and remove a training loop's hidden
synchronizations.

Run it anywhere: python -m snippets.execution.execution_exercises
(on a CPU nothing is queued, so both versions agree; the fixes are the same)
"""

GPUS_NEEDED = 0  # picks CUDA at run time; on a CPU every synchronization is a no-op

# --8<-- [start:setup]
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def sync():
    """Wait until the GPU has done everything queued so far (a CPU queues nothing)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
# --8<-- [end:setup]


# --8<-- [start:timing_task]
# Exercise 1: this says how long one product takes. On a GPU it is wrong by far.
# Find why, and write `time_per_call` that measures the GPU's time correctly.
def time_per_call_wrong(fn, *args, repeats=20):
    start = time.perf_counter()
    for _ in range(repeats):
        fn(*args)
    return (time.perf_counter() - start) / repeats


n = 4096 if device.type == "cuda" else 256
a = torch.randn(n, n, device=device)
b = torch.randn(n, n, device=device)
torch.matmul(a, b)  # the first product sets cuBLAS up: a one-off cost, not the flaw
print(f"wrong: {time_per_call_wrong(torch.matmul, a, b) * 1e6:.0f} us per product")
# --8<-- [end:timing_task]


# --8<-- [start:timing_solution]
def time_per_call(fn, *args, repeats=20, warmup=3):
    """Median and spread of fn(*args), each call's work finished inside the clock."""
    for _ in range(warmup):  # the first calls pay for setup (cuBLAS, the allocator)
        fn(*args)
    times = []
    for _ in range(repeats):
        sync()  # earlier work is not billed to this call
        start = time.perf_counter()
        fn(*args)
        sync()  # this call's work is done before the clock stops
        times.append(time.perf_counter() - start)
    q1, _, q3 = statistics.quantiles(times, n=4)
    return statistics.median(times), q3 - q1


median, iqr = time_per_call(torch.matmul, a, b)
print(f"right: {median * 1e6:.0f} us per product (IQR {iqr * 1e6:.0f} us)")
# --8<-- [end:timing_solution]


# --8<-- [start:loop_task]
# Exercise 2: this loop makes the host wait for the GPU twice per step, so the
# host never runs ahead. Find both waits and remove them, keeping the mean loss
# it returns and an error if a loss was not finite.
def make_problem(steps=50, seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = [(torch.randn(128, 256, device=device),
                torch.randint(10, (128,), device=device)) for _ in range(steps)]
    return model, optimizer, batches


def train_waiting(model, optimizer, batches):
    total = 0.0
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        if not torch.isfinite(loss):
            raise FloatingPointError("the loss is not finite")
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(batches)


print(f"mean loss {train_waiting(*make_problem()):.4f}")
# --8<-- [end:loop_task]


# --8<-- [start:loop_solution]
def train_queued(model, optimizer, batches):
    total = torch.zeros((), device=device)  # stays on the GPU: nothing to wait for
    finite = torch.ones((), dtype=torch.bool, device=device)
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        finite &= torch.isfinite(loss)  # queued, like the step itself
        loss.backward()
        optimizer.step()
        total += loss.detach()
    if not finite:  # one wait, after the loop
        raise FloatingPointError("a loss was not finite")
    return total.item() / len(batches)


print(f"mean loss {train_queued(*make_problem()):.4f}")
# --8<-- [end:loop_solution]
