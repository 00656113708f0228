"""Claims of docs/several-gpus/model-parallelism.md: the split model and its pipeline compute what
the naive version computes (CPU and GPU), and on two GPUs the pipeline leaves them idle less."""

import pytest
import torch

from snippets.several_gpus import model_parallelism as snippet

pytestmark = pytest.mark.snippet("snippets/several_gpus/model_parallelism.py")


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
        idle[micro_batches] = sum(snippet.idle_fraction(bars, f"GPU {g}") for g in (0, 1)) / 2
    assert idle[1] > 0.4, idle  # naive: each GPU waits for the other about half the time
    assert idle[8] < idle[1] - 0.1, idle


# --- The page's claims against every recorded run (timings/; runs in CI) -------------------------

def test_eight_micro_batches_leave_the_gpus_less_idle_and_step_faster(measured):
    naive, piped = "model_parallelism.step[naive]", "model_parallelism.step[8-micro-batches]"
    for run in measured(naive, piped):
        assert run.value(piped, "idle_mean") < run.value(naive, "idle_mean") - 0.1, str(run)
        assert run.value(piped) < run.value(naive), str(run)
