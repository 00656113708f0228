"""Benchmarks behind docs/several-gpus/pipeline-parallelism.md: a pipeline over 2 GPUs (and 4
where there are four) under ScheduleGPipe, Schedule1F1B and, with two stages per GPU,
ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble and ScheduleZBVZeroBubble; beside it the
unsplit model on one GPU.

Needs two GPUs; the 4-GPU points need four. This process is rank 0 on GPU 0 (benchmarks/ranks.py).
The model: 16 layers of 4096 x 4096 (+ ReLU) in bf16, forward and backward with an MSE loss, no
optimizer. Two sweeps: a fixed batch of 16384 samples cut into M = 1 .. 16 micro-batches (the
trade-off), and fixed micro-batches of 4096 samples, M = 2 .. 16, the batch growing with M (the
bubble formula's test). Each point: step time over 20 rounds (rank 0's wall clock, all ranks
started together); idle time read from every rank's kernel timeline over 20 profiled steps
(compute kernels only, NCCL's left out), split into fill/drain and waits; compute inflation:
the kernel time of each rank's stages in the pipeline over the same forwards and backwards run
alone; peak memory per GPU (torch.cuda.max_memory_allocated).
Budget on two H200s: ~10 s to start the ranks, 15 points of ~3-6 s each (under 90 s in all).
"""

import gc
import statistics

import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from benchmarks import ranks as several
from snippets.several_gpus import pipeline_parallelism as pp

pytestmark = pytest.mark.snippet("snippets/several_gpus/pipeline_parallelism.py",
                                 "benchmarks/ranks.py", "benchmarks/two_ranks.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "one_gpu": "The unsplit model on one GPU: forward and backward of {batch} samples",
    "step": "{schedule}, {stages} stages on {gpus} GPUs, {microbatches} micro-batches "
            "of {microbatch_rows}: one step",
}
WORDS = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved1f1b": "Interleaved 1F1B",
         "interleavedzb": "Interleaved zero bubble", "zbv": "Zero bubble V",
         "one": "One GPU, unsplit"}

WIDTH, DEPTH = 4096, 16
BATCH, ROWS = 16384, 4096       # the fixed batch; the fixed micro-batch's samples
ROUNDS, ALONE_ROUNDS = 20, 10   # timed and profiled steps; profiled runs of the stages alone
SCHEDULES = {"gpipe": (pp.ScheduleGPipe, 1), "1f1b": (pp.Schedule1F1B, 1),
             "interleaved1f1b": (pp.ScheduleInterleaved1F1B, 2),
             "interleavedzb": (pp.ScheduleInterleavedZeroBubble, 2),
             "zbv": (pp.ScheduleZBVZeroBubble, 2)}
FORMULA = {"gpipe", "1f1b", "interleaved1f1b"}  # the schedules the bubble formula describes

_state = {}  # this rank's stages, schedule and batch


def _sync():
    if _state["device"].type == "cuda":
        torch.cuda.synchronize(_state["device"])


def _data(device, batch, width, depth):
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    with torch.device(device):  # build on the GPU: initializing on the CPU is slower
        return (pp.make_model(width, depth).to(dtype),
                torch.randn(batch, width, dtype=dtype), torch.randn(batch, width, dtype=dtype))


def prepare(schedule, batch, microbatches, width=WIDTH, depth=DEPTH):
    """This rank's stages of the model, its schedule and the batch; a first step (the stages
    agree on shapes), then the peak-memory counter reset."""
    device = several.device()
    model, x, y = _data(device, batch, width, depth)
    mesh = init_device_mesh(device.type, (dist.get_world_size(),), mesh_dim_names=("pp",))
    cls, per_rank = SCHEDULES[schedule]
    if per_rank == 1:
        stages, run = pp.build_pipeline(model, mesh, device, microbatches, cls)
    else:
        stages, run = pp.build_virtual_pipeline(model, mesh, device, microbatches, cls, per_rank)
    del model  # only this rank's stages stay
    _state.update(device=device, stages=stages, schedule=run, batch=(x, y),
                  microbatches=microbatches)
    step()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def step():
    pp.pipeline_step(_state["stages"], _state["schedule"], *_state["batch"])
    _sync()


def prepare_one(batch, width=WIDTH, depth=DEPTH):
    """The unsplit model and the batch, on every rank's own device (rank 0's is timed)."""
    device = several.device()
    model, x, y = _data(device, batch, width, depth)
    _state.update(device=device, model=model, batch=(x, y))
    step_one()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def step_one():
    model, (x, y) = _state["model"], _state["batch"]
    model.zero_grad(set_to_none=True)
    pp.loss_fn(model(x), y).backward()
    _sync()


def _peak_gib():
    if _state["device"].type != "cuda":
        return 0.0
    return torch.cuda.max_memory_allocated(_state["device"]) / 2**30


def alone(rounds):
    """This rank's stages run their forwards and backwards alone, as in one step (no sends, no
    other rank): the kernel time of each of `rounds` runs, ns."""
    stages, m = _state["stages"], _state["microbatches"]
    x, y = _state["batch"]
    rows = x.shape[0] // m
    inputs = {s.stage_index: x[:rows].clone().requires_grad_(not s.is_first) for s in stages}
    grad = torch.ones_like(x[:rows])

    def work():
        for s in stages:
            s.submod.zero_grad(set_to_none=True)
        for s in sorted(stages, key=lambda s: s.stage_index):
            for _ in range(m):
                out = s.submod(inputs[s.stage_index])
                if s.is_last:
                    pp.loss_fn(out, y[:rows]).backward()
                else:
                    out.backward(grad)
        _sync()

    return [pp.busy_ns(spans) for spans in pp.profiled_steps(work, rounds, _state["device"])]


def measure_and_release(rounds, alone_rounds):
    """Every rank: its peak memory, `rounds` profiled steps (every rank's idle parts in each,
    from all ranks' spans) and its stages' kernel time alone; then free the workload."""
    peak = _peak_gib()
    mine = pp.profiled_steps(step if "stages" in _state else step_one, rounds, _state["device"])
    everyone = several.everyones(mine)
    parts = [pp.idle_parts([spans[i] for spans in everyone]) for i in range(rounds)]
    busy_alone = alone(alone_rounds) if "stages" in _state else None
    _state.clear()
    gc.collect()  # stages and schedules in reference cycles
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return {"parts": parts, "spans": everyone, "peaks": several.everyones(peak),
            "busy_alone": several.everyones(busy_alone)}


def timeline(every_ranks_spans, merge_ns=20_000):
    """One step's compute on each GPU as bars for the page's Gantt chart (seconds from the
    step's first kernel); kernels closer than `merge_ns` merged into one bar."""
    t0 = min(s for spans in every_ranks_spans for s, _ in spans)
    bars = []
    for rank, spans in enumerate(every_ranks_spans):
        last = None
        for start, end in sorted(spans):
            if last is not None and start - last[1] < merge_ns:
                last[1] = max(last[1], end)
            else:
                last = [start, end]
                bars.append((rank, last))
    return [{"lane": f"GPU {rank}", "name": "compute", "start": (s - t0) / 1e9,
             "duration": (e - s) / 1e9} for rank, (s, e) in bars]


def _quartiles(values):
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def summary(measured):
    """What a page shows from measure_and_release: medians over the profiled rounds, their
    spread, and per rank."""
    parts, ranks = measured["parts"], len(measured["peaks"])

    def shares(key):  # per round, the mean over ranks of this part's share of the step
        return [statistics.fmean(p[key] / p["span"] for p in one) for one in parts]

    idle = [statistics.fmean(1 - p["busy"] / p["span"] for p in one) for one in parts]
    q1, q3 = _quartiles(idle)
    typical = sorted(range(len(idle)), key=idle.__getitem__)[len(idle) // 2]
    busy = [statistics.median(one[r]["busy"] for one in parts) for r in range(ranks)]
    extras = {
        "idle_share": statistics.median(idle), "idle_share_q1": q1, "idle_share_q3": q3,
        "idle_share_min": min(idle), "idle_share_max": max(idle), "profiled_rounds": len(idle),
        "fill_drain_share": statistics.median(shares("fill_drain")),
        "waits_share": statistics.median(shares("waits")),
        "span_ms": statistics.median(one[0]["span"] for one in parts) / 1e6,
        "busy_ms": sum(busy) / 1e6,
        "peak_gib": max(measured["peaks"]),
        "timeline": timeline([spans[typical] for spans in measured["spans"]]),
    }
    for r in range(ranks):
        extras[f"idle_rank{r}"] = statistics.median(1 - one[r]["busy"] / one[r]["span"]
                                                    for one in parts)
        extras[f"peak_gpu{r}_gib"] = measured["peaks"][r]
    if measured["busy_alone"][0] is not None:
        alone_ns = [statistics.median(b) for b in measured["busy_alone"]]
        extras["busy_alone_ms"] = sum(alone_ns) / 1e6
        extras["compute_inflation"] = sum(busy) / sum(alone_ns)
        for r in range(ranks):
            extras[f"inflation_rank{r}"] = busy[r] / alone_ns[r]
    return extras


@pytest.fixture(scope="module")
def worlds():
    """`worlds(n)`: a process group of n ranks, one per GPU; a new one when n changes."""
    with several.Worlds() as get:
        yield get


FOUR = pytest.mark.gpus(4)
FIXED_BATCH = [(2, "gpipe", BATCH, m) for m in (1, 2, 4, 8, 16)] + [
    (2, "1f1b", BATCH, m) for m in (4, 8, 16)]
FIXED_ROWS = [(2, "gpipe", ROWS * m, m) for m in (2, 8, 16)]  # m = 4 is in FIXED_BATCH
VIRTUAL = [(2, schedule, BATCH, 8) for schedule in ("interleaved1f1b", "interleavedzb", "zbv")]
ON_FOUR = [(4, "gpipe", ROWS * m, m) for m in (4, 8, 16)] + [
    (4, schedule, BATCH, 16) for schedule in ("gpipe", "1f1b")]
POINTS = FIXED_BATCH + FIXED_ROWS + VIRTUAL + ON_FOUR  # 2-GPU groups first, then 4


def bench_one_gpu(benchmark, worlds):
    """The unsplit model's step on one GPU: every rank runs its own copy; rank 0 is timed."""
    world = worlds(2)
    world.call(prepare_one, BATCH)
    # plain benchmark: each rank steps on its own GPU; world.announcer starts each round there
    benchmark.pedantic(step_one, setup=world.announcer(step_one), rounds=ROUNDS,
                       warmup_rounds=2)
    measured = world.call(measure_and_release, ROUNDS, ALONE_ROUNDS)
    benchmark.extra_info.update(
        schedule="one", gpus=1, stages=1, microbatches=1, batch=BATCH, microbatch_rows=BATCH,
        samples_per_s=BATCH / benchmark.stats.stats.median, peak_gib=measured["peaks"][0],
        busy_ms=statistics.median(one[0]["busy"] for one in measured["parts"]) / 1e6)


@pytest.mark.parametrize(("gpus", "schedule", "batch", "microbatches"), [
    pytest.param(n, schedule, batch, m, marks=[FOUR] if n == 4 else [],
                 id=f"{schedule}-{n}gpus-{batch}-{m}mb") for n, schedule, batch, m in POINTS])
def bench_step(benchmark, worlds, gpus, schedule, batch, microbatches):
    world = worlds(gpus)
    world.call(prepare, schedule, batch, microbatches)
    # plain benchmark: n ranks; world.announcer starts each round on the other ranks too
    benchmark.pedantic(step, setup=world.announcer(step), rounds=ROUNDS, warmup_rounds=2)
    extras = summary(world.call(measure_and_release, ROUNDS, ALONE_ROUNDS))
    per_rank = SCHEDULES[schedule][1]
    if schedule in FORMULA:
        extras["bubble_formula"] = pp.bubble_fraction(gpus, microbatches, per_rank)
    benchmark.extra_info.update(
        schedule=schedule, gpus=gpus, stages=gpus * per_rank, microbatches=microbatches,
        batch=batch, microbatch_rows=batch // microbatches,
        samples_per_s=batch / benchmark.stats.stats.median, **extras)
