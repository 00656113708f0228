"""Claims the pages make in words, checked against the committed H100 measurements.

Numbers on a page come from timings/ through shortcodes, but sentences such as "pinning costs
more than the copy it enables" are comparisons a new measurement could contradict. These tests
run in CI (no GPU needed) and fail when the data no longer supports the prose.
"""

import pytest

from fieldguide.timings import Timings

H100 = "nvidia-h100-80gb-hbm3"


@pytest.fixture(scope="module")
def h100():
    return Timings.for_gpu(H100)


def value(timings, name, field="median"):
    return timings.record(name).value(field)


class TestTimingGpuCode:
    def test_unsynchronized_clock_undercounts_at_least_tenfold(self, h100):
        assert value(h100, "timing_gpu_code.synchronized") > 10 * value(
            h100, "timing_gpu_code.launch_only")

    def test_first_call_costs_more(self, h100):
        assert value(h100, "timing_gpu_code.first_call", "first_over_steady") > 2


class TestPinnedMemory:
    def test_pinned_host_to_device_reaches_080_of_the_link(self, h100):
        for size in ("256MiB", "1GiB"):
            record = h100.record(f"pinned_memory.copy[h2d-pinned-{size}]")
            assert record.value("bandwidth_gbs") / record.value("link_gbs") >= 0.8

    def test_pinned_beats_pageable_from_1MiB_up(self, h100):
        for direction in ("h2d", "d2h"):
            for size in ("1MiB", "16MiB", "256MiB", "1GiB"):
                pinned = value(h100, f"pinned_memory.copy[{direction}-pinned-{size}]")
                pageable = value(h100, f"pinned_memory.copy[{direction}-pageable-{size}]")
                assert pinned < pageable, (direction, size)

    def test_small_copies_cost_about_the_same(self, h100):
        for kind in ("pinned", "pageable"):
            small = [value(h100, f"pinned_memory.copy[h2d-{kind}-{s}]") for s in ("1KiB", "16KiB")]
            assert max(small) < 2 * min(small)

    def test_pinning_costs_more_than_the_copy_it_enables(self, h100):
        assert value(h100, "pinned_memory.pin[256MiB]") > value(
            h100, "pinned_memory.copy[h2d-pinned-256MiB]")

    def test_only_pinned_non_blocking_returns_early(self, h100):
        early = value(h100, "pinned_memory.return[pinned-non_blocking]")
        assert early < 0.1 * value(h100, "pinned_memory.return[pinned-blocking]")
        assert value(h100, "pinned_memory.return[pageable-non_blocking]") > 0.5 * value(
            h100, "pinned_memory.return[pageable-blocking]")

    def test_non_blocking_hides_the_copy_behind_cpu_work(self, h100):
        assert value(h100, "pinned_memory.overlap[non_blocking]") < value(
            h100, "pinned_memory.overlap[blocking]")
