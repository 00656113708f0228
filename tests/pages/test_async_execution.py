"""Claims of docs/execution/async-execution.md."""

import statistics
import time

import pytest
import torch

from snippets.execution import async_execution as snippet
from tests.helpers import run_python

pytestmark = pytest.mark.snippet("snippets/execution/async_execution.py")


def test_reading_the_loss_less_often_changes_nothing():
    """Same seed, same batches: the loop that syncs every step and the one that syncs every
    5 steps see the same losses and end with the same weights."""
    steps = 23  # not a multiple of `every`: the last, partial group is read too
    batches = snippet.make_batches()
    model_a, opt_a = snippet.make_model()
    model_b, opt_b = snippet.make_model()
    every_step = snippet.train_reading_every_step(model_a, opt_a, batches, steps)
    every_5 = snippet.train_reading_every(model_b, opt_b, batches, steps, every=5)
    assert len(every_step) == len(every_5) == steps
    assert all(isinstance(v, float) for v in every_5)
    torch.testing.assert_close(torch.tensor(every_step), torch.tensor(every_5), rtol=1e-6, atol=0)
    for p, q in zip(model_a.parameters(), model_b.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=0)
    # and the loop does train: later passes over the same batches have a lower loss
    assert statistics.fmean(every_step[-8:]) < statistics.fmean(every_step[:8])


def test_sync_free_version_computes_the_same_sum():
    x = snippet.x
    torch.testing.assert_close(snippet.positive_sum_with_mask(x),
                               snippet.positive_sum_without_sync(x), rtol=1e-4, atol=1e-3)


def test_listed_operations_run():
    for op in (*snippet.SYNCHRONIZING.values(), *snippet.QUEUED.values()):
        op(snippet.x)


@pytest.mark.timed
def test_step_timer_reports_a_time():
    assert 0 < snippet.seconds_per_step(every=5, steps=10, repeats=1) < 1


@pytest.mark.gpus(1)
@pytest.mark.parametrize("name", list(snippet.SYNCHRONIZING))
def test_sync_debug_mode_flags_hidden_syncs(name):
    op = snippet.SYNCHRONIZING[name]
    op(snippet.x)  # warm-up, so first-call work is not counted
    assert snippet.count_syncs(lambda: op(snippet.x)) >= 1
    assert torch.cuda.get_sync_debug_mode() == 0  # restored


@pytest.mark.gpus(1)
@pytest.mark.parametrize("name", list(snippet.QUEUED))
def test_fixed_shape_operations_do_not_sync(name):
    op = snippet.QUEUED[name]
    op(snippet.x)
    torch.cuda.synchronize()
    assert snippet.count_syncs(lambda: op(snippet.x)) == 0


@pytest.mark.gpus(1)
def test_error_mode_raises_on_item_and_nonzero():
    for op in (lambda x: x.sum().item(), lambda x: x.nonzero()):
        with pytest.raises(RuntimeError, match="synchronizing"), snippet.sync_debug_mode("error"):
            op(snippet.x)
        assert torch.cuda.get_sync_debug_mode() == 0


@pytest.mark.gpus(1)
def test_training_step_contains_no_hidden_sync():
    model, optimizer = snippet.make_model()
    batches = snippet.make_batches()
    snippet.train_step(model, optimizer, *batches[0])  # warm-up
    torch.cuda.synchronize()
    with snippet.sync_debug_mode("error"):
        for x, y in batches:
            snippet.train_step(model, optimizer, x, y)
    torch.cuda.synchronize()


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_queueing_returns_long_before_the_work_is_done():
    snippet.launch_and_wait(snippet.a)  # warm-up
    launched, finished = [], []
    for _ in range(5):
        snippet.sync()
        start = time.perf_counter()
        snippet.launch(snippet.a)
        launched.append(time.perf_counter() - start)
        snippet.sync()
        finished.append(time.perf_counter() - start)
    assert statistics.median(launched) < 0.5 * statistics.median(finished)


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_item_every_step_is_slower_than_every_50():
    every_step = snippet.seconds_per_step(every=1)
    every_50 = snippet.seconds_per_step(every=50)
    # The host work (a few ms per step) overlaps the GPU only without the per-step sync.
    assert every_step > 1.15 * every_50, (every_step, every_50)


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_growing_the_pool_costs_more_than_reusing_a_cached_block():
    # In a new Python, as the timing run measures it: in this process, earlier tests' live
    # tensors can share a segment with the freed block, so empty_cache() cannot return it and
    # "fresh" reuses it (H100 and H200, 2026-11-23: 18.6 µs both ways).
    code = ("from snippets.execution.async_execution import allocation_seconds, alloc_bytes\n"
            "print(allocation_seconds(alloc_bytes, cached=False),"
            " allocation_seconds(alloc_bytes, cached=True))")
    result = run_python(["-c", code], timeout=300)
    assert result.returncode == 0, result.stderr
    fresh, cached = map(float, result.stdout.split()[-2:])
    assert fresh > 1.5 * cached, (fresh, cached)


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_launch_blocking_slows_the_training_loop(monkeypatch):
    from fieldguide import ROOT

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the child imports the snippet
    normal = snippet.seconds_per_step_in_fresh_process(launch_blocking=False)
    blocking = snippet.seconds_per_step_in_fresh_process(launch_blocking=True)
    assert blocking > 1.1 * normal, (blocking, normal)


# The table's host-to-device rows. An idle GPU cannot tell a copy that waits for the queue from
# one that does not, so each case runs behind tens of milliseconds of queued products.

def _returned_while_busy(op, products=20):
    """(seconds until op() returned with the GPU busy, seconds the queue alone takes)."""
    snippet.launch_and_wait(snippet.a, 1)  # warm-up: a kernel's first launch can block
    op()  # and the op's own first-call costs
    snippet.sync()
    start = time.perf_counter()
    snippet.launch(snippet.a, products)
    snippet.sync()
    drain = time.perf_counter() - start
    snippet.launch(snippet.a, products)
    start = time.perf_counter()
    op()
    returned = time.perf_counter() - start
    snippet.sync()
    return returned, drain


def _host_to_device_cases():
    import numpy as np

    pageable = torch.ones(2**18)  # 1 MiB of float32
    pinned = pageable.pin_memory()
    big_pageable = torch.ones(2**24)  # 64 MiB
    return {
        "blocking": {
            'x.to("cuda") from pageable memory': lambda: pageable.to(snippet.device),
            'x.to("cuda") from pinned memory': lambda: pinned.to(snippet.device),
            'torch.tensor(list, device="cuda")':
                lambda: torch.tensor([1.0, 2.0, 3.0], device=snippet.device),
            'torch.as_tensor(array, device="cuda")':
                lambda: torch.as_tensor(np.ones(3), device=snippet.device),
        },
        "queued": {
            "pinned, non_blocking=True": lambda: pinned.to(snippet.device, non_blocking=True),
        },
        "waits unflagged": {
            "64 MiB pageable, non_blocking=True":
                lambda: big_pageable.to(snippet.device, non_blocking=True),
        },
    }


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_blocking_host_to_device_copies_wait_for_the_queue_and_are_flagged():
    for name, op in _host_to_device_cases()["blocking"].items():
        returned, drain = _returned_while_busy(op)
        assert returned > 0.5 * drain, (name, returned, drain)
        assert snippet.count_syncs(op) >= 1, name


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_pinned_non_blocking_copy_stays_queued():
    for name, op in _host_to_device_cases()["queued"].items():
        returned, drain = _returned_while_busy(op)
        assert returned < 0.1 * drain, (name, returned, drain)
        assert snippet.count_syncs(op) == 0, name


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_large_pageable_non_blocking_copy_waits_but_sync_debug_mode_misses_it():
    """The driver, not PyTorch, makes the host wait here, so the debug mode cannot see it."""
    for name, op in _host_to_device_cases()["waits unflagged"].items():
        returned, drain = _returned_while_busy(op)
        assert returned > 0.5 * drain, (name, returned, drain)
        assert snippet.count_syncs(op) == 0, name


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) ---

def test_a_sync_every_step_costs_time_in_every_run(measured):
    names = ("async_execution.train_loop[every-step]", "async_execution.train_loop[every-50]")
    for run in measured(*names):
        assert run.value(names[0]) > run.value(names[1]), run


def test_launch_blocking_slows_the_loop_in_every_run(measured):
    names = ("async_execution.launch_blocking[blocking]", "async_execution.launch_blocking[default]")
    for run in measured(*names):
        assert run.value(names[0], "step_us") > run.value(names[1], "step_us"), run
