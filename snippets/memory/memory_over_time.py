"""Memory over time: record every allocation of two training steps, save a snapshot for
PyTorch's memory visualizer, and turn the recording into a timeline of allocated memory.

Run it on a CUDA machine: python -m snippets.memory.memory_over_time
(writes training_steps.pickle in the temporary folder: drag it onto https://pytorch.org/memory_viz)
"""

GPUS_NEEDED = 1  # the allocator's history is CUDA's (timeline() itself is plain Python)

# --8<-- [start:model]
import torch
from torch import nn

device = torch.device("cuda")
WIDTH, TOKENS = 1024, 8192


def make_training(seed=0):
    """A small model of four feed-forward blocks, its AdamW optimizer, and a batch."""
    torch.manual_seed(seed)
    model = nn.Sequential(*[
        nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(),
                      nn.Linear(4 * WIDTH, WIDTH))
        for _ in range(4)
    ]).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(TOKENS, WIDTH, device=device)
    return model, optimizer, x


def warm_up(model, x):
    """A tiny forward and backward pass before recording. A process's first matrix
    product on a thread makes cuBLAS take a workspace from PyTorch's cache, which it
    keeps: one for the forward pass, one for backward (autograd's own thread)."""
    model(x[:8]).square().mean().backward()
    model.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
# --8<-- [end:model]


# --8<-- [start:record]
def record_steps(model, optimizer, x, path="training_steps.pickle", steps=2):
    """Train `steps` steps with the allocator's history on; save it as a snapshot.

    Returns the recorded events, memory_allocated() when recording started, and
    where each phase ended: (phase, step, number of events by then).
    """
    index = torch.cuda.current_device()

    def events_so_far():
        return len(torch.cuda.memory._snapshot()["device_traces"][index])

    torch.cuda.memory._record_memory_history(max_entries=100_000, stacks="python")
    start, first = torch.cuda.memory_allocated(device), events_so_far()
    ends = []
    for step in range(1, steps + 1):
        loss = model(x).square().mean()
        ends.append(("forward", step, events_so_far()))
        loss.backward()
        ends.append(("backward", step, events_so_far()))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        ends.append(("optimizer", step, events_so_far()))
    trace = torch.cuda.memory._snapshot()["device_traces"][index]
    torch.cuda.memory._dump_snapshot(path)  # for pytorch.org/memory_viz
    torch.cuda.memory._record_memory_history(enabled=None)  # stop recording
    return trace[first:ends[-1][2]], start, [(p, s, end - first) for p, s, end in ends]
# --8<-- [end:record]


# --8<-- [start:timeline]
def timeline(events, start, ends, points=400):
    """Allocated bytes after each event, with its phase; at most about `points` rows.

    Thinning keeps the highest row of each stretch of events (so the peak survives)
    and the last row of every phase.
    """
    rows, level, phase = [], start, iter(ends)
    name, step, end = next(phase)
    for t, event in enumerate(events):
        while t >= end:
            name, step, end = next(phase)
        if event["action"] == "alloc":
            level += event["size"]
        elif event["action"] == "free_requested":
            level -= event["size"]
        rows.append({"t": t, "allocated": level, "phase": name, "step": step})
    stretch = max(1, -(-len(rows) // points))
    keep = {max(range(i, min(i + stretch, len(rows))),
                key=lambda k: rows[k]["allocated"])
            for i in range(0, len(rows), stretch)}
    keep |= {end - 1 for _, _, end in ends if end > 0} | {0}
    return [rows[k] for k in sorted(keep) if k < len(rows)]
# --8<-- [end:timeline]


if __name__ == "__main__":
    # --8<-- [start:main]
    import os
    import tempfile

    path = os.path.join(tempfile.gettempdir(), "training_steps.pickle")
    model, optimizer, x = make_training()
    warm_up(model, x)  # cuBLAS's workspaces now, not in the middle of the curve
    events, start, ends = record_steps(model, optimizer, x, path)
    rows = timeline(events, start, ends)
    MiB = 2**20
    print(f"{len(events)} allocator events; snapshot saved as {path}")
    for name, step, _ in ends:
        stretch = [r["allocated"] for r in rows if (r["phase"], r["step"]) == (name, step)]
        print(f"step {step} {name:>9}: peak {max(stretch) / MiB:6.0f} MiB, "
              f"at its end {stretch[-1] / MiB:6.0f} MiB")
    # --8<-- [end:main]
