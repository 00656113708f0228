"""One model made fast, step by step: a small GPT-style training job taken from slow to
fast one change at a time. Each recipe_N is recipe_(N-1) with one change; every recipe
trains the same weights on the same batches, so their loss curves can be compared.

Run it anywhere: python -m snippets.case_studies.training_made_fast
(on a CPU the same code trains a much smaller model)
"""

GPUS_NEEDED = 0  # picks CUDA at run time; on a CPU the same recipes train a tiny model

# --8<-- [start:setup]
import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

if device.type == "cuda":  # GPT-2's vocabulary and width, four blocks
    SIZES = dict(vocab=50257, width=768, depth=4, heads=12, seq=512)
    BATCH = 8  # sequences per step
else:  # tiny on a CPU; the vocabulary is odd here too
    SIZES = dict(vocab=251, width=32, depth=2, heads=2, seq=16)
    BATCH = 4
LR = 3e-4
READ_EVERY = 10  # from step 2 on, the loss is read once every READ_EVERY steps
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
def make_batch(i, seed=0, batch=BATCH):
    """Batch i of the synthetic data: random tokens, each to be mapped to another by a
    fixed rule. The same batch whoever makes it, in whichever process."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + i)
    tokens = torch.randint(SIZES["vocab"], (batch, SIZES["seq"]), generator=g)
    targets = (5 * tokens + 3) % SIZES["vocab"]  # a permutation of the vocabulary
    return tokens, targets


def train(recipe, steps, **options):
    """The loss of each of `steps` steps of a recipe (a multiple of READ_EVERY)."""
    step, losses = recipe(**options)
    for i in range(steps):
        step(i)
    return losses
# --8<-- [end:data]


# --8<-- [start:flops]
def step_flops(batch, vocab, width, depth, heads, seq):
    """Model flops of one training step: 6 per weight of a matrix product and token
    (forward 2, backward 4), plus attention's two products of seq x seq per layer."""
    weights = depth * 12 * width * width + width * vocab  # qkv, proj, MLP; head
    tokens = batch * seq
    return 6 * weights * tokens + 12 * depth * batch * seq * seq * width
# --8<-- [end:flops]


# --8<-- [start:recipe_0]
def recipe_0(seed=0, batch=BATCH):
    """The slow start: batches made on the CPU in the loop, the loss read each step."""
    model = make_model(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    losses = []

    def step(i):
        tokens, targets = make_batch(i, seed, batch)
        tokens, targets = tokens.to(device), targets.to(device)
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())  # the host waits here for the GPU, every step

    return step, losses
# --8<-- [end:recipe_0]


# --8<-- [start:loader]
from torch.utils.data import DataLoader, Dataset


class Batches(Dataset):
    """The same batches as make_batch, made in DataLoader's worker processes."""

    def __init__(self, seed=0, batch=BATCH):
        self.seed, self.batch = seed, batch

    def __len__(self):
        return 10**9  # endless, for our purposes

    def __getitem__(self, i):
        return make_batch(i, self.seed, self.batch)
# --8<-- [end:loader]


# --8<-- [start:recipe_1]
def recipe_1(seed=0, batch=BATCH):
    """Step 1: batches made ahead by worker processes, in pinned memory, sent async."""
    model = make_model(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    losses = []
    loader = iter(DataLoader(Batches(seed, batch), batch_size=None, num_workers=4,
                             pin_memory=device.type == "cuda"))

    def step(i):
        tokens, targets = next(loader)
        tokens = tokens.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())  # the host waits here for the GPU, every step

    return step, losses
# --8<-- [end:recipe_1]


# --8<-- [start:recipe_2]
def recipe_2(seed=0, batch=BATCH):
    """Step 2: the loss read once every READ_EVERY steps."""
    model = make_model(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    losses, pending = [], []
    loader = iter(DataLoader(Batches(seed, batch), batch_size=None, num_workers=4,
                             pin_memory=device.type == "cuda"))

    def step(i):
        tokens, targets = next(loader)
        tokens = tokens.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        pending.append(loss.detach())  # stays on the GPU: nothing waits
        if (i + 1) % READ_EVERY == 0:
            losses.extend(torch.stack(pending).tolist())  # one wait per READ_EVERY
            pending.clear()

    return step, losses
# --8<-- [end:recipe_2]


# --8<-- [start:recipe_3]
def recipe_3(seed=0, batch=BATCH):
    """Step 3: float32 matrix products on TF32 Tensor Cores."""
    torch.backends.cuda.matmul.fp32_precision = "tf32"  # for the whole process
    model = make_model(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    losses, pending = [], []
    loader = iter(DataLoader(Batches(seed, batch), batch_size=None, num_workers=4,
                             pin_memory=device.type == "cuda"))

    def step(i):
        tokens, targets = next(loader)
        tokens = tokens.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        pending.append(loss.detach())  # stays on the GPU: nothing waits
        if (i + 1) % READ_EVERY == 0:
            losses.extend(torch.stack(pending).tolist())  # one wait per READ_EVERY
            pending.clear()

    return step, losses
# --8<-- [end:recipe_3]


# --8<-- [start:recipe_4]
def recipe_4(seed=0, batch=BATCH):
    """Step 4: the forward pass and the loss under bf16 autocast."""
    torch.backends.cuda.matmul.fp32_precision = "tf32"  # for the whole process
    model = make_model(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    losses, pending = [], []
    loader = iter(DataLoader(Batches(seed, batch), batch_size=None, num_workers=4,
                             pin_memory=device.type == "cuda"))

    def step(i):
        tokens, targets = next(loader)
        tokens = tokens.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = model(tokens)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        pending.append(loss.detach())  # stays on the GPU: nothing waits
        if (i + 1) % READ_EVERY == 0:
            losses.extend(torch.stack(pending).tolist())  # one wait per READ_EVERY
            pending.clear()

    return step, losses
# --8<-- [end:recipe_4]


# --8<-- [start:pad_vocab]
def pad_vocab(model, multiple=64):
    """The output layer widened to a multiple of `multiple` classes. The new classes
    have zero weights and a bias so low that softmax gives them exactly 0: the loss
    and every gradient stay what they were, and the new rows never change."""
    old = model.head
    vocab, width = old.weight.shape
    padded = -(-vocab // multiple) * multiple  # vocab rounded up
    head = nn.Linear(width, padded).to(old.weight.device)
    with torch.no_grad():
        head.weight.zero_()
        head.weight[:vocab] = old.weight
        head.bias.fill_(-1e4)  # exp(-1e4) is 0 in float32 and in bfloat16
        head.bias[:vocab] = old.bias
    model.head = head
    return model
# --8<-- [end:pad_vocab]


# --8<-- [start:recipe_5]
def recipe_5(seed=0, batch=BATCH):
    """Step 5: shapes: the vocabulary padded to a multiple of 64."""
    torch.backends.cuda.matmul.fp32_precision = "tf32"  # for the whole process
    model = pad_vocab(make_model(seed))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    losses, pending = [], []
    loader = iter(DataLoader(Batches(seed, batch), batch_size=None, num_workers=4,
                             pin_memory=device.type == "cuda"))

    def step(i):
        tokens, targets = next(loader)
        tokens = tokens.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = model(tokens)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        pending.append(loss.detach())  # stays on the GPU: nothing waits
        if (i + 1) % READ_EVERY == 0:
            losses.extend(torch.stack(pending).tolist())  # one wait per READ_EVERY
            pending.clear()

    return step, losses
# --8<-- [end:recipe_5]


# --8<-- [start:recipe_6]
def recipe_6(seed=0, batch=BATCH):
    """Step 6: AdamW's update of all parameters in one fused kernel."""
    torch.backends.cuda.matmul.fp32_precision = "tf32"  # for the whole process
    model = pad_vocab(make_model(seed))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, fused=True)
    losses, pending = [], []
    loader = iter(DataLoader(Batches(seed, batch), batch_size=None, num_workers=4,
                             pin_memory=device.type == "cuda"))

    def step(i):
        tokens, targets = next(loader)
        tokens = tokens.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = model(tokens)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        pending.append(loss.detach())  # stays on the GPU: nothing waits
        if (i + 1) % READ_EVERY == 0:
            losses.extend(torch.stack(pending).tolist())  # one wait per READ_EVERY
            pending.clear()

    return step, losses
# --8<-- [end:recipe_6]


# --8<-- [start:recipe_7]
def recipe_7(seed=0, batch=BATCH):
    """Step 7: the model compiled: fewer, fused kernels."""
    torch.backends.cuda.matmul.fp32_precision = "tf32"  # for the whole process
    model = pad_vocab(make_model(seed))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, fused=True)
    model = torch.compile(model)  # compiles on the first step
    losses, pending = [], []
    loader = iter(DataLoader(Batches(seed, batch), batch_size=None, num_workers=4,
                             pin_memory=device.type == "cuda"))

    def step(i):
        tokens, targets = next(loader)
        tokens = tokens.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = model(tokens)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        pending.append(loss.detach())  # stays on the GPU: nothing waits
        if (i + 1) % READ_EVERY == 0:
            losses.extend(torch.stack(pending).tolist())  # one wait per READ_EVERY
            pending.clear()

    return step, losses
# --8<-- [end:recipe_7]


# --8<-- [start:checkpointed]
from torch.utils.checkpoint import checkpoint


class Checkpointed(nn.Module):
    """A block whose activations are not kept: the backward pass computes them again."""

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)
# --8<-- [end:checkpointed]


# --8<-- [start:recipe_8]
def recipe_8(seed=0, batch=BATCH):
    """Step 8: activation checkpointing, block by block: less memory, more compute."""
    torch.backends.cuda.matmul.fp32_precision = "tf32"  # for the whole process
    model = pad_vocab(make_model(seed))
    model.blocks = nn.Sequential(*[Checkpointed(b) for b in model.blocks])
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, fused=True)
    model = torch.compile(model)  # compiles on the first step
    losses, pending = [], []
    loader = iter(DataLoader(Batches(seed, batch), batch_size=None, num_workers=4,
                             pin_memory=device.type == "cuda"))

    def step(i):
        tokens, targets = next(loader)
        tokens = tokens.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = model(tokens)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        pending.append(loss.detach())  # stays on the GPU: nothing waits
        if (i + 1) % READ_EVERY == 0:
            losses.extend(torch.stack(pending).tolist())  # one wait per READ_EVERY
            pending.clear()

    return step, losses
# --8<-- [end:recipe_8]


RECIPES = [recipe_0, recipe_1, recipe_2, recipe_3, recipe_4, recipe_5, recipe_6,
           recipe_7, recipe_8]


if __name__ == "__main__":
    # --8<-- [start:main]
    steps = 2 * READ_EVERY
    baseline = train(recipe_0, steps)
    print(f"step 0: loss {baseline[0]:.3f} -> {baseline[-1]:.3f}")
    for n, recipe in enumerate([recipe_1, recipe_2, recipe_3, recipe_4, recipe_5,
                                recipe_6, recipe_7, recipe_8], start=1):
        losses = train(recipe, steps)
        gap = max(abs(a - b) / b for a, b in zip(losses, baseline, strict=True))
        print(f"step {n}: loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
              f"largest gap to step 0 {gap:.2%}")
    # --8<-- [end:main]
