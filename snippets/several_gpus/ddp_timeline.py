"""A GPU timeline of one training step from torch.profiler: NCCL's kernels in one lane, the
computation in the other, and how long the two ran at the same time.

Run it: python -m snippets.several_gpus.ddp_timeline   (profiles a small step where there is a
GPU; the timing run records a DDP step on two GPUs with it)
"""

GPUS_NEEDED = 0  # runs anywhere; only a GPU has kernels to put on the timeline

# --8<-- [start:timeline]
import json
import os
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile


def step_timeline(step, limit=400):
    """The GPU kernels one call of step() ran: lane, name, start, duration (s)."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)["traceEvents"]
    kernels = [e for e in trace if e.get("ph") == "X" and e.get("cat") == "kernel"]
    kernels.sort(key=lambda e: e["ts"])
    t0 = kernels[0]["ts"] if kernels else 0  # trace times are in microseconds
    return [{"lane": "all-reduce" if "nccl" in e["name"].lower() else "compute",
             "name": e["name"].removeprefix("void ")[:96],
             "start": (e["ts"] - t0) / 1e6,
             "duration": e["dur"] / 1e6} for e in kernels[:limit]]


def overlap_seconds(events):
    """How long an all-reduce kernel and a compute kernel ran at the same moment."""
    def spans(lane):
        return [(e["start"], e["start"] + e["duration"])
                for e in events if e["lane"] == lane]
    return sum(max(0.0, min(a1, c1) - max(a0, c0))
               for a0, a1 in spans("all-reduce") for c0, c1 in spans("compute"))


def busy_seconds(events, lanes=("compute", "all-reduce")):
    """How long at least one kernel of these lanes ran (overlaps counted once)."""
    busy, end = 0.0, float("-inf")
    for e in sorted((e for e in events if e["lane"] in lanes),
                    key=lambda e: e["start"]):
        start, stop = e["start"], e["start"] + e["duration"]
        busy += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return busy


def idle_seconds(events):
    """Time between the first kernel's start and the last one's end with no kernel
    running: the GPU waited for the host (or for another GPU's work)."""
    if not events:
        return 0.0
    span = (max(e["start"] + e["duration"] for e in events)
            - min(e["start"] for e in events))
    return span - busy_seconds(events, lanes={e["lane"] for e in events})
# --8<-- [end:timeline]


if __name__ == "__main__":
    # --8<-- [start:main]
    if torch.cuda.is_available():
        model = torch.nn.Linear(4096, 4096, device="cuda")
        x = torch.randn(1024, 4096, device="cuda")
        events = step_timeline(lambda: model(x).sum().backward())
        counts = {lane: sum(e["lane"] == lane for e in events)
                  for lane in ("compute", "all-reduce")}
        print(f"one step on one GPU, kernels per lane: {counts}; "
              f"overlap {overlap_seconds(events) * 1e3:.3f} ms")
    else:
        print("no CUDA GPU: there are no GPU kernels to put on a timeline")
    # --8<-- [end:main]
