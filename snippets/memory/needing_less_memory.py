"""Needing less memory: no autograd for inference, activation checkpointing, gradient
accumulation, and smaller optimizer state.

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
    def __init__(self, width=WIDTH, blocks=BLOCKS, checkpointed=False):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(blocks))
        self.checkpointed = checkpointed

    def forward(self, x):
        for block in self.blocks:
            if self.checkpointed and torch.is_grad_enabled():
                # Keep only the block's input; run it again during backward.
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return x
# --8<-- [end:checkpointed]


# --8<-- [start:train_step]
def make(checkpointed=False, dtype=torch.float32, optimizer="adam", seed=0):
    """A model, its optimizer and a batch: the same weights for the same seed."""
    torch.manual_seed(seed)
    model = Model(checkpointed=checkpointed).to(device, dtype)
    optimizers = {"adam": lambda p: torch.optim.Adam(p, lr=1e-4),
                  "sgd": lambda p: torch.optim.SGD(p, lr=1e-2),
                  "sgd_momentum": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9)}
    x = torch.randn(TOKENS, WIDTH, device=device, dtype=dtype)
    return model, optimizers[optimizer](model.parameters()), x


def accumulate_gradients(model, x, micro_batches=1):
    """Backward over equal chunks of x: the gradient of the whole batch's mean loss."""
    for chunk in x.chunk(micro_batches):
        loss = model(chunk).square().mean() / micro_batches
        loss.backward()  # adds into .grad; this chunk's activations are freed


def train_step(model, optimizer, x, micro_batches=1):
    accumulate_gradients(model, x, micro_batches)
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
# --8<-- [end:optimizer_state]


if __name__ == "__main__":
    # --8<-- [start:main]
    model, optimizer, x = make()
    train_step(model, optimizer, x)  # the first step creates Adam's state
    print(f"{TOKENS} tokens on {device}: "
          f"parameters {parameter_bytes(model) / 2**20:.0f} MiB, "
          f"Adam state {state_bytes(optimizer) / 2**20:.0f} MiB, activations saved "
          f"for backward {saved_bytes(model, x) / 2**20:.0f} MiB")
    if device.type == "cuda":
        for checkpointed in (False, True):
            model, optimizer, x = make(checkpointed=checkpointed)
            train_step(model, optimizer, x)
            peak = peak_bytes(train_step, model, optimizer, x)
            print(f"checkpointed={checkpointed}: peak {peak / 2**20:.0f} MiB")
    else:
        print("peak memory: needs a CUDA GPU (CPU memory has no allocator counters)")
    # --8<-- [end:main]
