"""Claims of docs/first-steps/pytorch-on-a-gpu.md (most run on the CPU; the GPU ones are marked)."""

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.snippet("snippets/first_steps/pytorch_on_a_gpu.py")

needs_gpu = pytest.mark.gpus(1)


# --- Is there a GPU, and if not, why not -------------------------------------------------------

def test_device_follows_cuda_availability(snippet):
    assert snippet.device.type == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.skipif(torch.version.cuda is not None or torch.version.hip is not None,
                    reason="this PyTorch is a GPU build")
def test_cpu_only_build_is_named_as_the_reason(snippet):
    reason = snippet.why_no_gpu()
    assert reason is not None and "CPU-only build" in reason


@pytest.fixture
def cuda_build_without_gpu(monkeypatch):
    """Pretend to be a CUDA 13 build on a machine where CUDA is not usable."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return monkeypatch


@pytest.mark.parametrize("value", ["", "-1"])
def test_hidden_devices_are_named_as_the_reason(snippet, cuda_build_without_gpu, value):
    cuda_build_without_gpu.setenv("CUDA_VISIBLE_DEVICES", value)
    assert "CUDA_VISIBLE_DEVICES" in snippet.why_no_gpu()


def test_missing_driver_is_named_as_the_reason(snippet, cuda_build_without_gpu):
    cuda_build_without_gpu.setattr(snippet.shutil, "which", lambda name: None)
    assert "nvidia-smi" in snippet.why_no_gpu()
    assert snippet.driver_version() is None


def test_old_driver_is_named_as_the_reason(snippet, cuda_build_without_gpu):
    cuda_build_without_gpu.setattr(snippet.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    cuda_build_without_gpu.setattr(snippet, "driver_version", lambda: "535.104.05")
    reason = snippet.why_no_gpu()
    assert "too old" in reason and "580" in reason
    cuda_build_without_gpu.setattr(snippet, "driver_version", lambda: "580.65.06")
    assert "too old" not in snippet.why_no_gpu()


def test_min_driver_table_is_ordered(snippet):
    versions = [snippet.MIN_DRIVER[k] for k in sorted(snippet.MIN_DRIVER)]
    assert versions == sorted(versions)


@needs_gpu
def test_no_reason_when_cuda_works(snippet):
    assert snippet.why_no_gpu() is None
    driver = snippet.driver_version()
    assert driver is not None
    need = snippet.MIN_DRIVER[int(torch.version.cuda.split(".")[0])]
    assert int(driver.split(".")[0]) >= need


# --- Device properties and choosing a device ---------------------------------------------------

def test_describe_gpus_has_one_line_per_device(snippet):
    lines = snippet.describe_gpus()
    assert len(lines) == torch.cuda.device_count()
    for index, line in enumerate(lines):
        assert line.startswith(f"cuda:{index} ") and "compute capability" in line


@needs_gpu
def test_describe_gpus_reports_the_real_device(snippet):
    props = torch.cuda.get_device_properties(0)
    line = snippet.describe_gpus()[0]
    assert props.name in line and f"{props.major}.{props.minor}" in line


def test_one_tensor_per_gpu(snippet):
    tensors = snippet.one_tensor_per_gpu()
    assert [t.device for t in tensors] == [torch.device("cuda", i)
                                           for i in range(torch.cuda.device_count())]


@needs_gpu
def test_bare_cuda_means_the_current_device(snippet):
    last = torch.cuda.device_count() - 1
    before = torch.cuda.current_device()
    try:
        assert snippet.current_gpu_after_set_device(last) == torch.device("cuda", last)
        assert torch.cuda.current_device() == last
    finally:
        torch.cuda.set_device(before)
    assert snippet.gpu_inside_context(last) == torch.device("cuda", last)
    assert torch.cuda.current_device() == before  # the context manager restored it


def test_cuda_visible_devices_empty_hides_every_gpu(snippet):
    assert snippet.device_count_with("") == 0


@needs_gpu
def test_cuda_visible_devices_selects_gpus(snippet):
    assert snippet.device_count_with("0") == 1
    assert snippet.device_count_with(",".join(map(str, range(torch.cuda.device_count())))) == \
        torch.cuda.device_count()


# --- Creating on the device vs moving ------------------------------------------------------------

def test_both_creation_paths_end_on_the_device(snippet):
    for make in (snippet.created_on_device, snippet.created_then_moved):
        t = make((64, 64))
        assert t.device.type == snippet.device.type and t.shape == (64, 64)
        assert t.dtype == torch.float32


@needs_gpu
@pytest.mark.timed
def test_creating_on_the_device_beats_creating_then_moving(snippet):
    import statistics
    import time

    def median_time(make, shape=(4096, 4096), repeats=5):
        make(shape)  # warm up: allocator, generator, kernels
        times = []
        for _ in range(repeats):
            torch.cuda.synchronize()
            start = time.perf_counter()
            make(shape)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    on_device = median_time(snippet.created_on_device)
    moved = median_time(snippet.created_then_moved)
    assert on_device < 0.2 * moved, (on_device, moved)


def test_creation_arguments(snippet):
    assert snippet.zeros.dtype == torch.float16 and snippet.zeros.device.type == snippet.device.type
    assert snippet.weights.requires_grad
    assert snippet.from_list.dtype == torch.float32
    assert snippet.from_numpy.dtype == torch.float64  # NumPy's float64 is kept
    assert snippet.like.shape == snippet.weights.shape and snippet.like.device == snippet.weights.device
    assert not snippet.like.requires_grad


# --- Modules and tensors -------------------------------------------------------------------------

def test_module_to_moves_in_place_and_returns_self(snippet):
    model = torch.nn.Linear(4, 4)
    params = list(model.parameters())
    assert model.to(snippet.device) is model
    assert all(a is b for a, b in zip(params, model.parameters(), strict=True))  # same objects
    assert snippet.where_is(model) == {params[0].device}
    assert params[0].device.type == snippet.device.type


def test_tensor_to_returns_a_new_tensor_when_it_moves_or_converts(snippet):
    x = torch.ones(3)
    moved = x.to(snippet.device, dtype=torch.float64)
    assert moved is not x and x.device.type == "cpu" and x.dtype == torch.float32


def test_where_is_includes_buffers(snippet):
    assert snippet.where_is(snippet.model) == {snippet.y.device}
    assert any(True for _ in snippet.model.buffers())  # BatchNorm's running stats


@needs_gpu
def test_mixing_devices_fails():
    model = torch.nn.Linear(4, 4).to("cuda")
    with pytest.raises(RuntimeError, match="same device"):
        model(torch.ones(2, 4))


def test_to_arguments_do_what_they_say(snippet):
    assert snippet.a.device.type == snippet.device.type and snippet.a.dtype == torch.float32
    assert snippet.b.dtype == torch.bfloat16
    assert snippet.c.is_contiguous(memory_format=torch.channels_last)
    assert not snippet.images.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(snippet.c, snippet.images)  # same values, different layout
    assert torch.equal(snippet.d.cpu(), snippet.images)
    assert snippet.e is not snippet.images


@needs_gpu
def test_staging_buffer_is_pinned(snippet):
    assert snippet.staging.is_pinned()


def test_to_returns_self_unless_something_changes_or_copy_is_true(snippet):
    t = snippet.t
    assert t.to(snippet.device) is t
    assert t.to(t.device, t.dtype) is t
    assert t.to(snippet.device, copy=True) is not t
    c = snippet.c
    assert c.to(memory_format=torch.channels_last) is c


def test_gpu_is_not_a_device_type(snippet):
    with pytest.raises(RuntimeError, match="gpu"):
        torch.ones(2).to("gpu")
    message = snippet.message_for_gpu_device()
    assert "cuda" in message and "gpu" in message


# --- torch.accelerator ---------------------------------------------------------------------------

def test_pick_device_matches_cuda_check_here(snippet):
    # On this suite's machines (CPU-only CI, CUDA GPUs) both ways agree; on a Mac it would say mps.
    assert snippet.pick_device().type == snippet.device.type


def test_accelerator_summary_is_consistent(snippet):
    summary = snippet.accelerator_summary()
    assert summary["available"] == (summary["count"] > 0)
    assert summary["available"] == (summary["device"].type != "cpu")


# --- NumPy-like, dynamic graphs ------------------------------------------------------------------

def test_from_numpy_shares_memory_and_cpu_numpy_round_trips(snippet):
    assert np.allclose(snippet.grid, np.linspace(1.0, 2.0, 5))  # `shared += 1` changed the array
    assert np.allclose(snippet.back, 2 * snippet.grid)


@needs_gpu
def test_numpy_needs_a_cpu_tensor():
    with pytest.raises(TypeError, match="cpu"):
        torch.ones(2, device="cuda").numpy()


def test_autograd_follows_the_loop_that_ran(snippet):
    assert snippet.v.grad.tolist() == [8.0, 8.0, 8.0]
    w = torch.full((3,), 5.0, requires_grad=True)  # norm 8.66: one doubling
    snippet.doubled_until_large(w).backward()
    assert w.grad.tolist() == [2.0, 2.0, 2.0]
