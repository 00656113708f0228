"""Claims of docs/several-gpus/pipeline-parallelism.md, tested on 2 and 4 stages started by
torchrun: torch.distributed.pipelining with gloo on the CPU in CI, with NCCL where the machine has
a GPU for every process.

This file is also the worker for the per-stage checks (`python tests/pages/test_pipeline_parallelism.py
OUT_DIR` under torchrun): each rank writes what it saw to OUT_DIR/rank<N>.json.
"""

import gc
import json
import os
import sys
from pathlib import Path

import pytest

from tests.helpers import RANK_PROCESSES, process_id, run_on_ranks

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300
PROCESSES = RANK_PROCESSES

pytestmark = pytest.mark.snippet("snippets/several_gpus/pipeline_parallelism.py")

CLAIMS = {
    "idle_above_formula_max": 0.10,  # measured idle share of a step, over (S-1)/(M+S-1), at most
    "idle_below_formula_max": 0.05,  # and under it (no schedule here beats the bubble), at most
}


@pytest.fixture(scope="module", params=PROCESSES, ids=process_id)
def stages(request, tmp_path_factory):
    """What each of n stages saw: n = 2 and 4 CPU processes (gloo), and as many GPUs (NCCL)
    where the machine has them (the others are skipped, and listed by make test-gpu)."""
    backend, n = request.param
    out = tmp_path_factory.mktemp(f"pp-{backend}-{n}")
    return run_on_ranks(__file__, backend, n, out, TIMEOUT)


@pytest.mark.parametrize("schedule", ["GPipe", "1F1B"])
def test_every_stage_gets_the_gradients_of_the_unsplit_model(stages, schedule):
    assert all(s[schedule]["grads_equal"] for s in stages), stages


@pytest.mark.parametrize("schedule", ["GPipe", "1F1B"])
def test_only_the_last_stage_sees_the_losses_one_per_micro_batch(stages, schedule):
    assert [s[schedule]["losses"] for s in stages] == [0] * (len(stages) - 1) + [4]


def test_split_model_refuses_an_uneven_split(snippet):
    with pytest.raises(ValueError, match="do not split into 3 equal stages"):
        snippet.split_model(snippet.make_model(depth=4), 0, 3)


def test_1f1b_refuses_fewer_micro_batches_than_stages(snippet):
    from types import SimpleNamespace

    four_stages = SimpleNamespace(get_local_rank=lambda: 0, size=lambda: 4)  # no group needed
    with pytest.raises(ValueError, match="got 2 micro-batches for 4 stages"):
        snippet.build_pipeline(snippet.make_model(), four_stages, "cpu", 2, snippet.Schedule1F1B)


def test_bubble_formula(snippet):
    assert snippet.bubble_fraction(1, 8) == 0
    assert snippet.bubble_fraction(4, 4) == 3 / 7
    assert snippet.bubble_fraction(2, 16) == 1 / 17


def test_the_zero_bubble_schedules_the_page_names_exist(snippet):
    assert {"ScheduleGPipe", "Schedule1F1B", "ScheduleInterleaved1F1B", "ScheduleLoopedBFS",
            "ScheduleInterleavedZeroBubble", "ScheduleZBVZeroBubble",
            "ScheduleDualPipeV"} <= set(snippet.schedules())


# --- The page's claims against every recorded run (timings/; runs in CI) -------------------------

POINTS = [f"pipeline_parallelism.step[{schedule}-{s}stages-{m}mb]"
          for s in (2, 4) for schedule in ("gpipe", "1f1b") for m in (4, 16)]


def test_measured_idle_share_follows_the_formula(measured):
    for name in POINTS:
        for run in measured(name):
            idle, formula = run.value(name, "idle_mean"), run.value(name, "bubble_formula")
            assert idle - formula <= CLAIMS["idle_above_formula_max"], (str(run), name, idle)
            assert formula - idle <= CLAIMS["idle_below_formula_max"], (str(run), name, idle)


def test_more_micro_batches_leave_less_idle(measured):
    for s in (2, 4):
        for schedule in ("gpipe", "1f1b"):
            few = f"pipeline_parallelism.step[{schedule}-{s}stages-4mb]"
            many = f"pipeline_parallelism.step[{schedule}-{s}stages-16mb]"
            for run in measured(few, many):
                assert run.value(many, "idle_mean") < run.value(few, "idle_mean"), str(run)


# --- The worker ----------------------------------------------------------------------------------

def stage_checks(out_dir):
    import torch.distributed as dist

    from snippets.several_gpus import pipeline_parallelism as pp

    mesh, device = pp.start_mesh(names=("pp",))
    seen = {name: pp.compare_with_unsplit(schedule, mesh, device)
            for name, schedule in (("GPipe", pp.ScheduleGPipe), ("1F1B", pp.Schedule1F1B))}
    seen["backend"] = dist.get_backend()
    with open(os.path.join(out_dir, f"rank{dist.get_rank()}.json"), "w") as f:
        json.dump(seen, f)
    # freed at exit instead, gloo's threads abort Python one run in two (torch 2.13, CPU)
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    stage_checks(sys.argv[1])
