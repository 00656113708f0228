"""Pinned (page-locked) host memory, `non_blocking`, and what they do to host<->device copies.

Run it on a CUDA machine: python -m snippets.data_movement.pinned_memory
"""

GPUS_NEEDED = 1  # page-locked memory is a CUDA driver feature

# --8<-- [start:allocate]
import torch

device = torch.device("cuda")

MiB = 2**20
pageable = torch.ones(64 * MiB, dtype=torch.uint8)   # ordinary host memory
pinned = torch.ones(64 * MiB, dtype=torch.uint8, pin_memory=True)  # locked from birth
also_pinned = pageable.pin_memory()                  # a page-locked *copy*

assert pinned.is_pinned() and also_pinned.is_pinned() and not pageable.is_pinned()
# --8<-- [end:allocate]


# --8<-- [start:buffers]
def make_buffers(nbytes, pinned, direction):
    """Source and destination of one copy; host pages are touched so they exist."""
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned).fill_(1)
    gpu = torch.empty(nbytes, dtype=torch.uint8, device=device)
    return (host, gpu) if direction == "h2d" else (gpu, host)  # (src, dst)


def copy_and_wait(src, dst):
    """One synchronized copy: the clock must not stop before the bytes have arrived."""
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
# --8<-- [end:buffers]


# --8<-- [start:bandwidth]
import statistics
import time


def bandwidth_gbs(nbytes, pinned, direction, repeats=20):
    """Median copy bandwidth in GB/s (10**9 bytes/s), after one warm-up copy."""
    src, dst = make_buffers(nbytes, pinned, direction)
    copy_and_wait(src, dst)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy_and_wait(src, dst)
        times.append(time.perf_counter() - start)
    return nbytes / statistics.median(times) / 1e9
# --8<-- [end:bandwidth]


# --8<-- [start:link]
import subprocess

# Transfer rate per lane and direction in GT/s, and the share left after line encoding.
PCIE_GENERATIONS = {1: (2.5, 8 / 10), 2: (5.0, 8 / 10), 3: (8.0, 128 / 130),
                    4: (16.0, 128 / 130), 5: (32.0, 128 / 130), 6: (64.0, 242 / 256)}


def pcie_link(index=0):
    """(generation, lanes) of the GPU's host link, as the driver reports it."""
    props = torch.cuda.get_device_properties(index)
    bus_id = (f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:"
              f"{props.pci_device_id:02x}.0")
    query = "--query-gpu=pcie.link.gen.max,pcie.link.width.max"
    out = subprocess.run(
        ["nvidia-smi", f"--id={bus_id}", query, "--format=csv,noheader,nounits"],
        capture_output=True, text=True, check=True,
    ).stdout
    generation, lanes = (int(field) for field in out.split(","))
    return generation, lanes


def link_gbs(generation, lanes):
    """Theoretical one-way rate of a PCIe link in GB/s, after line encoding."""
    transfers_per_s, efficiency = PCIE_GENERATIONS[generation]
    return transfers_per_s * lanes * efficiency / 8
# --8<-- [end:link]


# --8<-- [start:non_blocking]
def start_copy(host, non_blocking):
    """Queue a host->device copy; how soon this returns is what non_blocking changes."""
    return host.to(device, non_blocking=non_blocking)
# --8<-- [end:non_blocking]


# --8<-- [start:overlap]
def cpu_work():
    """Stand-in for host work such as preparing the next batch (a few ms of math)."""
    x = torch.ones(2**18, dtype=torch.float64)
    for _ in range(6):
        x = torch.sqrt(x * x + 1.0)


def copy_while_cpu_works(host, non_blocking):
    """From pinned memory with non_blocking=True the copy runs while the CPU works."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    on_gpu = host.to(device, non_blocking=non_blocking)
    cpu_work()
    torch.cuda.synchronize()  # only now is `on_gpu` guaranteed to hold the data
    return time.perf_counter() - start, on_gpu
# --8<-- [end:overlap]


# --8<-- [start:hazard]
def read_too_early():
    """Device->host, non_blocking=True: the buffer fills *later*. Don't do this."""
    host = torch.full((4096,), float("nan"), pin_memory=True)
    b = torch.randn(4096, 4096, device=device)
    (b @ b).sum(dim=1)  # load the kernels: a kernel's first launch can block
    torch.cuda.synchronize()
    for _ in range(20):          # a long computation still queued on the GPU...
        c = b @ b
    result = c.sum(dim=1)
    host.copy_(result, non_blocking=True)  # ...so this copy has not even started
    early = host.numpy().copy()            # a plain CPU read of the buffer: still NaN
    torch.cuda.synchronize()
    late = host.numpy().copy()
    return early, late, result.cpu().numpy()
# --8<-- [end:hazard]


# --8<-- [start:hazard_fixed]
def read_after_event():
    """The fix: record an event after the copy; wait on it before reading."""
    host = torch.empty(4096, pin_memory=True)
    b = torch.randn(4096, 4096, device=device)
    result = (b @ b).sum(dim=1)
    host.copy_(result, non_blocking=True)
    copied = torch.cuda.Event()
    copied.record()
    # ... the CPU is free to do unrelated work here ...
    copied.synchronize()  # waits for this copy only, not for everything on the device
    return host, result.cpu()
# --8<-- [end:hazard_fixed]


if __name__ == "__main__":
    # --8<-- [start:main]
    generation, lanes = pcie_link()
    rate = link_gbs(generation, lanes)
    print(f"PCIe gen {generation} x{lanes}: {rate:.1f} GB/s each way")
    for pinned_memory in (False, True):
        label = "pinned  " if pinned_memory else "pageable"
        h2d = bandwidth_gbs(256 * 2**20, pinned_memory, "h2d")
        d2h = bandwidth_gbs(256 * 2**20, pinned_memory, "d2h")
        print(f"{label} 256 MiB: host->device {h2d:.1f} GB/s, device->host {d2h:.1f} GB/s")
    early, late, expected = read_too_early()
    print(f"read before sync saw the result: {(early == expected).all()}; "
          f"after sync: {(late == expected).all()}")
    # --8<-- [end:main]
