"""Benchmarks behind docs/several-gpus/scaling-to-four-gpus.md: the same training step on 1, 2 and
4 GPUs of one machine under DDP, FSDP2 and DataParallel; all-reduce bus bandwidth at 2 and 4 GPUs;
and the machine's bf16 matmul ceiling, the yardstick of model FLOPs utilisation.

Needs two GPUs; the 4-GPU points need four (`gpus(4)`), so a 2-GPU machine measures the rest.
This process is rank 0 on GPU 0 (benchmarks/ranks.py); followers are the other ranks. The workload
(snippets/several_gpus/scaling.py): an MLP of 8 layers of 4096 x 4096 and a head, about 134 million
parameters, bf16 autocast, Adam, 4096 or 16384 samples per GPU (weak scaling) and 16384 samples
split over the GPUs (strong scaling: 8192 per GPU on two, 4096 on four).
The composed layouts (`layouts`): a stack of 4 transformer blocks of width 4096 (about 805 million
parameters), fp32 parameters, bf16 autocast, Adam, a global batch of 8 sequences of 2048 tokens,
under FSDP2, TP, TP + SP on 2 and 4 GPUs, and FSDP2 + TP and HSDP on 2 x 2 GPUs.
Budget on four H200s: ~6 s to start each of four groups of ranks, ~30 s of steps, ~10 s of
all-reduces, ~30 s of composed layouts (on two H200s: about half of each).
"""

import functools

import pytest
import torch

from benchmarks import ranks as several
from snippets.precision import tensor_cores_and_shapes as precision
from snippets.several_gpus import all_reduce_bandwidth as all_reduce
from snippets.several_gpus import scaling

pytestmark = pytest.mark.snippet("snippets/several_gpus/scaling.py",
                                 "snippets/several_gpus/all_reduce_bandwidth.py",
                                 "benchmarks/ranks.py", "benchmarks/two_ranks.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "all_reduce": "All-reduce of {message_bytes} in bf16 over {gpus} GPUs (NCCL)",
    "step": "{layout} on {gpus} GPUs: a training step of {batch_per_gpu} samples per GPU",
    "step[one-1gpu-4096]": "One GPU alone: a training step of {batch_per_gpu} samples",
    "step[one-1gpu-16384]": "One GPU alone: a training step of {batch_per_gpu} samples",
    "matmul_ceiling": "The ceiling: an {n} × {n} product in bf16 on GPU 0",
    "layouts": "{layout} on {gpus} GPUs: a training step of the block stack",
    "layouts[one-1gpu]": "One GPU alone: a training step of the block stack",
}
# All-reduces of 4 MiB and less took 0.8-2.4 ms on two H200s, runs 1.3-1.7x apart (2026-11-28):
# far above what the link needs for them, so each round's time is the processes' and NCCL's own.
HOST_BOUND = {
    "all_reduce[*-1KiB]": "the processes and NCCL's launch: too small a message to time the link",
    "all_reduce[*-4KiB]": "the processes and NCCL's launch: too small a message to time the link",
    "all_reduce[*-16KiB]": "the processes and NCCL's launch: too small a message to time the link",
    "all_reduce[*-64KiB]": "the processes and NCCL's launch: too small a message to time the link",
    "all_reduce[*-256KiB]": "the processes and NCCL's launch: too small a message to time the link",
    "all_reduce[*-1MiB]": "the processes and NCCL's launch: too small a message to time the link",
    "all_reduce[*-4MiB]": "the processes and NCCL's launch: too small a message to time the link",
}
WORDS = {"one": "One GPU", "ddp": "DDP", "fsdp2": "FSDP2", "dataparallel": "DataParallel",
         "tp": "Tensor parallel", "sp": "Tensor + sequence parallel",
         "fsdp2+tp": "FSDP2 (across) + TP (within 2)", "hsdp": "HSDP (sharded within 2)"}

FOUR = pytest.mark.gpus(4)
WIDTH, DEPTH = 4096, 8
KiB, MiB, GiB = 2**10, 2**20, 2**30


@pytest.fixture(scope="module")
def worlds():
    """`worlds(n)`: a process group of n ranks, one per GPU; a new one when n changes."""
    with several.Worlds() as get:
        yield get


# --- All-reduce bus bandwidth ----------------------------------------------------------------

SIZES = [KiB * 4**i for i in range(11)]  # 1 KiB ... 1 GiB


def size_label(nbytes):
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= scale:
            return f"{nbytes // scale}{unit}"
    return f"{nbytes}B"


@functools.lru_cache(maxsize=1)  # one buffer at a time: 1 GiB is freed before the next size
def buffer(nbytes):
    return torch.zeros(nbytes // 2, dtype=torch.bfloat16, device=several.device())


def release_buffer():
    """Free the cached buffer (up to 1 GiB) on this rank, so that no later benchmark's
    memory figures carry it."""
    buffer.cache_clear()
    torch.cuda.empty_cache()


def all_reduce_and_wait(nbytes, ops):
    """`ops` all-reduces of one buffer, back to back, then wait for the GPU (every rank)."""
    all_reduce.all_reduce_many(buffer(nbytes), ops)
    torch.cuda.synchronize()


def ops_for(nbytes):
    """Back-to-back operations per round: the followers hear of a round over a socket ~0.2 ms
    after rank 0 starts it; 20 to 50 operations spread that lag (as in the 2-GPU benchmark)."""
    return max(20, min(50, 64 * MiB // nbytes))


@pytest.mark.parametrize("nbytes", SIZES, ids=[size_label(s) for s in SIZES])
@pytest.mark.parametrize("gpus", [2, pytest.param(4, marks=FOUR)], ids=["2gpus", "4gpus"])
def bench_all_reduce(benchmark, worlds, gpus, nbytes):
    """nccl-tests' all_reduce_perf, from Python, at 2 and at 4 GPUs of the same machine."""
    world = worlds(gpus)
    ops = ops_for(nbytes)
    world.call(all_reduce_and_wait, nbytes, 3)  # warm-up on every rank, outside the rounds
    # plain benchmark: n ranks; world.announcer starts each round on the other ranks too
    benchmark.pedantic(all_reduce_and_wait, args=(nbytes, ops),
                       setup=world.announcer(all_reduce_and_wait, nbytes, ops),
                       rounds=10, warmup_rounds=2)
    seconds = benchmark.stats.stats.median / ops
    n = world.world_size
    benchmark.extra_info.update(
        message_bytes=nbytes, ops=ops, gpus=n, dtype="bfloat16",
        algbw_gbs=nbytes / seconds / 1e9,
        busbw_gbs=all_reduce.bus_bandwidth(nbytes, seconds, n) / 1e9)
    world.call(release_buffer)  # every rank of this group


# --- Training steps ----------------------------------------------------------------------------

_state = {}  # this rank's model, optimizer and batch


def prepare(layout, batch_per_gpu):
    """Build the workload on this rank's GPU, laid out, and take a first step (Adam's state).
    Returns the parameters and the matmul FLOPs of one GPU's share of a step."""
    release_buffer()  # in case an all-reduce benchmark left one here
    device = several.device() if layout in scaling.LAYOUTS else torch.device("cuda", 0)
    model = scaling.make_mlp(WIDTH, DEPTH)
    counts = {"parameters": sum(p.numel() for p in model.parameters()),
              "flops": scaling.matmul_flops(model, batch_per_gpu)}
    if layout in scaling.LAYOUTS:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(device.type, (torch.distributed.get_world_size(),))
        model = scaling.lay_out(model, layout, device, mesh)
    elif layout == "dataparallel":  # one process drives every GPU; the batch is split among them
        gpus = torch.cuda.device_count()
        model = torch.nn.DataParallel(model.to(device), device_ids=list(range(gpus)))
        batch_per_gpu *= gpus
    else:
        model = model.to(device)
    x = torch.randn(batch_per_gpu, WIDTH, device=device)
    y = torch.randn(batch_per_gpu, 1, device=device)
    _state.update(device=device, model=model, batch=(x, y),
                  optimizer=torch.optim.Adam(model.parameters()))
    step()
    torch.cuda.reset_peak_memory_stats(device)
    return counts


def step():
    """One training step on this rank, waited for (on every GPU this process drives)."""
    scaling.train_step(_state["model"], _state["optimizer"], *_state["batch"])
    if isinstance(_state["model"], torch.nn.DataParallel):
        for gpu in _state["model"].device_ids:  # the replicas' work on the other GPUs
            torch.cuda.synchronize(gpu)
    torch.cuda.synchronize(_state["device"])


def host_ms(repeats=5):
    """This rank: the median time the host takes to issue a training step, starting with the
    GPU idle and not waiting for it at the end (near the step's time: the GPUs wait for the
    host)."""
    import time  # here, not at the top: a module-level import would key every benchmark here

    times = []
    for _ in range(repeats):
        torch.cuda.synchronize(_state["device"])
        started = time.perf_counter()
        scaling.train_step(_state["model"], _state["optimizer"], *_state["batch"])
        times.append(time.perf_counter() - started)
    torch.cuda.synchronize(_state["device"])
    return sorted(times)[len(times) // 2] * 1e3


def everyones_host_ms():
    return several.everyones(host_ms())


def held_peak_and_release():
    """This rank's (training state GiB by tensor sizes, the same by the allocator, peak GiB
    since prepare()); then free the workload.

    After a step the activations are freed and the gradients kept, so what the allocator has
    handed out, less the batch, is the training state plus whatever the layout adds (DDP's
    buckets, FSDP2's padding and buffers)."""
    held = sum(scaling.training_state_bytes(_state["model"], _state["optimizer"]).values())
    torch.cuda.synchronize(_state["device"])
    batch = sum(t.numel() * t.element_size() for t in _state["batch"])
    allocated = torch.cuda.memory_allocated(_state["device"]) - batch
    peak = torch.cuda.max_memory_allocated(_state["device"]) / GiB
    _state.clear()
    torch.cuda.empty_cache()
    return held / GiB, allocated / GiB, peak


def everyones_held_peak_and_release():
    return several.everyones(held_peak_and_release())


# (layout, GPUs, samples per GPU), in the order they run: after the all-reduces' groups of 2
# and 4, the 4-rank group goes on, then one of 2 starts. Weak scaling: 4096 and 16384 per GPU
# at every n. Strong scaling: 16384 in all, split n ways.
STEPS = ([("one", 1, 4096), ("one", 1, 16384)]
         + [(layout, n, batch) for n, batches in ((4, (4096, 16384)), (2, (4096, 8192, 16384)))
            for layout in scaling.LAYOUTS for batch in batches]
         + [("dataparallel", 4, 4096)])


@pytest.mark.parametrize(
    ("layout", "gpus", "batch"),
    [pytest.param(layout, n, batch, marks=[FOUR] if n == 4 else [],
                  id=f"{layout}-{n}gpu{'s' if n > 1 else ''}-{batch}")
     for layout, n, batch in STEPS])
def bench_step(benchmark, worlds, layout, gpus, batch):
    """One training step: on GPU 0 alone ("one"), under DDP or FSDP2 on n ranks, or under
    DataParallel from this one process over the four GPUs."""
    if layout in scaling.LAYOUTS:
        world = worlds(gpus)
        counts = world.call(prepare, layout, batch)
        # plain benchmark: n ranks; world.announcer starts each round on the other ranks too
        benchmark.pedantic(step, setup=world.announcer(step), rounds=12, warmup_rounds=2)
        hosts = world.call(everyones_host_ms)
        found = world.call(everyones_held_peak_and_release)
    else:
        counts = prepare(layout, batch)
        # plain benchmark: this process alone, step() waits for every GPU it drives
        benchmark.pedantic(step, setup=torch.cuda.synchronize, rounds=12, warmup_rounds=2)
        hosts = [host_ms()] if layout == "one" else []  # DataParallel: its threads, not here
        found = [held_peak_and_release()]
    if hosts:
        benchmark.extra_info["host_ms"] = max(hosts)
    benchmark.extra_info.update(
        layout=layout, gpus=gpus, batch_per_gpu=batch, **counts,
        state_gib_per_gpu=max(f[0] for f in found), allocated_gib_per_gpu=max(f[1] for f in found),
        peak_gib_per_gpu=max(f[2] for f in found))


# Dense bf16 Tensor Core peak of each GPU's datasheet, TFLOP/s (the sparse figure's half)
DATASHEET_BF16_TFLOPS = {"NVIDIA H100 80GB HBM3": 989, "NVIDIA H200": 989}


@pytest.mark.snippet("snippets/precision/tensor_cores_and_shapes.py")
def bench_matmul_ceiling(gpu_benchmark):
    """The precision chapter's bf16 product of 8192 x 8192, on this machine's GPU 0; beside it,
    the GPU's datasheet peak (dense bf16), the other yardstick of MFU."""
    n = 8192
    a, b = precision.operands(n, torch.bfloat16)
    gpu_benchmark.extra_info.update(
        n=n, flops=2 * n**3, precision="bf16",
        datasheet_tflops=DATASHEET_BF16_TFLOPS[torch.cuda.get_device_name(0)])
    gpu_benchmark(precision.matmul, a, b, "bf16", rounds=15, warmup_rounds=3)


# --- Composed layouts: a stack of transformer blocks ---------------------------------------------

STACK = {"depth": 4, "dim": 4096, "heads": 32, "hidden": 16384}
GLOBAL_BATCH = 8  # sequences per step, over all GPUs
SEQ = 2048  # tokens per sequence


def prepare_composed(layout, gpus):
    """This rank's part of the stack laid out by `layout`, Adam, its part of the global batch;
    one step (Adam's state). Returns the matmul FLOPs of one GPU's share of a step (each
    layout splits the same work n ways: TP the weights, data parallelism the tokens)."""
    from snippets.several_gpus import composing

    release_buffer()
    device = torch.device("cuda", 0) if layout == "one" else several.device()
    with torch.device(device):  # initialised on the GPU: every rank the same, by the seed
        blocks = composing.make_stack(**STACK)
        x = torch.randn(GLOBAL_BATCH, SEQ, STACK["dim"])
        y = torch.randn(GLOBAL_BATCH, SEQ, STACK["dim"])
    flops = scaling.matmul_flops(blocks, GLOBAL_BATCH * SEQ) // gpus
    model, (part, parts) = ((blocks, (0, 1)) if layout == "one"
                            else composing.compose(blocks, layout, device))
    batch = (x.chunk(parts)[part].contiguous(), y.chunk(parts)[part].contiguous())
    _state.update(device=device, model=model, batch=batch,
                  optimizer=torch.optim.Adam(composing.param_groups(model)))
    step()
    torch.cuda.reset_peak_memory_stats(device)
    return flops


COMPOSED_POINTS = ([("one", 1)] + [(layout, 2) for layout in ("fsdp2", "tp", "sp")]
                   + [(layout, 4) for layout in ("fsdp2", "tp", "sp", "fsdp2+tp", "hsdp")])


@pytest.mark.snippet("snippets/several_gpus/composing.py",
                     "snippets/several_gpus/tensor_parallelism.py")
@pytest.mark.parametrize(("layout", "gpus"), [
    pytest.param(layout, n, marks=[FOUR] if n == 4 else [],
                 id=f"{layout.replace('+', '-')}-{n}gpu{'s' if n > 1 else ''}")
    for layout, n in COMPOSED_POINTS])
def bench_layouts(benchmark, worlds, layout, gpus):
    """A training step of the block stack, the same global batch, under each layout."""
    if layout == "one":
        flops = prepare_composed(layout, 1)
        # plain benchmark: the baseline of the n-rank steps below, timed the same way
        benchmark.pedantic(step, setup=torch.cuda.synchronize, rounds=10, warmup_rounds=2)
        hosts = [host_ms()]
        found = [held_peak_and_release()]
    else:
        world = worlds(gpus)
        flops = world.call(prepare_composed, layout, gpus)
        # plain benchmark: n ranks; world.announcer starts each round on the other ranks too
        benchmark.pedantic(step, setup=world.announcer(step), rounds=10, warmup_rounds=2)
        hosts = world.call(everyones_host_ms)
        found = world.call(everyones_held_peak_and_release)
    benchmark.extra_info.update(
        layout=layout, gpus=gpus, tokens=GLOBAL_BATCH * SEQ, flops=flops, **STACK,
        host_ms=max(hosts),
        state_gib_per_gpu=max(f[0] for f in found), peak_gib_per_gpu=max(f[2] for f in found))
