"""My training is slow: take one torch.profiler trace of a few training steps, then read from
it which symptom the step shows (the GPU waits, many tiny kernels, float32 matrix products, or
a GPU that is simply full), so that the page can send the reader to the fix.

Run it: python -m snippets.start_here.slow_training
"""

GPUS_NEEDED = 0  # the trace is taken anywhere; kernels and GPU idle time show only on CUDA

# --8<-- [start:step]
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
width = 1024 if device.type == "cuda" else 64  # keep the CPU run short
model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
model = model.to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)


def batch(size=64):
    """A batch made on the CPU and copied over, as a plain DataLoader hands it."""
    x = torch.randn(size, width)
    y = torch.randint(0, 10, (size,))
    return x.to(device), y.to(device)


def train_step(x, y):
    """One step in float32, reading the loss back every step."""
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()  # the host waits here for the GPU to finish the step
# --8<-- [end:step]


# --8<-- [start:trace]
from torch.profiler import ProfilerActivity, profile, schedule

activities = [ProfilerActivity.CPU]
if device.type == "cuda":
    activities.append(ProfilerActivity.CUDA)  # kernels and copies, GPU timestamps
sort_by = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"


def take_trace(path, one_step, steps=5):
    """Profile `one_step()` a few times: skip one, warm up on one, record three.
    Writes the trace to `path` and returns the summary table."""
    summary = {}

    def on_trace_ready(prof):  # called once the three recorded steps are done
        summary["table"] = prof.key_averages().table(sort_by=sort_by, row_limit=8)
        prof.export_chrome_trace(str(path))  # open it in https://ui.perfetto.dev

    with profile(
        activities=activities,
        record_shapes=True,  # also records each operation's input dtypes
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        on_trace_ready=on_trace_ready,
    ) as prof:
        for _ in range(steps):
            one_step()
            prof.step()  # tell the schedule that a step has ended
    return summary["table"]
# --8<-- [end:trace]


# --8<-- [start:read]
import json
from dataclasses import dataclass

GPU_WORK = {"kernel", "gpu_memcpy", "gpu_memset"}  # what keeps a GPU busy
MATMULS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}
# the host op; its kernels run under aten::cudnn_convolution
CONVOLUTIONS = {"aten::convolution"}
TINY_US = 10  # a kernel shorter than this ends before the host can launch the next one


@dataclass
class Symptoms:
    span_us: float  # from the first recorded step's start to the last GPU work's end
    gpu_busy_us: float  # time with at least one kernel or copy running
    longest_gaps_us: list  # the longest stretches with nothing on the GPU
    kernels: int
    tiny_kernels: int  # kernels shorter than TINY_US
    kernel_us: float  # time of all kernels, added up
    tiny_kernel_us: float  # ... of the kernels shorter than TINY_US
    products: int  # matrix products and convolutions
    fp32_products: int  # ... of them with float32 inputs that run in strict float32
    fp32_product_us: float  # GPU time of their kernels (none in a CPU trace)

    @property
    def gpu_idle_share(self):
        return 1 - self.gpu_busy_us / self.span_us

    @property
    def tiny_kernel_share(self):  # of the kernels' time, not of their number
        return self.tiny_kernel_us / self.kernel_us if self.kernel_us else 0.0


def strict_float32():
    """The float32 products that run in full float32 under this process's settings: the
    trace's `Input type` says float either way, TF32 or not."""
    strict = set()
    if torch.backends.cuda.matmul.fp32_precision != "tf32":  # the default, "highest"
        strict |= MATMULS
    if torch.backends.cudnn.conv.fp32_precision != "tf32":  # cuDNN defaults to TF32
        strict |= CONVOLUTIONS
    return strict


def read_trace(path):
    """What a trace written by export_chrome_trace says about the recorded steps.

    Call it in the process that took the trace: whether a float32 product ran in
    TF32 is read from the precision settings in force (the trace does not say).
    """
    try:
        with open(path, encoding="utf-8") as file:
            events = json.load(file)["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a trace from export_chrome_trace ({error!r}); "
                         "take one with take_trace()") from None
    done = [e for e in events if e.get("ph") == "X" and "dur" in e]
    steps = [e for e in done if e["name"].startswith("ProfilerStep#")]
    if not steps:
        raise ValueError(f"{path}: no ProfilerStep# in the trace; call prof.step() "
                         "after each step inside the profile() block")
    on_gpu = [e for e in done if e.get("cat") in GPU_WORK]
    gpu = sorted((e["ts"], e["ts"] + e["dur"]) for e in on_gpu)
    busy, gaps, end = 0.0, [], None
    for start, stop in gpu:  # merge overlapping work: the GPU is busy or it is not
        if end is not None and start > end:
            gaps.append(start - end)
        if end is None or start > end:
            busy += stop - start
        elif stop > end:
            busy += stop - end
        end = stop if end is None else max(end, stop)
    first = min(e["ts"] for e in steps)
    last = max([e["ts"] + e["dur"] for e in steps] + [stop for _, stop in gpu])
    kernels = [e["dur"] for e in done if e.get("cat") == "kernel"]
    tiny = [d for d in kernels if d < TINY_US]
    products = [e for e in done if e.get("cat") == "cpu_op"
                and e["name"] in MATMULS | CONVOLUTIONS]
    strict = strict_float32()
    fp32 = [e for e in products if e["name"] in strict
            and "float" in e.get("args", {}).get("Input type", [])]
    # a kernel's "External id" is that of the operator that launched it
    fp32_ids = {e["args"].get("External id") for e in fp32} - {None}
    fp32_kernel_us = sum(e["dur"] for e in done if e.get("cat") == "kernel"
                         and e.get("args", {}).get("External id") in fp32_ids)
    return Symptoms(span_us=last - first, gpu_busy_us=busy,
                    longest_gaps_us=sorted(gaps, reverse=True)[:3],
                    kernels=len(kernels), tiny_kernels=len(tiny),
                    kernel_us=sum(kernels), tiny_kernel_us=sum(tiny),
                    products=len(products), fp32_products=len(fp32),
                    fp32_product_us=fp32_kernel_us)
# --8<-- [end:read]


# --8<-- [start:decide]
def where_to_look(s, idle_share=0.2, tiny_share=0.5):
    """The branches this trace takes, the largest share of the step first.

    A launch-bound step takes the first two: the host row of the trace, during the
    gaps, tells them apart.
    """
    found = []  # (share of the step, branch)
    if s.kernels and s.gpu_idle_share > idle_share:
        waits = "the GPU waits: data loading, synchronizations"
        found.append((s.gpu_idle_share, waits))
    if s.kernels and s.tiny_kernel_share > tiny_share:
        tiny = "tiny kernels: CUDA graphs, fusion"
        found.append((s.tiny_kernel_us / s.span_us, tiny))
    if s.fp32_products:  # a CPU trace has no kernel time: the branch is listed, last
        fp32 = "float32 products: TF32, bf16 autocast"
        found.append((s.fp32_product_us / s.span_us, fp32))
    if not found:
        return ["the GPU is busy: compare with its peak, then more GPUs"]
    return [branch for _, branch in sorted(found, key=lambda f: f[0], reverse=True)]
# --8<-- [end:decide]


if __name__ == "__main__":
    # --8<-- [start:main]
    print(take_trace("trace.json", lambda: train_step(*batch())))
    symptoms = read_trace("trace.json")
    print(f"{symptoms.kernels} kernels, {symptoms.tiny_kernels} under {TINY_US} µs "
          f"({symptoms.tiny_kernel_share:.0%} of the kernels' time)")
    print(f"{symptoms.fp32_products} of {symptoms.products} products in strict float32")
    if symptoms.kernels:
        print(f"GPU idle {symptoms.gpu_idle_share:.0%} of the recorded steps")
        print("longest gaps (µs):", [round(g) for g in symptoms.longest_gaps_us])
    print("Look at:", "; ".join(where_to_look(symptoms)))
    # --8<-- [end:main]
