"""Tensor parallelism with DTensor: one transformer block whose weights are split across GPUs.

Run it (from the repository root):
    torchrun --standalone --nproc-per-node 4 -m snippets.several_gpus.tensor_parallelism
    python -m snippets.several_gpus.tensor_parallelism   # one process: a mesh of one
NCCL where every process has a GPU, gloo on CPU processes otherwise. Every rank checks that the
split block computes what the whole block computes, and prints what it holds and sends.
"""

GPUS_NEEDED = 0  # one GPU per process where there are enough; gloo on CPU processes otherwise

# --8<-- [start:block]
import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.head_dim = dim // heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        batch, seq, _ = x.shape
        # -1 heads, not `heads`: under tensor parallelism each rank has only its share
        q, k, v = (proj(x).view(batch, seq, -1, self.head_dim).transpose(1, 2)
                   for proj in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(batch, seq, -1))


class MLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    """A pre-norm transformer block: attention, then an MLP, each with a residual."""

    def __init__(self, dim=256, heads=8, hidden=1024):
        super().__init__()
        self.attn_norm, self.attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.mlp_norm, self.mlp = nn.LayerNorm(dim), MLP(dim, hidden)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))
# --8<-- [end:block]


# --8<-- [start:mesh]
import os

import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh


def start_mesh(shape=None, names=("tp",)):
    """Join torchrun's process group and arrange its processes in a mesh.

    Without torchrun (python script.py, a notebook) the mesh is one process.
    Returns (mesh, device): a GPU per process with NCCL, else the CPU with gloo.
    """
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    per_machine = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if torch.cuda.device_count() >= per_machine:  # a GPU for every local process
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend, device_id = "nccl", device
    else:
        device, backend, device_id = torch.device("cpu"), "gloo", None
    if "RANK" in os.environ:  # started by torchrun: it says where to meet the others
        dist.init_process_group(backend, device_id=device_id)
    else:  # alone: a group of one, in memory
        dist.init_process_group(backend, store=dist.HashStore(), rank=0,
                                world_size=1, device_id=device_id)
    shape = shape or (dist.get_world_size(),)
    return init_device_mesh(device.type, shape, mesh_dim_names=names), device
# --8<-- [end:mesh]


# --8<-- [start:dtensor]
from torch.distributed.tensor import Replicate, Shard, distribute_tensor


def dtensor_tour(mesh):
    """One global 8 x 4 matrix, laid out three ways over the mesh's ranks."""
    full = torch.arange(32.0, device=mesh.device_type).reshape(8, 4)
    rows = distribute_tensor(full, mesh, [Shard(0)])  # each rank: 8/n rows
    cols = distribute_tensor(full, mesh, [Shard(1)])  # each rank: 4/n columns
    replicated = distribute_tensor(full, mesh, [Replicate()])  # each rank: all of it
    total = (rows * 2).sum()  # ops on DTensors act on the global matrix
    return {"rows_local": tuple(rows.to_local().shape),
            "cols_local": tuple(cols.to_local().shape),
            "copy_local": tuple(replicated.to_local().shape),
            "global": tuple(rows.shape),
            "same_sum": total.full_tensor().item() == (full * 2).sum().item(),
            "rows_to_cols": torch.equal(rows.redistribute(mesh, [Shard(1)]).to_local(),
                                        cols.to_local())}
# --8<-- [end:dtensor]


# --8<-- [start:plan]
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


def tensor_parallel(block, mesh):
    """Megatron-style: q, k, v and up split by output feature (ColwiseParallel: rows
    of their weights), out and down by input feature (RowwiseParallel: columns).

    Each rank computes its heads and its slice of the hidden layer with no
    communication; the row-split layers add the ranks' partial outputs with one
    all-reduce each, so a block's forward pass sends two all-reduces of activations.
    The attention's input is made one replicated DTensor that q, k and v share, so
    backward adds their input gradients locally and all-reduces once (Megatron's
    f and g): two all-reduces backward too, not one per projection.
    """
    plan = {
        "attn": PrepareModuleInput(input_layouts=(Replicate(),),
                                   desired_input_layouts=(Replicate(),)),
        "attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(),
        "attn.v": ColwiseParallel(), "attn.out": RowwiseParallel(),
        "mlp.up": ColwiseParallel(), "mlp.down": RowwiseParallel(),
    }
    return parallelize_module(block, mesh, plan)


def sequence_parallel(block, mesh):
    """Tensor parallelism plus sequence parallelism for the norms and residuals.

    Between the split layers each rank keeps only its 1/n of the sequence: the
    all-reduce becomes a reduce-scatter (out, down) and an all-gather (before q,
    k, v and up), the same bytes, and the norms' activations take 1/n the memory.
    The block's input and output are each rank's slice of the sequence (dim 1).
    The norms' weight and bias gradients are left Partial (each rank's slice's
    share) and all-reduced when the optimizer reads them. SequenceParallel assumes
    the norms' weights start equal on every rank (ones, as here): it does not
    broadcast them.
    """
    gather_sequence = PrepareModuleInput(input_layouts=(Shard(1),),
                                         desired_input_layouts=(Replicate(),))
    plan = {
        "attn_norm": SequenceParallel(), "attn": gather_sequence,
        "attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(),
        "attn.v": ColwiseParallel(),
        "attn.out": RowwiseParallel(output_layouts=Shard(1)),
        "mlp_norm": SequenceParallel(), "mlp": gather_sequence,
        "mlp.up": ColwiseParallel(),
        "mlp.down": RowwiseParallel(output_layouts=Shard(1)),
    }
    return parallelize_module(block, mesh, plan)
# --8<-- [end:plan]


# --8<-- [start:holds]
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.debug import CommDebugMode


def what_this_rank_holds(block):
    """Each weight's shape on this rank, beside its global shape and placement."""
    held = {}
    for name, p in block.named_parameters():
        if isinstance(p, DTensor):
            local, placement = p.to_local(), str(p.placements[0])
            held[name] = (tuple(local.shape), tuple(p.shape), placement)
        else:
            held[name] = (tuple(p.shape), tuple(p.shape), "whole")
    return held


def what_a_step_sends(block, x):
    """Collectives of one forward pass, one backward pass and one optimizer step,
    counted by DTensor."""
    x = x.detach().requires_grad_()  # as in a model: the previous block's output
    # foreach=False: with tensor_parallel() the norms stay plain tensors beside
    # DTensors; on a GPU the optimizer defaults to one foreach op over all of
    # them, and DTensor refuses one that mixes the two
    optimizer = torch.optim.SGD(block.parameters(), lr=1e-3, foreach=False)
    with CommDebugMode() as forward:
        out = block(x)
    with CommDebugMode() as backward:
        out.sum().backward()
    with CommDebugMode() as step:  # Partial gradients are reduced here
        optimizer.step()
    return {phase: {str(op).split(".")[-1]: n
                    for op, n in mode.get_comm_counts().items()}
            for phase, mode in (("forward", forward), ("backward", backward),
                                ("optimizer", step))}


def activations_kept(block, x):
    """Bytes of activations autograd keeps on this rank for the backward pass of
    one forward pass: every tensor saved for backward, each storage once (q, k
    and v save one input), the weights left out."""
    def storage(t):
        return (t.to_local() if isinstance(t, DTensor) else t).untyped_storage()

    weights = {storage(p).data_ptr() for p in block.parameters()}
    kept = {}

    def pack(t):
        if storage(t).data_ptr() not in weights:
            kept[storage(t).data_ptr()] = storage(t).nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        block(x.detach().requires_grad_())
    return sum(kept.values())
# --8<-- [end:holds]


# --8<-- [start:check]
import copy


def close(a, b, tolerance=1e-4):
    """Equal up to rounding: the difference is tiny beside the tensor itself (the
    split sums in a different order, and GPU kernels differ by shape). This holds
    in fp32 with TF32 off, PyTorch's default for matrix products; with TF32 on,
    the tolerance must grow."""
    return bool((a - b).norm() <= tolerance * b.norm())


def compare_with_one_device(parallelize, mesh, device, sequence_split=False):
    """The split block's output and gradients against the whole block's, on this rank.

    Every rank builds the same block from the same seed; parallelize_module then
    keeps only this rank's shard of each weight (as rank 0 has it).
    """
    torch.manual_seed(0)
    whole = Block().to(device)
    split = parallelize(copy.deepcopy(whole), mesh)  # this rank's shards of them
    x = torch.randn(2, 16, 256, device=device)  # the same batch on every rank
    expected = whole(x)
    expected.sum().backward()
    rank, n = mesh.get_local_rank(), mesh.size()
    if sequence_split:  # this rank's slice of the sequence in, its slice out
        out, expected = split(x.chunk(n, dim=1)[rank]), expected.chunk(n, dim=1)[rank]
    else:
        out = split(x)
    out.sum().backward()
    # a sequence-split output's gradient on the other slices comes through the
    # collectives; summing out on every rank adds up the whole sequence's loss
    grads_equal = all(
        close(p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad,
              dict(whole.named_parameters())[name].grad)
        for name, p in split.named_parameters())
    return {"output_equal": close(out, expected), "grads_equal": grads_equal}
# --8<-- [end:check]


# --8<-- [start:two_d]
from torch.distributed.fsdp import fully_shard


def fsdp_and_tp(blocks, mesh_2d):
    """A 2-D mesh: tensor parallelism inside each row ("tp"), FSDP2 across rows ("dp").

    Ranks in one tp group split every weight of a block; the dp groups each hold
    a 1/dp shard of those splits and see different data.
    """
    for block in blocks:
        tensor_parallel(block, mesh_2d["tp"])
        fully_shard(block, mesh=mesh_2d["dp"])
    return fully_shard(blocks, mesh=mesh_2d["dp"])


def train_step_2d(mesh_2d, device, steps=2):
    """Two SGD steps of two blocks under FSDP2 + TP against the same on one device.

    Each dp group trains on its own part of the batch; FSDP2 averages gradients
    over dp, so the result equals one device training on the whole batch.
    """
    torch.manual_seed(0)
    whole = nn.Sequential(Block(), Block()).to(device)
    split = fsdp_and_tp(copy.deepcopy(whole), mesh_2d)
    batch = torch.randn(2 * mesh_2d["dp"].size(), 16, 256, device=device)
    mine = batch.chunk(mesh_2d["dp"].size())[mesh_2d["dp"].get_local_rank()]
    for model, x in ((whole, batch), (split, mine)):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(steps):
            optimizer.zero_grad()
            model(x).pow(2).mean().backward()
            optimizer.step()
    return all(close(p.full_tensor(), q)
               for p, q in zip(split.parameters(), whole.parameters(), strict=True))
# --8<-- [end:two_d]


if __name__ == "__main__":
    # --8<-- [start:main]
    import gc

    mesh, device = start_mesh()
    try:
        rank, n = dist.get_rank(), dist.get_world_size()
        tour = dtensor_tour(mesh)
        plain = compare_with_one_device(tensor_parallel, mesh, device)
        seq = compare_with_one_device(sequence_parallel, mesh, device,
                                      sequence_split=True)
        x = torch.randn(2, 16, 256, device=device)
        sends = what_a_step_sends(tensor_parallel(Block().to(device), mesh), x)
        mine = x.chunk(n, dim=1)[rank]  # this rank's slice of the sequence
        sends_seq = what_a_step_sends(sequence_parallel(Block().to(device), mesh), mine)
        held = what_this_rank_holds(tensor_parallel(Block().to(device), mesh))
        kept = {"one device": activations_kept(Block().to(device), x),
                "tensor parallel": activations_kept(
                    tensor_parallel(Block().to(device), mesh), x),
                "+ sequence parallel": activations_kept(
                    sequence_parallel(Block().to(device), mesh), mine.contiguous())}
        if n % 2 == 0:  # a 2-D mesh: n/2 data-parallel rows of 2 tensor-parallel ranks
            mesh_2d = init_device_mesh(device.type, (n // 2, 2),
                                       mesh_dim_names=("dp", "tp"))
            two_d = train_step_2d(mesh_2d, device)
        else:
            two_d = "needs an even number of processes"
        if rank == 0:
            print(f"{n} process(es), {device.type}, {dist.get_backend()}")
            print(f"DTensor layouts: {tour}")
            print(f"tensor parallel == one device: {plain}")
            print(f"sequence parallel == one device: {seq}")
            print(f"FSDP2 + TP on a 2-D mesh == one device: {two_d}")
            print(f"collectives, tensor parallel: {sends}")
            print(f"collectives, sequence parallel: {sends_seq}")
            print(f"activations kept for backward, bytes per rank: {kept}")
            for name in ("attn.q.weight", "attn.out.weight", "mlp.up.bias",
                         "mlp.down.bias", "attn_norm.weight"):
                local, whole, placement = held[name]
                print(f"  {name:18} holds {local} of {whole}: {placement}")
    finally:
        gc.collect()  # free reference cycles now, while Python is whole
        dist.destroy_process_group()
    # --8<-- [end:main]
