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
    """(generation, lanes) the GPU's host link runs at now, as the driver reports it.

    An idle GPU may drop its link to a lower generation to save power: read it right
    after a large copy, while the link still runs at the rate the copy got.
    """
    props = torch.cuda.get_device_properties(index)
    bus_id = (f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:"
              f"{props.pci_device_id:02x}.0")
    query = "--query-gpu=pcie.link.gen.gpucurrent,pcie.link.width.current"
    try:
        result = subprocess.run(
            ["nvidia-smi", f"--id={bus_id}", query, "--format=csv,noheader,nounits"],
            capture_output=True, text=True,
        )
    except FileNotFoundError:
        raise RuntimeError("nvidia-smi not found: it comes with the driver") from None
    try:
        generation, lanes = (int(field) for field in result.stdout.split(","))
    except ValueError:  # an error message, or [N/A] where the driver cannot tell
        said = (result.stdout + result.stderr).strip()
        raise RuntimeError(f"nvidia-smi did not report the PCIe link: {said}") from None
    return generation, lanes


def link_gbs(generation, lanes):
    """Theoretical one-way rate of a PCIe link in GB/s, after line encoding."""
    transfers_per_s, efficiency = PCIE_GENERATIONS[generation]
    return transfers_per_s * lanes * efficiency / 8
# --8<-- [end:link]


# --8<-- [start:pin_cost]
def pin_once(pageable):
    """A page-locked copy of `pageable`, dropped at once: PyTorch caches its block."""
    pageable.pin_memory()


def pinning_seconds(pageable):
    """Time one pin_once(); `fresh` is True when PyTorch had to lock new memory."""
    blocks_before = torch.cuda.host_memory_stats()["num_host_alloc"]
    start = time.perf_counter()
    pin_once(pageable)
    seconds = time.perf_counter() - start
    fresh = torch.cuda.host_memory_stats()["num_host_alloc"] > blocks_before
    return seconds, fresh
# --8<-- [end:pin_cost]


# --8<-- [start:non_blocking]
def start_copy(host, non_blocking):
    """Queue a host->device copy; how soon this returns is what non_blocking changes."""
    return host.to(device, non_blocking=non_blocking)
# --8<-- [end:non_blocking]


# --8<-- [start:busy_queue]
def queue_gpu_work(products=20, n=4096):
    """Queue `products` n x n matrix products (tens of ms of work); return at once."""
    a = torch.ones(n, n, device=device)
    for _ in range(products):
        a @ a


def queue_seconds(products=20):
    """How long the GPU takes to work through that queue: the yardstick below."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    queue_gpu_work(products)
    torch.cuda.synchronize()
    return time.perf_counter() - start


def return_seconds(host, non_blocking, products=20):
    """How long .to(device) holds the host while the GPU is busy with earlier work."""
    queue_gpu_work(1)
    torch.cuda.synchronize()  # warm-up: a kernel's first launch can block
    queue_gpu_work(products)  # the GPU is now busy for tens of milliseconds
    start = time.perf_counter()
    start_copy(host, non_blocking)
    returned = time.perf_counter() - start
    torch.cuda.synchronize()
    return returned


def return_times(sizes=tuple(4 * 2**10 * 4**i for i in range(8)), repeats=3):
    """Median return time for each (memory, non_blocking, bytes), 4 KiB to 64 MiB."""
    times = {}
    for nbytes in sizes:
        for kind in ("pageable", "pinned"):
            host = torch.ones(nbytes, dtype=torch.uint8, pin_memory=kind == "pinned")
            for non_blocking in (False, True):
                runs = [return_seconds(host, non_blocking) for _ in range(repeats)]
                times[kind, non_blocking, nbytes] = statistics.median(runs)
    return times
# --8<-- [end:busy_queue]


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


# --8<-- [start:source_hazard]
def overwrite_too_early():
    """Host->device, non_blocking=True: the GPU reads the source *later*. Don't."""
    host = torch.zeros(4096, pin_memory=True)
    queue_gpu_work(1)
    torch.cuda.synchronize()  # warm-up, as above
    queue_gpu_work()  # the GPU is busy for tens of milliseconds...
    on_gpu = host.to(device, non_blocking=True)  # ...so this copy waits in the queue
    host.fill_(1.0)  # the next batch, written into the buffer before the copy ran
    torch.cuda.synchronize()
    return on_gpu.cpu()  # all ones: the GPU got what was written after the call
# --8<-- [end:source_hazard]


# --8<-- [start:staging]
class Uploader:
    """Host->device copies through pinned staging buffers that are reused safely."""

    def __init__(self, shape, dtype=torch.float32, buffers=2):
        self.staging = [torch.empty(shape, dtype=dtype, pin_memory=True)
                        for _ in range(buffers)]
        self.copied = [None] * buffers  # per buffer: an event after its last copy
        self.turn = 0

    def upload(self, batch):
        i, self.turn = self.turn, (self.turn + 1) % len(self.staging)
        if self.copied[i] is not None:
            self.copied[i].synchronize()  # the GPU has read this buffer: reuse it
        self.staging[i].copy_(batch)
        on_gpu = self.staging[i].to(device, non_blocking=True)
        self.copied[i] = torch.cuda.Event()
        self.copied[i].record()  # queued right after the copy, so it marks its end
        return on_gpu
# --8<-- [end:staging]


if __name__ == "__main__":
    # --8<-- [start:main]
    for pinned_memory in (False, True):
        label = "pinned  " if pinned_memory else "pageable"
        h2d = bandwidth_gbs(256 * 2**20, pinned_memory, "h2d")
        d2h = bandwidth_gbs(256 * 2**20, pinned_memory, "d2h")
        print(f"{label} 256 MiB: host->device {h2d:.1f} GB/s, device->host {d2h:.1f} GB/s")
    generation, lanes = pcie_link()  # right after the copies: the link is still up
    rate = link_gbs(generation, lanes)
    print(f"PCIe gen {generation} x{lanes}: {rate:.1f} GB/s each way")
    early, late, expected = read_too_early()
    print(f"read before sync saw the result: {(early == expected).all()}; "
          f"after sync: {(late == expected).all()}")
    # --8<-- [end:main]
