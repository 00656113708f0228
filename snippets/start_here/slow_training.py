"""My training is slow: take one torch.profiler trace of a few training steps, then read from
it which symptom the step shows (the GPU waits on a synchronization or on host work, tiny
kernels launched one at a time, float32 matrix products, or a GPU that is simply full), each
with its share of the step, so that the page can send the reader to the fix.

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
from bisect import bisect_left
from dataclasses import dataclass

GPU_WORK = {"kernel", "gpu_memcpy", "gpu_memset"}  # what keeps a GPU busy
HOST_CALLS = {"cuda_runtime", "cuda_driver"}  # launches, copies, synchronizations
MATMULS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}
# the host op, the op cuDNN's forward kernels run under, and the backward op
CONVOLUTIONS = {"aten::convolution", "aten::cudnn_convolution",
                "aten::convolution_backward"}
TINY_US = 10  # a kernel shorter than this ends before the host can launch the next one
KERNEL_WAIT_US = 5  # a gap before a kernel already launched: the GPU's own overhead


@dataclass
class Symptoms:
    span_us: float  # the recorded steps, from their first GPU work to their end
    gpu_busy_us: float  # time with at least one kernel or copy running
    idle_us: dict  # the GPU's idle time by cause (see idle_cause)
    longest_gaps_us: list  # the longest stretches with nothing on the GPU
    kernels: int
    tiny_kernels: int  # kernels shorter than TINY_US
    products: int  # matrix products and convolutions
    fp32_products: int  # ... of them with float32 inputs that run in strict float32
    fp32_product_us: float  # GPU time of their kernels (none in a CPU trace)

    def share(self, *causes):  # of the step, idle time by cause
        return sum(self.idle_us.get(c, 0) for c in causes) / self.span_us

    @property
    def gpu_idle_share(self):
        return 1 - self.gpu_busy_us / self.span_us


def strict_float32():
    """The float32 products that run in full float32 under this process's settings: the
    trace's `Input type` says float either way, TF32 or not."""
    strict = set()
    if torch.backends.cuda.matmul.fp32_precision != "tf32":  # default "none": ieee
        strict |= MATMULS
    if torch.backends.cudnn.conv.fp32_precision != "tf32":  # cuDNN defaults to TF32
        strict |= CONVOLUTIONS
    return strict


def idle_cause(gap, since, call, done, launching):
    """Why the GPU sat idle `gap` µs from `since` until its next work, whose launch
    call on the host is `call`: Holistic Trace Analysis' split (host wait, kernel
    wait, other), the host wait told apart by what the host row shows, and a launch
    call still running when the GPU ran dry taken out of other."""
    if call is None or call["ts"] <= since:  # launched before the GPU ran dry
        if gap < KERNEL_WAIT_US:
            return "kernel wait"
        if call is not None and call["ts"] + call["dur"] > since:
            return "launch"  # the launch call was still running when the GPU ran dry
        return "other"
    start, end = since, call["ts"]  # the host launched late: what did it do?
    spans = sorted((max(start, e["ts"]), min(end, e["ts"] + e["dur"])) for e in done
                   if e.get("cat") in ("cpu_op", "user_annotation")
                   and e["tid"] == call["tid"] and id(e) not in launching
                   and e["ts"] < end and e["ts"] + e["dur"] > start)
    host_work, reach = 0.0, start  # time under operators that launched nothing:
    for a, b in spans:  # making a batch, a loader, the CPU's own work
        host_work += max(0.0, b - max(a, reach))
        reach = max(reach, b)
    if host_work > (end - start) / 2:  # the host made a batch, whatever it waited on
        return "host work"
    if any(e["ts"] < end and e["ts"] + e["dur"] > start for e in done
           if e.get("cat") in HOST_CALLS and "Synchronize" in e["name"]):
        return "sync"  # it waited for the GPU, then did the step's host work
    return "launch"


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
    gpu = sorted((e for e in done if e.get("cat") in GPU_WORK), key=lambda e: e["ts"])
    calls = {e["args"]["correlation"]: e for e in done
             if e.get("cat") in HOST_CALLS and "correlation" in e.get("args", {})}
    launch = [calls.get(e.get("args", {}).get("correlation")) for e in gpu]
    ops = [e for e in done if e.get("cat") in ("cpu_op", "user_annotation")]
    # each host op, with the host calls that launched GPU work inside it
    starts = {}
    for call in filter(None, launch):
        starts.setdefault(call["tid"], []).append(call["ts"])
    for times in starts.values():
        times.sort()
    launching = set()
    for op in ops:
        times = starts.get(op["tid"], [])
        i = bisect_left(times, op["ts"])
        if i < len(times) and times[i] <= op["ts"] + op["dur"]:
            launching.add(id(op))
    # from the first GPU work (the host work before it belongs to an earlier step)
    first = max([min(e["ts"] for e in steps)] + [e["ts"] for e in gpu[:1]])
    last = max([e["ts"] + e["dur"] for e in steps] + [e["ts"] + e["dur"] for e in gpu])
    busy, gaps, end = 0.0, [], first
    idle = dict.fromkeys(["sync", "host work", "launch", "kernel wait", "other"], 0.0)
    for e, call in zip(gpu, launch, strict=True):  # the GPU is busy or it is not
        start, stop = e["ts"], e["ts"] + e["dur"]
        if start > end:
            gaps.append(start - end)
            idle[idle_cause(start - end, end, call, done, launching)] += start - end
        busy += max(0.0, stop - max(start, end))
        end = max(end, stop)
    if gpu:  # after the last GPU work: the host ends the step
        idle["other"] += last - end
    kernels = [e["dur"] for e in gpu if e["cat"] == "kernel"]
    # a product's kernels are those its host op launched, at any depth below it
    nested = [e for e in ops if e["name"] in MATMULS | CONVOLUTIONS]
    products = [e for e in nested if not any(  # the outermost: a product counts once
        p is not e and p["tid"] == e["tid"] and p["ts"] <= e["ts"] <= p["ts"] + p["dur"]
        for p in nested)]
    strict = strict_float32()
    fp32 = [e for e in products if e["name"] in strict
            and "float" in e.get("args", {}).get("Input type", [])]
    fp32_us = sum(e["dur"] for e, call in zip(gpu, launch, strict=True) if call and any(
        p["tid"] == call["tid"] and p["ts"] <= call["ts"] <= p["ts"] + p["dur"]
        for p in fp32))
    return Symptoms(span_us=last - first, gpu_busy_us=busy, idle_us=idle,
                    longest_gaps_us=sorted(gaps, reverse=True)[:3],
                    kernels=len(kernels),
                    tiny_kernels=sum(d < TINY_US for d in kernels),
                    products=len(products), fp32_products=len(fp32),
                    fp32_product_us=fp32_us)
# --8<-- [end:read]

# --8<-- [start:decide]
MIN_SHARE = 0.1  # a branch is listed when it costs at least a tenth of the step
BRANCHES = {  # each branch, and the causes of idle time that it costs
    "the GPU waits while the host synchronizes: read metrics every N steps": ["sync"],
    "the GPU waits for host work: DataLoader workers, pinned memory": ["host work"],
    "tiny kernels, launched one by one: CUDA graphs, fusion": ["launch", "kernel wait"],
    "idle for a reason one trace cannot show: HTA, Nsight Systems": ["other"],
}
FP32 = "float32 products: TF32, bf16 autocast"
BUSY = "the GPU is busy: compare with its peak, then more GPUs"


def where_to_look(s, min_share=MIN_SHARE):
    """(share of the step, branch) for each branch this trace takes, largest first.

    A trace without GPU work (taken on a CPU) has no shares to rank: only its float32
    products show, with the share None.
    """
    if not s.kernels:
        return [(None, FP32)] if s.fp32_products else []
    found = [(s.share(*causes), branch) for branch, causes in BRANCHES.items()]
    found.append((s.fp32_product_us / s.span_us, FP32))
    found = [(share, branch) for share, branch in found if share >= min_share]
    return sorted(found, reverse=True) or [(s.gpu_busy_us / s.span_us, BUSY)]
# --8<-- [end:decide]


if __name__ == "__main__":
    # --8<-- [start:use]
    # with slow_training.py beside your script:
    # from slow_training import take_trace, read_trace, where_to_look
    print(take_trace("trace.json", lambda: train_step(*batch())))  # your step here
    symptoms = read_trace("trace.json")
    for share, branch in where_to_look(symptoms):
        print("Look at:", branch, "(share unknown: no GPU in the trace)"
              if share is None else f"({share:.0%} of the step)")
    # --8<-- [end:use]

    # --8<-- [start:main]
    s = symptoms
    print(f"{s.kernels} kernels, {s.tiny_kernels} under {TINY_US} µs; "
          f"{s.fp32_products} of {s.products} products in strict float32")
    if s.kernels:
        print(f"GPU idle {s.gpu_idle_share:.0%} of the recorded steps:", ", ".join(
            f"{cause} {us / s.span_us:.0%}" for cause, us in s.idle_us.items()))
        print("longest gaps (µs):", [round(g) for g in s.longest_gaps_us])
    # --8<-- [end:main]
