"""Claims of docs/start-here/will-it-fit.md: the estimators give what their formulas say, and
each stays within the bound the page quotes of every committed run that measured its case
(fieldguide/measuring/estimates.py pairs them), or misses the way the page says. No GPU needed: the runs
are in timings/. Only runs the three-runs-from-two-leases rule admits count; a case none of
them measured yet is skipped, with what it waits for, as the page lists it.
"""

import math

import pytest

from fieldguide.measuring import estimates

pytestmark = pytest.mark.snippet("snippets/start_here/will_it_fit.py")

CLAIMS = {
    # |estimate / measured - 1| at most, in every admitted run of every GPU
    "memory_one_gpu": 0.10,
    "memory_ddp": 0.20,
    "memory_fsdp2": 0.20,      # at 4096 samples a GPU
    "memory_tp": 0.20,         # a transformer block, whole and by tensor parallelism
    "copy_pinned": 0.25,       # 256 MiB and more, at the link's nominal speed (always under)
    "all_reduce": 0.25,        # 16 MiB and more, latency and bus bandwidth of the same run
    "all_reduce_small": 1.0,   # under 16 MiB: within a factor of two
    "all_reduce_gpus": 0.15,   # four GPUs from two GPUs' bus bandwidth
    "bubble": 0.20,            # up to one micro-batch a stage
    "waves_full": 0.15,        # shapes whose last wave is full
    # misses, by at least this much, in the direction the page says
    "copy_pageable": 0.50,     # the link alone: under the measured time by at least this
}

WITHIN = ["memory_one_gpu", "memory_ddp", "memory_fsdp2", "memory_tp", "copy_pinned",
          "all_reduce", "all_reduce_small", "all_reduce_gpus", "bubble", "waves_full"]


def _cases(check):
    """(case, machine) of every case of `check`, admitted or pending, read as the test file
    is collected: one test each, so a pending case is a skip with its reason."""
    found = {(p.case, p.machine) for p in estimates.points(check)}
    found |= {(p.case, p.machine) for p in estimates.pending(check)}
    return sorted(found)


CASES = [pytest.param(check, case, machine, id=f"{check}-{machine}-{case}")
         for check in WITHIN for case, machine in _cases(check)]


def _measured(check, case=None, machine=None):
    """The admitted points of `check` (of one case, where given); a skip naming what they
    wait for where there are none."""
    found = [p for p in estimates.points(check)
             if case is None or (p.case, p.machine) == (case, machine)]
    if not found:
        waiting = [w for p in estimates.pending(check)
                   if case is None or (p.case, p.machine) == (case, machine) for w in p.why]
        pytest.skip(f"{check}: not yet measured in {estimates.RUNS_WANTED} runs of the current "
                    f"code from {estimates.LEASES_WANTED} leases: {'; '.join(waiting)}")
    return found


def _worst(points):
    worst = max(points, key=lambda p: abs(p.error))
    return f"{worst.case} on {worst.machine}/{worst.run}: error {worst.error:+.3f}"


def test_every_bounded_check_has_a_case():
    assert {c.values[0] for c in CASES} == set(WITHIN)


@pytest.mark.parametrize(("check", "case", "machine"), CASES)
def test_each_estimate_is_within_the_bound_the_page_quotes_in_every_run(check, case, machine):
    points = _measured(check, case, machine)
    assert all(abs(p.error) <= CLAIMS[check] for p in points), _worst(points)


def test_memory_on_one_gpu_is_under_the_measured_peak():
    """The sum leaves out the backward pass's temporaries: under, never over."""
    assert all(p.error < 0 for p in _measured("memory_one_gpu"))


def test_ddp_on_two_leases_differs_by_one_gradient_copy():
    """The page: for two GPUs and 4096 samples each, one lease peaked one gradient copy
    (4 bytes a parameter) higher than the other."""
    points = [p for p in _measured("memory_ddp", "DDP, 2 GPUs, 4096 samples each",
                                   "2x-nvidia-h200")]
    copy = 134_254_593 * 4
    assert math.isclose(max(p.measured for p in points) - min(p.measured for p in points),
                        copy, rel_tol=0.05)


def test_ddp_with_bucket_view_is_under_the_peak_and_saves_less_than_a_gradient_copy():
    """The page: with gradient_as_bucket_view=True the estimate (no second copy) is under
    every run, and at 4096 samples each the option's peak is less than one gradient copy
    (4 bytes a parameter) under the peak of DDP's default on every lease."""
    view = _measured("memory_ddp_bucket_view")
    assert all(p.error < 0 for p in view), _worst(view)
    case = ("DDP, 2 GPUs, 4096 samples each", "2x-nvidia-h200")
    plain = _measured("memory_ddp", *case)
    with_view = [p for p in view if (p.case, p.machine) == case
                 and p.benchmark == "ddp_with_torchrun.step_bucket_view"]
    if not with_view:
        pytest.skip("ddp_with_torchrun.step_bucket_view: no admitted run")
    copy = 134_254_593 * 4
    assert all(p.measured - q.measured < copy for p in plain for q in with_view)


def test_fsdp2_at_larger_batches_misses_by_more_than_at_the_small_one():
    small = [p.error for p in _measured("memory_fsdp2")]
    large = [p.error for p in _measured("memory_fsdp2_large")]
    assert all(e < 0 for e in large)
    assert max(abs(e) for e in large) > max(abs(e) for e in small)


def test_sequence_parallelism_misses_by_more_than_tensor_parallelism_alone():
    """Under, and further under than TP on the same number of GPUs."""
    tp = {p.case.rsplit(", ", 1)[1]: p.error for p in _measured("memory_tp")}
    for p in _measured("memory_sp"):
        assert p.error < tp[p.case.rsplit(", ", 1)[1]] < 0, p


def test_the_link_speed_is_never_reached():
    assert all(p.error < 0 for p in _measured("copy_pinned"))


def test_a_pageable_copy_takes_far_longer_than_the_link_alone():
    points = _measured("copy_pageable")
    assert all(p.error <= -CLAIMS["copy_pageable"] for p in points), _worst(points)


def test_no_training_step_beats_its_roofline_bound():
    points = _measured("roofline")
    assert all(p.estimate <= p.measured for p in points), _worst(points)


def test_a_partial_last_wave_costs_no_more_than_a_full_one():
    """A fixed tile overstates the cost; cuBLAS picks a better tile (within noise)."""
    points = _measured("waves_partial")
    assert all(p.error >= -0.05 for p in points), _worst(points)


def test_many_micro_batches_leave_more_idle_time_than_the_formula():
    points = _measured("bubble_many")
    assert all(p.error < -CLAIMS["bubble"] for p in points), _worst(points)


def test_pending_cases_name_what_they_wait_for():
    """A case with no admitted run names each benchmark that falls short, and why."""
    for check in estimates.CHECKS:
        for p in estimates.pending(check):
            assert p.why and all(" on " in w for w in p.why), p


# --- The formulas, as the page states them ---------------------------------------------------

def test_adam_costs_16_bytes_a_parameter_in_float32_and_with_autocast(snippet):
    assert snippet.state_bytes_per_parameter("adam", "fp32") == 16
    assert snippet.state_bytes_per_parameter("adam", "autocast") == 16
    assert snippet.state_bytes_per_parameter("adam", "bf16") == 8
    assert snippet.state_bytes_per_parameter("sgd", "fp32") == 8


def test_memory_parts_add_up_and_follow_the_split(snippet):
    one = snippet.training_memory(10**9, 10, 4096, 1024)
    assert one["total"] == sum(v for k, v in one.items() if k != "total")
    ddp = snippet.training_memory(10**9, 10, 4096, 1024, gpus=4, parallel="ddp")
    assert ddp["buckets"] == ddp["gradients"] == one["gradients"]
    fsdp = snippet.training_memory(10**9, 10, 4096, 1024, gpus=4, parallel="fsdp2")
    assert fsdp["optimizer"] == one["optimizer"] / 4
    assert fsdp["activations"] == one["activations"]
    assert fsdp["gathered"] == 2 * 10**9 * 4 / 10   # this layer and the prefetched next
    alone = snippet.training_memory(10**9, 1, 4096, 1024, gpus=4, parallel="fsdp2")
    assert alone["gathered"] == 10**9 * 4           # one layer: nothing to prefetch
    view = snippet.training_memory(10**9, 10, 4096, 1024, gpus=4, parallel="ddp",
                                   bucket_view=True)
    assert view["buckets"] == 0 and view["gradients"] == one["gradients"]
    tp = snippet.training_memory(10**9, 10, 4096, 1024, gpus=4, parallel="tp")
    assert tp["activations"] == one["activations"] / 4
    kept = snippet.training_memory(10**9, 10, 4096, 1024, gpus=4, parallel="tp",
                                   whole_widths=2)
    assert kept["activations"] == one["activations"] * (2 + 8 / 4) / 10
    ckpt = snippet.training_memory(10**9, 10, 4096, 1024, checkpoint=True)
    assert ckpt["activations"] < one["activations"]
    mixed = snippet.training_memory(10**9, 10, 4096, 1024, precision="autocast",
                                    checkpoint=True)   # float32 residual stream kept
    assert mixed["activations"] == 10 * 4096 * 1024 * 4 + 4096 * 1024 * 10 * 2
    half = snippet.training_memory(10**9, 10, 4096, 1024, micro_batches=2)
    assert half["activations"] == one["activations"] / 2


def test_ring_traffic_and_bubble_and_waves(snippet):
    assert snippet.collective_seconds(8, 4, 1.0) == 2 * 3 / 4 * 8
    assert snippet.collective_seconds(8, 4, 1.0, op="all_gather") == 3 / 4 * 8
    assert snippet.collective_seconds(8, 1, 1.0) == 0
    assert snippet.bubble_fraction(4, 4) == 3 / 7
    assert snippet.pipeline_seconds(4.0, 4, 4) == pytest.approx(1.75)
    shape = snippet.matmul_waves(1024 + 128, 8192)
    assert (shape["tiles"], shape["waves"]) == (288, 3)
    assert math.isclose(shape["fill"], 288 / 396)
    bound = snippet.step_lower_bound(100.0, 10.0, 10.0, 2.0)
    assert (bound["compute_s"], bound["memory_s"], bound["bound_s"]) == (10.0, 5.0, 10.0)
