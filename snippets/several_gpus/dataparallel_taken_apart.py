"""nn.DataParallel, taken apart: replicate, scatter, parallel_apply and gather, written out and
shown equal to nn.DataParallel; and what each step costs GPU 0.

Run it: python -m snippets.several_gpus.dataparallel_taken_apart   (needs two GPUs)
"""

GPUS_NEEDED = 2  # DataParallel's pieces work only on CUDA devices, and show something with two

# --8<-- [start:setup]
import torch
from torch import nn
from torch.nn.parallel import gather, parallel_apply, replicate, scatter

devices = list(range(torch.cuda.device_count()))  # [0, 1] on a two-GPU machine
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10)).to("cuda:0")
x = torch.randn(256, 512, device="cuda:0")  # the whole batch starts on GPU 0
# --8<-- [end:setup]


# --8<-- [start:by_hand]
def data_parallel(model, x, devices, output_device=0):
    """What nn.DataParallel does in every forward call, step by step."""
    replicas = replicate(model, devices)  # parameters copied to every GPU, every call
    pieces = scatter(x, devices)          # the batch cut along dim 0, a piece per GPU
    # one Python thread per GPU, each running its replica on its piece
    outputs = parallel_apply(replicas[:len(pieces)], pieces)
    return gather(outputs, output_device)  # outputs copied to one GPU, concatenated
# --8<-- [end:by_hand]


# --8<-- [start:compare]
def same_as_data_parallel(model, x, devices):
    """The pieces by hand, nn.DataParallel and one GPU alone: the same outputs?"""
    by_hand = data_parallel(model, x, devices)
    wrapped = nn.DataParallel(model, device_ids=devices)(x)
    alone = model(x)
    return (torch.allclose(by_hand, wrapped, rtol=1e-5, atol=1e-6)
            and torch.allclose(wrapped, alone, rtol=1e-5, atol=1e-6))


def pieces_and_places(x, devices):
    """Where scatter puts the batch: (rows, device) of every piece."""
    return [(piece.shape[0], str(piece.device)) for piece in scatter(x, devices)]
# --8<-- [end:compare]


# --8<-- [start:backward]
def gradients_reach_the_original(model, x, devices):
    """Backward through DataParallel sums the replicas' gradients into `model`."""
    model.zero_grad(set_to_none=True)
    nn.DataParallel(model, device_ids=devices)(x).square().mean().backward()
    through_dp = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    model(x).square().mean().backward()  # the same loss on one GPU
    alone = [p.grad for p in model.parameters()]
    return all(torch.allclose(a, b, rtol=1e-4, atol=1e-6)
               for a, b in zip(through_dp, alone, strict=True))
# --8<-- [end:backward]


# --8<-- [start:train_step]
def train_step(dp_model, optimizer, x, y):
    """One DataParallel step: the loss is computed on GPU 0, from gathered outputs."""
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = nn.functional.mse_loss(dp_model(x), y)
    loss.backward()  # gradients of every replica are summed on GPU 0's parameters
    optimizer.step()  # only GPU 0 holds the optimizer state
    return loss.detach()


def peak_memory_per_gpu(fn, devices):
    """GiB each GPU held at its peak while fn() ran."""
    for d in devices:
        torch.cuda.synchronize(d)
        torch.cuda.reset_peak_memory_stats(d)
    fn()
    for d in devices:
        torch.cuda.synchronize(d)
    return [torch.cuda.max_memory_allocated(d) / 2**30 for d in devices]
# --8<-- [end:train_step]


if __name__ == "__main__":
    # --8<-- [start:main]
    print(f"scatter puts the batch here: {pieces_and_places(x, devices)}")
    same = same_as_data_parallel(model, x, devices)
    print(f"by hand == nn.DataParallel == one GPU: {same}")
    print(f"gradients summed into the original: "
          f"{gradients_reach_the_original(model, x, devices)}")
    dp_model = nn.DataParallel(model, device_ids=devices)
    optimizer = torch.optim.Adam(model.parameters())
    y = torch.randn(256, 10, device="cuda:0")
    train_step(dp_model, optimizer, x, y)  # the first step creates the optimizer state
    peaks = peak_memory_per_gpu(lambda: train_step(dp_model, optimizer, x, y), devices)
    for d, gib in zip(devices, peaks, strict=True):
        print(f"peak memory of GPU {d} in one step: {gib * 1024:.0f} MiB")
    # --8<-- [end:main]
