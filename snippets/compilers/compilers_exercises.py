"""Exercises of the compilers chapter: a graph break to remove, recompiles to stop, and a
fused kernel to write in Triton.

Run it anywhere: python -m snippets.compilers.compilers_exercises
(on a CPU, Inductor writes C++ and the Triton kernel runs in Triton's interpreter)
"""

GPUS_NEEDED = 0  # picks CUDA at run time; on a CPU the Triton kernel runs in the interpreter

# --8<-- [start:setup]
import os

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if device.type == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"   # kernels run in Triton's interpreter

import triton
import triton.language as tl


class CountingBackend:
    """A torch.compile backend that counts the graphs it is handed, and runs them."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1
        return graph_module.forward


def count_graphs(fn, *args, **compile_options):
    backend = CountingBackend()
    torch.compiler.reset()
    torch.compile(fn, backend=backend, **compile_options)(*args)
    return backend.graphs
# --8<-- [end:setup]


# --8<-- [start:break_task]
def clipped_scale(x, limit=4.0):
    """x clipped to [-limit, limit], then scaled so its largest magnitude is 1."""
    peak = x.abs().max().item()
    if peak > limit:
        x = x.clamp(-limit, limit)
        peak = limit
    return x / peak


x = 3 * torch.randn(4096, device=device)
print("graphs:", count_graphs(clipped_scale, x))
# --8<-- [end:break_task]


# --8<-- [start:break_solution]
def clipped_scale_fixed(x, limit=4.0):
    x = x.clamp(-limit, limit)      # changes nothing where no value passes the limit
    return x / x.abs().max()        # a 0-d tensor: no .item(), no branch


torch.testing.assert_close(clipped_scale_fixed(x), clipped_scale(x))
print("graphs:", count_graphs(clipped_scale_fixed, x, fullgraph=True))
# --8<-- [end:break_solution]


# --8<-- [start:recompile_task]
def unit_rows(batch):
    """Each row scaled so that its largest magnitude is 1."""
    return batch / batch.abs().amax(dim=-1, keepdim=True)


def serve_requests(compiled, sizes):
    """One call per batch of requests, each batch `size` rows of 64 values: a graph
    for batches of one, and one for the rest."""
    for size in sizes:
        batch = torch.randn(size, 64, device=device)
        compiled(batch)


backend = CountingBackend()
torch.compiler.reset()
compiled = torch.compile(unit_rows, backend=backend)
serve_requests(compiled, [1, 8, 3, 1, 16, 5])
print("graphs:", backend.graphs)
# --8<-- [end:recompile_task]


# --8<-- [start:recompile_solution]
def serve_marked(compiled, sizes):
    for size in sizes:
        batch = torch.randn(size, 64, device=device)
        torch._dynamo.decorators.mark_unbacked(batch, 0)   # any size, 1 included
        compiled(batch)


backend = CountingBackend()
torch.compiler.reset()
compiled = torch.compile(unit_rows, backend=backend)
serve_marked(compiled, [1, 8, 3, 1, 16, 5])
print("graphs:", backend.graphs)
# --8<-- [end:recompile_solution]


# --8<-- [start:kernel_task]
def bias_gelu(x, bias):
    """bias + sigmoid-GELU over the rows of x: four kernels eagerly."""
    y = x + bias
    return y * torch.sigmoid(1.702 * y)


x = torch.randn(8, 300, device=device)
bias = torch.randn(300, device=device)
# --8<-- [end:kernel_task]


# --8<-- [start:kernel_solution]
@triton.jit
def bias_gelu_kernel(x_ptr, bias_ptr, y_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)   # this program's block
    mask = offsets < n_elements                  # the last block runs past the end
    x = tl.load(x_ptr + offsets, mask=mask)
    bias = tl.load(bias_ptr + offsets % n_cols, mask=mask)   # the element's column
    y = x + bias
    tl.store(y_ptr + offsets, y * tl.sigmoid(1.702 * y), mask=mask)


def bias_gelu_triton(x, bias, block=1024):
    x = x.contiguous()                # the kernel reads x as one run of values
    y = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), block),)
    bias_gelu_kernel[grid](x, bias, y, x.numel(), x.shape[-1], BLOCK=block)
    return y


torch.testing.assert_close(bias_gelu_triton(x, bias), bias_gelu(x, bias))
print("bias_gelu_triton matches bias_gelu")
# --8<-- [end:kernel_solution]
