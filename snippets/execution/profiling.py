"""Profiling and monitoring GPU code: why cProfile blames the wrong line, torch.profiler, and
what nvidia-smi's GPU-Util and power draw really say.

Run it: python -m snippets.execution.profiling
"""

GPUS_NEEDED = 0  # the profilers run anywhere; the NVML part runs only when CUDA is present

# --8<-- [start:setup]
import statistics
import time

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def sync():
    """Block until all work queued on the GPU is done (a CPU has no queue)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


n = 4096 if device.type == "cuda" else 256  # keep the CPU run short
x = torch.randn(n, n, device=device)
w = torch.randn(n, n, device=device) / n**0.5


def forward(x, w, layers=8):
    """The heavy part: eight n x n matrix products. On a GPU this only *queues* them."""
    for _ in range(layers):
        x = torch.tanh(x @ w)
    return x


def loss_value(y):
    """The cheap part: one number back to Python. `.item()` must wait for the GPU."""
    return y.square().mean().item()


def step(x, w):
    return loss_value(forward(x, w))
# --8<-- [end:setup]


# --8<-- [start:cprofile]
import cProfile
import pstats


def cprofile_steps(x, w, steps=5):
    """Profile a few steps with Python's own profiler, after one warm-up step."""
    step(x, w)  # one-off costs (library handles, kernel loading) stay out
    with cProfile.Profile() as profiler:
        for _ in range(steps):
            step(x, w)
    return pstats.Stats(profiler)


def cumulative_seconds(stats, name):
    """Seconds spent inside `name` and all it called, over all its calls:
    a Python function by its name, a built-in by the name in its description
    ("<method 'item' of ...>")."""
    # The raw table: get_stats_profile() rounds every time to whole milliseconds.
    found = [cumulative
             for (_, _, function), (_, _, _, cumulative, _) in stats.stats.items()
             if function == name or f"'{name}'" in function]
    if not found:
        raise KeyError(f"no function named {name!r} in this profile")
    return sum(found)
# --8<-- [end:cprofile]


# --8<-- [start:profiler]
from torch.profiler import ProfilerActivity, profile, record_function, schedule

activities = [ProfilerActivity.CPU]
if device.type == "cuda":
    activities.append(ProfilerActivity.CUDA)  # also record kernels, with GPU timestamps
sort_key = "device_time_total" if device.type == "cuda" else "cpu_time_total"


def profile_steps(x, w, trace_path, steps=6):
    """Skip one step, warm up on one, record three; keep a table, write a trace."""
    results = {}

    def on_trace_ready(prof):  # called once the three recorded steps are done
        results["table"] = prof.key_averages().table(sort_by=sort_key, row_limit=12)
        prof.export_chrome_trace(str(trace_path))  # open it in https://ui.perfetto.dev

    with profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        on_trace_ready=on_trace_ready,
    ) as prof:
        for _ in range(steps):
            with record_function("forward"):  # a named span in the table and the trace
                y = forward(x, w)
            with record_function("loss_value"):
                loss_value(y)
            prof.step()  # tell the schedule that a step has ended
    return results["table"]
# --8<-- [end:profiler]


# --8<-- [start:nvml]
def pci_bus_id():
    """The GPU's PCI address: NVML may number GPUs unlike CUDA, but not this."""
    p = torch.cuda.get_device_properties(device)
    return f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"


def watch_gpu(launch, seconds=2.5, in_flight=4):
    """Keep the GPU busy with `launch()` for `seconds`; read GPU-Util and power.

    At most `in_flight` launches are queued ahead, so the GPU never waits for Python
    and the queue stays short. Readings are taken in the second half, once NVML's
    sample window (up to a second) covers busy time only.
    Returns (median GPU-Util in %, median power in W).
    """
    import pynvml  # pip install nvidia-ml-py (NVIDIA's NVML bindings)

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id().encode())
        utilization, watts, queued = [], [], []
        start = last_read = time.perf_counter()
        while (now := time.perf_counter()) - start < seconds:
            launch()
            done = torch.cuda.Event()
            done.record()
            queued.append(done)
            if len(queued) > in_flight:
                queued.pop(0).synchronize()  # wait for an older launch only
            if now - start > seconds / 2 and now - last_read > 0.05:
                rates = pynvml.nvmlDeviceGetUtilizationRates(handle)
                utilization.append(rates.gpu)
                milliwatts = pynvml.nvmlDeviceGetPowerUsage(handle)
                watts.append(milliwatts / 1000)
                last_read = now
        sync()
    finally:
        pynvml.nvmlShutdown()
    return statistics.median(utilization), statistics.median(watts)
# --8<-- [end:nvml]


# --8<-- [start:tiny_kernel]
def tiny_kernel_loop(launches=1000):
    """A CUDA graph of 1000 additions to ONE number: each one block, on one SM.

    A graph replays its kernels back to back, without Python in between, so the
    GPU is never idle, yet it uses a sliver of the chip. Returns the function
    that launches the graph.
    """
    counter = torch.zeros(1, device=device)
    counter.add_(1)  # run the kernel once before capture (loads it)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(launches):
            counter.add_(1)
    return graph.replay


def big_matmul_loop(size=8192):
    """For comparison: big bfloat16 products keep every SM and Tensor Core busy."""
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    c = torch.empty_like(a)
    return lambda: torch.matmul(a, b, out=c)
# --8<-- [end:tiny_kernel]


if __name__ == "__main__":
    # --8<-- [start:main]
    print(f"device: {device}")
    stats = cprofile_steps(x, w)
    stats.sort_stats("cumulative").print_stats(6)
    heavy = cumulative_seconds(stats, "forward")
    cheap = cumulative_seconds(stats, "loss_value")
    print(f"cProfile: forward {heavy * 1e3:.2f} ms, loss_value {cheap * 1e3:.2f} ms")
    sync()
    start = time.perf_counter()
    forward(x, w)
    sync()
    print(f"forward really takes {(time.perf_counter() - start) * 1e3:.2f} ms per call")

    import tempfile
    from pathlib import Path

    trace = Path(tempfile.gettempdir()) / "profiling_trace.json"
    print(profile_steps(x, w, trace))
    print(f"trace for https://ui.perfetto.dev: {trace}")

    if device.type == "cuda":
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        util, power = watch_gpu(tiny_kernel_loop())
        print(f"1 tiny kernel (1 block of {sms} SMs): {util:.0f} % GPU-Util, {power:.0f} W")
        util, power = watch_gpu(big_matmul_loop())
        print(f"big bfloat16 matmuls:             {util:.0f} % GPU-Util, {power:.0f} W")
    # --8<-- [end:main]
