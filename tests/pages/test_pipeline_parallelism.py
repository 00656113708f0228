"""Claims of docs/several-gpus/pipeline-parallelism.md, tested on 2 and 4 ranks started by
torchrun: torch.distributed.pipelining with gloo on the CPU in CI, with NCCL where the machine has
a GPU for every process; and against every recorded run of its benchmarks.

This file is also the worker for the per-rank checks (`python tests/pages/test_pipeline_parallelism.py
OUT_DIR [pairs]` under torchrun): each rank writes what it saw to OUT_DIR/rank<N>.json. With
`pairs` (gloo, 4 processes) each rank also runs the checks a second time, as a stage of one of two
2-rank pipelines, the "pp" dimension of a 2 x 2 mesh (the snippet builds its stages on a mesh's
"pp" dimension as on a 1-D mesh): one launch of 4 CPU processes checks 2 ranks and 4, instead of a
second launch (a torchrun and 2 Pythons importing torch: about 10 CPU-seconds).
"""

import gc
import json
import os
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers import RANK_PROCESSES, four_ranks_and_pairs, process_id, run_on_ranks, run_python

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300
PROCESSES = RANK_PROCESSES

pytestmark = pytest.mark.snippet("snippets/several_gpus/pipeline_parallelism.py")

CLAIMS = {
    # Fixed micro-batch (4096 samples), GPipe on 2 H200s, M = 2, 4, 8, 16: the idle share read
    # from the kernel timelines over (S-1)/(M+S-1). Runs 20261128T173642Z (lease 1), 195745Z and
    # 200256Z (lease d9e87b2f): 0.054 0.066 0.065 0.063 / 0.055 0.058 0.060 0.058 /
    # 0.051 0.060 0.061 0.058: above the formula at every M, by 0.051 to 0.066
    "idle_above_formula_min": 0.04,
    "idle_above_formula_max": 0.07,
    # fill and drain (mean of the two GPUs) against half the formula's share (GPipe puts the
    # first GPU's part of the bubble between its forward and backward chunks): within 0.004
    "fill_drain_off_half_formula_max": 0.005,
    # Fixed batch, 16 micro-batches: compute inflation 0.995 1.006 1.003 (GPipe), 0.998 0.998
    # 0.999 (1F1B): the kernel time that grew with M is there when the stages run alone
    "inflation_at_16_off_one_max": 0.01,
}
# What the draft claimed before three runs: idle within 5 points above the formula and at most 2
# below. All three runs put it 5.1 to 6.6 points above (the strict xfail below keeps it in view).
FORMULA_WITHIN = (0.05, 0.02)

SINGLE = ("ScheduleGPipe", "Schedule1F1B")
MULTI = ("ScheduleInterleaved1F1B", "ScheduleLoopedBFS", "ScheduleInterleavedZeroBubble",
         "ScheduleZBVZeroBubble", "ScheduleDualPipeV")


def microbatches_for(schedule, ranks):
    """4 micro-batches; DualPipeV needs one per stage at least (two stages per rank)."""
    return 4 if schedule in SINGLE else max(4, 2 * ranks)


# torch 2.11's pipelining over gloo fails its first point-to-point exchange on the second rank
# ("Pair is not connected", gloo's pair.cc; reproduced on CPU processes with torch 2.11, with
# TORCH_GLOO_LAZY_INIT 0 or 1); torch 2.13, what CI installs and the page teaches, passes. The GPU
# machine's torch 2.11 runs these checks over NCCL on its GPUs instead.
GLOO_P2P_BROKEN = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13)
GLOO_P2P_REASON = ("gloo point-to-point in torch 2.11's pipelining fails ('Pair is not "
                   "connected'); torch 2.13 (CI) runs the gloo ranks, NCCL runs them on GPUs")

_gloo_launch = {}  # the one launch of 4 gloo processes, for n = 4 and its pairs for n = 2


@pytest.fixture(scope="module", params=PROCESSES, ids=process_id)
def ranks(request, tmp_path_factory):
    """What each of n ranks saw: n = 2 and 4 CPU processes (gloo: one launch of 4, whose first
    pair of ranks is the 2-rank pipeline), and as many GPUs (NCCL) where the machine has them
    (the others are skipped, and listed by make test-gpu)."""
    backend, n = request.param
    if backend != "gloo":
        out = tmp_path_factory.mktemp(f"pp-{backend}-{n}")
        return run_on_ranks(__file__, backend, n, out, TIMEOUT)
    if GLOO_P2P_BROKEN:
        pytest.skip(GLOO_P2P_REASON)
    if not _gloo_launch:
        out = tmp_path_factory.mktemp("pp-gloo-4-and-pairs")
        _gloo_launch.update(four_ranks_and_pairs(__file__, out, TIMEOUT))
        # ranks 2 and 3 ran the same pipelines beside ranks 0 and 1: they saw the same
        first, second = ([{k: r[k] for k in SINGLE + MULTI} for r in _gloo_launch[pair]]
                         for pair in (2, "second pair"))
        assert second == first, (first, second)
    return _gloo_launch[n]


@pytest.mark.parametrize("schedule", SINGLE + MULTI)
def test_every_stage_gets_the_gradients_of_the_unsplit_model(ranks, schedule):
    assert all(r[schedule]["grads_equal"] for r in ranks), ranks


@pytest.mark.parametrize("schedule", SINGLE + MULTI)
def test_only_the_last_stage_sees_the_losses_one_per_micro_batch(ranks, schedule):
    n = len(ranks)
    last = n * (1 if schedule in SINGLE else 2) - 1
    expected = [microbatches_for(schedule, n) if last in r[schedule]["stages"] else 0
                for r in ranks]
    assert [r[schedule]["losses"] for r in ranks] == expected
    assert sum(e > 0 for e in expected) == 1


def test_each_rank_holds_the_stages_its_schedule_places(ranks):
    n = len(ranks)
    for rank, r in enumerate(ranks):
        assert r["ScheduleGPipe"]["stages"] == [rank]
        assert r["ScheduleInterleaved1F1B"]["stages"] == [rank, rank + n]  # looped
        assert r["ScheduleZBVZeroBubble"]["stages"] == [rank, 2 * n - 1 - rank]  # a V


def test_a_steps_idle_parts_add_up_on_every_rank(ranks):
    """fill/drain + waits + busy = the step's span, the same span on every rank, in every
    profiled step (here on gloo: CPU matrix products stand for the kernels)."""
    steps = [r["idle_parts"] for r in ranks]
    for one_step in zip(*steps, strict=True):
        assert len({p["span"] for p in one_step}) == 1
        for p in one_step:
            assert min(p.values()) >= 0 and p["busy"] > 0
            assert p["fill_drain"] + p["waits"] + p["busy"] == p["span"]


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
    assert snippet.bubble_fraction(2, 8, per_rank=2) == 1 / 17  # interleaved: fill/2, drain/2


def test_stages_of_rank(snippet):
    assert [snippet.stages_of_rank(r, 2, 2) for r in (0, 1)] == [[0, 2], [1, 3]]
    assert [snippet.stages_of_rank(r, 2, 2, v_shaped=True) for r in (0, 1)] == [[0, 3], [1, 2]]
    assert snippet.stages_of_rank(3, 4, 3) == [3, 7, 11]


def test_idle_parts_of_a_made_up_step(snippet):
    """Two ranks, times in ns: rank 0 computes 0-10 and 20-30, rank 1 computes 10-20 and 30-40
    (and 12-15 inside its first span: overlaps count once)."""
    parts = snippet.idle_parts([[(0, 10), (20, 30)], [(10, 20), (12, 15), (30, 40)]])
    assert parts == [{"span": 40, "busy": 20, "fill_drain": 10, "waits": 10},
                     {"span": 40, "busy": 20, "fill_drain": 10, "waits": 10}]
    assert snippet.busy_ns([(0, 10), (5, 15), (20, 25)]) == 20


def test_compute_spans_keep_compute_kernels_only(snippet):
    import torch

    trace = {"baseTimeNanoseconds": 1_000_000, "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "nvjet_hsh_256x128", "ts": 1.0, "dur": 2.0},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_SendRecv", "ts": 1.5, "dur": 9.0},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 4.0, "dur": 1.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0.5, "dur": 1.0},
        {"ph": "i", "cat": "kernel", "name": "marker", "ts": 7.0}]}
    assert snippet.compute_spans(trace, torch.device("cuda")) == [(1_001_000, 1_003_000)]
    assert snippet.compute_spans(trace, torch.device("cpu")) == [(1_000_500, 1_001_500)]


def test_the_schedules_the_page_names_exist(snippet):
    assert set(SINGLE + MULTI) <= set(snippet.schedules())


@pytest.mark.fresh_interpreter
def test_the_benchmarks_measure_on_cpu_processes():
    """The benchmark's per-rank work (prepare, steps, profiled steps, the stages alone) and its
    summary, on 2 CPU processes with gloo and a small model: GPipe, and ZB-V's two stages per
    rank."""
    if GLOO_P2P_BROKEN:
        pytest.skip(GLOO_P2P_REASON)
    code = """
from benchmarks import ranks
from benchmarks import bench_pipeline_parallelism as bench

with ranks.Worlds(cpu=True) as worlds:
    world = worlds(2)
    for schedule in ("gpipe", "zbv"):
        world.call(bench.prepare, schedule, 32, 4, 32, 4)
        s = bench.summary(world.call(bench.measure_and_release, 2, 2))
        parts = s["fill_drain_share"] + s["waits_share"]
        print(schedule, s["profiled_rounds"], 0 <= s["idle_share"] < 1, 0 <= parts < 1,
              s["busy_alone_ms"] > 0, sorted(k for k in s if k.startswith("inflation")))
    world.call(bench.prepare_one, 32, 32, 4)
    print("one", len(world.call(bench.measure_and_release, 2, 2)["parts"]))
"""
    result = run_python(["-c", code], timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == [
        "gpipe 2 True True True ['inflation_rank0', 'inflation_rank1']",
        "zbv 2 True True True ['inflation_rank0', 'inflation_rank1']",
        "one 2"]


def test_the_page_renders_from_runs_shaped_like_the_benchmarks(snippet, tmp_path):
    """Every shortcode of the page finds its benchmarks and fields in two runs recorded as the
    benchmarks record them (made-up spans and peaks, the current code's keys): the page can
    leave the drafts as soon as a GPU has measured it."""
    from benchmarks import bench_pipeline_parallelism as bench
    from fieldguide.measuring.codekey import code_keys
    from fieldguide.rendering.shortcodes import Build
    from tests.helpers import fake_benchmark, fake_run, write_run

    files = ["snippets/several_gpus/pipeline_parallelism.py", "benchmarks/ranks.py",
             "benchmarks/two_ranks.py"]
    module = "benchmarks/bench_pipeline_parallelism.py"
    ms = 1_000_000  # ns
    spans = [[(0, 4 * ms), (5 * ms, 9 * ms)], [(1 * ms, 5 * ms), (6 * ms, 10 * ms)]]
    made_up = {"parts": [snippet.idle_parts(spans)] * 3, "spans": [[spans[0]] * 3, [spans[1]] * 3],
               "peaks": [2.0, 1.5], "busy_alone": [[7 * ms] * 2, [7 * ms] * 2]}
    benches = [fake_benchmark(f"{module}::bench_one_gpu", 0.03,
                              code=code_keys(ROOT, module, "bench_one_gpu", files),
                              schedule="one", gpus=1, stages=1, microbatches=1, batch=16384,
                              microbatch_rows=16384, samples_per_s=5e5, peak_gib=3.0, busy_ms=25.0)]
    for gpus, schedule, batch, m in bench.POINTS:
        per_rank = bench.SCHEDULES[schedule][1]
        extra = {**bench.summary(made_up), "schedule": schedule, "gpus": gpus,
                 "stages": gpus * per_rank, "microbatches": m, "batch": batch,
                 "microbatch_rows": batch // m, "samples_per_s": batch / 0.03}
        if schedule in bench.FORMULA:
            extra["bubble_formula"] = snippet.bubble_fraction(gpus, m, per_rank)
        benches.append(fake_benchmark(
            f"{module}::bench_step[{schedule}-{gpus}gpus-{batch}-{m}mb]", 0.03,
            code=code_keys(ROOT, module, "bench_step", files), **extra))
    for day in ("21", "22"):
        write_run(tmp_path, fake_run(benches, date=f"2026-11-{day}T00:00:00+00:00",
                                     gpu_name="NVIDIA H200", gpu_count=2))
    build = Build(ROOT, "2x-nvidia-h200", timings_dir=tmp_path)
    page = ROOT / "docs" / "several-gpus" / "pipeline-parallelism.md"
    markdown, rendered = build.render_page(page.read_text(encoding="utf-8"),
                                           "several-gpus/pipeline-parallelism.md",
                                           "several-gpus/pipeline-parallelism/")
    assert not rendered.problems, rendered.problems
    assert not build.stale
    assert "timing unavailable" not in markdown
    assert "| Idle share, timelines |" in markdown and "Measured on" in markdown


# --- The page's claims against every recorded run (timings/; runs in CI) -------------------------

def step(schedule, gpus, batch, microbatches):
    return f"pipeline_parallelism.step[{schedule}-{gpus}gpus-{batch}-{microbatches}mb]"


FIXED_ROWS = {2: [step("gpipe", 2, 4096 * m, m) for m in (2, 4, 8, 16)],
              4: [step("gpipe", 4, 4096 * m, m) for m in (4, 8, 16)]}


@pytest.fixture
def measured_where(measured, _all_timings, _code_keys):
    """measured(*names) for the 2-GPU points; the 4-GPU points only where a run holds them
    (the four-GPU machine is lent at times: the page works with 2-GPU points alone)."""
    from fieldguide.measuring.timings import TimingError, runs_measuring

    def runs(gpus, *names):
        if gpus == 2:
            return measured(*names)
        try:
            return runs_measuring(_all_timings, *names, keys=_code_keys)
        except TimingError:
            return []

    return runs


@pytest.mark.parametrize("gpus", [pytest.param(2, marks=pytest.mark.xfail(strict=True, reason=(
    "all three runs on 2 H200s at the current code (20261129T005653Z and 010455Z, one lease; "
    "090635Z, another) put GPipe's idle share at 4096 samples per micro-batch 0.050 to 0.065 "
    "above the formula, at every M (M=2: 0.388/0.383/0.389 against 0.333; M=4: "
    "0.263/0.264/0.264 against 0.200): the formula "
    "is a floor here, not within 5 points; the page claims what the runs show instead"))), 4])
def test_idle_at_a_fixed_micro_batch_follows_the_bubble_formula(measured_where, gpus):
    """With 4096 samples per micro-batch the work grows with M, as the formula assumes: the idle
    share read from the kernel timelines lies within 5 points above (S-1)/(M+S-1) and 2 below."""
    above, below = FORMULA_WITHIN
    for name in FIXED_ROWS[gpus]:
        for run in measured_where(gpus, name):
            idle, formula = run.value(name, "idle_share"), run.value(name, "bubble_formula")
            assert idle - formula <= above, (str(run), name, idle)
            assert formula - idle <= below, (str(run), name, idle)


@pytest.mark.parametrize("gpus", [2, 4])
def test_idle_at_a_fixed_micro_batch_lies_a_few_points_above_the_formula(measured_where, gpus):
    """The bubble is a floor: at every M the idle share read from the timelines lies above
    (S-1)/(M+S-1) by what the page's bounds say, and fill and drain are half of the formula's
    share (GPipe's first GPU waits out its part between its forward and backward chunks)."""
    for name in FIXED_ROWS[gpus]:
        for run in measured_where(gpus, name):
            idle, formula = run.value(name, "idle_share"), run.value(name, "bubble_formula")
            assert idle - formula >= CLAIMS["idle_above_formula_min"], (str(run), name, idle)
            assert idle - formula <= CLAIMS["idle_above_formula_max"], (str(run), name, idle)
            if gpus == 2:
                off = run.value(name, "fill_drain_share") - formula / 2
                assert abs(off) <= CLAIMS["fill_drain_off_half_formula_max"], (str(run), name)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_at_a_fixed_batch_four_micro_batches_beat_sixteen(measured, schedule):
    few, many = step(schedule, 2, 16384, 4), step(schedule, 2, 16384, 16)
    for run in measured(few, many):
        assert run.value(few) < run.value(many), str(run)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_at_a_fixed_batch_the_pipelines_compute_grows_with_m(measured, schedule):
    """The formula's hidden assumption fails: cut finer, the same batch costs more kernel time."""
    few, many = step(schedule, 2, 16384, 4), step(schedule, 2, 16384, 16)
    for run in measured(few, many):
        assert run.value(few, "busy_ms") < run.value(many, "busy_ms"), str(run)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_at_16_micro_batches_the_grown_compute_is_there_alone_too(measured, schedule):
    """Compute inflation (kernel time in the pipeline over the same passes alone) stays near 1:
    the work grew with the cut, not from running beside the other stage."""
    many = step(schedule, 2, 16384, 16)
    for run in measured(many):
        off = abs(run.value(many, "compute_inflation") - 1)
        assert off <= CLAIMS["inflation_at_16_off_one_max"], (str(run), off)


def test_gpipe_at_16_micro_batches_is_slower_than_one_gpu(measured):
    many, one = step("gpipe", 2, 16384, 16), "pipeline_parallelism.one_gpu"
    for run in measured(many, one):
        assert run.value(many) > run.value(one), str(run)


@pytest.mark.parametrize("schedule", ["interleaved1f1b", "interleavedzb", "zbv"])
def test_two_stages_per_gpu_wait_more_and_lose_to_1f1b(measured, schedule):
    """8 micro-batches of 2048: against 1F1B with one stage per GPU, each schedule with two has
    more waits, more idle, more compute inflation, and a longer step."""
    one, two = step("1f1b", 2, 16384, 8), step(schedule, 2, 16384, 8)
    for run in measured(one, two):
        more = {f: run.value(two, f) > run.value(one, f)
                for f in ("waits_share", "idle_share", "compute_inflation")}
        assert all(more.values()), (str(run), more)
        assert run.value(two) > run.value(one), str(run)


def _fill_drain_ms(run, name):
    """Fill and drain as time: its share of the profiled step (the mean over the GPUs) times
    the step's span. The shares in the page's table are of steps of different lengths."""
    return run.value(name, "fill_drain_share") * run.value(name, "span_ms")


@pytest.mark.parametrize("schedule, shorter", [("interleaved1f1b", True),
                                               ("interleavedzb", False), ("zbv", False)])
def test_only_interleaved_1f1b_spends_less_time_in_fill_and_drain(measured, schedule, shorter):
    one, two = step("1f1b", 2, 16384, 8), step(schedule, 2, 16384, 8)
    for run in measured(one, two):
        found = _fill_drain_ms(run, two) < _fill_drain_ms(run, one)
        assert found == shorter, (str(run), _fill_drain_ms(run, two), _fill_drain_ms(run, one))


@pytest.mark.parametrize("gpus", [2, 4])
def test_1f1b_peaks_lower_than_gpipe_with_16_micro_batches(measured_where, gpus):
    """1F1B holds at most S micro-batches' activations, GPipe all M: the first GPU's peak."""
    gpipe, one_f = step("gpipe", gpus, 16384, 16), step("1f1b", gpus, 16384, 16)
    for run in measured_where(gpus, gpipe, one_f):
        assert run.value(one_f, "peak_gpu0_gib") < run.value(gpipe, "peak_gpu0_gib"), str(run)


# --- The worker ----------------------------------------------------------------------------------

def checks_on(mesh, device):
    """What this rank sees as a stage of the pipelines over `mesh` (a 1-D mesh, or the "pp"
    dimension of a larger one)."""
    import torch
    import torch.distributed as dist

    from snippets.several_gpus import pipeline_parallelism as pp

    n, group = mesh.size(), mesh.get_group()
    seen = {name: pp.compare_with_unsplit(getattr(pp, name), mesh, device,
                                          microbatches_for(name, n),
                                          1 if name in SINGLE else 2)
            for name in SINGLE + MULTI}
    stages, run = pp.build_pipeline(pp.make_model(), mesh, device, 4)
    x, y = torch.randn(32, 256, device=device), torch.randn(32, 256, device=device)
    seen["idle_parts"] = []
    for spans in pp.profiled_steps(lambda: pp.pipeline_step(stages, run, x, y), 2, device,
                                   group):
        everyone = [None] * n
        dist.all_gather_object(everyone, spans, group=group)
        seen["idle_parts"].append(pp.idle_parts(everyone)[mesh.get_local_rank()])
    seen["backend"] = dist.get_backend()
    return seen


def rank_checks(out_dir, pairs=False):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from snippets.several_gpus import pipeline_parallelism as pp

    mesh, device = pp.start_mesh(names=("pp",))
    seen = checks_on(mesh, device)
    if pairs:  # two pipelines of 2 stages: ranks 0 and 1, ranks 2 and 3
        two_by_two = init_device_mesh(device.type, (2, 2), mesh_dim_names=("dp", "pp"))
        seen["pair"] = checks_on(two_by_two["pp"], device)
    with open(os.path.join(out_dir, f"rank{dist.get_rank()}.json"), "w") as f:
        json.dump(seen, f)
    # freed at exit instead, gloo's threads abort Python one run in two (torch 2.13, CPU)
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    rank_checks(sys.argv[1], pairs=sys.argv[2:] == ["pairs"])
