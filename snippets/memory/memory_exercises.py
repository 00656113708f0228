"""Exercises on GPU memory: predict a model's training memory, fit a batch that does not fit,
and evaluate without keeping a graph.

Run it anywhere: python -m snippets.memory.memory_exercises
(on a CPU the first exercise counts tensors; on a GPU it reads the allocator too)
"""

GPUS_NEEDED = 0  # picks CUDA at run time; every check also holds on the CPU

# --8<-- [start:setup]
import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def make_model(width=1024, depth=4, outputs=None):
    """`depth` linear layers of width x width with ReLUs between them; the last
    one gives `outputs` numbers per row (`width` if None)."""
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    if outputs is not None:
        layers[-2] = nn.Linear(width, outputs)
    return nn.Sequential(*layers[:-1]).to(device)


def tensor_bytes(tensors):
    """The bytes the data of these tensors takes (None entries count nothing)."""
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)
# --8<-- [end:setup]


# --8<-- [start:adam_task]
# Exercise 1: before running it, predict the bytes this training state holds
# once the optimizer has stepped: weights, gradients and Adam's state.
model = make_model()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
parameters = sum(p.numel() for p in model.parameters())
print(f"{parameters:,} float32 parameters")
predicted_bytes = ...  # your prediction, from `parameters`
# --8<-- [end:adam_task]


# --8<-- [start:adam_solution]
# Four float32 numbers per parameter: the weight, its gradient, and Adam's two
# running averages (exp_avg and exp_avg_sq), each as large as the weight.
predicted_bytes = parameters * 4 * 4


def training_state_bytes(model, optimizer):
    """Count them: every parameter, its gradient and the optimizer's tensors."""
    weights = tensor_bytes(model.parameters())
    grads = tensor_bytes(p.grad for p in model.parameters())
    state = tensor_bytes(t for s in optimizer.state.values() for t in s.values()
                         if t.dim() > 0)  # Adam's `step` counters are scalars
    return weights + grads + state


def one_step(model, optimizer, batch):
    loss = model(batch).square().mean()
    loss.backward()
    optimizer.step()  # gradients stay until the next zero_grad()


one_step(model, optimizer, torch.randn(64, 1024, device=device))
counted = training_state_bytes(model, optimizer)
print(f"predicted {predicted_bytes / 2**20:.1f} MiB, counted {counted / 2**20:.1f} MiB")
# --8<-- [end:adam_solution]


# --8<-- [start:adam_measure]
def allocated_by_training_state(batch):
    """What the CUDA allocator holds after one step, beyond what it held before."""
    warm = make_model(width=64, depth=2)  # cuBLAS's workspaces, allocated on first
    warm(torch.ones(8, 64, device=device)).sum().backward()  # use, are not the model's
    del warm
    before = torch.cuda.memory_allocated()
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    one_step(model, optimizer, batch)
    return torch.cuda.memory_allocated() - before  # the model's tensors, still alive


if device.type == "cuda":
    batch = torch.randn(64, 1024, device=device)  # allocated before `before`
    measured = allocated_by_training_state(batch)
    print(f"torch.cuda.memory_allocated grew by {measured / 2**20:.1f} MiB")
# --8<-- [end:adam_measure]


# --8<-- [start:accumulate_task]
# Exercise 2: a batch of 64 does not fit on the GPU; 16 rows do. Write
# accumulated_gradients(model, inputs, targets, micro_batches=4): the gradients
# of the whole batch's mean loss, running the model on 16 rows at a time.
def full_batch_gradients(model, inputs, targets):
    model.zero_grad(set_to_none=True)
    F.mse_loss(model(inputs), targets).backward()
    return [p.grad.clone() for p in model.parameters()]


small = make_model(width=64, depth=3)
inputs = torch.randn(64, 64, device=device)
targets = torch.randn(64, 64, device=device)
# --8<-- [end:accumulate_task]


# --8<-- [start:accumulate_solution]
def accumulated_gradients(model, inputs, targets, micro_batches=4):
    model.zero_grad(set_to_none=True)
    for x, y in zip(inputs.chunk(micro_batches), targets.chunk(micro_batches),
                    strict=True):
        # backward() adds into .grad: weigh each micro-batch's mean by its share of
        # the rows, so the sum is the mean over the batch (chunks can be unequal:
        # 5 rows in 4 chunks are 2, 2 and 1)
        (F.mse_loss(model(x), y) * (len(x) / len(inputs))).backward()
    return [p.grad.clone() for p in model.parameters()]


full = full_batch_gradients(small, inputs, targets)
pieces = accumulated_gradients(small, inputs, targets)
gap = max((a - b).abs().max().item() for a, b in zip(full, pieces, strict=True))
print(f"largest difference from the full batch's gradients: {gap:.1e}")
# --8<-- [end:accumulate_solution]


# --8<-- [start:evaluate_task]
# Exercise 3: this evaluation keeps every batch's outputs (10 class scores per
# row) until the end. Why does its peak memory grow far faster with the number
# of batches than the outputs alone would make it, and what fixes it?
def evaluate(model, batches):
    outputs = [model(x) for x in batches]
    return torch.cat(outputs).argmax(dim=1)


classifier = make_model(width=64, depth=3, outputs=10)
batches = [torch.randn(256, 64, device=device) for _ in range(8)]
# --8<-- [end:evaluate_task]


# --8<-- [start:evaluate_solution]
@torch.inference_mode()  # no graph: no activations saved for a backward pass
def evaluate_without_graph(model, batches):
    model.eval()  # dropout off, batch norm's running statistics: none here, but
    outputs = [model(x) for x in batches]  # an evaluation should say it is one
    return torch.cat(outputs).argmax(dim=1)


kept = evaluate(classifier, batches)
without_graph = evaluate_without_graph(classifier, batches)
print("same predictions:", torch.equal(kept, without_graph))
# --8<-- [end:evaluate_solution]
