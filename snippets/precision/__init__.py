"""Chapter: precision: Tensor Cores, reduced precision, mixed-precision training, fp8, layouts."""
