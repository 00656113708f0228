"""What every data-parallel scheme relies on: the gradient of a batch is the mean of the gradients
of its equal parts. And where that breaks: layers that look across the batch, such as BatchNorm.

Run it: python -m snippets.several_gpus.splitting_a_batch   (CPU or GPU)
"""

GPUS_NEEDED = 0  # plain arithmetic on one device

# --8<-- [start:chunks]
import torch
from torch import nn


def gradient(model, x, y):
    """Gradient of the mean squared error over (x, y), as one flat vector."""
    model.zero_grad(set_to_none=True)
    nn.functional.mse_loss(model(x), y).backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def mean_of_part_gradients(model, x, y, parts):
    """Split the batch into equal parts, as data parallelism does; average gradients."""
    grads = [gradient(model, xp, yp) for xp, yp in zip(x.chunk(parts), y.chunk(parts),
                                                        strict=True)]
    return torch.stack(grads).mean(dim=0)
# --8<-- [end:chunks]


# --8<-- [start:batchnorm]
def split_changes_outputs(model, x, parts):
    """Largest difference between the outputs for the whole batch and for its parts."""
    with torch.no_grad():
        whole = model(x)
        split = torch.cat([model(xp) for xp in x.chunk(parts)])
    return (whole - split).abs().max().item()
# --8<-- [end:batchnorm]


if __name__ == "__main__":
    # --8<-- [start:main]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    x, y = torch.randn(64, 16, device=device), torch.randn(64, 1, device=device)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    whole = gradient(mlp, x, y)
    parts = mean_of_part_gradients(mlp, x, y, parts=4)
    print(f"MLP: gradient of the batch vs mean over 4 parts: "
          f"max difference {(whole - parts).abs().max().item():.1e}")
    with_bn = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(),
                            nn.Linear(32, 1)).to(device)
    print(f"with BatchNorm, training mode: outputs differ by up to "
          f"{split_changes_outputs(with_bn, x, parts=4):.2f}")
    print(f"with BatchNorm, eval mode: outputs differ by up to "
          f"{split_changes_outputs(with_bn.eval(), x, parts=4):.1e}")
    # --8<-- [end:main]
