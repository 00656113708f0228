"""Claims of docs/first-steps/cupy-and-numpy.md (CuPy needs a GPU, so all of these do)."""

import statistics

import numpy as np
import pytest

from tests.helpers import run_python

pytestmark = pytest.mark.snippet("snippets/first_steps/cupy_and_numpy.py")


def test_arrays_live_on_the_device_they_were_made_on(snippet):
    cp = snippet.cp
    assert isinstance(snippet.x, cp.ndarray) and snippet.x.device.id == 0
    assert snippet.y.device.id == 0
    assert isinstance(snippet.total, cp.ndarray) and snippet.total.ndim == 0  # not a Python float
    assert float(snippet.total) == sum(range(12))
    assert 0 < snippet.free_bytes <= snippet.total_bytes


def test_round_trip_returns_the_same_numbers(snippet):
    assert isinstance(snippet.on_gpu, snippet.cp.ndarray)
    assert isinstance(snippet.back, np.ndarray)
    assert np.array_equal(snippet.back, snippet.host)
    assert np.array_equal(snippet.on_gpu.get(), snippet.host)


def test_numpy_refuses_implicit_conversion(snippet):
    with pytest.raises(TypeError):
        np.asarray(snippet.on_gpu)
    assert snippet.refused  # the section caught the same error


@pytest.mark.parametrize(("dtype", "rtol"), [(np.float64, 1e-12), (np.float32, 1e-4)],
                         ids=["fp64", "fp32"])
def test_gpu_product_matches_numpy(snippet, dtype, rtol):
    cp = snippet.cp
    a = snippet.random_matrix(512, dtype)
    assert a.dtype == np.dtype(dtype)
    on_gpu = snippet.cupy_product(a, cp.empty_like(a))
    a_host = cp.asnumpy(a)
    on_cpu = snippet.numpy_product(a_host, np.empty_like(a_host))
    np.testing.assert_allclose(cp.asnumpy(on_gpu), on_cpu, rtol=rtol)


@pytest.mark.timed
def test_profiler_gpu_time_is_the_work_and_cpu_time_the_launch(snippet):
    a = snippet.random_matrix(4096, np.float32)
    gpu_s, cpu_s = snippet.gpu_and_cpu_seconds(a)
    # A 4096^3 product keeps an H100 busy for milliseconds; queueing it takes microseconds.
    assert gpu_s > 5 * cpu_s, (gpu_s, cpu_s)
    out = snippet.cp.empty_like(a)
    synced = statistics.median(snippet.timed(snippet.cupy_product, a, out) for _ in range(5))
    assert synced == pytest.approx(gpu_s, rel=0.5)


@pytest.mark.timed
def test_first_product_in_a_process_costs_more():
    code = ("from snippets.first_steps import cupy_and_numpy as s; "
            "first, steady = s.first_call_vs_steady(2048, s.cp.float64); print(first / steady)")
    result = run_python(["-c", code])
    assert result.returncode == 0, result.stderr
    assert float(result.stdout.split()[-1]) > 1.5


def test_dlpack_shares_memory_both_ways(snippet):
    cp, torch = snippet.cp, snippet.torch
    c = cp.arange(1000, dtype=cp.float32)
    t = torch.from_dlpack(c)
    assert t.is_cuda and t.data_ptr() == c.data.ptr  # same bytes, no copy
    t.mul_(2)  # write through PyTorch ...
    torch.cuda.synchronize()
    assert float(c[10]) == 20.0  # ... read through CuPy
    u = cp.from_dlpack(t)
    assert u.data.ptr == t.data_ptr()
    u[0] = -1.0  # write through CuPy ...
    cp.cuda.Device().synchronize()
    assert t[0].item() == -1.0  # ... read through PyTorch
    assert snippet.t.data_ptr() == snippet.c.data.ptr and float(snippet.c[0]) == 42.0


def test_elementwise_kernel_matches_numpy(snippet):
    cp = snippet.cp
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.float64):
        x = rng.uniform(-3, 3, size=(257, 129)).astype(dtype)  # odd shape: no lucky alignment
        expected = snippet.reference(x, 1.5, -0.25, -1.0, 2.0)
        for version in (snippet.fused, snippet.unfused):
            got = version(cp.asarray(x), 1.5, -0.25, -1.0, 2.0)
            assert got.dtype == dtype
            np.testing.assert_allclose(cp.asnumpy(got), expected, rtol=1e-6, atol=1e-6)
        assert (expected == 2.0).any() and (expected == -1.0).any()  # both clamps were exercised


@pytest.mark.timed
def test_fused_kernel_beats_three_kernels(snippet):
    cp = snippet.cp
    x = cp.random.rand(2**26, dtype=cp.float32)

    def seconds(fn):
        fn(x, 2.0, 0.5, 0.0, 1.0)
        times = []
        for _ in range(10):
            cp.cuda.Device().synchronize()
            start = cp.cuda.Event()
            end = cp.cuda.Event()
            start.record()
            fn(x, 2.0, 0.5, 0.0, 1.0)
            end.record()
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end))
        return statistics.median(times)

    assert seconds(snippet.fused) < 0.7 * seconds(snippet.unfused)


def test_copies_into_preallocated_host_arrays_arrive_intact(snippet):
    cp, torch = snippet.cp, snippet.torch
    a = cp.arange(3 * 1000, dtype=cp.float64).reshape(3, 1000)
    for pinned in (False, True):
        out = snippet.host_array_like(a, pinned)
        assert torch.from_numpy(out).is_pinned() == pinned  # cupyx.empty_pinned page-locks
        assert snippet.to_host_into(a, out) is out  # no new array: the copy lands in `out`
        np.testing.assert_array_equal(out, cp.asnumpy(a))
    fresh = snippet.to_host_fresh(a)
    assert isinstance(fresh, np.ndarray) and not torch.from_numpy(fresh).is_pinned()


@pytest.mark.timed
def test_preallocated_pinned_copy_beats_a_fresh_asnumpy(snippet):
    """What the page separates: a fresh `cp.asnumpy` pays for a new host array (its pages
    are mapped during the copy) as well as the pageable copy; a pinned array made once
    leaves only the link."""
    import time

    cp = snippet.cp
    a = cp.ones((4096, 8192), dtype=cp.float64)  # 256 MiB
    pinned = snippet.host_array_like(a, pinned=True)

    def seconds(fn, *args):
        fn(*args)  # warm-up
        times = []
        for _ in range(3):
            cp.cuda.Device().synchronize()
            start = time.perf_counter()
            fn(*args)  # both return once the bytes are on the host
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    fresh = seconds(snippet.to_host_fresh, a)
    into_pinned = seconds(snippet.to_host_into, a, pinned)
    assert into_pinned < 0.5 * fresh, (into_pinned, fresh)


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) ---

def test_cupy_beats_numpy_on_the_16000_product_in_every_run(measured):
    for precision in ("fp64", "fp32"):
        names = [f"cupy_and_numpy.matmul_{m}[{precision}]" for m in ("cupy", "numpy")]
        for run in measured(*names):
            assert run.value(names[0]) < run.value(names[1]), (run, precision)


def test_fused_kernel_beats_three_kernels_in_every_run(measured):
    names = ("cupy_and_numpy.affine_clamp[fused]", "cupy_and_numpy.affine_clamp[unfused]")
    for run in measured(*names):
        assert run.value(names[0]) < run.value(names[1]), run


def test_a_fresh_asnumpy_spends_most_of_its_time_on_the_new_array_in_every_run(measured):
    """The page: most of a fresh `cp.asnumpy` goes into allocating and mapping the new array;
    the copy into a pageable array made once takes less than half as long."""
    fresh, pageable = "cupy_and_numpy.to_host[fresh]", "cupy_and_numpy.to_host[pageable]"
    for run in measured(fresh, pageable):
        assert run.value(fresh, "bytes") == run.value(pageable, "bytes"), run
        assert run.value(pageable) < 0.5 * run.value(fresh), run


def test_a_pinned_array_made_once_is_the_fastest_way_back_in_every_run(measured):
    names = [f"cupy_and_numpy.to_host[{into}]" for into in ("pinned", "pageable", "fresh")]
    for run in measured(*names):
        assert len({run.value(name, "bytes") for name in names}) == 1, run
        pinned, pageable, fresh = (run.value(name) for name in names)
        assert pinned < pageable < fresh, run


def test_moving_the_input_costs_more_than_the_product_in_every_run(measured):
    names = ("cupy_and_numpy.transfer[to_gpu]", "cupy_and_numpy.matmul_cupy[fp64]")
    for run in measured(*names):
        assert run.value(names[0]) > run.value(names[1]), run
