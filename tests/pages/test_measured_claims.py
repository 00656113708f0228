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


class TestStreams:
    def test_overlap_efficiency_is_at_least_090(self, h100):
        assert value(h100, "streams.overlapped", "overlap_efficiency") >= 0.9


class TestCudaGraphs:
    def test_graph_cuts_time_per_operation_at_least_fivefold(self, h100):
        eager = value(h100, "cuda_graphs.chain[eager-200ops]", "per_op")
        graph = value(h100, "cuda_graphs.chain[graph-200ops]", "per_op")
        assert eager >= 5 * graph


class TestAsyncExecution:
    def test_a_sync_every_step_costs_time(self, h100):
        assert value(h100, "async_execution.train_loop[every-step]") > value(
            h100, "async_execution.train_loop[every-50]")

    def test_launch_blocking_slows_the_loop(self, h100):
        assert value(h100, "async_execution.launch_blocking[blocking]", "step_us") > value(
            h100, "async_execution.launch_blocking[default]", "step_us")


class TestDataLoading:
    def test_workers_give_at_least_three_times_the_throughput(self, h100):
        alone = value(h100, "data_loading.loader[0]", "items_per_s")
        best = max(value(h100, f"data_loading.loader[{n}]", "items_per_s") for n in (1, 2, 4, 8))
        assert best >= 3 * alone

    def test_gpu_resident_augmentation_beats_the_dataloader(self, h100):
        assert value(h100, "data_loading.augment[gpu]", "items_per_s") > value(
            h100, "data_loading.augment[dataloader]", "items_per_s")


class TestProfiling:
    def test_one_tiny_kernel_reads_as_busy_but_draws_little_power(self, h100):
        assert value(h100, "profiling.busy[tiny]", "utilization_pct") >= 80
        assert value(h100, "profiling.busy[tiny]", "power_w") < 0.8 * value(
            h100, "profiling.busy[matmul]", "power_w")


class TestCpuVsGpu:
    def test_tiny_op_is_slower_on_gpu_and_triad_faster(self, h100):
        assert value(h100, "cpu_vs_gpu.tiny_op[gpu]") > value(h100, "cpu_vs_gpu.tiny_op[cpu]")
        assert value(h100, "cpu_vs_gpu.triad[gpu]") < value(h100, "cpu_vs_gpu.triad[cpu]")

    def test_lower_precisions_are_faster_and_less_exact(self, h100):
        fp32 = h100.record("cpu_vs_gpu.matmul[fp32]")
        for precision in ("tf32", "fp16", "bf16"):
            record = h100.record(f"cpu_vs_gpu.matmul[{precision}]")
            assert record.value("median") < fp32.value("median")
            assert record.value("relative_error") > fp32.value("relative_error")


class TestWhenToUseAGpu:
    def test_small_sizes_favour_the_cpu(self, h100):
        for case, size in (("elementwise", 1024), ("matmul", 32)):
            assert value(h100, f"when_to_use_a_gpu.{case}[cpu-{size}]") < value(
                h100, f"when_to_use_a_gpu.{case}[gpu-transfers-{size}]")

    def test_largest_matmul_favours_the_gpu_even_with_transfers(self, h100):
        assert value(h100, "when_to_use_a_gpu.matmul[gpu-transfers-4096]") < value(
            h100, "when_to_use_a_gpu.matmul[cpu-4096]")

    def test_transfers_are_most_of_the_large_elementwise_time(self, h100):
        size = 2**26
        resident = value(h100, f"when_to_use_a_gpu.elementwise[gpu-resident-{size}]")
        with_transfers = value(h100, f"when_to_use_a_gpu.elementwise[gpu-transfers-{size}]")
        assert resident < 0.5 * with_transfers
        assert resident < value(h100, f"when_to_use_a_gpu.elementwise[cpu-{size}]")

    def test_a_python_loop_of_tiny_steps_is_slower_on_the_gpu(self, h100):
        assert value(h100, "when_to_use_a_gpu.sequential[loop-gpu]") > value(
            h100, "when_to_use_a_gpu.sequential[loop-cpu]")


class TestCupyAndNumpy:
    def test_cupy_beats_numpy_on_the_16000_product(self, h100):
        for precision in ("fp64", "fp32"):
            assert value(h100, f"cupy_and_numpy.matmul_cupy[{precision}]") < value(
                h100, f"cupy_and_numpy.matmul_numpy[{precision}]")

    def test_fused_kernel_beats_three_kernels(self, h100):
        assert value(h100, "cupy_and_numpy.affine_clamp[fused]") < value(
            h100, "cupy_and_numpy.affine_clamp[unfused]")


class TestDiffusion:
    GPU_VARIANTS = ("torch_compile", "cupy_kernel", "cupy_graph")

    def test_fastest_step_reaches_075_of_copy_bandwidth_at_4096(self, h100):
        copy = value(h100, "diffusion.copy_ceiling[4096]", "bandwidth_gbs")
        best = max(value(h100, f"diffusion.step[{v}-4096]", "bandwidth_gbs")
                   for v in self.GPU_VARIANTS)
        assert best >= 0.75 * copy

    def test_seed_step_stays_under_010_of_copy_bandwidth(self, h100):
        copy = value(h100, "diffusion.copy_ceiling[4096]", "bandwidth_gbs")
        assert value(h100, "diffusion.step[torch_seed-4096]", "bandwidth_gbs") < 0.1 * copy

    def test_graphs_remove_launch_overhead_on_the_small_grid(self, h100):
        assert value(h100, "diffusion.step[cupy_graph-640]", "per_op") < 0.5 * value(
            h100, "diffusion.step[cupy_kernel-640]", "per_op")


class TestProcessesThreadsGil:
    """Also checked live by tests/test_processes_threads_gil.py, which skips on a busy machine."""

    def test_threads_do_not_speed_up_pure_python_and_processes_do(self, h100):
        serial = value(h100, "processes_threads_gil.pure_python[serial]")
        assert value(h100, "processes_threads_gil.pure_python[threads]") > 0.8 * serial
        assert value(h100, "processes_threads_gil.pure_python[processes]") < 0.5 * serial

    def test_threads_speed_up_numpy(self, h100):
        assert value(h100, "processes_threads_gil.numpy_sort[threads]") < value(
            h100, "processes_threads_gil.numpy_sort[serial]")
