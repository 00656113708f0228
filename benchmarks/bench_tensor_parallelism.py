"""Benchmarks behind docs/several-gpus/tensor-parallelism.md: forward and backward of one
transformer block, whole on one GPU and split over 2 and 4 GPUs by tensor parallelism, with and
without sequence parallelism.

Needs two GPUs; the 4-GPU points need four. This process is rank 0 on GPU 0 (benchmarks/ranks.py).
The block: width 4096, 32 heads, an MLP of 16384, bf16 weights, 4 sequences of 2048 tokens (about
201 million weights in its six projections). `flops` counts one GPU's share of the projections'
products (6 per weight per token), not attention's own two products, so TFLOP/s is a floor.
`host_ms`: the time the host takes to issue one step, the GPU idle at the start and not waited
for at the end (each rank's median of 5; the larger rank's): near the step's median, the GPUs
wait for the host. Budget on four H200s: ~6 s to start each of two groups of ranks, ~10 s of
steps.
"""

import time

import pytest
import torch
from torch.distributed.device_mesh import init_device_mesh

from benchmarks import ranks as several
from snippets.several_gpus import scaling
from snippets.several_gpus import tensor_parallelism as tp

pytestmark = pytest.mark.snippet("snippets/several_gpus/tensor_parallelism.py",
                                 "snippets/several_gpus/scaling.py",
                                 "benchmarks/ranks.py", "benchmarks/two_ranks.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {"step": "{plan} on {gpus} GPUs: forward and backward of the block, {tokens} tokens",
          "step[one-1gpu]": "The whole block on one GPU: forward and backward, {tokens} tokens"}
WORDS = {"tp": "Tensor parallel", "sp": "Tensor + sequence parallel"}

DIM, HEADS, HIDDEN, BATCH, SEQ = 4096, 32, 16384, 4, 2048
GiB = 2**30

_state = {}  # this rank's block and input


def prepare(plan, gpus):
    """This rank's block (split by `plan` over `gpus` ranks) and input; one step to warm up.
    Returns the FLOPs of this GPU's share of the projections."""
    device = torch.device("cuda", 0) if plan == "one" else several.device()
    torch.manual_seed(0)
    with torch.device(device):
        block = tp.Block(DIM, HEADS, HIDDEN).to(torch.bfloat16)
        x = torch.randn(BATCH, SEQ, DIM, dtype=torch.bfloat16)
    flops = scaling.matmul_flops(block, BATCH * SEQ) // gpus
    if plan != "one":
        mesh = init_device_mesh("cuda", (gpus,), mesh_dim_names=("tp",))
        block = {"tp": tp.tensor_parallel, "sp": tp.sequence_parallel}[plan](block, mesh)
    if plan == "sp":  # this rank's slice of the sequence
        x = x.chunk(gpus, dim=1)[mesh.get_local_rank()].contiguous()
    _state.update(device=device, block=block, x=x)
    step()
    torch.cuda.reset_peak_memory_stats(device)
    return flops


def step():
    _state["block"].zero_grad(set_to_none=True)
    _state["block"](_state["x"]).sum().backward()
    torch.cuda.synchronize(_state["device"])


def host_ms(repeats=5):
    """This rank: the median time the host takes to issue a step's forward and backward
    passes, starting with the GPU idle and not waiting for it at the end."""
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize(_state["device"])
        started = time.perf_counter()
        _state["block"].zero_grad(set_to_none=True)
        _state["block"](_state["x"]).sum().backward()
        times.append(time.perf_counter() - started)
    torch.cuda.synchronize(_state["device"])
    return sorted(times)[len(times) // 2] * 1e3


def everyones_host_ms():
    return several.everyones(host_ms())


def peak_and_release():
    peak = torch.cuda.max_memory_allocated(_state["device"]) / GiB
    _state.clear()
    torch.cuda.empty_cache()
    return peak


def everyones_peak_and_release():
    return several.everyones(peak_and_release())


@pytest.fixture(scope="module")
def worlds():
    """`worlds(n)`: a process group of n ranks, one per GPU; a new one when n changes."""
    with several.Worlds() as get:
        yield get


FOUR = pytest.mark.gpus(4)
POINTS = [("one", 1), ("tp", 2), ("sp", 2), ("tp", 4), ("sp", 4)]


@pytest.mark.parametrize(("plan", "gpus"), [
    pytest.param(plan, n, marks=[FOUR] if n == 4 else [],
                 id=f"{plan}-{n}gpu{'s' if n > 1 else ''}") for plan, n in POINTS])
def bench_step(benchmark, worlds, plan, gpus):
    """Strong scaling of one block: the same tokens, its weights split over n GPUs."""
    if plan == "one":
        flops = prepare(plan, 1)
        # plain benchmark: the baseline of the n-rank steps below, timed the same way
        benchmark.pedantic(step, setup=torch.cuda.synchronize, rounds=12, warmup_rounds=2)
        hosts = [host_ms()]
        peaks = [peak_and_release()]
    else:
        world = worlds(gpus)
        flops = world.call(prepare, plan, gpus)
        # plain benchmark: n ranks; world.announcer starts each round on the other ranks too
        benchmark.pedantic(step, setup=world.announcer(step), rounds=12, warmup_rounds=2)
        hosts = world.call(everyones_host_ms)
        peaks = world.call(everyones_peak_and_release)
    benchmark.extra_info.update(plan=plan, gpus=gpus, tokens=BATCH * SEQ, flops=flops,
                                activation_mib=BATCH * SEQ * DIM * 2 / 2**20,
                                peak_gib_per_gpu=max(peaks), host_ms=max(hosts))
