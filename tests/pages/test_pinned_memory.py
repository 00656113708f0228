"""Claims of docs/data-movement/pinned-memory.md."""

import pytest

pytestmark = pytest.mark.snippet("snippets/data_movement/pinned_memory.py")

MiB = 2**20


@pytest.fixture(scope="module")
def snippet():
    from snippets.data_movement import pinned_memory

    return pinned_memory


def test_allocation_section_pins_what_it_says(snippet):
    assert snippet.pinned.is_pinned() and snippet.also_pinned.is_pinned()
    assert not snippet.pageable.is_pinned()
    assert snippet.also_pinned.data_ptr() != snippet.pageable.data_ptr()  # pin_memory() copies


def test_link_rate_formula(snippet):
    assert snippet.link_gbs(5, 16) == pytest.approx(63.02, abs=0.01)
    assert snippet.link_gbs(4, 16) == pytest.approx(31.51, abs=0.01)
    assert snippet.link_gbs(3, 16) == pytest.approx(15.75, abs=0.01)


def test_link_is_read_from_the_device(snippet):
    generation, lanes = snippet.pcie_link()
    assert generation in snippet.PCIE_GENERATIONS and lanes in (1, 2, 4, 8, 16)


def test_copies_arrive_intact(snippet):
    for direction in ("h2d", "d2h"):
        for pinned in (False, True):
            src, dst = snippet.make_buffers(MiB, pinned, direction)
            src.fill_(1)  # make_buffers only touches the host side; give the source content
            dst.zero_()
            snippet.copy_and_wait(src, dst)
            assert dst.cpu().eq(1).all()


def test_pinned_beats_pageable_for_large_copies(snippet):
    for direction in ("h2d", "d2h"):
        pinned = snippet.bandwidth_gbs(64 * MiB, True, direction)
        pageable = snippet.bandwidth_gbs(64 * MiB, False, direction)
        assert pinned > 1.2 * pageable, (direction, pinned, pageable)


def test_non_blocking_returns_early_only_from_pinned_memory(snippet):
    import statistics
    import time

    import torch

    def returned(host, non_blocking):
        times = []
        for _ in range(10):
            torch.cuda.synchronize()
            start = time.perf_counter()
            snippet.start_copy(host, non_blocking)
            times.append(time.perf_counter() - start)
            torch.cuda.synchronize()
        return statistics.median(times)

    pinned = torch.ones(64 * MiB, dtype=torch.uint8, pin_memory=True)
    pageable = torch.ones(64 * MiB, dtype=torch.uint8)
    copy_time = returned(pinned, False)
    assert returned(pinned, True) < 0.2 * copy_time
    assert returned(pageable, True) > 0.5 * copy_time  # non_blocking from pageable memory waits


def test_overlap_hides_the_copy_behind_cpu_work(snippet):
    import statistics

    import torch

    host = torch.ones(256 * MiB, dtype=torch.uint8, pin_memory=True)
    blocking = statistics.median(snippet.copy_while_cpu_works(host, False)[0] for _ in range(5))
    overlapped = statistics.median(snippet.copy_while_cpu_works(host, True)[0] for _ in range(5))
    assert overlapped < 0.8 * blocking
    _, on_gpu = snippet.copy_while_cpu_works(host, True)
    assert on_gpu.eq(1).all()


def test_reading_before_sync_sees_stale_data(snippet):
    import numpy as np

    early, late, expected = snippet.read_too_early()
    assert np.isnan(early).all(), "the early read should see the buffer's old contents"
    assert np.array_equal(late, expected)


def test_event_fix_reads_the_result(snippet):
    import torch

    host, expected = snippet.read_after_event()
    assert torch.equal(host, expected)


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) ---

CLAIMS = {"pinned_share_of_link": 0.8}


def test_pinned_host_to_device_reaches_the_bound_of_the_link_in_every_run(measured):
    names = [f"pinned_memory.copy[h2d-pinned-{size}]" for size in ("256MiB", "1GiB")]
    for run in measured(*names):
        for name in names:
            record = run.record(name)
            share = record.value("bandwidth_gbs") / record.value("link_gbs")
            assert share >= CLAIMS["pinned_share_of_link"], (run, name, share)


def test_pinned_beats_pageable_from_1MiB_up_in_every_run(measured):
    cases = [(d, s) for d in ("h2d", "d2h") for s in ("1MiB", "16MiB", "256MiB", "1GiB")]
    names = [f"pinned_memory.copy[{d}-{k}-{s}]" for d, s in cases for k in ("pinned", "pageable")]
    for run in measured(*names):
        for d, s in cases:
            assert run.value(f"pinned_memory.copy[{d}-pinned-{s}]") < run.value(
                f"pinned_memory.copy[{d}-pageable-{s}]"), (run, d, s)


def test_small_copies_cost_about_the_same_in_every_run(measured):
    for kind in ("pinned", "pageable"):
        names = [f"pinned_memory.copy[h2d-{kind}-{s}]" for s in ("1KiB", "16KiB")]
        for run in measured(*names):
            small = [run.value(n) for n in names]
            assert max(small) < 2 * min(small), (run, kind, small)


def test_pinning_costs_more_than_the_copy_it_enables_in_every_run(measured):
    for run in measured("pinned_memory.pin[256MiB]", "pinned_memory.copy[h2d-pinned-256MiB]"):
        assert run.value("pinned_memory.pin[256MiB]") > run.value(
            "pinned_memory.copy[h2d-pinned-256MiB]"), run


def test_only_pinned_non_blocking_returns_early_in_every_run(measured):
    names = [f"pinned_memory.return[{k}-{m}]" for k in ("pinned", "pageable")
             for m in ("blocking", "non_blocking")]
    for run in measured(*names):
        assert run.value("pinned_memory.return[pinned-non_blocking]") < 0.1 * run.value(
            "pinned_memory.return[pinned-blocking]"), run
        # 64 MiB from pageable memory: non_blocking still waits (large copies are not staged)
        assert run.value("pinned_memory.return[pageable-non_blocking]") > 0.5 * run.value(
            "pinned_memory.return[pageable-blocking]"), run


def test_non_blocking_hides_the_copy_behind_cpu_work_in_every_run(measured):
    for run in measured("pinned_memory.overlap[non_blocking]", "pinned_memory.overlap[blocking]"):
        assert run.value("pinned_memory.overlap[non_blocking]") < run.value(
            "pinned_memory.overlap[blocking]"), run
