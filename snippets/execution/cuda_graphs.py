"""CUDA graphs: capture a chain of small kernels once, then replay it with a single launch.

Run it on a CUDA machine: python -m snippets.execution.cuda_graphs
"""

GPUS_NEEDED = 1  # CUDA graphs are a CUDA feature

# --8<-- [start:setup]
import statistics
import time

import torch

device = torch.device("cuda")


def chain(x, steps):
    """4 * steps tiny elementwise operations; eagerly, each one is a kernel launch."""
    for _ in range(steps):
        x = x * 1.01
        x = x + 0.01
        x = x * 0.99
        x = x - 0.0099  # together: x * 0.9999, so the result still depends on the input
    return x


x = torch.randn(1024, device=device)  # 4 KiB: each kernel is done in a few microseconds
# --8<-- [end:setup]


# --8<-- [start:capture]
def capture(fn, static_input):
    """Record fn(static_input) into a CUDA graph; return the graph and its output."""
    # Warm up on a side stream first, as the PyTorch docs ask: one-time work such as
    # library initialization and memory-pool growth must not end up inside the graph.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(static_input)
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):     # kernels are recorded, not run
        static_output = fn(static_input)
    return graph, static_output
# --8<-- [end:capture]


# --8<-- [start:replay]
STEPS = 50                               # 200 operations
static_x = torch.zeros_like(x)           # the graph reads this memory on every replay
graph, static_y = capture(lambda t: chain(t, STEPS), static_x)


def run_graph(new_x):
    static_x.copy_(new_x)       # put the new input where the graph will read it
    graph.replay()              # one launch runs all 200 kernels
    return static_y.clone()     # the next replay overwrites static_y: copy it
# --8<-- [end:replay]


# --8<-- [start:per_op]
def wall_time(fn):
    """Seconds for fn() including all the GPU work it queued."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def per_op_times(steps=STEPS, repeats=50):
    """Median seconds per operation: eager launches vs replaying a captured graph."""
    g, _ = capture(lambda t: chain(t, steps), static_x)
    eager, replay = [], []
    for _ in range(repeats):                 # interleaved, so drift affects both alike
        eager.append(wall_time(lambda: chain(x, steps)))
        replay.append(wall_time(g.replay))
    ops = 4 * steps
    return statistics.median(eager) / ops, statistics.median(replay) / ops
# --8<-- [end:per_op]


# --8<-- [start:frozen]
def frozen_python_value():
    """Python values are read once, during capture; replays reuse what was recorded."""
    scale = 2.0
    inp = torch.ones(4, device=device)

    def scaled(t):
        return t * scale

    g, out = capture(scaled, inp)
    scale = 3.0               # eager calls see the new value, the graph never will
    g.replay()
    # [2.0, ...] from the graph, [3.0, ...] from the eager call
    return out.tolist(), scaled(inp).tolist()
# --8<-- [end:frozen]


# --8<-- [start:graphed_callables]
import copy


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.GELU(),
        torch.nn.Linear(256, 256), torch.nn.GELU(),
        torch.nn.Linear(256, 10),
    ).to(device)


model = make_model()
reference = copy.deepcopy(model)       # an ungraphed twin, to compare against
batch = torch.randn(32, 64, device=device)

# make_graphed_callables ties the parameters' gradient accumulation to its own side
# stream; autograd synchronizes the two streams correctly, so skip the warning about it.
torch.autograd.graph.set_warn_on_accumulate_grad_stream_mismatch(False)

# Warms up, then captures the forward and the backward pass as two graphs. The module
# is patched in place: `model(...)` now replays. The sample's requires_grad must match
# that of the real inputs.
model = torch.cuda.make_graphed_callables(model, (batch,))


def train_step(net, inputs):
    """Forward and backward; returns the output and the parameter gradients."""
    net.zero_grad(set_to_none=True)
    output = net(inputs)
    output.square().mean().backward()
    return output.detach().clone(), [p.grad.clone() for p in net.parameters()]
# --8<-- [end:graphed_callables]


# --8<-- [start:compiled]
def compiled_outputs(calls=3):
    """torch.compile captures and replays graphs for you in mode="reduce-overhead"."""
    outputs = []
    with torch.no_grad():
        compiled = torch.compile(make_model(), mode="reduce-overhead")
        for _ in range(calls):        # call 1 compiles, call 2 records, call 3 replays
            torch.compiler.cudagraph_mark_step_begin()  # "a new iteration starts"
            # outputs live in graph memory that the next call reuses: clone to keep
            outputs.append(compiled(batch).clone())
    return outputs
# --8<-- [end:compiled]


if __name__ == "__main__":
    # --8<-- [start:main]
    new_x = torch.randn(1024, device=device)
    same = torch.allclose(run_graph(new_x), chain(new_x, STEPS))
    print("graph replay equals eager:", same)
    eager, replay = per_op_times()
    print(f"per operation: eager {eager * 1e6:.2f} µs, graph replay {replay * 1e6:.2f} µs "
          f"({eager / replay:.1f}x less)")
    print("graph vs eager after the Python value changed:", frozen_python_value())
    out_graphed, grads_graphed = train_step(model, batch)
    out_eager, grads_eager = train_step(reference, batch)
    same = all(torch.allclose(g, e, rtol=1e-4, atol=1e-6)
               for g, e in zip([out_graphed, *grads_graphed],
                               [out_eager, *grads_eager], strict=True))
    print("make_graphed_callables matches eager (output and gradients):", same)
    with torch.no_grad():
        expected = reference(batch)
    same = all(torch.allclose(o, expected, rtol=1e-4, atol=1e-5)
               for o in compiled_outputs())
    print("torch.compile(mode='reduce-overhead') matches eager:", same)
    # --8<-- [end:main]
