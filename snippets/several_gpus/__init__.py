"""Chapter: several GPUs (data parallel, sharded, model parallel; torchrun and Slurm)."""
