"""torch.compile from the inside: what it generates, what the first call costs, what each mode buys.

Run it anywhere: python -m snippets.compilers.torch_compile
(on a CPU, Inductor writes C++ instead of Triton and needs a C++ compiler; the shapes are smaller)
Time the first compiled call of a fresh process: python -m snippets.compilers.torch_compile --first-call
"""

GPUS_NEEDED = 0  # picks CUDA at run time; on a CPU Inductor generates C++ (g++ must be installed)

# --8<-- [start:chain]
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def bias_gelu(x, bias):
    """A bias, then the sigmoid approximation of GELU: four elementwise operations
    (add, multiply, sigmoid, multiply), so four kernels eagerly, each reading and
    writing the whole tensor."""
    y = x + bias
    return y * torch.sigmoid(1.702 * y)


compiled_bias_gelu = torch.compile(bias_gelu)   # compiles on the first call, not here


def chain_inputs(rows=4096 if device.type == "cuda" else 64, width=4096):
    x = torch.randn(rows, width, device=device)
    bias = torch.randn(width, device=device)
    return x, bias
# --8<-- [end:chain]


# --8<-- [start:output_code]
def show_generated_code():
    """Print the code Inductor writes for bias_gelu, as TORCH_LOGS=output_code would."""
    torch.compiler.reset()           # forget earlier compiles: this call compiles again
    torch._logging.set_logs(output_code=True)
    try:
        torch.compile(bias_gelu)(*chain_inputs())
    finally:
        torch._logging.set_logs()                   # back to the default: quiet
# --8<-- [end:output_code]


# --8<-- [start:generated_code]
def generated_kernels(fn, *args):
    """{name: source} of each kernel Inductor writes for fn(*args): a Triton kernel
    from its @triton.jit on a GPU, a C++ function on a CPU."""
    import re

    from torch._inductor.utils import run_and_get_code

    torch.compiler.reset()                          # compile afresh, for these inputs
    _, modules = run_and_get_code(torch.compile(fn), *args)  # the generated modules
    kernels = {}
    for module in modules:           # each kernel is a string in its module's source
        found = re.findall(r"(\w+) = async_compile\.\w+\(.*?'''\n?(.*?)'''", module,
                           flags=re.DOTALL)
        for name, source in found:
            _, jit, kernel = source.partition("@triton.jit")
            kernels[name] = jit + kernel if jit else source
    return kernels
# --8<-- [end:generated_code]


# --8<-- [start:first_call]
import time


def sync():
    if device.type == "cuda":
        torch.cuda.synchronize()


def first_and_second_call():
    """Seconds of the first call (Dynamo traces, Inductor compiles or loads from its
    on-disk cache, then it runs) and of the second (it only runs)."""
    x, bias = chain_inputs()
    seconds = []
    for _ in range(2):
        sync()
        start = time.perf_counter()
        compiled_bias_gelu(x, bias)
        sync()
        seconds.append(time.perf_counter() - start)
    return seconds
# --8<-- [end:first_call]


# --8<-- [start:mlp]
from torch import nn


def mlp_block(width=1024 if device.type == "cuda" else 64):
    """A transformer's feed-forward block: norm, widen, GELU, narrow, add back."""
    return nn.Sequential(
        nn.LayerNorm(width),
        nn.Linear(width, 4 * width), nn.GELU(),
        nn.Linear(4 * width, width),
    ).to(device)


class Residual(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return x + self.inner(x)


def mlp_model(blocks=4, width=1024 if device.type == "cuda" else 64, seed=0):
    """Residual blocks with weights drawn from `seed`: two models built alike start
    equal (the tests compare them), and the global random state is left alone."""
    with torch.random.fork_rng(devices=[]):   # the weights are drawn on the CPU
        torch.manual_seed(seed)
        return nn.Sequential(*(Residual(mlp_block(width)) for _ in range(blocks)))
# --8<-- [end:mlp]


# --8<-- [start:modes]
MODES = ["default", "reduce-overhead", "max-autotune"]


def compiled(fn, mode):
    """fn itself for mode "eager", else torch.compile(fn, mode=mode)."""
    return fn if mode == "eager" else torch.compile(fn, mode=mode)
# --8<-- [end:modes]


# --8<-- [start:train_step]
def make_train_step(model, mode):
    """One optimizer step; the model's forward and the loss are compiled (and with them
    AOTAutograd's backward), the optimizer runs eagerly."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def loss_fn(x, target):
        return nn.functional.mse_loss(model(x), target)

    loss_of = compiled(loss_fn, mode)

    def train_step(x, target):
        if mode == "reduce-overhead":
            # a new step: the graph may reuse the memory of the last step's outputs
            torch.compiler.cudagraph_mark_step_begin()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(x, target)
        loss.backward()
        optimizer.step()
        # Under reduce-overhead the loss lives in the CUDA graph's memory, which the
        # next replay overwrites: a copy is what a caller can keep in a list.
        return loss.detach().clone()

    return train_step
# --8<-- [end:train_step]


if __name__ == "__main__":
    import sys

    if "--first-call" in sys.argv:
        # --8<-- [start:first_call_main]
        first, second = first_and_second_call()
        print(f"first call {first:.3f} s, second call {second * 1e3:.3f} ms")
        # --8<-- [end:first_call_main]
        # --8<-- [start:compile_times]
        print(torch._dynamo.utils.compile_times())   # seconds in each step, so far
        # --8<-- [end:compile_times]
    else:
        x, bias = chain_inputs()
        torch.testing.assert_close(compiled_bias_gelu(x, bias), bias_gelu(x, bias))
        print(f"bias_gelu on {device}: compiled output matches eager")
        # --8<-- [start:print_kernels]
        import textwrap

        for name, source in generated_kernels(bias_gelu, *chain_inputs()).items():
            print(f"# {name}")
            for line in source.strip("\n").splitlines():   # long lines folded to fit
                indent = " " * (len(line) - len(line.lstrip()) + 4)
                print("\n".join(textwrap.wrap(line, 80, subsequent_indent=indent,
                                              break_on_hyphens=False)))
        # --8<-- [end:print_kernels]
