"""A complete small training loop on the GPU: data, model, optimizer, loss, accuracy.

Run it anywhere: python -m snippets.first_steps.training_loop
(it trains on the GPU where there is one, on the CPU otherwise)
"""

GPUS_NEEDED = 0  # picks CUDA at run time; every line also runs on a CPU-only machine

# --8<-- [start:training_loop]
import math

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def spirals(n, generator):
    """Two interleaved spirals in the plane: n points, each labelled 0 or 1."""
    angle = torch.rand(n, generator=generator) * 3 * math.pi
    label = torch.randint(0, 2, (n,), generator=generator)
    side = (2 * label - 1).unsqueeze(1)                 # +1 or -1: which spiral
    radius = (angle / (3 * math.pi)).unsqueeze(1)
    points = side * radius * torch.stack([angle.cos(), angle.sin()], dim=1)
    return points + 0.02 * torch.randn(n, 2, generator=generator), label


def train(steps=600, batch=256, log_every=100, seed=0):
    """Fit a small network to the spirals on `device`: logged losses, accuracy."""
    torch.manual_seed(seed)                             # every device's generator
    points, labels = spirals(8192, torch.Generator().manual_seed(seed))
    points, labels = points.to(device), labels.to(device)  # the data set, moved once
    net = torch.nn.Sequential(
        torch.nn.Linear(2, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 2),
    ).to(device)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2)
    logged = []
    for step in range(steps):
        pick = torch.randint(0, len(points), (batch,), device=device)  # a random batch
        loss = torch.nn.functional.cross_entropy(net(points[pick]), labels[pick])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % log_every == 0 or step == steps - 1:
            logged.append((step, loss.item()))
    with torch.no_grad():
        accuracy = (net(points).argmax(dim=1) == labels).float().mean().item()
    return logged, accuracy
# --8<-- [end:training_loop]


# --8<-- [start:run_training]
logged, accuracy = train()
for step, value in logged:
    print(f"step {step:4d}  loss {value:.4f}")
print(f"accuracy on {device.type}: {accuracy:.1%}")
# --8<-- [end:run_training]
