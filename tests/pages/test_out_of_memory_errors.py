"""Claims of docs/memory/out-of-memory-errors.md.

The snippet needs CUDA, so its claims are GPU tests (marked one by one). Two claims the page
builds on hold without a GPU and run on the CPU too: that leaving the except block frees what
the failed step held (plain Python and autograd), and which environment variable this
PyTorch's allocator settings are read from.
"""

import gc
import os
import re
import subprocess
import sys
import weakref

import pytest

SNIPPET = "snippets/memory/out_of_memory_errors.py"
on_gpu = pytest.mark.snippet(SNIPPET)
MiB, GiB = 2**20, 2**30


# --- Without a GPU: the Python the recovery relies on, and the variable's name --------------------

def test_leaving_the_except_block_frees_the_failed_steps_tensors():
    """A stand-in for a CUDA out-of-memory error deep in a forward pass: what the failed
    step built is alive inside the except block and gone after it, with no gc.collect()."""
    import torch
    from torch import nn

    activations = []

    class RunsOutOfMemory(nn.Module):
        def forward(self, x):
            activations.append(weakref.ref(x))  # this layer's input: an activation
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB.")

    model = nn.Sequential(nn.Linear(8, 64), nn.GELU(), RunsOutOfMemory())
    gc.disable()  # freed by reference counting alone, as on the page
    try:
        try:
            model(torch.randn(4, 8)).sum().backward()
        except torch.OutOfMemoryError:
            assert activations[0]() is not None, "the traceback should still hold the step"
        assert activations[0]() is None, "leaving the except block should free the step"
    finally:
        gc.enable()


def test_keeping_the_error_keeps_the_failed_step():
    """The control: hold on to the error (here in a list) and the step's tensors stay."""
    import torch

    activations, errors = [], []

    def step():
        x = torch.randn(4, 8)
        activations.append(weakref.ref(x))
        raise torch.OutOfMemoryError("CUDA out of memory.")

    try:
        step()
    except torch.OutOfMemoryError as error:
        errors.append(error)
    assert activations[0]() is not None
    errors.clear()
    assert activations[0]() is None


def settings_read_from(variable):
    """The allocator settings a fresh PyTorch reports with `variable` set (a private
    accessor, used only here: it works without a GPU)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("ALLOC_CONF")}
    env[variable] = "expandable_segments:True"
    code = "import torch; print(torch._C._accelerator_getAllocatorSettings())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"this PyTorch has no _accelerator_getAllocatorSettings: {out.stderr[-200:]}")
    return out.stdout.strip()


@pytest.mark.parametrize("variable", ["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"])
def test_this_pytorch_reads_both_names(variable):
    assert "expandable_segments:True" in settings_read_from(variable)


# --- The snapshot dumped from the except block (its module runs anywhere) ------------------------

snapshot_module = pytest.mark.snippet("snippets/memory/out_of_memory_errors_snapshot.py")


@snapshot_module
def test_run_or_dump_returns_what_fits_and_raises_the_error_again(tmp_path):
    import torch

    from snippets.memory import out_of_memory_errors_snapshot as snap

    path = tmp_path / "oom.pickle"
    assert snap.run_or_dump(lambda: 42, path) == 42 and not path.exists()

    def fails():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB.")

    with pytest.raises(torch.OutOfMemoryError):
        snap.run_or_dump(fails, path)
    assert path.exists() == (snap.device.type == "cuda")  # only CUDA records a history


@snapshot_module
@pytest.mark.parametrize("caller_records", [False, True])
def test_run_or_dump_leaves_the_callers_recording_as_it_found_it(tmp_path, monkeypatch,
                                                                 caller_records):
    # The CUDA calls stood in for on the CPU: run_or_dump starts and stops a recording only
    # where none ran, and dumps from the caller's own where one did.
    import torch

    from snippets.memory import out_of_memory_errors_snapshot as snap

    calls, state = [], {"on": caller_records}

    def record(enabled="all", **kwargs):
        calls.append(enabled)
        state["on"] = enabled is not None

    monkeypatch.setattr(snap, "device", torch.device("cuda", 0))
    monkeypatch.setattr(torch.cuda, "init", lambda: None)  # no CUDA here to set up
    monkeypatch.setattr(torch._C, "_cuda_isHistoryEnabled", lambda: state["on"],
                        raising=False)
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", record)
    monkeypatch.setattr(torch.cuda.memory, "_dump_snapshot",
                        lambda path: calls.append(("dump", state["on"])))

    def fails():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB.")

    assert snap.run_or_dump(lambda: 42, tmp_path / "oom.pickle") == 42
    with pytest.raises(torch.OutOfMemoryError):
        snap.run_or_dump(fails, tmp_path / "oom.pickle")
    assert state["on"] == caller_records
    if caller_records:
        assert calls == [("dump", True)]
    else:
        assert calls == ["all", None, "all", ("dump", True), None]


def test_the_failed_allocation_is_the_last_oom_event_of_the_history(tmp_path):
    import pickle

    from snippets.memory import out_of_memory_errors_snapshot as snap

    path = tmp_path / "oom.pickle"
    events = [{"action": "alloc", "size": 512}, {"action": "oom", "size": 3 * GiB,
                                                 "device_free": GiB},
              {"action": "free_requested", "size": 512}]
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [events]}))
    assert snap.failed_allocation(path) == (3 * GiB, GiB)
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [events[:1]]}))
    assert snap.failed_allocation(path) is None


@snapshot_module
@pytest.mark.gpus(1)
@pytest.mark.whole_gpu
def test_a_real_out_of_memory_leaves_a_snapshot_ending_at_the_failed_allocation(tmp_path):
    import torch

    from snippets.memory import out_of_memory_errors_snapshot as snap

    path = tmp_path / "oom.pickle"
    free, _ = torch.cuda.mem_get_info()
    with pytest.raises(torch.OutOfMemoryError):
        snap.run_or_dump(lambda: torch.empty(2 * free, dtype=torch.uint8, device="cuda"),
                         path)
    asked, device_free = snap.failed_allocation(path)
    assert asked >= 2 * free and 0 < device_free < asked, (asked, device_free, free)


@snapshot_module
@pytest.mark.gpus(1)
def test_a_recording_the_caller_started_stays_on_after_run_or_dump(tmp_path):
    import torch

    from snippets.memory import out_of_memory_errors_snapshot as snap

    torch.cuda.memory._record_memory_history(max_entries=1000)
    try:
        assert snap.run_or_dump(lambda: torch.ones(4, device="cuda").sum().item(),
                                tmp_path / "oom.pickle") == 4
        assert torch._C._cuda_isHistoryEnabled()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    assert not torch._C._cuda_isHistoryEnabled()


# --- On a GPU ------------------------------------------------------------------------------------

CLAIMS = {
    "expandable_gap_reduction": 2.0,   # default reserved-minus-allocated / expandable, at least
}


@pytest.fixture(scope="module")
def snippet():
    """The snippet module, imported only where a test runs: it builds its model on the GPU."""
    import importlib

    return importlib.import_module("snippets.memory.out_of_memory_errors")


@pytest.fixture
def capped(snippet):
    """The snippet with AdamW's state created and PyTorch limited to 2 GiB; the limit and the
    cache are given back after each test."""
    import torch

    outside = torch.cuda.memory_allocated()  # what earlier tests of the session still hold
    snippet.train_step(256)
    snippet.limit_memory(2 + outside / 2**30)
    yield snippet
    snippet.unlimit_memory()
    torch.cuda.empty_cache()


@on_gpu
def test_the_message_says_what_was_asked_for_and_what_is_cached(capped):
    message = capped.out_of_memory_message(65536)
    assert message is not None
    assert re.search(r"Tried to allocate \d", message)
    assert "reserved by PyTorch but unallocated" in message


@on_gpu
def test_the_failed_step_is_held_inside_except_and_released_after(capped):
    before, inside, after = capped.held_while_handling(65536)
    input_bytes = 65536 * capped.WIDTH * 4  # float32
    assert inside - before >= input_bytes, (before, inside)  # the input, and activations so far
    assert after == before


@on_gpu
def test_fit_step_halves_until_the_step_fits_and_leaves_memory_as_it_found_it(capped):
    import torch

    before = torch.cuda.memory_allocated()
    ooms = torch.cuda.memory_stats()["num_ooms"]
    loss, fitted = capped.fit_step(65536)
    assert 1 <= fitted < 65536 and fitted & (fitted - 1) == 0  # a power of two
    assert torch.isfinite(torch.tensor(loss))
    assert torch.cuda.memory_stats()["num_ooms"] > ooms
    assert torch.cuda.memory_allocated() == before


@on_gpu
def test_an_out_of_memory_error_inside_optimizer_step_leaves_half_a_step_done(snippet):
    """The page: the default (foreach) AdamW had already counted the step, decayed the weights
    and updated its moments when it ran out of memory for its temporaries, so retrying the
    step would apply them twice. The fused implementation needs no temporaries and fits."""
    import torch

    torch.cuda.empty_cache()
    foreach = snippet.failed_optimizer_step(fused=False)
    assert foreach == {"raised": True, "step changed": True, "moments changed": True,
                       "weights changed": True}, foreach
    fused = snippet.failed_optimizer_step(fused=True)
    assert fused == {"raised": False, "step changed": True, "moments changed": True,
                     "weights changed": True}, fused


@on_gpu
@pytest.mark.whole_gpu
def test_a_real_out_of_memory_on_the_whole_gpu_is_recovered(snippet):
    """No limit: a batch whose input fills a quarter of the free memory, and whose first
    activation does not fit at all. Allocated memory returns to its baseline."""
    import torch

    snippet.train_step(256)
    torch.cuda.empty_cache()
    baseline = torch.cuda.memory_allocated()
    free, _ = torch.cuda.mem_get_info()
    batch = free // (4 * 4 * snippet.WIDTH)  # x: free / 4 bytes; up(x): free bytes
    ooms = torch.cuda.memory_stats()["num_ooms"]
    try:
        raised = False
        try:
            snippet.train_step(batch)
        except torch.OutOfMemoryError:  # a plain except: nothing keeps the error afterwards
            raised = True
        assert raised
        snippet.optimizer.zero_grad(set_to_none=True)
        assert torch.cuda.memory_allocated() == baseline
        assert torch.cuda.memory_stats()["num_ooms"] == ooms + 1
        _, fitted = snippet.fit_step(batch)
        assert fitted < batch and torch.cuda.memory_allocated() == baseline
    finally:
        torch.cuda.empty_cache()  # hand the cached gigabytes back


@pytest.fixture(scope="module")
def growing(snippet):
    import torch

    torch.cuda.empty_cache()
    return {variable: snippet.growing_batches(variable)
            for variable in (None, "PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")}


@on_gpu
def test_the_default_allocator_reserves_far_more_than_the_batches_need(growing):
    default = growing[None]
    assert not default["expandable"]
    assert default["allocated"] == 16 * 16 * MiB  # only the kept results are alive
    assert default["gap"] >= 4 * GiB, default      # cached segments of the old batches
    assert default["segments"] >= 16, default


@on_gpu
def test_expandable_segments_narrow_the_gap_by_the_pages_bound(growing):
    default, expandable = growing[None], growing["PYTORCH_ALLOC_CONF"]
    assert expandable["expandable"], "PYTORCH_ALLOC_CONF=expandable_segments:True was ignored"
    assert expandable["allocated"] == default["allocated"]
    assert default["gap"] >= CLAIMS["expandable_gap_reduction"] * expandable["gap"], (default, expandable)


@on_gpu
def test_this_pytorch_honours_the_new_name_and_still_the_old_one(growing):
    assert growing["PYTORCH_ALLOC_CONF"]["expandable"]
    assert not growing["PYTORCH_ALLOC_CONF"]["warned"]
    assert growing["PYTORCH_CUDA_ALLOC_CONF"]["expandable"]


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) ---

GROWING = "out_of_memory_errors.growing_batches[{}]"


def test_expandable_segments_narrow_the_gap_in_every_run(measured):
    names = [GROWING.format(s) for s in ("default", "PYTORCH_ALLOC_CONF")]
    for run in measured(*names):
        default, expandable = (run.value(n, "gap_bytes") for n in names)
        assert default >= CLAIMS["expandable_gap_reduction"] * expandable, (run, default, expandable)
        assert run.value(names[1], "expandable") == "yes", run


def test_the_failed_step_was_released_in_every_run(measured):
    name = "out_of_memory_errors.recover"
    for run in measured(name):
        assert run.value(name, "held_bytes") > 0, run
        assert run.value(name, "after_bytes") == run.value(name, "before_bytes"), run
        assert run.value(name, "fitted_batch") < run.value(name, "tried_batch"), run


def test_the_message_shows_the_raised_cap_and_the_old_variable_in_every_run(measured):
    """The page: "... allowed" is the budget set on top of what the process already held, the
    page's model and nothing else; the message of this PyTorch still suggests
    PYTORCH_CUDA_ALLOC_CONF."""
    name = "out_of_memory_errors.recover"
    for run in measured(name):
        message = run.value(name, "message")
        allowed = float(re.search(r"([\d.]+) GiB allowed", message)[1])
        cap, outside = run.value(name, "cap_bytes"), run.value(name, "outside_bytes")
        assert outside > 0 and allowed == pytest.approx((cap + outside) / GiB, abs=0.01), run
        assert outside == run.value(name, "model_bytes"), run
        assert run.value(name, "before_bytes") > outside, run  # AdamW's state on top
        assert run.value(name, "held_bytes") == run.value(name, "inside_bytes") - run.value(
            name, "before_bytes"), run
        assert "PYTORCH_CUDA_ALLOC_CONF" in message, run


def test_empty_cache_returns_the_whole_free_segments_in_every_run(measured):
    """The page: one segment per batch, all kept; empty_cache() returned the whole free ones,
    and only the segments the kept results filled stayed, with free pieces inside them. With
    expandable segments, one segment, and little more than the results stays."""
    names = [GROWING.format(s) for s in ("default", "PYTORCH_ALLOC_CONF")]
    for run in measured(*names):
        default = {f: run.value(names[0], f) for f in (
            "segments", "allocated_bytes", "reserved_bytes", "gap_bytes",
            "reserved_after_empty_cache_bytes", "inactive_split_bytes")}
        assert default["segments"] >= 16, run
        assert default["reserved_bytes"] >= sum((step + 1) * 64 * MiB for step in range(16)), run
        stayed = default["reserved_after_empty_cache_bytes"] - default["allocated_bytes"]
        assert 0 < stayed < 0.5 * default["gap_bytes"], run          # most of the gap went back
        assert default["reserved_after_empty_cache_bytes"] < 3 * default["allocated_bytes"], run
        assert default["inactive_split_bytes"] > 0, run
        expandable = {f: run.value(names[1], f) for f in (
            "segments", "allocated_bytes", "reserved_after_empty_cache_bytes")}
        assert expandable["segments"] == 1, run
        assert expandable["reserved_after_empty_cache_bytes"] <= 1.1 * expandable["allocated_bytes"], run
