"""Attention written out and compiled by torch.compile (as Inductor rewrites it, and
with its rewrites off), against the fused kernels of scaled_dot_product_attention
(flash, memory-efficient, cuDNN) and FlexAttention.

Run it anywhere: python -m snippets.compilers.custom_kernels_attention
(on a CPU: small shapes in float32, the flash backend and FlexAttention's CPU kernel; Inductor
writes C++ and needs a C++ compiler)
"""

GPUS_NEEDED = 0  # picks CUDA at run time; on a CPU the memory-efficient backend is missing

# --8<-- [start:naive]
import torch
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def naive_attention(q, k, v):
    """softmax(Q K^T / sqrt(d)) V as the formula reads: the scores of every query with
    every key, (batch, heads, seq, seq) values, are written to memory and read back."""
    scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    return torch.softmax(scores, dim=-1) @ v


# One graph per sequence length: the compiled kernels fit each shape. Inductor's
# pattern matcher knows this formula and rewrites it into a fused attention call.
compiled_attention = torch.compile(naive_attention, dynamic=False)
# With its pattern rewrites off, Inductor compiles the operations as written.
unfused_attention = torch.compile(naive_attention, dynamic=False,
                                  options={"pattern_matcher": False})
# --8<-- [end:naive]


# --8<-- [start:rewrite]
import re

from torch._inductor.utils import run_and_get_code


def calls_in_generated_code(fn, *args):
    """What the code Inductor writes for fn(*args) calls, in order: library operators
    (aten.*, extern_kernels.*) and the kernels it generated (triton_*, cpp_*)."""
    torch.compiler.reset()                          # compile afresh, for these inputs
    _, modules = run_and_get_code(fn, *args)
    calls = re.findall(r"(aten\.\w+|extern_kernels\.\w+|\b(?:triton|cpp)_\w+_\d+)"
                       r"(?=\.default|\.run\(|\()", "\n".join(modules))
    return list(dict.fromkeys(calls))               # each once, first call first
# --8<-- [end:rewrite]


# --8<-- [start:fused]
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import flex_attention

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION,   # CUDA only
            "cudnn": SDPBackend.CUDNN_ATTENTION}           # CUDA only


def sdpa(q, k, v, backend="flash"):
    """PyTorch's fused attention, held to one backend (an error if it cannot run):
    each block of queries keeps its scores on chip, none go to memory."""
    with sdpa_kernel(BACKENDS[backend]):
        return F.scaled_dot_product_attention(q, k, v)


# FlexAttention is a template: torch.compile writes a fused kernel from it (with a
# score_mod or a block mask, the variant you need); called eagerly it is not fused.
compiled_flex = torch.compile(flex_attention, dynamic=False)
# --8<-- [end:fused]


# --8<-- [start:inputs]
def attention_inputs(seq, batch=8, heads=16, head_dim=64, dtype=torch.bfloat16):
    """Queries, keys and values of shape (batch, heads, seq, head_dim)."""
    shape = (batch, heads, seq, head_dim)
    return [torch.randn(shape, device=device, dtype=dtype) for _ in range(3)]


def peak_memory(fn, *args):
    """Bytes fn(*args) allocates at its peak beyond what was allocated before (CUDA)."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn(*args)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def implementations():
    """{name: function of (q, k, v)} of what runs on this device."""
    impls = {"compiled": compiled_attention, "unfused": unfused_attention,
             "flex": compiled_flex, "flash": lambda q, k, v: sdpa(q, k, v, "flash")}
    if device.type == "cuda":
        for backend in ("efficient", "cudnn"):
            impls[backend] = lambda q, k, v, b=backend: sdpa(q, k, v, b)
    return impls
# --8<-- [end:inputs]


if __name__ == "__main__":
    # --8<-- [start:check]
    if device.type == "cuda":
        q, k, v = attention_inputs(2048)
        tolerance = {"atol": 2e-2, "rtol": 2e-2}        # bfloat16
    else:
        q, k, v = attention_inputs(256, batch=2, heads=2, dtype=torch.float32)
        tolerance = {"atol": 1e-5, "rtol": 1e-4}
    for name in ("compiled", "unfused"):
        calls = calls_in_generated_code(implementations()[name], q, k, v)
        print(f"{name} calls: {', '.join(calls)}")
    expected = naive_attention(q, k, v)
    for name, fn in implementations().items():
        torch.testing.assert_close(fn(q, k, v), expected, **tolerance)
        print(f"{name}: matches the formula")
    if device.type == "cuda":
        for name, fn in implementations().items():
            print(f"{name}: {peak_memory(fn, q, k, v) / 2**20:.0f} MiB at its peak")
    # --8<-- [end:check]
