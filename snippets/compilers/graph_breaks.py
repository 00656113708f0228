"""Graph breaks: replace with one line on what the page teaches.

Run it: python -m snippets.compilers.graph_breaks
"""

GPUS_NEEDED = 0  # 0: runs anywhere, uses CUDA when present; 1: needs CUDA; 2: needs two GPUs

# --8<-- [start:example]
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def scaled_sum(n, scale=2.0):
    """Replace with the code the page teaches: here, a sum computed on `device`."""
    x = torch.arange(n, device=device, dtype=torch.float32)
    return (scale * x).sum().item()
# --8<-- [end:example]


if __name__ == "__main__":
    print(f"scaled_sum(1000) on {device}: {scaled_sum(1000)}")
