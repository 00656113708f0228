"""Needing less memory: no autograd for inference, activation checkpointing (whole and
selective), offloading saved activations, gradient accumulation (also with a GradScaler),
smaller optimizer state, mixed precision, and truncated backpropagation through time.

Run it anywhere: python -m snippets.memory.needing_less_memory
(the peak-memory numbers need a CUDA GPU; on a CPU the script runs a smaller batch and
reports what autograd saves instead)
"""

GPUS_NEEDED = 0  # runs on a CPU too; only peak_bytes() needs CUDA's allocator counters

# --8<-- [start:model]
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
WIDTH, BLOCKS = 512, 16
TOKENS = 16384 if device.type == "cuda" else 64  # a short run on a CPU


class Block(nn.Module):
    """A transformer's feed-forward block: x + down(gelu(up(norm(x))))."""

    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))
# --8<-- [end:model]


# --8<-- [start:checkpointed]
class Model(nn.Module):
    """`activations` says what the forward pass keeps for backward: "keep" (all of
    it), "checkpoint", "selective" or "offload", each explained further down."""

    def __init__(self, width=WIDTH, blocks=BLOCKS, activations="keep"):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(blocks))
        self.activations = activations

    def forward(self, x):
        if not torch.is_grad_enabled():  # nothing is kept for backward anyway
            return self.run_blocks(x, "keep")
        if self.activations == "offload":  # keep them in CPU memory instead
            with torch.autograd.graph.save_on_cpu(pin_memory=True):
                return self.run_blocks(x, "keep")
        return self.run_blocks(x, self.activations)

    def run_blocks(self, x, activations):
        for block in self.blocks:
            if activations == "checkpoint":
                # Keep only the block's input; run it again during backward.
                x = checkpoint(block, x, use_reentrant=False)
            elif activations == "selective":
                x = selective_checkpoint(block, x)  # defined with the policy below
            else:
                x = block(x)
        return x
# --8<-- [end:checkpointed]


# --8<-- [start:train_step]
def make(activations="keep", dtype=torch.float32, optimizer="adam", seed=0):
    """A model, its optimizer and a batch: the same weights for the same seed."""
    torch.manual_seed(seed)
    model = Model(activations=activations).to(device, dtype)
    optimizers = {"adam": lambda p: torch.optim.Adam(p, lr=1e-4),
                  "sgd": lambda p: torch.optim.SGD(p, lr=1e-2),
                  "sgd_momentum": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9)}
    x = torch.randn(TOKENS, WIDTH, device=device, dtype=dtype)
    return model, optimizers[optimizer](model.parameters()), x


def accumulate_gradients(model, x, micro_batches=1, compute_dtype=None):
    """Backward over equal chunks of x: the gradient of the whole batch's mean loss.
    With a compute_dtype, the forward pass runs under autocast (mixed precision)."""
    for chunk in x.chunk(micro_batches):
        with torch.autocast(device.type, dtype=compute_dtype,
                            enabled=compute_dtype is not None):
            loss = model(chunk).square().mean() / micro_batches
        loss.backward()  # adds into .grad; this chunk's activations are freed


def train_step(model, optimizer, x, micro_batches=1, compute_dtype=None):
    accumulate_gradients(model, x, micro_batches, compute_dtype)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
# --8<-- [end:train_step]


# --8<-- [start:saved]
def saved_bytes(model, x):
    """Bytes of the tensors autograd saves for backward during model(x): activations.

    Parameters saved along the way are not counted: they exist anyway.
    """
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(x)
    return sum(saved.values())
# --8<-- [end:saved]


# --8<-- [start:peak]
def peak_bytes(fn, *args):
    """The most GPU memory allocated at once while fn(*args) runs (CUDA only).

    It counts every tensor of the process, also those made before the call.
    """
    torch.cuda.reset_peak_memory_stats(device)
    fn(*args)
    return torch.cuda.max_memory_allocated(device)
# --8<-- [end:peak]


# --8<-- [start:selective]
from functools import partial

from torch.utils.checkpoint import (
    CheckpointPolicy,
    create_selective_checkpoint_contexts,
)

MATRIX_PRODUCTS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default}


def keep_matrix_products(ctx, op, *args, **kwargs):
    """The policy: save what a matrix product made, recompute everything else."""
    if op in MATRIX_PRODUCTS:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def selective_checkpoint(block, x):
    contexts = partial(create_selective_checkpoint_contexts, keep_matrix_products)
    return checkpoint(block, x, use_reentrant=False, context_fn=contexts)
# --8<-- [end:selective]


# --8<-- [start:inference]
def predict(model, x, mode):
    """A forward pass, with autograd ("grad") or without it (the other modes)."""
    if mode == "no_grad":
        with torch.no_grad():
            return model(x)
    if mode == "inference_mode":
        with torch.inference_mode():
            return model(x)
    return model(x)  # records the graph, and keeps every activation it needs
# --8<-- [end:inference]


# --8<-- [start:optimizer_state]
def tensor_bytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors if torch.is_tensor(t))


def state_bytes(optimizer):
    """Bytes the optimizer keeps per parameter (created by its first step)."""
    return tensor_bytes(v for state in optimizer.state.values() for v in state.values())


def parameter_bytes(model):
    return tensor_bytes(model.parameters())


def training_state_bytes(model, optimizer):
    """Parameters, their gradients and the optimizer's state: what a step keeps
    whatever the batch (read it after backward, before zero_grad)."""
    gradients = tensor_bytes(p.grad for p in model.parameters())
    return parameter_bytes(model) + gradients + state_bytes(optimizer)
# --8<-- [end:optimizer_state]


# --8<-- [start:custom_function]
class SumOfSquares(torch.autograd.Function):
    """A hand-written operation that must run in float32, even under autocast:
    custom_fwd casts its floating-point inputs and turns autocast off inside forward;
    custom_bwd runs backward with the autocast state forward had."""

    @staticmethod
    @torch.amp.custom_fwd(device_type=device.type, cast_inputs=torch.float32)
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.square().sum(dim=-1)

    @staticmethod
    @torch.amp.custom_bwd(device_type=device.type)
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad.unsqueeze(-1)
# --8<-- [end:custom_function]


# --8<-- [start:scaler]
def scaled_step(model, optimizers, scaler, x, micro_batches=4):
    """float16 mixed precision with gradient accumulation and several optimizers:
    scale every micro-batch's loss, step each optimizer once, update the scale once."""
    for chunk in x.chunk(micro_batches):
        with torch.autocast(device.type, dtype=torch.float16):
            loss = model(chunk).square().mean() / micro_batches
        scaler.scale(loss).backward()  # the same scale for every micro-batch
    for optimizer in optimizers:
        scaler.step(optimizer)  # unscales its gradients; skips it on inf or NaN
    scaler.update()  # after every optimizer has stepped: one new scale per step
    for optimizer in optimizers:
        optimizer.zero_grad(set_to_none=True)
# --8<-- [end:scaler]


# --8<-- [start:tbptt]
SEQUENCE = 2048 if device.type == "cuda" else 64  # time steps
SEQUENCES, TRUNCATE = 64, 64  # sequences in the batch; time steps per backward


class Recurrent(nn.Module):
    """An LSTM over a long sequence (time first) and a linear read-out."""

    def __init__(self, width=WIDTH):
        super().__init__()
        self.lstm = nn.LSTM(width, width)
        self.head = nn.Linear(width, width)

    def forward(self, x, state=None):
        out, state = self.lstm(x, state)
        return self.head(out), state


def train_sequence(model, optimizer, x, target, k=None):
    """One pass over a sequence, backpropagating through k time steps at a time
    (k=None: the whole sequence at once), with an optimizer step after each."""
    state, k = None, k or len(x)
    for chunk, goal in zip(x.split(k), target.split(k), strict=True):
        out, state = model(chunk, state)
        (out - goal).square().mean().backward()  # frees this chunk's graph
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        # Carry the values on, not the graph: the next backward stops here.
        state = tuple(s.detach() for s in state)


def make_sequence(seed=0, steps=SEQUENCE):
    torch.manual_seed(seed)
    model = Recurrent().to(device)
    x = torch.randn(steps, SEQUENCES, WIDTH, device=device)
    target = torch.randn(steps, SEQUENCES, WIDTH, device=device)
    return model, torch.optim.Adam(model.parameters(), lr=1e-4), x, target
# --8<-- [end:tbptt]


if __name__ == "__main__":
    # --8<-- [start:main]
    model, optimizer, x = make()
    train_step(model, optimizer, x)  # the first step creates Adam's state
    print(f"{TOKENS} tokens on {device}: "
          f"parameters {parameter_bytes(model) / 2**20:.0f} MiB, "
          f"Adam state {state_bytes(optimizer) / 2**20:.0f} MiB, activations saved "
          f"for backward {saved_bytes(model, x) / 2**20:.0f} MiB")
    if device.type == "cuda":
        for activations in ("keep", "checkpoint", "selective", "offload"):
            model, optimizer, x = make(activations)
            train_step(model, optimizer, x)
            peak = peak_bytes(train_step, model, optimizer, x)
            print(f"activations={activations}: peak {peak / 2**20:.0f} MiB")
        for k in (None, TRUNCATE):
            model, optimizer, x, target = make_sequence()
            train_sequence(model, optimizer, x[:TRUNCATE], target[:TRUNCATE])
            peak = peak_bytes(train_sequence, model, optimizer, x, target, k)
            print(f"LSTM over {SEQUENCE} steps, backprop through {k or SEQUENCE}: "
                  f"peak {peak / 2**20:.0f} MiB")
    else:
        print("peak memory: needs a CUDA GPU (CPU memory has no allocator counters)")
    # --8<-- [end:main]
