"""Step 9 of the case study: recipe 7 on every GPU of a torchrun job, under DDP.

Run it on two GPUs (gloo on the CPU without them):
    torchrun --standalone --nproc-per-node 2 -m snippets.case_studies.training_made_fast_ddp
"""

GPUS_NEEDED = 0  # one process per GPU under torchrun; gloo on the CPU where there is none

from snippets.case_studies.training_made_fast import (  # noqa: E402 (the page shows these)
    BATCH,
    LR,
    READ_EVERY,
    Batches,
    DataLoader,
    F,
    device,
    make_model,
    pad_vocab,
    torch,
    train,
)

# isort: split

# --8<-- [start:recipe_9]
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class RankBatches(Batches):
    """Rank r of w takes batches r, r + w, r + 2w, ...: each rank its own share."""

    def __getitem__(self, i):
        return super().__getitem__(i * dist.get_world_size() + dist.get_rank())


def recipe_9(seed=0, batch=BATCH):
    """Step 9: recipe 7 on every GPU, DDP averaging the gradients as they are made."""
    torch.backends.cuda.matmul.fp32_precision = "tf32"  # for the whole process
    model = pad_vocab(make_model(seed))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, fused=True)
    model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    model = torch.compile(model)  # compiles on the first step
    losses, pending = [], []
    loader = iter(DataLoader(RankBatches(seed, batch), batch_size=None, num_workers=4,
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
            mean = torch.stack(pending)
            dist.all_reduce(mean)  # the sum over ranks...
            losses.extend((mean / dist.get_world_size()).tolist())  # ...their mean
            pending.clear()

    return step, losses
# --8<-- [end:recipe_9]


if __name__ == "__main__":
    # --8<-- [start:launch]
    import os

    if device.type == "cuda":  # one GPU per process: torchrun says which
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if "RANK" in os.environ:  # started by torchrun
        dist.init_process_group(backend)
    else:  # started by plain python: a group of one process
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    losses = train(recipe_9, 2 * READ_EVERY)
    if dist.get_rank() == 0:
        print(f"{dist.get_world_size()} ranks: loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    dist.destroy_process_group()
    # --8<-- [end:launch]
