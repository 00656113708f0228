"""Claims of docs/precision/activations.md."""


import pytest
import torch

pytestmark = pytest.mark.snippet("snippets/precision/activations.py")

# The page's bounds, used by its prose (timing-bound), the live GPU tests and the measured data.
CLAIMS = {
    "share_of_copy": 0.7,   # every activation's forward + backward reaches this share of a copy
    "spread": 1.3,          # slowest activation over fastest, forward + backward
    "fusion_speedup": 2.0,  # torch.compile's one kernel over the three eager ones
}


@pytest.mark.parametrize("name", ["relu", "gelu", "silu", "tanh", "sigmoid"])
def test_forward_backward_returns_the_activations_derivative(snippet, name):
    x = torch.linspace(-4, 4, 1001, device=snippet.device, requires_grad=True)
    grad_out = torch.rand(1001, device=snippet.device)
    grad_in = snippet.forward_backward(snippet.ACTIVATIONS[name], x, grad_out)
    x64 = x.detach().double().requires_grad_()
    (expected,) = torch.autograd.grad(snippet.ACTIVATIONS[name](x64), x64, grad_out.double())
    torch.testing.assert_close(grad_in.double(), expected, rtol=1e-5, atol=1e-6)
    assert x.grad is None, "autograd.grad leaves .grad alone: nothing accumulates between calls"


def test_traffic_counts_five_tensors_and_a_copy_two(snippet):
    assert snippet.activation_bytes(1000, 4) == 5 * 4000
    src, dst = torch.arange(10.0), torch.zeros(10)
    snippet.copy(src, dst)
    assert torch.equal(src, dst)


def test_scale_shift_activation_computes_what_it_says(snippet):
    x, scale, shift = snippet.fusion_inputs(n=8 * 16, width=16)
    expected = torch.nn.functional.gelu(x * scale + shift)
    torch.testing.assert_close(snippet.scale_shift_activation(x, scale, shift), expected)
    relu = snippet.scale_shift_activation(x, scale, shift, torch.relu)
    torch.testing.assert_close(relu, torch.relu(x * scale + shift))


@pytest.mark.gpus(1)
def test_compiled_version_matches_eager(snippet):
    x, scale, shift = snippet.fusion_inputs(n=2**20)
    for activation in (torch.nn.functional.gelu, torch.relu):
        torch.testing.assert_close(snippet.fused(x, scale, shift, activation),
                                   snippet.scale_shift_activation(x, scale, shift, activation),
                                   rtol=1e-5, atol=1e-5)


def cuda_kernels(fn, *args):
    """The GPU kernels one call launches, counted by the profiler."""
    from torch.profiler import ProfilerActivity, profile

    fn(*args)  # compile and warm up outside the count
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


@pytest.mark.gpus(1)
def test_eager_is_three_kernels_and_compiled_is_one(snippet):
    x, scale, shift = snippet.fusion_inputs(n=2**20)
    assert len(cuda_kernels(snippet.scale_shift_activation, x, scale, shift)) == 3
    assert len(cuda_kernels(snippet.fused, x, scale, shift)) == 1


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_activations_run_near_copy_bandwidth(snippet):
    copy = snippet.copy_bandwidth_gbs(snippet.N)
    rates = {name: snippet.activation_bandwidth_gbs(name) for name in snippet.ACTIVATIONS}
    for name, rate in rates.items():
        assert rate > 0.8 * CLAIMS["share_of_copy"] * copy, (name, rate, copy)  # live: margin


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_fusion_beats_the_choice_of_activation(snippet):
    x, scale, shift = snippet.fusion_inputs()
    eager_relu = snippet.median_seconds(snippet.scale_shift_activation, x, scale, shift,
                                        torch.relu)
    compiled_gelu = snippet.median_seconds(snippet.fused, x, scale, shift)
    # live: margin. The recorded runs hold the full bound (below); one live run in a pytest
    # process that had run other timed tests read 1.85x (H100, 2026-11-23)
    assert eager_relu > 0.8 * CLAIMS["fusion_speedup"] * compiled_gelu, (eager_relu, compiled_gelu)


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) --------

ACTIVATION_NAMES = ["relu", "gelu", "silu", "tanh", "sigmoid"]


def test_activations_are_memory_bound_and_alike_in_every_run(measured):
    names = [f"activations.forward_backward[{a}]" for a in ACTIVATION_NAMES]
    for run in measured("activations.copy", *names):
        copy = run.value("activations.copy", "bandwidth_gbs")
        for name in names:
            share = run.value(name, "bandwidth_gbs") / copy
            assert share >= CLAIMS["share_of_copy"], (run, name, share)
        times = [run.value(name) for name in names]
        assert max(times) / min(times) <= CLAIMS["spread"], (run, times)


def test_fusion_matters_more_than_the_choice_in_every_run(measured):
    eager_relu, eager_gelu, compiled = (f"activations.fusion[{case}]" for case in
                                        ("eager-relu", "eager-gelu", "compiled-gelu"))
    for run in measured(eager_relu, eager_gelu, compiled):
        assert run.value(eager_relu) >= CLAIMS["fusion_speedup"] * run.value(compiled), run
        assert run.value(eager_gelu) >= CLAIMS["fusion_speedup"] * run.value(compiled), run
        assert run.value(eager_gelu) / run.value(eager_relu) <= CLAIMS["spread"], run
