"""Benchmarks behind docs/several-gpus/pipeline-parallelism.md: a pipeline of 2 and 4 stages under
ScheduleGPipe and Schedule1F1B, its step time and each stage's measured idle fraction beside
(S - 1) / (M + S - 1).

Needs two GPUs; the 4-stage points need four. This process is rank 0, stage 0, on GPU 0
(benchmarks/ranks.py). The model: 16 layers of 4096 x 4096 (+ ReLU) in bf16, 16384 samples per
step, cut into M = 4 or 16 micro-batches. A stage's busy time is what its M forwards and
backwards take when it runs them alone on its GPU; idle = 1 - busy / step. Sending activations
counts as idle: the formula assumes sends take no time.
Budget on four H100s: ~6 s to start each of two groups of ranks, ~15 s of steps.
"""

import time

import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from benchmarks import ranks as several
from snippets.several_gpus import pipeline_parallelism as pp

pytestmark = pytest.mark.snippet("snippets/several_gpus/pipeline_parallelism.py",
                                 "benchmarks/ranks.py", "benchmarks/two_ranks.py")

# How tables and charts name these benchmarks (read by the site build; see fieldguide/labels.py)
LABELS = {"step": "{schedule}, {stages} stages, {microbatches} micro-batches: one step"}
WORDS = {"gpipe": "GPipe", "1f1b": "1F1B"}

WIDTH, DEPTH, BATCH = 4096, 16, 16384
SCHEDULES = {"gpipe": pp.ScheduleGPipe, "1f1b": pp.Schedule1F1B}

_state = {}  # this rank's stage, schedule and batch


def prepare(schedule, microbatches):
    device = several.device()
    with torch.device(device):  # build on the GPU: initializing on the CPU is slower
        model = pp.make_model(WIDTH, DEPTH).to(torch.bfloat16)
        x = torch.randn(BATCH, WIDTH, dtype=torch.bfloat16)
        y = torch.randn(BATCH, WIDTH, dtype=torch.bfloat16)
    pp_mesh = init_device_mesh("cuda", (dist.get_world_size(),), mesh_dim_names=("pp",))
    stage, run = pp.build_pipeline(model, pp_mesh, device, microbatches, SCHEDULES[schedule])
    _state.update(device=device, stage=stage, schedule=run, batch=(x, y),
                  microbatches=microbatches)
    step()  # the first step also agrees on shapes between stages


def step():
    _state["stage"].submod.zero_grad(set_to_none=True)
    pp.pipeline_step(_state["stage"], _state["schedule"], *_state["batch"])
    torch.cuda.synchronize(_state["device"])


def busy_seconds(repeats=5):
    """This stage's M forwards and backwards of one micro-batch each, alone on its GPU."""
    stage, m = _state["stage"], _state["microbatches"]
    x = torch.randn(BATCH // m, WIDTH, dtype=torch.bfloat16, device=_state["device"],
                    requires_grad=not stage.is_first)  # as in the pipeline: input grads sent back
    for _ in range(2):  # warm-up
        stage.submod(x).sum().backward()
    torch.cuda.synchronize(_state["device"])
    start = time.perf_counter()
    for _ in range(repeats * m):
        out = stage.submod(x)
        out.backward(torch.ones_like(out))
    torch.cuda.synchronize(_state["device"])
    return (time.perf_counter() - start) / repeats


def idle_fractions_and_release(step_seconds):
    """Every stage: 1 - busy / step; then free the workload."""
    idle = 1 - busy_seconds() / step_seconds
    _state.clear()
    torch.cuda.empty_cache()
    return several.everyones(idle)


@pytest.fixture(scope="module")
def worlds():
    """`worlds(n)`: a process group of n ranks, one per GPU; a new one when n changes."""
    with several.Worlds() as get:
        yield get


FOUR = pytest.mark.gpus(4)
POINTS = [(s, schedule, m) for s in (2, 4) for schedule in SCHEDULES for m in (4, 16)]


@pytest.mark.parametrize(("stages", "schedule", "microbatches"), [
    pytest.param(s, schedule, m, marks=[FOUR] if s == 4 else [],
                 id=f"{schedule}-{s}stages-{m}mb") for s, schedule, m in POINTS])
def bench_step(benchmark, worlds, stages, schedule, microbatches):
    world = worlds(stages)
    world.call(prepare, schedule, microbatches)
    # plain benchmark: n ranks; world.announcer starts each round on the other ranks too
    benchmark.pedantic(step, setup=world.announcer(step), rounds=10, warmup_rounds=2)
    idle = world.call(idle_fractions_and_release, benchmark.stats.stats.median)
    benchmark.extra_info.update(
        schedule=schedule, stages=stages, microbatches=microbatches,
        idle_mean=sum(idle) / len(idle), **{f"idle_stage{i}": f for i, f in enumerate(idle)},
        bubble_formula=pp.bubble_fraction(stages, microbatches))
