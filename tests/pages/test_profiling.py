"""Claims of docs/execution/profiling.md."""

import importlib.util
import json
import types

import pytest
import torch

pytestmark = pytest.mark.snippet("snippets/execution/profiling.py")


def trace_categories(path):
    events = json.loads(path.read_text(encoding="utf-8"))["traceEvents"]
    return events, {event.get("cat") for event in events}


def test_cumulative_seconds_adds_up_the_unrounded_times(snippet):
    # Rows as pstats keeps them: (file, line, name) -> (calls, primitive calls, own, cumulative,
    # callers). pstats' get_stats_profile() would round each time to whole milliseconds: 0.0 here.
    rows = {("a.py", 1, "forward"): (2, 2, 1e-5, 2.4e-4, {}),
            ("b.py", 9, "forward"): (1, 1, 1e-5, 1.1e-4, {}),
            ("~", 0, "<method 'item' of 'torch._C.TensorBase' objects>"): (3, 3, 3e-4, 3e-4, {}),
            ("c.py", 5, "forward_hook"): (1, 1, 5e-3, 5e-3, {})}
    stats = types.SimpleNamespace(stats=rows)
    assert snippet.cumulative_seconds(stats, "forward") == pytest.approx(3.5e-4)
    assert snippet.cumulative_seconds(stats, "item") == pytest.approx(3e-4)
    with pytest.raises(KeyError, match="loss_value"):
        snippet.cumulative_seconds(stats, "loss_value")


@pytest.mark.timed
def test_cprofile_is_right_on_a_cpu(snippet):
    # On a CPU every operation finishes before it returns, so cProfile charges the real work.
    # The page's CPU size: big enough that forward's share stands out on a busy CI machine.
    x, w = torch.randn(256, 256), torch.randn(256, 256) / 256**0.5
    stats = snippet.cprofile_steps(x, w, steps=3)
    assert snippet.cumulative_seconds(stats, "forward") > snippet.cumulative_seconds(
        stats, "loss_value")


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_cprofile_blames_the_synchronizing_call_on_a_gpu(snippet):
    stats = snippet.cprofile_steps(snippet.x, snippet.w)
    forward = snippet.cumulative_seconds(stats, "forward")
    loss_value = snippet.cumulative_seconds(stats, "loss_value")
    item = snippet.cumulative_seconds(stats, "item")
    # The matrix products return at once; the wait for them shows up under .item().
    assert loss_value > 5 * forward
    assert item > 0.8 * loss_value
    # ...while the products are what really takes the time: CUDA events measure them on the GPU.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    snippet.sync()
    start.record()
    snippet.forward(snippet.x, snippet.w)
    end.record()
    end.synchronize()
    real_per_call = start.elapsed_time(end) / 1000
    assert real_per_call > 5 * forward / 5  # cProfile saw 5 calls of forward


def test_profiler_records_only_the_active_steps_and_writes_a_trace(snippet, tmp_path):
    trace = tmp_path / "trace.json"
    table = snippet.profile_steps(snippet.x, snippet.w, trace)
    assert "forward" in table and "loss_value" in table and "aten::mm" in table
    events, categories = trace_categories(trace)  # valid JSON, the Chrome trace format
    assert "cpu_op" in categories
    labels = [e["name"] for e in events if e.get("cat") == "user_annotation"]
    assert labels.count("forward") == 3  # schedule(wait=1, warmup=1, active=3): 3 of 6 steps
    assert labels.count("loss_value") == 3


@pytest.mark.gpus(1)
def test_profiler_trace_has_kernels_and_table_has_gpu_time(snippet, tmp_path):
    trace = tmp_path / "trace.json"
    table = snippet.profile_steps(snippet.x, snippet.w, trace)
    assert "CUDA total" in table
    events, categories = trace_categories(trace)
    assert "kernel" in categories
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert sum(e["dur"] for e in kernels) > 0


def test_old_cuda_time_names_are_deprecated_and_the_sort_key_is_current(snippet):
    averages = torch.autograd.profiler_util.FunctionEventAvg()
    with pytest.warns(FutureWarning, match="device_time"):
        _ = averages.cuda_time
    getattr(averages, snippet.sort_key)  # the suite turns a deprecation warning into an error
    assert "cuda" not in snippet.sort_key


@pytest.mark.filterwarnings("ignore:CUDA is not available:UserWarning")  # on a CPU build
def test_old_profiler_wants_use_device_not_use_cuda():
    import warnings

    with pytest.warns(FutureWarning, match="use_device = 'cuda'"):
        torch.autograd.profiler.profile(use_cuda=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # the current spelling is not deprecated
        torch.autograd.profiler.profile(use_device="cuda")


@pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 13),
                    reason="checked on PyTorch 2.13, where bottleneck is gone")
def test_torch_utils_bottleneck_is_gone():
    assert importlib.util.find_spec("torch.utils.bottleneck") is None


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_gpu_util_is_high_for_one_tiny_kernel_but_power_tells_the_truth(snippet):
    tiny_util, tiny_watts = snippet.watch_gpu(snippet.tiny_kernel_loop())
    big_util, big_watts = snippet.watch_gpu(snippet.big_matmul_loop())
    assert tiny_util >= 80, "one single-block kernel at a time already reads as a busy GPU"
    assert big_util >= 80
    assert tiny_watts < 0.8 * big_watts, (tiny_watts, big_watts)


@pytest.mark.gpus(1)
def test_the_tiny_kernel_is_one_block(snippet, tmp_path):
    # The kernel the graph repeats: an addition to one float runs as a single block.
    from torch.profiler import ProfilerActivity, profile

    counter = torch.zeros(1, device="cuda")
    counter.add_(1)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        counter.add_(1)
        snippet.sync()
    prof.export_chrome_trace(str(tmp_path / "tiny.json"))
    events, _ = trace_categories(tmp_path / "tiny.json")
    grids = [e["args"]["grid"] for e in events if e.get("cat") == "kernel"]
    assert grids and all(grid == [1, 1, 1] for grid in grids), grids


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) ---

CLAIMS = {"tiny_loop_utilization_pct": 80, "tiny_loop_power_share": 0.8}


def test_one_tiny_kernel_reads_as_busy_but_draws_little_power_in_every_run(measured):
    for run in measured("profiling.busy[tiny]", "profiling.busy[matmul]"):
        tiny, matmul = run.record("profiling.busy[tiny]"), run.record("profiling.busy[matmul]")
        assert tiny.value("utilization_pct") >= CLAIMS["tiny_loop_utilization_pct"], run
        assert tiny.value("power_w") < CLAIMS["tiny_loop_power_share"] * matmul.value("power_w"), run
