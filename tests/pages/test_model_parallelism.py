"""Claims of docs/several-gpus/model-parallelism.md: the split model and its pipeline compute what
the naive version computes (CPU and GPU), and on two GPUs the pipeline leaves them idle less."""

import itertools

import pytest
import torch

from snippets.several_gpus import model_parallelism as snippet

pytestmark = pytest.mark.snippet("snippets/several_gpus/model_parallelism.py")

CLAIMS = {
    "naive_idle_min": 0.4,         # naive split: each GPU's idle share of the step, at least
    # eight micro-batches: the GPUs' mean idle share, below. It follows the host's launch speed:
    # two runs on one lease had the same busy time and idle shares that differed by a sixth
    "pipelined_idle_max": 0.33,
    "pipeline_speedup_min": 1.4,   # naive step time / eight micro-batches' step time, at least
    "sixteen_over_eight_min": 0.97,  # sixteen micro-batches' step time / eight's: no real gain
}


@pytest.fixture
def data():
    torch.manual_seed(0)
    return torch.randn(96, 64), torch.randn(96, 1)


def make_model():
    torch.manual_seed(1)
    return snippet.TwoStages(width=64, depth=4)


@pytest.mark.parametrize("micro_batches", [2, 3, 8])
def test_pipelined_forward_equals_the_naive_one(data, micro_batches):
    x, _ = data
    model = make_model()
    with torch.no_grad():
        naive, piped = model(x), snippet.pipelined_forward(model, x, micro_batches)
    assert piped.device == snippet.devices[1]
    torch.testing.assert_close(piped, naive, rtol=1e-4, atol=1e-5)


def test_a_pipelined_step_takes_the_same_step(data):
    x, y = data
    models = [make_model(), make_model()]
    for model, micro_batches in zip(models, (1, 4), strict=True):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        snippet.train_step(model, optimizer, x, y, micro_batches)
    for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    assert not torch.equal(next(make_model().parameters()), next(models[0].parameters()))


def test_idle_fraction_is_the_share_of_the_step_without_kernels():
    bars = [{"lane": "GPU 0", "name": "kernels", "start": 0.0, "duration": 1.0},
            {"lane": "GPU 1", "name": "kernels", "start": 1.0, "duration": 3.0}]
    assert snippet.idle_fraction(bars, "GPU 0") == pytest.approx(0.75)
    assert snippet.idle_fraction(bars, "GPU 1") == pytest.approx(0.25)


@pytest.mark.gpus(2)
def test_the_stages_live_on_two_gpus():
    model = snippet.TwoStages(width=64, depth=4)
    assert {p.device for p in model.stage1.parameters()} == {torch.device("cuda:0")}
    assert {p.device for p in model.stage2.parameters()} == {torch.device("cuda:1")}


@pytest.mark.gpus(2)
@pytest.mark.timed
def test_the_pipeline_keeps_both_gpus_busier():
    torch.manual_seed(0)
    model = snippet.TwoStages(width=4096, depth=8)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    x, y = torch.randn(8192, 4096), torch.randn(8192, 1)
    idle = {}
    for micro_batches in (1, 8):
        snippet.train_step(model, optimizer, x, y, micro_batches)  # warm-up
        bars = snippet.busy_timeline(lambda m=micro_batches: snippet.train_step(model, optimizer, x, y, m))
        assert {b["lane"] for b in bars} == {"GPU 0", "GPU 1"}
        idle[micro_batches] = [snippet.idle_fraction(bars, f"GPU {g}") for g in (0, 1)]
    naive, piped = idle[1], idle[8]
    # naive: each GPU waits for the other about half the time
    assert min(naive) >= CLAIMS["naive_idle_min"], idle
    assert sum(piped) / 2 < CLAIMS["pipelined_idle_max"], idle


# --- The page's claims against every recorded run (timings/; runs in CI) -------------------------

STEP = "model_parallelism.step[{}]"
VARIANTS = {1: "naive", 2: "2-micro-batches", 4: "4-micro-batches", 8: "8-micro-batches",
            16: "16-micro-batches"}
NAMES = {m: STEP.format(v) for m, v in VARIANTS.items()}


def test_the_naive_split_leaves_each_gpu_idle_about_half_the_step(measured):
    for run in measured(NAMES[1]):
        for gpu in (0, 1):
            idle = run.value(NAMES[1], f"idle_gpu{gpu}")
            assert idle >= CLAIMS["naive_idle_min"], (str(run), gpu, idle)


def test_eight_micro_batches_leave_the_gpus_less_idle_and_step_faster(measured):
    naive, piped = NAMES[1], NAMES[8]
    for run in measured(naive, piped):
        assert run.value(piped, "idle_mean") < CLAIMS["pipelined_idle_max"], str(run)
        speedup = run.value(naive) / run.value(piped)
        assert speedup >= CLAIMS["pipeline_speedup_min"], (str(run), speedup)


def test_each_doubling_up_to_eight_is_faster_and_less_idle(measured):
    for run in measured(*NAMES.values()):
        steps = [NAMES[m] for m in (1, 2, 4, 8)]
        for fewer, more in itertools.pairwise(steps):
            assert run.value(more) < run.value(fewer), (str(run), more)
            assert run.value(more, "idle_mean") < run.value(fewer, "idle_mean"), (str(run), more)


def busy_seconds(run, name):
    """The GPUs' mean busy time in a step: the step's time less its mean idle share."""
    return run.value(name) * (1 - run.value(name, "idle_mean"))


def test_sixteen_idles_less_but_computes_longer_and_is_no_faster(measured):
    for run in measured(*NAMES.values()):
        eight, sixteen = NAMES[8], NAMES[16]
        assert run.value(sixteen, "idle_mean") < run.value(eight, "idle_mean"), str(run)
        ratio = run.value(sixteen) / run.value(eight)
        assert ratio >= CLAIMS["sixteen_over_eight_min"], (str(run), ratio)
        busy = {n: busy_seconds(run, n) for n in (eight, sixteen)}
        assert busy[sixteen] > busy[eight], (str(run), busy)


def test_idle_stays_above_the_bubble_formula(measured):
    stages = 2
    for run in measured(*NAMES.values()):
        for micro_batches in (2, 4, 8, 16):
            bubble = (stages - 1) / (micro_batches + stages - 1)
            idle = run.value(NAMES[micro_batches], "idle_mean")
            assert idle > bubble, (str(run), micro_batches, idle, bubble)


def test_gpu0_idles_more_than_gpu1_in_every_variant(measured):
    for run in measured(*NAMES.values()):
        for name in NAMES.values():
            assert run.value(name, "idle_gpu0") > run.value(name, "idle_gpu1"), (str(run), name)
