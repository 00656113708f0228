"""Model parallelism: a model split across two GPUs, run naively (one GPU idle at a time) and as
a pipeline of micro-batches; a profiler timeline shows each GPU's busy and idle time.

Run it: python -m snippets.several_gpus.model_parallelism
(on two GPUs; with one GPU or none, both halves share a device and nothing overlaps)
"""

GPUS_NEEDED = 0  # splits across two GPUs where there are two; runs on one device otherwise

# --8<-- [start:devices]
import torch
from torch import nn

if torch.cuda.device_count() >= 2:
    devices = (torch.device("cuda:0"), torch.device("cuda:1"))
else:  # the same code on one device: correct, but nothing can overlap
    one = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    devices = (one, one)
# --8<-- [end:devices]


# --8<-- [start:model]
def block(width):
    return nn.Sequential(nn.Linear(width, width), nn.ReLU())


class TwoStages(nn.Module):
    """The first half of the layers on one GPU, the second half on the other."""

    def __init__(self, width=1024, depth=8, devices=devices):
        super().__init__()
        self.devices = devices
        half = depth // 2
        self.stage1 = nn.Sequential(*[block(width) for _ in range(half)]).to(devices[0])
        self.stage2 = nn.Sequential(*[block(width) for _ in range(depth - half)],
                                    nn.Linear(width, 1)).to(devices[1])

    def forward(self, x):
        """Naive: the whole batch through stage 1, then all of it through stage 2."""
        h = self.stage1(x.to(self.devices[0]))
        return self.stage2(h.to(self.devices[1]))  # the activations cross to GPU 1
# --8<-- [end:model]


# --8<-- [start:pipeline]
def pipelined_forward(model, x, micro_batches):
    """Cut the batch into micro-batches; while stage 2 works on one, stage 1 works on
    the next. Nothing here waits: every call only queues work on its GPU."""
    pieces = iter(x.to(model.devices[0]).chunk(micro_batches))
    in_flight = model.stage1(next(pieces)).to(model.devices[1])
    outputs = []
    for piece in pieces:
        outputs.append(model.stage2(in_flight))  # queued on GPU 1 ...
        in_flight = model.stage1(piece).to(model.devices[1])  # ... and this on GPU 0
    outputs.append(model.stage2(in_flight))
    return torch.cat(outputs)


def train_step(model, optimizer, x, y, micro_batches=1):
    """One step, naive (micro_batches=1) or pipelined; the same gradients either way."""
    optimizer.zero_grad(set_to_none=True)
    if micro_batches == 1:
        out = model(x)
    else:
        out = pipelined_forward(model, x, micro_batches)
    loss = nn.functional.mse_loss(out, y.to(out.device))
    loss.backward()  # autograd runs each GPU's part of the backward on its own thread
    optimizer.step()
    return loss.detach()
# --8<-- [end:pipeline]


# --8<-- [start:timeline]
import json
import os
import tempfile

from torch.profiler import ProfilerActivity, profile


def busy_timeline(step, merge_gap=5e-6):
    """When each GPU was busy during step(): one lane per GPU, kernels closer than
    `merge_gap` seconds merged into one bar; start and duration in seconds."""
    torch.cuda.synchronize(devices[0])
    torch.cuda.synchronize(devices[1])
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize(devices[0])
        torch.cuda.synchronize(devices[1])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)["traceEvents"]
    kernels = [e for e in trace if e.get("ph") == "X" and e.get("cat") == "kernel"]
    t0 = min(e["ts"] for e in kernels)  # microseconds
    bars = []
    for e in sorted(kernels, key=lambda e: e["ts"]):
        lane = f"GPU {e['args']['device']}"
        start, end = (e["ts"] - t0) / 1e6, (e["ts"] + e["dur"] - t0) / 1e6
        last = next((b for b in reversed(bars) if b["lane"] == lane), None)
        if last and start - (last["start"] + last["duration"]) < merge_gap:
            last["duration"] = max(last["duration"], end - last["start"])
        else:
            bars.append({"lane": lane, "name": "kernels", "start": start,
                         "duration": end - start})
    return bars


def idle_fraction(bars, lane):
    """Share of the step during which this GPU ran no kernel."""
    span = max(b["start"] + b["duration"] for b in bars) - min(b["start"] for b in bars)
    busy = sum(b["duration"] for b in bars if b["lane"] == lane)
    return 1 - busy / span
# --8<-- [end:timeline]


if __name__ == "__main__":
    # --8<-- [start:main]
    torch.manual_seed(0)
    model = TwoStages()
    x, y = torch.randn(512, 1024), torch.randn(512, 1)
    naive = model(x)
    piped = pipelined_forward(model, x, micro_batches=4)
    print(f"stages on {devices[0]} and {devices[1]}; pipelined == naive: "
          f"{torch.allclose(naive, piped, rtol=1e-4, atol=1e-5)}")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = [train_step(model, optimizer, x, y, micro_batches=4).item() for _ in range(5)]
    print(f"five pipelined steps: loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    if devices[0] != devices[1]:
        for micro_batches in (1, 4):
            bars = busy_timeline(
                lambda m=micro_batches: train_step(model, optimizer, x, y, m))
            idle = [idle_fraction(bars, f"GPU {d.index}") for d in devices]
            print(f"{micro_batches} micro-batch(es): GPU 0 idle {idle[0]:.0%}, "
                  f"GPU 1 idle {idle[1]:.0%}")
    # --8<-- [end:main]
