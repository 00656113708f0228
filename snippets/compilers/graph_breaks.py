"""Graph breaks and recompiles: find them with explain and TORCH_LOGS, price them, fix them.

Run it anywhere: python -m snippets.compilers.graph_breaks
(on a CPU, Inductor writes C++ instead of Triton and needs a C++ compiler)
"""

GPUS_NEEDED = 0  # picks CUDA at run time; on a CPU Inductor generates C++ (g++ must be installed)

# --8<-- [start:broken]
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def scale_by_max_item(x):
    y = torch.sin(x) + 1
    peak = y.abs().max().item()   # a Python float: the GPU must finish first
    return torch.relu(y / peak - 0.5)


def branch_on_sum(x):
    y = torch.sin(x) + 1
    if y.mean() > 1:              # Python decides, so Python must see the value
        return torch.relu(y - 1)
    return torch.relu(1 - y)


def print_in_the_middle(x):
    y = torch.sin(x) + 1
    print("halfway")              # a side effect Dynamo leaves to Python
    return torch.relu(y - 1)
# --8<-- [end:broken]


# --8<-- [start:explain]
def explain(fn, *args):
    """What Dynamo captures of fn(*args): graphs, breaks and why. Nothing is
    compiled, but fn runs (its side effects happen), and explain resets Dynamo:
    every function compiled before in this process compiles again on its next call."""
    report = torch._dynamo.explain(fn)(*args)
    reasons = [b.reason.splitlines()[0] for b in report.break_reasons]
    return report.graph_count, report.graph_break_count, reasons
# --8<-- [end:explain]


# --8<-- [start:fixed]
def scale_by_max(x):
    y = torch.sin(x) + 1
    peak = y.abs().max()          # stays a tensor on the device: no break, no sync
    return torch.relu(y / peak - 0.5)


def branch_free(x):
    y = torch.sin(x) + 1
    # Both sides are cheap elementwise work: compute both, let the device pick.
    return torch.where(y.mean() > 1, torch.relu(y - 1), torch.relu(1 - y))


def print_outside(x):
    y = torch.sin(x) + 1
    return torch.relu(y - 1)      # print("halfway") moves to the caller
# --8<-- [end:fixed]


# --8<-- [start:logs]
def show_breaks_and_recompiles(x):
    """Log each graph break and each recompile with its reason, as
    TORCH_LOGS="graph_breaks,recompiles" would."""
    torch.compiler.reset()
    torch._logging.set_logs(graph_breaks=True, recompiles=True)
    try:
        compiled = torch.compile(branch_on_sum)
        compiled(x)
        compiled(x[: len(x) // 2])    # a new length: a recompile, and the failed guard
    finally:
        torch._logging.set_logs()
# --8<-- [end:logs]


# --8<-- [start:recompiles]
class CountingBackend:
    """A torch.compile backend that counts the graphs Dynamo hands it and runs them as
    they are: how many times a function was compiled, without compiling anything."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1
        return graph_module.forward


def call_with_lengths(lengths, backend="inductor", dynamic=None, mark_dynamic=False):
    """Compile scale_by_max afresh and call it on 1-D inputs of these lengths."""
    torch.compiler.reset()
    compiled = torch.compile(scale_by_max, backend=backend, dynamic=dynamic)
    for n in lengths:
        x = torch.randn(n, device=device)
        if mark_dynamic:
            torch._dynamo.mark_dynamic(x, 0)  # "dimension 0 will vary": no specializing
        compiled(x)


def graphs_for_lengths(lengths, dynamic=None, mark_dynamic=False):
    """How many graphs torch.compile makes for those calls."""
    backend = CountingBackend()
    call_with_lengths(lengths, backend, dynamic, mark_dynamic)
    return backend.graphs
# --8<-- [end:recompiles]


# --8<-- [start:count_graphs]
def count_graphs(fn, *args, **compile_options):
    """How many graphs torch.compile(fn, **compile_options)(*args) captures."""
    backend = CountingBackend()
    torch.compiler.reset()
    torch.compile(fn, backend=backend, **compile_options)(*args)
    return backend.graphs
# --8<-- [end:count_graphs]


# --8<-- [start:strict_region]
def step_with_strict_core(x, core=scale_by_max_item):
    """Breaks allowed around the core (the print), none inside it: a break in
    core raises where it happens instead of splitting the graph quietly."""
    print("step")                                    # a break this step accepts
    with torch._dynamo.error_on_graph_break(True):   # PyTorch 2.9 and later
        return core(x)
# --8<-- [end:strict_region]


# --8<-- [start:disable]
@torch.compiler.disable        # Dynamo never traces it: one clean break per call
def log_halfway(y):
    print(f"halfway: {tuple(y.shape)}")


def print_through_disable(x):
    y = torch.sin(x) + 1
    log_halfway(y)
    return torch.relu(y - 1)
# --8<-- [end:disable]


# --8<-- [start:nonstrict]
def shift_of(y):
    torch._dynamo.graph_break()   # stands for Python Dynamo cannot follow: a C
    return y.mean()               # extension, a language feature it lacks


@torch._dynamo.nonstrict_trace    # its tensor operations join the graph
def traced_shift_of(y):
    torch._dynamo.graph_break()
    return y.mean()


def centred(x, shift=shift_of):
    y = torch.sin(x) + 1
    return torch.relu(y - shift(y))
# --8<-- [end:nonstrict]


# --8<-- [start:serve]
def serve(compiled, batches):
    """Run a compiled function warmed up on the shapes it will see, and refuse to
    compile in the middle of serving: a new shape raises instead (PyTorch 2.6+)."""
    with torch.compiler.set_stance("fail_on_recompile"):
        return [compiled(x) for x in batches]
# --8<-- [end:serve]


# --8<-- [start:unbacked]
def graphs_for_sizes(sizes, mark):
    """Graphs torch.compile makes for scale_by_max on inputs of these lengths, each
    input's dimension 0 marked with mark(x, 0) first."""
    backend = CountingBackend()
    torch.compiler.reset()
    compiled = torch.compile(scale_by_max, backend=backend)
    for n in sizes:
        x = torch.randn(n, device=device)
        mark(x, 0)
        compiled(x)
    return backend.graphs


MARKS = {
    "mark_dynamic": torch._dynamo.mark_dynamic,               # 0 and 1 stay specialized
    "maybe_mark_dynamic": torch._dynamo.maybe_mark_dynamic,   # a hint, never an error
    "mark_unbacked": torch._dynamo.decorators.mark_unbacked,  # any size, 0 and 1 too
}
# --8<-- [end:unbacked]


if __name__ == "__main__":
    # --8<-- [start:main]
    x = torch.randn(4096, device=device)
    for fn in (scale_by_max_item, branch_on_sum, print_in_the_middle,
               scale_by_max, branch_free, print_outside):
        graphs, breaks, reasons = explain(fn, x)
        print(f"{fn.__name__}: {graphs} graph(s), {breaks} break(s) {reasons}")
    lengths = [1000, 2000, 3000, 4000]
    print("graphs for 4 lengths, dynamic=False:", graphs_for_lengths(lengths, False))
    print("  default (static first, then dynamic):", graphs_for_lengths(lengths))
    print("  mark_dynamic:", graphs_for_lengths(lengths, mark_dynamic=True))
    # --8<-- [end:main]
    # --8<-- [start:fullgraph_main]
    x = torch.randn(4096, device=device)
    for fullgraph in (False, True):   # fullgraph=True also captures .item()
        graphs = count_graphs(scale_by_max_item, x, fullgraph=fullgraph)
        print(f"scale_by_max_item, fullgraph={fullgraph}: {graphs} graph(s)")
    # --8<-- [end:fullgraph_main]
    # --8<-- [start:strict_main]
    for core in (scale_by_max_item, scale_by_max):
        try:
            graphs = count_graphs(step_with_strict_core, x, core)
            print(f"{core.__name__}: {graphs} graphs, no break in the core")
        except torch._dynamo.exc.Unsupported as error:
            print(f"{core.__name__}: {str(error).splitlines()[0]}")
    # --8<-- [end:strict_main]
    # --8<-- [start:tools_main]
    print("disable:", count_graphs(print_through_disable, x), "graphs")
    print("graph break:", count_graphs(centred, x), "graphs;",
          "nonstrict_trace:", count_graphs(centred, x, traced_shift_of), "graph")
    compiled = torch.compile(scale_by_max, dynamic=False)
    warm = [torch.randn(n, device=device) for n in (1000, 2000)]
    for batch in warm:
        compiled(batch)                           # warm up first: two compiles
    serve(compiled, warm)                         # the same shapes: no compile
    try:
        serve(compiled, [torch.randn(3000, device=device)])
    except RuntimeError as error:
        print("fail_on_recompile:", str(error).splitlines()[0][:60])
    for name, mark in MARKS.items():
        print(f"lengths 1 to 4, {name}: {graphs_for_sizes([1, 2, 3, 4], mark)} graph(s)")
    # --8<-- [end:tools_main]
