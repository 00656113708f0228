"""Chapter: first steps with PyTorch and CuPy on a GPU."""
