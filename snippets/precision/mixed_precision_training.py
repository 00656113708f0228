"""Mixed-precision training: autocast, GradScaler, and one training loop timed four ways.

Run it anywhere: python -m snippets.precision.mixed_precision_training
(on a CPU the same code trains a much smaller model)
"""

GPUS_NEEDED = 0  # picks CUDA at run time; on a CPU, autocast and GradScaler use CPU kernels

# --8<-- [start:setup]
import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# On a GPU, large enough that the GPU, not Python launching kernels, sets the pace of
# a step, in every precision; tiny on a CPU.
if device.type == "cuda":
    SIZES = dict(vocab=8192, width=2048, depth=4, heads=16, seq=512)
    BATCH = 16  # sequences per step
    LR = 5e-4  # Adam moves every weight by about LR a step: wider layers want less
else:
    SIZES = dict(vocab=128, width=32, depth=2, heads=2, seq=16)
    BATCH = 8
    LR = 1e-3
STEPS = 30 if device.type == "cuda" else 12  # training steps per variant
# --8<-- [end:setup]


# --8<-- [start:model]
class Attention(nn.Module):
    """Causal self-attention on a packed (query, key, value) projection."""

    def __init__(self, heads):
        super().__init__()
        self.heads = heads

    def forward(self, qkv):
        batch, seq, _ = qkv.shape
        q, k, v = qkv.view(batch, seq, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return out.transpose(1, 2).reshape(batch, seq, -1)


class Block(nn.Module):
    """A pre-norm transformer block: attention, then an MLP, each with a residual."""

    def __init__(self, width, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.attention = Attention(heads)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.proj(self.attention(self.qkv(self.norm1(x))))
        return x + self.mlp(self.norm2(x))


class Transformer(nn.Module):
    def __init__(self, vocab, width, depth, heads, seq):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Embedding(seq, width)
        self.blocks = nn.Sequential(*[Block(width, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position.weight[: tokens.shape[1]]
        return self.head(self.norm(self.blocks(x)))


def make_model(seed=0):
    """The same initial weights every time, whatever the device."""
    torch.manual_seed(seed)
    return Transformer(**SIZES).to(device)
# --8<-- [end:model]


# --8<-- [start:data]
def make_batches(steps, seed=0):
    """Synthetic data: random tokens, each to be mapped to another by a fixed rule."""
    g = torch.Generator().manual_seed(seed)
    shape = (steps, BATCH, SIZES["seq"])
    tokens = torch.randint(SIZES["vocab"], shape, generator=g)
    targets = (5 * tokens + 3) % SIZES["vocab"]  # a permutation of the vocabulary
    return tokens.to(device), targets.to(device)
# --8<-- [end:data]


# --8<-- [start:flops]
def step_flops(batch, vocab, width, depth, heads, seq):
    """Model flops of one training step: 6 per weight of a matrix product and token
    (forward 2, backward 4), plus attention's two products of seq x seq per layer."""
    weights = depth * 12 * width * width + width * vocab  # qkv, proj, MLP; head
    tokens = batch * seq
    return 6 * weights * tokens + 12 * depth * batch * seq * seq * width
# --8<-- [end:flops]


# --8<-- [start:autocast]
layer = nn.Linear(64, 10).to(device)
x = torch.randn(32, 64, device=device)
labels = torch.randint(10, (32,), device=device)

with torch.autocast(device.type, dtype=torch.bfloat16):
    logits = layer(x)                       # a matrix product: runs in bfloat16
    loss = F.cross_entropy(logits, labels)  # a loss: autocast runs it in float32

loss.backward()  # outside the context: backward follows the forward's dtypes
print(f"logits {logits.dtype}, loss {loss.dtype}; "
      f"weight {layer.weight.dtype}, its gradient {layer.weight.grad.dtype}")
# --8<-- [end:autocast]


# --8<-- [start:dtypes]
def autocast_dtypes(model, tokens, targets, dtype):
    """The dtype each kind of module produced in a real forward pass under autocast."""
    seen = {}

    def record(module, args, output):
        seen.setdefault(type(module).__name__, output.dtype)  # the first of each kind

    hooks = [m.register_forward_hook(record) for m in model.modules()
             if m is not model and not isinstance(m, nn.Sequential)]
    try:
        with torch.autocast(device.type, dtype=dtype):
            logits = model(tokens)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    finally:
        for hook in hooks:
            hook.remove()
    seen["cross_entropy"] = loss.dtype
    return seen
# --8<-- [end:dtypes]


# --8<-- [start:train_step]
def train_step(model, optimizer, scaler, tokens, targets, dtype, max_norm=1.0):
    """One step; dtype None is plain float32. The scaler is a no-op unless enabled."""
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    scaler.scale(loss).backward()  # fp16: gradients of loss x scale, so few underflow
    scaler.unscale_(optimizer)     # divide the gradients by the scale, in place...
    nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # ...so clipping sees them
    scaler.step(optimizer)         # skips the step if a gradient is inf or NaN
    scaler.update()                # lowers the scale after a skip, raises it slowly
    return loss.detach()           # no .item(): reading it would wait for the GPU
# --8<-- [end:train_step]


# --8<-- [start:variants]
import contextlib

VARIANTS = {  # name: (how cuBLAS may compute float32 products, autocast dtype)
    "fp32": ("ieee", None),
    "tf32": ("tf32", None),
    "bf16": ("ieee", torch.bfloat16),
    "fp16": ("ieee", torch.float16),
}


@contextlib.contextmanager
def fp32_matmul_precision(mode):
    """'tf32' lets float32 matrix products use TF32 Tensor Cores; 'ieee' does not."""
    saved = torch.backends.cuda.matmul.fp32_precision
    torch.backends.cuda.matmul.fp32_precision = mode
    try:
        yield
    finally:
        torch.backends.cuda.matmul.fp32_precision = saved


def make_training(variant, seed=0):
    """Model, optimizer and scaler for one variant; only fp16 needs a GradScaler."""
    model = make_model(seed)
    fused = device.type == "cuda"  # one kernel for all parameters' updates
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, fused=fused)
    dtype = VARIANTS[variant][1]
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    return model, optimizer, scaler


def train(variant, steps, seed=0):
    """Losses of `steps` steps from the same weights and data for every variant."""
    mode, dtype = VARIANTS[variant]
    model, optimizer, scaler = make_training(variant, seed)
    tokens, targets = make_batches(steps, seed)
    with fp32_matmul_precision(mode):
        losses = [train_step(model, optimizer, scaler, tokens[i], targets[i], dtype)
                  for i in range(steps)]
    return torch.stack(losses).float().cpu()
# --8<-- [end:variants]


# --8<-- [start:breakdown]
import time

from torch.profiler import ProfilerActivity, profile

# The operators of matrix products: Linear layers, forward and backward
PRODUCTS = {"aten::mm", "aten::addmm", "aten::bmm"}


def time_shares(step, *args, steps=3):
    """Where the device's time in `step(*args)` goes, from the profiler: the shares of
    matrix products, attention and the rest, and the share of the wall-clock time the
    device was busy at all. Each operator counts the kernels it launched itself (on a
    CPU, its own time)."""
    cuda = device.type == "cuda"
    step(*args)  # a warm-up, outside the profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(steps):
            step(*args)
        if cuda:
            torch.cuda.synchronize()
        wall_us = (time.perf_counter() - start) * 1e6  # the profiler counts in µs
    totals = {"products": 0.0, "attention": 0.0, "other": 0.0}
    for op in prof.key_averages():
        if op.device_type != torch.autograd.DeviceType.CPU:
            continue  # a kernel's own row: counted with the operator that launched it
        kind = ("products" if op.key in PRODUCTS else
                "attention" if "attention" in op.key else "other")
        totals[kind] += op.self_device_time_total if cuda else op.self_cpu_time_total
    busy = sum(totals.values())
    return {kind: t / busy for kind, t in totals.items()}, busy / wall_us
# --8<-- [end:breakdown]


# --8<-- [start:skip]
def step_with_overflow(model, optimizer, scaler, tokens):
    """An fp16 gradient that overflowed: the scaler skips the step, halves the scale."""
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=torch.float16):
        loss = model(tokens).float().mean()
    scaler.scale(loss).backward()
    model.head.bias.grad[0] = float("inf")  # what an overflow leaves behind
    before = [p.detach().clone() for p in model.parameters()]
    scale = scaler.get_scale()
    scaler.unscale_(optimizer)
    scaler.step(optimizer)  # finds the inf: the optimizer does not step
    scaler.update()
    after = list(model.parameters())
    unchanged = all(torch.equal(b, a) for b, a in zip(before, after, strict=True))
    return unchanged, scale, scaler.get_scale()
# --8<-- [end:skip]


# --8<-- [start:checkpoint]
def save_checkpoint(path, model, optimizer, scaler):
    """The scaler's state belongs in a checkpoint: its scale took many steps to find."""
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scaler": scaler.state_dict()}, path)


def load_checkpoint(path, model, optimizer, scaler):
    state = torch.load(path, map_location=device)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scaler.load_state_dict(state["scaler"])
# --8<-- [end:checkpoint]


# --8<-- [start:compiled]
def compiled_under_autocast(dtype=torch.bfloat16):
    """The autocast section's layer, compiled, called inside and outside autocast:
    the compiler traces the region with the autocast state in force at the call."""
    compiled = torch.compile(layer)
    # the backward pass is built at the first call: say that it runs outside autocast
    with torch._functorch.config.patch(backward_pass_autocast="off"):
        with torch.autocast(device.type, dtype=dtype):
            logits = compiled(x)                     # traced with autocast's rules
            loss = F.cross_entropy(logits, labels)   # float32, as in eager mode
    loss.backward()                                  # outside autocast, as always
    plain = compiled(x)  # autocast is off now: a new trace, in float32
    return logits.dtype, loss.dtype, plain.dtype
# --8<-- [end:compiled]


# --8<-- [start:float32_region]
def float32_region(dtype=torch.bfloat16):
    """A region autocast must leave alone. enabled=False turns autocast off inside,
    but what comes in from outside is already 16-bit: cast it to float32 yourself."""
    with torch.autocast(device.type, dtype=dtype):
        h = layer(x)                                      # bfloat16
        with torch.autocast(device.type, enabled=False):
            as_it_came = h @ h.T                          # still bfloat16
            exact = h.float() @ h.float().T               # float32, as written
        after = layer(x)                                  # autocast is back on
    return h.dtype, as_it_came.dtype, exact.dtype, after.dtype
# --8<-- [end:float32_region]


# --8<-- [start:scale_watch]
def nonfinite_grads(model):
    """After scaler.unscale_(optimizer): the parameters whose gradient has an inf or
    a NaN, the ones that made the scaler skip this step."""
    return [name for name, p in model.named_parameters()
            if p.grad is not None and not torch.isfinite(p.grad).all()]


def scale_collapsing(scales, steps=10):
    """scaler.get_scale() after each update: halved at each of the last `steps`
    updates (a skipped step multiplies the scale by backoff_factor, 0.5)."""
    recent = scales[-steps - 1:]
    return len(recent) > steps and all(
        after == before / 2
        for before, after in zip(recent[:-1], recent[1:], strict=True))
# --8<-- [end:scale_watch]


# --8<-- [start:scale_collapse]
def scale_under_overflow(steps=12):
    """float16 training whose head overflows at every step, as a model that makes
    inf itself would: the scale halves each step, and the same gradient is at fault."""
    model, optimizer, scaler = make_training("fp16")
    tokens, targets = make_batches(1)
    model.head.weight.register_hook(lambda grad: grad * float("inf"))
    scales = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.float16):
            logits = model(tokens[0])
            loss = F.cross_entropy(logits.flatten(0, 1), targets[0].flatten())
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        at_fault = nonfinite_grads(model)
        scaler.step(optimizer)  # skipped: a gradient is not finite
        scaler.update()         # the scale halves
        scales.append(scaler.get_scale())
    return scales, at_fault
# --8<-- [end:scale_collapse]


if __name__ == "__main__":
    # --8<-- [start:main]
    import tempfile

    tokens, targets = make_batches(1)
    for dtype in (torch.bfloat16, torch.float16):
        dtypes = autocast_dtypes(make_model(), tokens[0], targets[0], dtype)
        print(f"autocast {dtype}:", {k: str(v).removeprefix("torch.")
                                     for k, v in dtypes.items()})
    curves = {variant: train(variant, STEPS) for variant in VARIANTS}
    for variant, losses in curves.items():
        gap = ((losses - curves["fp32"]).abs() / curves["fp32"]).max()
        print(f"{variant}: loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
              f"largest gap to fp32 {gap:.2%}")
    model, optimizer, scaler = make_training("fp16")
    print("overflow: step skipped {}, scale {} -> {}".format(
        *step_with_overflow(model, optimizer, scaler, tokens[0])))
    with tempfile.TemporaryDirectory() as folder:
        save_checkpoint(f"{folder}/checkpoint.pt", model, optimizer, scaler)
        restored = torch.amp.GradScaler(device.type)
        load_checkpoint(f"{folder}/checkpoint.pt", model, optimizer, restored)
    print(f"restored scale {restored.get_scale()}")
    print("compiled under autocast: logits {}, loss {}; outside autocast {}".format(
        *compiled_under_autocast()))
    print("float32 region: {} in, {} as it came, {} cast, {} after".format(
        *float32_region()))
    scales, at_fault = scale_under_overflow()
    print(f"scale {scales[0]} -> {scales[-1]}, collapsing {scale_collapsing(scales)}, "
          f"at fault {at_fault}")
    # --8<-- [end:main]
