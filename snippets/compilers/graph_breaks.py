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
