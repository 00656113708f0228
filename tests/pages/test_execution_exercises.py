"""Claims of docs/execution/execution-exercises.md: the timing waits for the work it times, and
the training loop waits for the GPU once instead of twice per step."""

import math
import time

import pytest
import torch

from tests.helpers import printed_on_reference_gpu

pytestmark = pytest.mark.snippet("snippets/execution/execution_exercises.py")

CLAIMS = {"undercount": 10}  # on a GPU, the wrong clock sees under a tenth of the product


def clock_and_syncs(monkeypatch, snippet):
    """Record, in order, every clock read and every synchronization the module makes."""
    events = []
    clock = time.perf_counter
    monkeypatch.setattr(snippet, "sync", lambda: events.append("sync"))
    monkeypatch.setattr(snippet.time, "perf_counter", lambda: events.append("clock") or clock())
    return events


def test_every_clock_read_of_the_fix_follows_a_synchronization(monkeypatch, snippet):
    events = clock_and_syncs(monkeypatch, snippet)
    calls = []
    median, iqr = snippet.time_per_call(lambda: calls.append(1), repeats=7, warmup=2)
    assert len(calls) == 2 + 7, "warm-up calls, then one timed call per repeat"
    assert events.count("clock") == 2 * 7
    assert all(events[i - 1] == "sync" for i, e in enumerate(events) if e == "clock")
    assert median >= 0 and iqr >= 0


def test_the_original_stops_its_clock_without_waiting(monkeypatch, snippet):
    """The check above can fail: the original reads the clock with work still queued."""
    events = clock_and_syncs(monkeypatch, snippet)
    snippet.time_per_call_wrong(lambda: None, repeats=5)
    assert events == ["clock", "clock"]


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_on_a_gpu_the_original_sees_a_fraction_of_the_real_time(snippet):
    a = torch.randn(4096, 4096, device="cuda")
    median, _ = snippet.time_per_call(torch.matmul, a, a)
    snippet.sync()
    wrong = min(snippet.time_per_call_wrong(torch.matmul, a, a, repeats=5) for _ in range(3))
    snippet.sync()
    assert wrong < median / CLAIMS["undercount"], (wrong, median)


def count_waits(monkeypatch, fn, *args):
    """How often fn reads a tensor's value on the host: .item() and bool(tensor)."""
    waits = []
    item, truth = torch.Tensor.item, torch.Tensor.__bool__
    monkeypatch.setattr(torch.Tensor, "item", lambda t: waits.append("item") or item(t))
    monkeypatch.setattr(torch.Tensor, "__bool__", lambda t: waits.append("bool") or truth(t))
    result = fn(*args)
    monkeypatch.undo()
    return result, waits


def test_the_queued_loop_reads_the_gpu_once_per_loop_not_twice_per_step(monkeypatch, snippet):
    steps = 20
    waiting, waits_before = count_waits(monkeypatch, snippet.train_waiting, *snippet.make_problem(steps))
    queued, waits_after = count_waits(monkeypatch, snippet.train_queued, *snippet.make_problem(steps))
    assert sorted(waits_before) == ["bool"] * steps + ["item"] * steps
    assert sorted(waits_after) == ["bool", "item"]
    assert math.isclose(queued, waiting, rel_tol=1e-5), "the same mean loss"


def test_a_loss_that_is_not_finite_still_raises(snippet):
    model, optimizer, batches = snippet.make_problem(steps=5)
    batches[2][0][0, 0] = float("nan")
    for train in (snippet.train_waiting, snippet.train_queued):
        with pytest.raises(FloatingPointError):
            train(*snippet.make_problem(steps=5)[:2], batches)


def test_the_queued_loop_raises_after_the_bad_step_was_applied(snippet):
    """The page: by the time the fix raises, the weights are already not finite; the
    original raises before the bad step, with its weights intact."""
    batches = snippet.make_problem(steps=5)[2]
    batches[2][0][0, 0] = float("nan")
    for train, weights_finite in ((snippet.train_waiting, True), (snippet.train_queued, False)):
        model, optimizer, _ = snippet.make_problem(steps=5)
        with pytest.raises(FloatingPointError):
            train(model, optimizer, batches)
        finite = all(bool(p.isfinite().all()) for p in model.parameters())
        assert finite == weights_finite, train.__name__


@pytest.mark.gpus(1)
def test_on_a_gpu_the_queued_loop_synchronizes_only_after_it(snippet):
    from snippets.execution.async_execution import count_syncs

    steps = 20
    first, second = snippet.make_problem(steps), snippet.make_problem(steps)  # copies wait
    snippet.sync()
    before = count_syncs(lambda: snippet.train_waiting(*first))
    after = count_syncs(lambda: snippet.train_queued(*second))
    assert before >= 2 * steps
    assert after <= 2, "at most bool(finite) and total.item(), after the loop"


def test_the_printed_run_shows_the_lesson():
    """What the page printed on the reference GPU, recorded alone: the wrong clock saw under
    1/undercount of the product's real time (a cold first product, billed to the wrong clock,
    once made it read 2.3 times the real time instead)."""
    import re

    text, gpu = printed_on_reference_gpu("execution/execution-exercises.md")
    wrong = float(re.search(r"^wrong: (\d+) us per product", text, re.M)[1])
    right = float(re.search(r"^right: (\d+) us per product", text, re.M)[1])
    assert wrong < right / CLAIMS["undercount"], (gpu, wrong, right)
