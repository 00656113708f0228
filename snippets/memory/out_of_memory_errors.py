"""Out-of-memory errors: reading them, recovering from them, and fragmentation.

Run it on a CUDA machine: python -m snippets.memory.out_of_memory_errors
"""

GPUS_NEEDED = 1  # out-of-memory errors and the caching allocator's settings are CUDA's

# --8<-- [start:setup]
import torch
from torch import nn

device = torch.device("cuda", 0)  # an index: set_per_process_memory_fraction needs one
MiB, GiB = 2**20, 2**30
WIDTH = 1024

torch.manual_seed(0)
model = nn.Sequential(*[
    nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))
    for _ in range(4)
]).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)


def train_step(batch_size):
    x = torch.randn(batch_size, WIDTH, device=device)
    loss = model(x).square().mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()
# --8<-- [end:setup]


# --8<-- [start:limit]
def limit_memory(gib):
    """Let PyTorch use at most `gib` GiB of this GPU: a smaller GPU, for the demo."""
    total = torch.cuda.get_device_properties(device).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, gib * GiB / total), device)


def unlimit_memory():
    torch.cuda.set_per_process_memory_fraction(1.0, device)
# --8<-- [end:limit]


# --8<-- [start:message]
def out_of_memory_message(batch_size):
    """The message of the error a too-large step raises."""
    try:
        train_step(batch_size)
    except torch.OutOfMemoryError as error:  # a subclass of RuntimeError
        return str(error)
    return None
# --8<-- [end:message]


# --8<-- [start:held]
def held_while_handling(batch_size):
    """memory_allocated() before the step, inside the except block, and after it."""
    before, inside = torch.cuda.memory_allocated(device), None
    try:
        train_step(batch_size)
    except torch.OutOfMemoryError:
        # The error's traceback holds the failed step's frames, and they hold its
        # input and activations: a retry from here starts with them still allocated.
        inside = torch.cuda.memory_allocated(device)
    optimizer.zero_grad(set_to_none=True)  # a step that failed in backward left some
    after = torch.cuda.memory_allocated(device)
    return before, inside, after
# --8<-- [end:held]


# --8<-- [start:recover]
def fit_step(batch_size):
    """Run one training step, halving the batch after each out-of-memory error."""
    while True:
        try:
            return train_step(batch_size), batch_size
        except torch.OutOfMemoryError:
            if batch_size == 1:
                raise  # even one sample does not fit: nothing left to halve
        # Outside the except block: the error, its traceback and the failed step's
        # tensors are gone. Drop any gradients it made, then retry with less.
        optimizer.zero_grad(set_to_none=True)
        batch_size //= 2
# --8<-- [end:recover]


# --8<-- [start:step_oom]
def failed_optimizer_step(fused=False, tensors=4, mib=64):
    """An AdamW step that runs out of memory part-way: what had it changed already?

    The budget leaves room for the parameters, gradients and state, not for the
    temporaries the default (foreach) implementation makes halfway through.
    """
    params = [torch.ones(mib * MiB // 4, device=device, requires_grad=True)
              for _ in range(tensors)]
    opt = torch.optim.AdamW(params, lr=1e-3, fused=fused, foreach=not fused)
    for p in params:
        p.grad = torch.ones_like(p)
    opt.step()  # the first step creates the state: exp_avg, exp_avg_sq, step

    def fingerprint():
        state = [opt.state[p] for p in params]
        return {"step": [float(s["step"]) for s in state],
                "moments": sum(s["exp_avg_sq"].sum().item() for s in state),
                "weights": sum(p.sum().item() for p in params)}

    before = fingerprint()
    torch.cuda.empty_cache()
    limit_memory((torch.cuda.memory_reserved(device) + 16 * MiB) / GiB)
    try:
        opt.step()
        raised = False
    except torch.OutOfMemoryError:
        raised = True
    finally:
        unlimit_memory()
    after = fingerprint()
    return {"raised": raised,
            **{f"{what} changed": after[what] != before[what] for what in before}}
# --8<-- [end:step_oom]


# --8<-- [start:fragmentation]
import json
import os
import subprocess
import sys

# Batches that grow step by step, while a small result of each step is kept.
GROWING_BATCHES = """
import json, torch
MiB = 2**20
kept = []
for step in range(16):
    batch = torch.empty((step + 1) * 64 * MiB, dtype=torch.uint8, device="cuda")
    kept.append(torch.empty(16 * MiB, dtype=torch.uint8, device="cuda"))
    del batch
stats = torch.cuda.memory_stats()
segments = torch.cuda.memory._snapshot()["segments"]
report = {
    "allocated": torch.cuda.memory_allocated(),
    "reserved": torch.cuda.memory_reserved(),
    "inactive_split": stats["inactive_split_bytes.all.current"],
    "segments": len(segments),
    "expandable": any(segment["is_expandable"] for segment in segments),
}
torch.cuda.empty_cache()
report["reserved_after_empty_cache"] = torch.cuda.memory_reserved()
print(json.dumps(report))
"""
ALLOC_CONF_NAMES = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")


def growing_batches(variable=None, setting="expandable_segments:True"):
    """Run GROWING_BATCHES in a new process, with `variable=setting` in its environment.

    The allocator reads its settings once, when the process starts using CUDA, so
    each setting needs a process of its own.
    """
    env = {k: v for k, v in os.environ.items() if k not in ALLOC_CONF_NAMES}
    if variable is not None:
        env[variable] = setting
    run = subprocess.run([sys.executable, "-c", GROWING_BATCHES], env=env,
                         capture_output=True, text=True, check=True)
    report = json.loads(run.stdout.splitlines()[-1])
    report["gap"] = report["reserved"] - report["allocated"]
    report["warned"] = "deprecated" in run.stderr  # what the child printed, if anything
    return report
# --8<-- [end:fragmentation]


if __name__ == "__main__":
    # --8<-- [start:main]
    train_step(256)  # a step that fits: AdamW creates its state on the first step
    limit_memory(2)
    print(out_of_memory_message(65536).splitlines()[0])
    before, inside, after = held_while_handling(65536)
    print(f"allocated before the step {before / MiB:.0f} MiB, inside except "
          f"{inside / MiB:.0f} MiB, after it {after / MiB:.0f} MiB")
    loss, fitted = fit_step(65536)
    print(f"the step fitted with a batch of {fitted}; loss {loss:.3f}")
    unlimit_memory()
    for variable in (None, *ALLOC_CONF_NAMES):
        report = growing_batches(variable)
        print(f"{variable or 'no setting':>23}: expandable {report['expandable']}, "
              f"allocated {report['allocated'] / MiB:.0f} MiB, "
              f"reserved {report['reserved'] / MiB:.0f} MiB, "
              f"gap {report['gap'] / MiB:.0f} MiB")
    # --8<-- [end:main]
