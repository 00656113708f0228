"""train_single.py: the same training on one GPU, without DDP: what train.py started from.

Run it:
    python train_single.py --epochs 3 --checkpoint ckpt.pt

(In this repository: python -m snippets.several_gpus.ddp_with_torchrun_single.)
"""

GPUS_NEEDED = 0  # the GPU where there is one, the CPU otherwise

# --8<-- [start:script]
import os

import torch


def start():
    """This process's device: the GPU where there is one."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


from torch.utils.data import DataLoader, TensorDataset


def make_dataset(n=4096, features=32, seed=0):
    """Synthetic regression data, made from a seed."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    y = x @ torch.randn(features, 1, generator=g) + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


def make_loader(dataset, batch_size, seed=0):
    """The whole dataset, in a new order every epoch."""
    order = torch.Generator().manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=order,
                      drop_last=True, pin_memory=torch.cuda.is_available())


from torch import nn


def make_model(features=32, width=256, depth=4):
    """A plain MLP; any nn.Module works the same way."""
    layers = []
    for i in range(depth):
        layers += [nn.Linear(features if i == 0 else width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 1))


def forward_backward(model, x, y, scale=1.0):
    """Loss of one batch; its gradient, times `scale`, is added to .grad."""
    on_gpu = x.device.type == "cuda"
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=on_gpu):
        loss = nn.functional.mse_loss(model(x), y)
    (loss * scale).backward()
    return loss.detach()


def train_epoch(model, loader, optimizer, device, accumulate=1):
    """One pass over the data: a step every `accumulate` batches."""
    model.train()
    optimizer.zero_grad(set_to_none=True)
    total = torch.zeros((), device=device)
    for i, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        step_now = (i + 1) % accumulate == 0
        total += forward_backward(model, x, y, scale=1 / accumulate)
        if step_now:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    return total.item() / len(loader)


def save_checkpoint(path, model, optimizer, epoch):
    """Write the file under another name first, then rename it."""
    state = {"model": model.state_dict(),
             "optimizer": optimizer.state_dict(), "epoch": epoch}
    torch.save(state, f"{path}.tmp")
    os.replace(f"{path}.tmp", path)  # a crash never leaves half a checkpoint


def load_checkpoint(path, model, optimizer, device):
    """Read the file onto this device; returns the next epoch."""
    state = torch.load(path, map_location=device, weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["epoch"] + 1


def stop_requested(path):
    """True once a file `<checkpoint>.stop` exists: a job script makes it when its
    time limit is near."""
    return bool(path) and os.path.exists(f"{path}.stop")


import argparse


def train(args, device):
    torch.manual_seed(0)
    model = make_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = make_loader(make_dataset(), args.batch_size)
    first = 0
    if args.checkpoint and os.path.exists(args.checkpoint):
        first = load_checkpoint(args.checkpoint, model, optimizer, device)
        print(f"resumed from {args.checkpoint} at epoch {first}", flush=True)
    for epoch in range(first, args.epochs):
        loss = train_epoch(model, loader, optimizer, device, args.accumulate)
        if args.checkpoint:
            save_checkpoint(args.checkpoint, model, optimizer, epoch)
        print(f"epoch {epoch}: loss {loss:.4f} ({device.type})", flush=True)
        if stop_requested(args.checkpoint):  # saved above: safe to stop here
            print(f"stopping after epoch {epoch}, as asked", flush=True)
            break


def main(argv=None):
    parser = argparse.ArgumentParser(description="training on one GPU")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--accumulate", type=int, default=1, help="batches per step")
    parser.add_argument("--checkpoint", help="save here every epoch; resume from it")
    args, _ = parser.parse_known_args(argv)  # known ones only: a notebook adds its own

    train(args, start())


if __name__ == "__main__":
    main()
# --8<-- [end:script]
