"""Bytes per GPU of train.py's model under DDP and under FSDP2, counted from its parameters.

Run it: python -m snippets.several_gpus.ddp_with_torchrun_memory
"""

GPUS_NEEDED = 0  # counts parameters: no GPU needed

# The page shows make_model (train.py's model section) just before this module's section.
from snippets.several_gpus.ddp_with_torchrun import make_model  # noqa: E402

# --8<-- [start:bytes]
# Kept between steps, per parameter, training in float32 (or bf16 autocast) with AdamW
BYTES_PER_PARAMETER = {"parameters": 4, "gradients": 4, "AdamW's two moments": 8}


def bytes_per_gpu(model, gpus):
    """What each GPU keeps between steps, part by part: DDP, every part whole plus
    its gradient buckets (a second copy of the gradients); FSDP2, 1/gpus of each."""
    n = sum(p.numel() for p in model.parameters())
    ddp = {part: n * size for part, size in BYTES_PER_PARAMETER.items()}
    ddp["DDP's gradient buckets"] = n * BYTES_PER_PARAMETER["gradients"]
    fsdp2 = {part: n * size / gpus for part, size in BYTES_PER_PARAMETER.items()}
    return ddp, fsdp2


model = make_model()
print(f"{sum(p.numel() for p in model.parameters()):,} parameters")
for gpus in (2, 8):
    ddp, fsdp2 = bytes_per_gpu(model, gpus)
    print(f"on {gpus} GPUs, each keeps: DDP {sum(ddp.values()) / 2**20:.2f} MiB, "
          f"FSDP2 {sum(fsdp2.values()) / 2**20:.2f} MiB")
# --8<-- [end:bytes]
