"""Where GPU memory goes: the CUDA context, PyTorch's caching allocator, and live tensors.

Run it on a CUDA machine: python -m snippets.memory.where_gpu_memory_goes
"""

GPUS_NEEDED = 1  # the allocator's counters, mem_get_info and nvidia-smi all need a CUDA GPU

# --8<-- [start:counters]
import torch

device = torch.device("cuda")
MiB = 2**20


def counters():
    """Four views of GPU memory, in MiB: three from PyTorch, one from the driver."""
    free, total = torch.cuda.mem_get_info(device)  # the driver's view of the whole GPU
    return {
        "allocated": torch.cuda.memory_allocated(device) / MiB,  # held by live tensors
        "reserved": torch.cuda.memory_reserved(device) / MiB,  # held by the cache
        "peak allocated": torch.cuda.max_memory_allocated(device) / MiB,
        "used on the GPU": (total - free) / MiB,  # every process, contexts included
    }
# --8<-- [end:counters]


# --8<-- [start:nvidia_smi]
import os
import subprocess


def nvidia_smi_mib(pid=None):
    """GPU memory nvidia-smi lists for one process (this one by default), in MiB.

    None where nvidia-smi does not list the process: inside a container it often
    sees the host's process ids, not the ones Python reports.
    """
    pid = os.getpid() if pid is None else pid
    query = ["nvidia-smi", "--query-compute-apps=pid,used_memory",
             "--format=csv,noheader,nounits"]
    out = subprocess.run(query, capture_output=True, text=True, check=True).stdout
    used = [float(mib) for listed, mib in
            (line.split(",") for line in out.splitlines() if line.strip())
            if int(listed) == pid]
    return sum(used) if used else None  # a process on several GPUs has several lines
# --8<-- [end:nvidia_smi]


# --8<-- [start:lifecycle]
def allocate_delete_release(mib=1024):
    """The four counters after each step of a tensor's life."""
    seen = {"before": counters()}
    x = torch.empty(mib * MiB, dtype=torch.uint8, device=device)
    seen["x = torch.empty(...)"] = counters()
    del x  # the last reference: the block goes back to PyTorch's cache
    seen["del x"] = counters()
    torch.cuda.empty_cache()  # unused cached blocks go back to the driver
    seen["torch.cuda.empty_cache()"] = counters()
    return seen


def show(seen):
    print(f"{'':>28}" + "".join(f"{name:>17}" for name in next(iter(seen.values()))))
    for step, values in seen.items():
        print(f"{step:>28}" + "".join(f"{mib:>13.0f} MiB" for mib in values.values()))
# --8<-- [end:lifecycle]


# --8<-- [start:references]
def still_referenced(mib=256):
    """MiB still allocated after `del x` when something else refers to x's memory."""
    held = {}
    base = torch.cuda.memory_allocated(device)

    x = torch.empty(mib * MiB, dtype=torch.uint8, device=device)
    first_row = x[:16]  # a view: it shares (and keeps) x's whole block
    del x
    held["a view of it"] = torch.cuda.memory_allocated(device) - base
    del first_row

    w = torch.ones(1, device=device, requires_grad=True)
    x = torch.ones(mib * MiB // 4, device=device)
    loss = (x * w).sum()  # autograd saves x: the gradient of w needs it
    del x
    held["the autograd graph"] = torch.cuda.memory_allocated(device) - base
    loss.backward()  # backward frees the graph, and x with it
    held["after backward()"] = torch.cuda.memory_allocated(device) - base
    return {why: nbytes / MiB for why, nbytes in held.items()}
# --8<-- [end:references]


# --8<-- [start:running_loss]
def running_loss_growth(steps=10, keep="graph", n=2**22):
    """MiB that a loop's running total holds on to after `steps` steps.

    keep="graph": total + loss; "detached": total + loss.detach(); "item": loss.item().
    """
    w = torch.ones(1, device=device, requires_grad=True)
    base = torch.cuda.memory_allocated(device)
    total = torch.zeros((), device=device)
    for _ in range(steps):
        x = torch.randn(n, device=device)  # 16 MiB
        loss = (x * w).square().mean()  # autograd saves x and x * w for backward
        if keep == "graph":  # chains every step's graph (and its saved x) onto total
            total = total + loss
        elif keep == "detached":  # the value on the GPU, no graph, no waiting
            total = total + loss.detach()
        else:  # a Python float: each .item() waits for the GPU to finish
            total = total + loss.item()
    del x, loss
    return (torch.cuda.memory_allocated(device) - base) / MiB
# --8<-- [end:running_loss]


# --8<-- [start:peak]
def peak_mib(fn, *args):
    """The most memory fn(*args) had allocated at once, above what was there before."""
    torch.cuda.reset_peak_memory_stats(device)  # peak := what is allocated now
    before = torch.cuda.memory_allocated(device)
    fn(*args)
    return (torch.cuda.max_memory_allocated(device) - before) / MiB


def two_temporaries(mib=512):
    a = torch.ones(mib * MiB // 4, device=device)
    b = a * 2  # a and b are alive together here: the peak
    return b.sum().item()
# --8<-- [end:peak]


# --8<-- [start:stats]
def allocator_stats():
    """A few of memory_stats()'s counters: what the cache holds and how it got there."""
    stats = torch.cuda.memory_stats(device)
    keys = {
        "allocated_bytes.all.current": "bytes in live tensors",
        "reserved_bytes.all.current": "bytes the cache holds",
        "inactive_split_bytes.all.current": "free bytes inside partly used blocks",
        "segment.all.current": "cudaMalloc'd segments",
        "num_alloc_retries": "times a cudaMalloc failed and the cache was flushed",
        "num_ooms": "out-of-memory errors raised",
    }
    return {words: stats.get(key, 0) for key, words in keys.items()}
# --8<-- [end:stats]


# --8<-- [start:cycles]
def tensors_in_cycles():
    """Describe the tensors that only reference cycles keep alive, then free them.

    Reference counting cannot free objects that refer to each other; Python's cyclic
    garbage collector does, but only when it next runs, and it does not know how much
    GPU memory a tensor holds.
    """
    import gc  # the standard library's interface to the cyclic garbage collector

    flags, before = gc.get_debug(), len(gc.garbage)  # the caller's, left as they were
    gc.set_debug(flags | gc.DEBUG_SAVEALL)  # keep what the collection finds, to look
    try:
        gc.collect()
        # type(), not isinstance(): the garbage can hold weak proxies to dead objects
        found = [(tuple(t.shape), t.dtype, t.device, t.untyped_storage().nbytes())
                 for t in gc.garbage[before:] if issubclass(type(t), torch.Tensor)]
    finally:
        gc.set_debug(flags)
        del gc.garbage[before:]  # only what this collection added
    gc.collect()  # now the collector frees them, and their GPU memory goes back
    return found


def leak_through_a_cycle(mib=64):
    """A tensor kept only by a cycle: an object that refers to itself."""
    holder = {"activations": torch.empty(mib * MiB, dtype=torch.uint8, device=device)}
    holder["self"] = holder  # the cycle: holder's count never drops to zero
# --8<-- [end:cycles]


# --8<-- [start:pools]
def pool_of(nbytes):
    """Which of the allocator's two pools a tensor of nbytes comes from."""
    before = torch.cuda.memory_stats(device)
    x = torch.empty(nbytes, dtype=torch.uint8, device=device)
    after = torch.cuda.memory_stats(device)
    del x
    key = "allocated_bytes.{}.current"
    return next(pool for pool in ("small_pool", "large_pool")
                if after[key.format(pool)] > before[key.format(pool)])


def reused_on(nbytes=64 * MiB):
    """A block freed on a side stream: does the default stream get it back, or
    only the side stream? (The cache keeps blocks per stream.)"""
    side = torch.cuda.Stream(device)
    with torch.cuda.stream(side):
        x = torch.empty(nbytes, dtype=torch.uint8, device=device)
    address = x.data_ptr()
    del x  # back to the cache, for the side stream
    on_default = torch.empty(nbytes, dtype=torch.uint8, device=device)
    with torch.cuda.stream(side):
        on_side = torch.empty(nbytes, dtype=torch.uint8, device=device)
    torch.cuda.synchronize(device)
    return {"default stream": on_default.data_ptr() == address,
            "side stream": on_side.data_ptr() == address}
# --8<-- [end:pools]


# --8<-- [start:dataset]
def fits(nbytes, spare=0.25):
    """Whether nbytes more fit on this GPU, with a `spare` share of it left over."""
    free, total = torch.cuda.mem_get_info(device)
    cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return nbytes <= free + cached - spare * total  # the cache's free blocks count too


def gpu_batches(x, y, batch_size):
    """Shuffled batches of a dataset that lives on the GPU: no copies per step."""
    order = torch.randperm(len(x), device=x.device)
    for start in range(0, len(x), batch_size):
        index = order[start:start + batch_size]
        yield x[index], y[index]
# --8<-- [end:dataset]


# --8<-- [start:fresh_process]
import sys

# Runs in a new Python: each report() waits for the parent to look from outside.
CHILD = """
import sys, torch
MiB = 2**20

def report(label):
    allocated = torch.cuda.memory_allocated() / MiB
    reserved = torch.cuda.memory_reserved() / MiB
    print(label, allocated, reserved, flush=True)
    sys.stdin.readline()

torch.zeros(1, device="cuda")  # the first CUDA call creates the context
report("context")
x = torch.empty(1024 * MiB, dtype=torch.uint8, device="cuda")
y = torch.empty(512 * MiB, dtype=torch.uint8, device="cuda")
del y  # freed, but its block stays in PyTorch's cache
report("tensors")
a = torch.ones(1024, 1024, device="cuda")
(a @ a).sum().item()  # the first matrix product loads cuBLAS
report("matmul")
torch.cuda.empty_cache()
report("empty_cache")
"""


def watch_fresh_process():
    """Run CHILD; at each report, measure what it has added to the GPU's used memory."""
    def used_mib():
        free, total = torch.cuda.mem_get_info(device)
        return (total - free) / MiB

    torch.cuda.synchronize(device)
    before = used_mib()
    child = subprocess.Popen([sys.executable, "-c", CHILD], text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    seen = {}
    for line in child.stdout:
        label, allocated, reserved = line.split()
        used = used_mib()
        seen[label] = {"allocated": float(allocated), "reserved": float(reserved),
                       "used on the GPU": used, "added to the GPU": used - before,
                       "nvidia-smi": nvidia_smi_mib(child.pid)}
        child.stdin.write("\n")  # let the child go on
        child.stdin.flush()
    child.stdin.close()
    if child.wait() != 0:
        raise RuntimeError("the child process failed")
    return seen


def not_pytorchs(report):
    """What a process holds outside PyTorch's cache: its context, libraries' kernels."""
    return report["added to the GPU"] - report["reserved"]
# --8<-- [end:fresh_process]


if __name__ == "__main__":
    # --8<-- [start:main]
    show(allocate_delete_release())
    for why, mib in still_referenced().items():
        print(f"held by {why}: {mib:.0f} MiB")
    held = {keep: running_loss_growth(keep=keep) for keep in ("graph", "detached", "item")}
    print("running total of losses, MiB held: "
          + ", ".join(f"{keep} {mib:.0f}" for keep, mib in held.items()))
    print(f"peak of two 512 MiB temporaries: {peak_mib(two_temporaries):.0f} MiB")
    x, y = torch.randn(60_000, 784), torch.randint(0, 10, (60_000,))  # an MNIST-sized set
    if fits(x.nbytes + y.nbytes):
        x, y = x.to(device), y.to(device)  # copied once, not once per batch
        batches = sum(1 for _ in gpu_batches(x, y, batch_size=512))
        print(f"dataset of {(x.nbytes + y.nbytes) / MiB:.0f} MiB on the GPU: "
              f"{batches} batches")
    for words, value in allocator_stats().items():
        print(f"{words}: {value:,}")
    for label, report in watch_fresh_process().items():
        print(f"fresh process, {label:>11}: allocated {report['allocated']:.0f} MiB, "
              f"reserved {report['reserved']:.0f} MiB, outside PyTorch "
              f"{not_pytorchs(report):.0f} MiB, nvidia-smi {report['nvidia-smi']} MiB")
    # --8<-- [end:main]
