"""A row-wise softmax written in Triton: one program per row, checked against PyTorch,
wrapped as a PyTorch operator with its backward so autograd and torch.compile see it.

Run it anywhere: python -m snippets.compilers.triton_kernels
(without a GPU, Triton's interpreter runs the same kernels on the CPU, on small tensors)
"""

GPUS_NEEDED = 0  # picks CUDA at run time; on a CPU the kernels run in Triton's interpreter

# --8<-- [start:setup]
import os

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if device.type == "cpu":
    # No GPU: Triton's interpreter runs each kernel with NumPy, slowly but line by
    # line, so a debugger or print() can follow it. Triton reads this when
    # triton.language is first imported: if anything imported Triton earlier
    # (torch.compile does), it is too late here, so set it in the shell:
    # TRITON_INTERPRET=1 python script.py
    os.environ["TRITON_INTERPRET"] = "1"

import triton
import triton.language as tl

# --8<-- [end:setup]


# --8<-- [start:kernel]
# Each program (a block of threads) handles one row; how many warps it uses is tuned
# per row length. The interpreter cannot time the candidates, so it gets one.
WARPS = (4, 8, 16) if device.type == "cuda" else (4,)


@triton.autotune(
    configs=[triton.Config({}, num_warps=w) for w in WARPS],
    key=["n_cols"],          # tune again when the row length changes
)
@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride,
                   BLOCK: tl.constexpr):
    # int64: in int32, row * stride overflows from 2**31 elements (8 GiB of float32)
    row = tl.program_id(0).to(tl.int64)      # which row this program owns
    cols = tl.arange(0, BLOCK)               # BLOCK: a power of two >= n_cols
    mask = cols < n_cols                     # the lanes past the row's end do nothing
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)                # exp() of numbers <= 0 cannot overflow
    numerator = tl.exp(x)
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, y, mask=mask)
# --8<-- [end:kernel]


# --8<-- [start:backward_kernel]
@triton.jit
def softmax_backward_kernel(y_ptr, dy_ptr, dx_ptr, n_cols, y_row_stride, dy_row_stride,
                            dx_row_stride, BLOCK: tl.constexpr):
    """dx = y * (dy - sum(y * dy)) for one row: reads y and dy once, writes dx."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    y = tl.load(y_ptr + row * y_row_stride + cols, mask=mask, other=0.0)
    dy = tl.load(dy_ptr + row * dy_row_stride + cols, mask=mask, other=0.0)
    dx = y * (dy - tl.sum(y * dy, axis=0))
    tl.store(dx_ptr + row * dx_row_stride + cols, dx, mask=mask)
# --8<-- [end:backward_kernel]


# --8<-- [start:op]
from torch.library import triton_op, wrap_triton

# The whole row sits in one program's registers: longer rows need a kernel that
# loops over the row in chunks (or torch.softmax), not a bigger block.
MAX_COLS = 16384


def rows_of(t: torch.Tensor, what: str) -> torch.Tensor:
    """t as rows the kernels can read: 2-D, not too long, a row's values adjacent."""
    if t.ndim != 2:
        raise ValueError(f"fieldguide::softmax: {what} must be 2-D (rows, columns), "
                         f"got shape {tuple(t.shape)}")
    if t.shape[1] > MAX_COLS:
        raise ValueError(f"fieldguide::softmax: rows of {t.shape[1]} values are longer "
                         f"than the {MAX_COLS} this one-block-per-row kernel holds; "
                         "use torch.softmax")
    # Rows may be any distance apart (their stride goes to the kernel); the values of
    # a row must be adjacent, so a column-strided view (a transpose) is copied, here.
    return t if t.stride(1) == 1 else t.contiguous()


@triton_op("fieldguide::softmax", mutates_args=())
def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor, one Triton program per row."""
    x = rows_of(x, "x")
    n_rows, n_cols = x.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    grid = (n_rows,)                          # one program per row
    wrap_triton(softmax_kernel)[grid](        # wrap_triton: required inside a triton_op
        x, y, n_cols, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n_cols))
    return y


@triton_op("fieldguide::softmax_backward", mutates_args=())
def softmax_backward(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    y, dy = rows_of(y, "y"), rows_of(dy, "dy")
    n_rows, n_cols = y.shape
    dx = torch.empty((n_rows, n_cols), dtype=y.dtype, device=y.device)
    wrap_triton(softmax_backward_kernel)[(n_rows,)](
        y, dy, dx, n_cols, y.stride(0), dy.stride(0), dx.stride(0),
        BLOCK=triton.next_power_of_2(n_cols))
    return dx


def setup_context(ctx, inputs, output):
    ctx.save_for_backward(output)             # the backward needs only y


def backward(ctx, grad_y):
    (y,) = ctx.saved_tensors
    return softmax_backward(y, grad_y)


softmax.register_autograd(backward, setup_context=setup_context)
# --8<-- [end:op]


# --8<-- [start:launch]
def launch_softmax(x):
    """The same kernel launched plainly, for rows whose values are adjacent: no
    operator, so no dispatch, no autograd and no export; the autotuner still picks
    the configuration."""
    n_rows, n_cols = x.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0),
                              BLOCK=triton.next_power_of_2(n_cols))
    return y
# --8<-- [end:launch]


# --8<-- [start:references]
def naive_softmax(x):
    """Softmax as one writes it in PyTorch: five kernels eagerly (max, subtract, exp,
    sum, divide), each reading or writing the whole tensor."""
    shifted = x - x.max(dim=-1, keepdim=True).values
    numerator = shifted.exp()
    return numerator / numerator.sum(dim=-1, keepdim=True)


compiled_softmax = torch.compile(naive_softmax, dynamic=False)  # Inductor fuses it


def copy(src, dst):
    """The ceiling: read every byte once and write it once, no arithmetic."""
    dst.copy_(src)
# --8<-- [end:references]


# --8<-- [start:kernel_time]
def kernel_time(fn, *args, repeats=50):
    """Median GPU seconds of one fn(*args), its host work left out (CUDA only).

    A CUDA event is recorded before and after each call. Queued behind a few large
    products, the calls reach the GPU faster than it runs them, so between a call's
    two events the GPU runs that call's kernels and never waits for Python. If the
    GPU catches up anyway (a slow host), more work goes ahead and it runs again."""
    fn(*args)                                # warm-up: compiled, tuned, loaded
    a = torch.randn(4096, 4096, device="cuda")
    events = [[torch.cuda.Event(enable_timing=True) for _ in range(2)]
              for _ in range(repeats)]       # a (start, end) pair per call
    for products in (8, 32, 128):            # a few milliseconds each
        torch.cuda.synchronize()
        for _ in range(products):
            a @ a                            # GPU work ahead of the first call
        ahead = torch.cuda.Event()
        ahead.record()
        for start, end in events:
            start.record()
            fn(*args)
            end.record()
        caught_up = ahead.query()            # the GPU idle before the last call?
        torch.cuda.synchronize()
        if not caught_up:
            times = sorted(start.elapsed_time(end) / 1e3 for start, end in events)
            return times[len(times) // 2]
    raise RuntimeError("the GPU kept catching up with the host: time fewer calls")
# --8<-- [end:kernel_time]


def softmax_bytes(x):
    """What any softmax must move: read x once and write y once, like a copy."""
    return 2 * x.nbytes


if __name__ == "__main__":
    # --8<-- [start:check]
    x = torch.randn(8 if device.type == "cpu" else 4096, 1000, device=device,
                    requires_grad=True)
    y = softmax(x)
    torch.testing.assert_close(y, torch.softmax(x, dim=-1))
    grad_y = torch.randn_like(y)
    (grad_x,) = torch.autograd.grad(y, x, grad_y)
    (expected,) = torch.autograd.grad(torch.softmax(x, dim=-1), x, grad_y)
    torch.testing.assert_close(grad_x, expected)
    print(f"softmax on {device}: forward and backward match torch.softmax")
    # --8<-- [end:check]
