"""Exercises: three slow training setups to fix, and a float32 loop to turn into mixed precision.

Run it anywhere: python -m snippets.precision.exercises
(on a CPU every setup is scaled down; the fixes and their checks are the same)
"""

GPUS_NEEDED = 0  # picks CUDA at run time; the before/after timings are measured on a GPU

# --8<-- [start:setup]
import os
import random
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
BIG = device.type == "cuda"  # full size on a GPU, a toy version on a CPU


def sync():
    if device.type == "cuda":
        torch.cuda.synchronize()


def median_seconds(fn, *args, repeats=5, warmup=2):
    """Median time of fn(*args), with the GPU drained before and after every call."""
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn(*args)
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
# --8<-- [end:setup]


# --8<-- [start:a_before]
# Exercise 1: a classifier for tabular data. What keeps it off the Tensor Cores?
FEATURES, CLASSES = 1024, 16
ROWS = 32768 if BIG else 256
table = torch.randn(ROWS, FEATURES, device=device)  # the whole dataset, on the GPU
labels = torch.randint(CLASSES, (ROWS,), device=device)


def make_mlp(hidden):
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(FEATURES, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, CLASSES)).to(device)


def mlp_step_before(model, optimizer):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(table), labels)
    loss.backward()
    optimizer.step()
    return loss.detach()


mlp_before = make_mlp(hidden=4095 if BIG else 63)
# --8<-- [end:a_before]


# --8<-- [start:a_after]
def mlp_step_after(model, optimizer):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=torch.bfloat16):  # products on Tensor Cores
        loss = F.cross_entropy(model(table), labels)
    loss.backward()
    optimizer.step()
    return loss.detach()


mlp_after = make_mlp(hidden=4096 if BIG else 64)  # a multiple of 64
# --8<-- [end:a_after]


# --8<-- [start:b_before]
# Exercise 2: images produced by a transform that costs CPU time. Where does it wait?
SIDE = 64 if BIG else 16  # images are 3 x SIDE x SIDE


class Augmented(Dataset):
    """Each image costs milliseconds of Python on a server core, as decoding and
    augmenting a real image does."""

    def __init__(self, count):
        self.count = count

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        rng = random.Random(index)  # item `index` is the same in every process
        pixels = [rng.random() for _ in range(3 * SIDE * SIDE)]  # the "decoding"
        return torch.tensor(pixels).view(3, SIDE, SIDE), index % CLASSES


def make_cnn():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, CLASSES)).to(device)


def cnn_epoch(model, optimizer, loader, non_blocking=False):
    for images, targets in loader:
        images = images.to(device, non_blocking=non_blocking)
        targets = targets.to(device, non_blocking=non_blocking)
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(images), targets).backward()
        optimizer.step()


dataset = Augmented(512 if BIG else 64)
loader_before = DataLoader(dataset, batch_size=64, shuffle=True,
                           generator=torch.Generator().manual_seed(0))
# --8<-- [end:b_before]


# --8<-- [start:b_after]
workers = min(4, os.cpu_count())
loader_after = DataLoader(
    dataset, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0),
    num_workers=workers,               # the transform runs in parallel processes
    persistent_workers=True,           # started once, not every epoch
    pin_memory=device.type == "cuda",  # batches arrive page-locked...
)
# ...so cnn_epoch(model, optimizer, loader_after, non_blocking=True) copies them
# asynchronously, while the GPU still works on the previous batch.
# --8<-- [end:b_after]


# --8<-- [start:c_before]
# Exercise 3: a next-token model with GPT-2's vocabulary. Which sizes hurt?
VOCAB = 50257  # the tokenizer's size, and an odd number
TOKENS = 16384 if BIG else 64  # tokens per batch


class TokenModel(nn.Module):
    def __init__(self, vocab, width):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(vocab, width)
        self.mlp = nn.Sequential(nn.Linear(width, width), nn.GELU())
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        return self.head(self.mlp(self.embed(tokens)))


def token_step_before(model, optimizer, tokens, targets):
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(tokens), targets)
    loss.backward()
    optimizer.step()
    return loss.detach()


g = torch.Generator().manual_seed(0)
tokens = torch.randint(VOCAB, (TOKENS,), generator=g).to(device)
targets = torch.randint(VOCAB, (TOKENS,), generator=g).to(device)
token_model_before = TokenModel(VOCAB, width=1000 if BIG else 40).to(device)
# --8<-- [end:c_before]


# --8<-- [start:c_after]
PADDED_VOCAB = (VOCAB + 63) // 64 * 64  # 50304: rows no token will ever use


def token_step_after(model, optimizer, tokens, targets):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=torch.bfloat16):
        logits = model(tokens)[:, :VOCAB]  # the padded classes never enter the loss
        loss = F.cross_entropy(logits, targets)
    loss.backward()
    optimizer.step()
    return loss.detach()


token_model_after = TokenModel(PADDED_VOCAB, width=1024 if BIG else 64).to(device)
# --8<-- [end:c_after]


# --8<-- [start:loop_before]
# Exercise 4: make this loop mixed precision (fp16), keeping what it does.
def train_fp32(model, optimizer, batches, max_norm=1.0):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def make_problem(steps=20, width=4096 if BIG else 64, batch=16384 if BIG else 64):
    """A model, its SGD optimizer and `steps` batches of a learnable synthetic task,
    large enough on a GPU that the GPU, not Python, sets the pace of every step."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(width, width), nn.GELU(),
                          nn.Linear(width, width), nn.GELU(),
                          nn.Linear(width, CLASSES)).to(device)
    # fused: one kernel updates every weight, and checks for inf there, not on the host
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9,
                                fused=device.type == "cuda")
    teacher = torch.randn(width, CLASSES, device=device)  # labels: a fixed linear rule
    data = [(x, (x @ teacher).argmax(1))
            for x in torch.randn(4, batch, width, device=device)]
    return model, optimizer, [data[i % 4] for i in range(steps)]  # four batches, cycled
# --8<-- [end:loop_before]


# --8<-- [start:loop_after]
def train_mixed(model, optimizer, batches, max_norm=1.0, dtype=torch.float16):
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype):  # forward and loss only
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()  # scaled, so small fp16 gradients survive
        scaler.unscale_(optimizer)     # true gradients again...
        nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # ...before clipping
        scaler.step(optimizer)         # skipped when a gradient is inf or NaN
        scaler.update()
        losses.append(loss.detach())
    return torch.stack(losses), scaler  # save scaler.state_dict() with checkpoints
# --8<-- [end:loop_after]


if __name__ == "__main__":
    # --8<-- [start:main]
    def sgd(model):
        return torch.optim.SGD(model.parameters(), lr=0.01)

    for name, step, model in (("1 before", mlp_step_before, mlp_before),
                              ("1 after", mlp_step_after, mlp_after)):
        print(f"exercise {name}: {median_seconds(step, model, sgd(model)) * 1e3:.1f} ms")
    for name, loader, non_blocking in (("2 before", loader_before, False),
                                       ("2 after", loader_after, True)):
        model = make_cnn()
        seconds = median_seconds(cnn_epoch, model, sgd(model), loader, non_blocking)
        print(f"exercise {name}: {seconds * 1e3:.1f} ms per epoch")
    for name, step, model in (("3 before", token_step_before, token_model_before),
                              ("3 after", token_step_after, token_model_after)):
        seconds = median_seconds(step, model, sgd(model), tokens, targets)
        print(f"exercise {name}: {seconds * 1e3:.1f} ms")
    fp32 = train_fp32(*make_problem())
    mixed, scaler = train_mixed(*make_problem())
    gap = ((mixed - fp32).abs() / fp32).max()
    print(f"exercise 4: fp32 loss {fp32[0]:.3f} -> {fp32[-1]:.3f}; fp16 "
          f"{mixed[0]:.3f} -> {mixed[-1]:.3f}; largest gap {gap:.2%}, "
          f"scale {scaler.get_scale()}")
    # --8<-- [end:main]
