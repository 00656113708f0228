"""Claims of docs/execution/events.md (all need a CUDA device: the snippet is GPUS_NEEDED = 1)."""

import statistics
import time

import pytest

pytestmark = pytest.mark.snippet("snippets/execution/events.py")

# Bounds the page quotes (timing-bound): a host pause between two events, as a share of the pause
CLAIMS = {"idle_pause_share": 0.9, "queued_pause_share": 0.1}


def test_consumer_sees_the_producers_result(snippet):
    import torch

    expected = snippet.same_on_one_stream(snippet.a)
    for _ in range(3):
        got = snippet.produce_on_side_stream(snippet.a)
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-3)


def test_query_is_false_while_work_runs_and_true_after_synchronize(snippet):
    import torch

    snippet.long_gpu_work(snippet.a)  # warm-up
    torch.cuda.synchronize()
    snippet.long_gpu_work(snippet.a)
    done = torch.cuda.Event()
    done.record()
    assert done.query() is False
    done.synchronize()
    assert done.query() is True


def test_cpu_works_while_the_gpu_runs(snippet):
    import torch

    torch.cuda.synchronize()
    snippet.long_gpu_work(snippet.a)
    done = torch.cuda.Event()
    done.record()
    chunks = snippet.work_until_done(done)
    assert chunks >= 1
    assert done.query()


@pytest.mark.timed
def test_elapsed_time_agrees_with_a_synchronized_clock(snippet):
    snippet.wall_seconds(snippet.long_gpu_work, snippet.a)  # warm-up
    events = statistics.median(snippet.gpu_seconds(snippet.long_gpu_work, snippet.a)
                               for _ in range(5))
    wall = statistics.median(snippet.wall_seconds(snippet.long_gpu_work, snippet.a)
                             for _ in range(5))
    assert events == pytest.approx(wall, rel=0.25)


@pytest.mark.timed
def test_a_host_pause_is_timed_only_when_the_gpu_is_idle(snippet):
    pause = 0.01
    snippet.timed_host_pause(snippet.a, pause, queued=20)  # warm-up
    idle = statistics.median(snippet.timed_host_pause(snippet.a, pause) for _ in range(3))
    queued = statistics.median(snippet.timed_host_pause(snippet.a, pause, queued=20)
                               for _ in range(3))
    # No GPU work lies between the events: on an idle GPU they still span the host's pause...
    assert idle >= CLAIMS["idle_pause_share"] * pause, idle
    # ...and behind 20 products (tens of ms, far longer than the pause) they do not.
    assert queued < CLAIMS["queued_pause_share"] * pause, queued


@pytest.mark.timed
def test_waiting_on_an_event_overlaps_cpu_and_gpu_work(snippet):
    snippet.wall_seconds(snippet.gpu_and_cpu, snippet.a)  # warm-up
    serial = statistics.median(snippet.wall_seconds(snippet.gpu_then_cpu, snippet.a)
                               for _ in range(5))
    overlapped = statistics.median(snippet.wall_seconds(snippet.gpu_and_cpu, snippet.a)
                                   for _ in range(5))
    assert overlapped < 0.8 * serial, (overlapped, serial)


def test_event_synchronize_does_not_wait_for_other_streams(snippet):
    import torch

    snippet.wait_for_device(snippet.a)  # warm-up
    torch.cuda.synchronize()
    small, side_done = snippet.wait_for_event(snippet.a)
    assert side_done.query() is False, "event.synchronize() should not wait for the side stream"
    torch.cuda.synchronize()
    assert side_done.query() is True
    torch.testing.assert_close(small, snippet.a[:, :64].sum(dim=0))


@pytest.mark.timed
def test_event_synchronize_returns_sooner_than_device_synchronize(snippet):
    import torch

    def timed(fn):
        times = []
        for _ in range(5):
            torch.cuda.synchronize()
            start = time.perf_counter()
            fn(snippet.a)
            times.append(time.perf_counter() - start)
        torch.cuda.synchronize()
        return statistics.median(times)

    assert timed(snippet.wait_for_event) < 0.5 * timed(snippet.wait_for_device)


@pytest.mark.timed
def test_record_and_query_cost_microseconds_not_milliseconds(snippet):
    import torch

    for timing in (True, False):
        event = torch.cuda.Event(enable_timing=timing)
        event.record()
        start = time.perf_counter()
        snippet.record_many(event, 1000)
        snippet.query_many(event, 1000)
        assert (time.perf_counter() - start) / 2000 < 100e-6


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) ---

def test_a_host_pause_is_timed_only_when_the_gpu_is_idle_in_every_run(measured):
    idle, queued = "events.host_pause[idle]", "events.host_pause[queued-20]"
    for run in measured(idle, queued):
        pause = run.value(idle, "pause_s")
        assert run.value(queued, "pause_s") == pause, run
        # Idle: the events span the host's pause, though no GPU work lies between them...
        assert run.value(idle, "event_s") >= CLAIMS["idle_pause_share"] * pause, run
        # ...behind 20 queued products the GPU passes them back to back.
        assert run.value(queued, "event_s") < CLAIMS["queued_pause_share"] * pause, run


def test_the_queue_outlasts_the_pause_in_every_run(measured):
    """20 products, twice `long_gpu_work`, keep the GPU busy for longer than the host pauses."""
    for run in measured("events.gpu_work", "events.host_pause[queued-20]"):
        assert 2 * run.value("events.gpu_work") > run.value("events.host_pause[queued-20]",
                                                            "pause_s"), run
