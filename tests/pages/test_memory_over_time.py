"""Claims of docs/memory/memory-over-time.md.

Recording needs CUDA (GPU tests, marked one by one); turning a recording into a timeline is
plain Python, checked on the CPU with made-up events.
"""

import pickle

import pytest

from snippets.memory import memory_over_time as module  # importable without a GPU

SNIPPET = "snippets/memory/memory_over_time.py"
on_gpu = pytest.mark.snippet(SNIPPET)
MiB = 2**20


# --- Without a GPU: the timeline of a made-up recording -----------------------------------------

def event(action, size):
    return {"action": action, "size": size, "addr": 0, "frames": []}


EVENTS = [event("alloc", 100), event("alloc", 50), event("segment_alloc", 4096),
          event("free_requested", 100), event("free_completed", 100), event("alloc", 30)]
ENDS = [("forward", 1, 2), ("backward", 1, 5), ("optimizer", 1, 6)]


def test_the_timeline_follows_allocations_and_frees():
    rows = module.timeline(EVENTS, 1000, ENDS)
    assert [r["allocated"] for r in rows] == [1100, 1150, 1150, 1050, 1050, 1080]
    assert [r["phase"] for r in rows] == ["forward"] * 2 + ["backward"] * 3 + ["optimizer"]
    assert [r["t"] for r in rows] == list(range(6)) and {r["step"] for r in rows} == {1}


def test_thinning_keeps_the_peak_and_the_end_of_every_phase():
    import random

    random.seed(0)
    events, ends, level = [], [], 0
    for step in (1, 2):
        for phase, count in (("forward", 900), ("backward", 900), ("optimizer", 40)):
            for _ in range(count):
                size = random.randrange(1, 1000)
                grow = phase == "forward" or level < size
                events.append(event("alloc" if grow else "free_requested", size))
                level += size if grow else -size
            ends.append((phase, step, len(events)))
    full = module.timeline(events, 0, ends, points=len(events))
    thin = module.timeline(events, 0, ends, points=100)
    assert len(full) == len(events) and len(thin) <= 100 + len(ends) + 1
    assert max(r["allocated"] for r in thin) == max(r["allocated"] for r in full)
    for _, _, end in ends:
        assert full[end - 1] in thin
    assert [r["t"] for r in thin] == sorted(r["t"] for r in thin)


# --- On a GPU: a real recording ------------------------------------------------------------------

@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    import torch

    model, optimizer, x = module.make_training()
    module.warm_up(model, x)  # cuBLAS's workspaces before the recording, as the page does
    torch.cuda.reset_peak_memory_stats()
    path = tmp_path_factory.mktemp("memory") / "steps.pickle"
    events, start, ends = module.record_steps(model, optimizer, x, path=str(path))
    parameters = sum(p.numel() * p.element_size() for p in model.parameters())
    return {"events": events, "start": start, "ends": ends, "path": path,
            "rows": module.timeline(events, start, ends), "parameters": parameters,
            "allocated": torch.cuda.memory_allocated(), "peak": torch.cuda.max_memory_allocated()}


@on_gpu
def test_the_snapshot_is_a_pickle_the_visualizer_reads(recorded):
    with open(recorded["path"], "rb") as f:
        snapshot = pickle.load(f)
    assert {"segments", "device_traces"} <= set(snapshot)
    actions = {e["action"] for trace in snapshot["device_traces"] for e in trace}
    assert {"alloc", "free_requested"} <= actions


@on_gpu
def test_the_phases_come_in_order(recorded):
    assert [(p, s) for p, s, _ in recorded["ends"]] == [
        (p, s) for s in (1, 2) for p in ("forward", "backward", "optimizer")]
    ends = [end for _, _, end in recorded["ends"]]
    assert ends == sorted(ends) and ends[-1] == len(recorded["events"])


@on_gpu
def test_the_timeline_ends_where_the_allocator_does(recorded):
    rows = recorded["rows"]
    assert rows[-1]["allocated"] == pytest.approx(recorded["allocated"], abs=MiB)
    assert max(r["allocated"] for r in rows) == pytest.approx(recorded["peak"], abs=MiB)


def level_at_end(recorded, phase, step):
    return [r for r in recorded["rows"] if (r["phase"], r["step"]) == (phase, step)][-1]["allocated"]


@on_gpu
def test_the_forward_pass_keeps_nine_activations_of_the_batch_size_per_block(recorded):
    """Per block: up's output and GELU's output (4 x width each) and the block's output."""
    expected = 4 * 9 * module.TOKENS * module.WIDTH * 4
    rise = level_at_end(recorded, "forward", 1) - recorded["start"]
    assert 0.95 * expected <= rise <= 1.1 * expected, (rise, expected)


@on_gpu
def test_after_each_step_memory_is_higher_by_adamws_state(recorded):
    first = level_at_end(recorded, "optimizer", 1) - recorded["start"]
    second = level_at_end(recorded, "optimizer", 2) - recorded["start"]
    assert first == pytest.approx(2 * recorded["parameters"], rel=0.01)  # exp_avg, exp_avg_sq
    assert second == pytest.approx(first, abs=MiB)


@on_gpu
def test_the_peak_is_where_the_forward_pass_ends(recorded):
    rows = recorded["rows"]
    top = max(rows, key=lambda r: r["allocated"])
    assert top["phase"] in ("forward", "backward")
    assert top["allocated"] - level_at_end(recorded, "forward", top["step"]) <= 0.5 * (
        level_at_end(recorded, "forward", 1) - recorded["start"])


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) ---

CLAIMS = {
    "cublas_workspace_mib": 32,  # cuBLAS's workspace on Hopper (CUBLAS_WORKSPACE_CONFIG default)
}


STEP = "memory_over_time.training_step"


def test_the_recorded_timeline_is_compact_and_complete_in_every_run(measured):
    for run in measured(STEP):
        rows = run.value(STEP, "memory_timeline")
        assert 10 <= len(rows) <= 450, run
        assert {r["phase"] for r in rows} == {"forward", "backward", "optimizer"}, run
        assert max(r["allocated"] for r in rows) == run.value(STEP, "peak_bytes"), run
        state = run.value(STEP, "optimizer_state_bytes")
        assert state == pytest.approx(2 * run.value(STEP, "parameter_bytes"), rel=0.01), run


def test_the_curve_starts_on_its_first_line_in_every_run(measured):
    """The page: the curve starts at start_bytes, on the line of the parameters, the batch and
    cuBLAS's two workspaces, and nothing else was allocated (the timing run gives each module
    a process of its own)."""
    for run in measured(STEP):
        start = run.value(STEP, "start_bytes")
        first_line = sum(run.value(STEP, f)
                         for f in ("parameter_bytes", "batch_bytes", "workspace_bytes"))
        assert run.value(STEP, "memory_levels")[0][1] == first_line, run
        assert start == pytest.approx(first_line, abs=2**20), run


def test_cublas_took_two_workspaces_from_the_cache_in_every_run(measured):
    """The page: the warm-up's matrix products made cuBLAS take two workspaces of
    CLAIMS["cublas_workspace_mib"] each, one for the forward pass's thread and one for
    autograd's backward thread, and at most a MiB or two besides (65 MiB in all on the H100)."""
    for run in measured(STEP):
        workspace = run.value(STEP, "workspace_bytes")
        two = 2 * CLAIMS["cublas_workspace_mib"] * MiB
        assert two <= workspace <= two + 2 * MiB, run


def test_the_curve_settles_on_the_adamw_state_line_in_every_run(measured):
    """The page: after each step the curve is back on the "+ AdamW state" line (before the
    warm-up was added, it settled 65 MiB above it: the workspaces came mid-step)."""
    for run in measured(STEP):
        rows = run.value(STEP, "memory_timeline")
        line = run.value(STEP, "memory_levels")[1][1]
        for step in (1, 2):
            end = [r for r in rows if (r["phase"], r["step"]) == ("optimizer", step)][-1]
            assert end["allocated"] == pytest.approx(line, abs=MiB), (run, step)
        assert run.value(STEP, "end_bytes") == rows[-1]["allocated"], run


def test_each_step_peaks_early_in_backward_and_step_2_highest_in_every_run(measured):
    """The page: each step peaks just after its forward pass, early in backward; the highest
    point is step 2's, and step 1's is lower by AdamW's state."""
    for run in measured(STEP):
        rows = run.value(STEP, "memory_timeline")
        start, state = run.value(STEP, "start_bytes"), run.value(STEP, "optimizer_state_bytes")

        def phase(name, step, rows=rows):
            return [r for r in rows if (r["phase"], r["step"]) == (name, step)]

        forward_rise = phase("forward", 1)[-1]["allocated"] - start
        for step in (1, 2):
            backward = phase("backward", step)
            top = max(backward, key=lambda r: r["allocated"])
            assert top["allocated"] >= max(r["allocated"] for r in rows if r["step"] == step), run
            end_of_forward = phase("forward", step)[-1]
            assert top["allocated"] - end_of_forward["allocated"] <= 0.5 * forward_rise, run
            events = backward[-1]["t"] - end_of_forward["t"]
            assert top["t"] - end_of_forward["t"] <= events / 4, run  # early in backward
        peak = max(rows, key=lambda r: r["allocated"])
        assert peak["step"] == 2 and peak["allocated"] == run.value(STEP, "peak_bytes"), run
        step_1 = max(r["allocated"] for r in rows if r["step"] == 1)
        assert peak["allocated"] - step_1 == pytest.approx(state, abs=2**20), run
