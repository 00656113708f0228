"""Claims of docs/precision/mixed-precision-training.md.

Autocast, the GradScaler and the training loop run on any device (CPU autocast and a CPU
GradScaler in CI, CUDA on the GPU); the speed and memory of the four variants need a GPU and
are checked against every recorded run.
"""


import pytest
import torch
import torch._functorch.config
import torch.nn.functional as F

from fieldguide import ROOT

pytestmark = pytest.mark.snippet("snippets/precision/mixed_precision_training.py")

# The page's bounds, used by its prose (timing-bound), the live GPU tests and the measured data.
CLAIMS = {
    "bf16_speedup_over_fp32": 3.0,
    "bf16_speedup_over_tf32": 1.0,  # bfloat16 autocast at least as fast as TF32
    "bf16_fp16_difference": 0.15,   # bfloat16's and float16's steps within 15 % of each other
    "tf32_speedup_over_fp32": 2.0,
    "device_busy": 0.85,    # kernels fill at least 85 % of every variant's step: GPU-bound
    "loss_gap": 0.02,       # every variant's loss within 2 % of fp32's, at every step
    "loss_drop": 0.95,      # the last loss at most this share of the first: it learns
}


LOW = [torch.bfloat16, torch.float16]


def test_autocast_section_products_low_loss_and_gradients_float32(snippet):
    assert snippet.logits.dtype == torch.bfloat16
    assert snippet.loss.dtype == torch.float32
    assert snippet.layer.weight.dtype == snippet.layer.weight.grad.dtype == torch.float32


@pytest.fixture(scope="module")
def batch(snippet):
    tokens, targets = snippet.make_batches(1)
    return tokens[0], targets[0]


@pytest.mark.parametrize("dtype", LOW, ids=["bf16", "fp16"])
def test_autocast_dtypes_read_from_a_forward_pass(snippet, batch, dtype):
    seen = snippet.autocast_dtypes(snippet.make_model(), *batch, dtype)
    assert seen["Linear"] == seen["Attention"] == seen["GELU"] == dtype  # matrix products
    assert seen["cross_entropy"] == torch.float32  # losses: autocast's float32 list
    assert seen["Block"] == torch.float32  # residual stream: float32 + low -> float32
    assert seen["LayerNorm"] == torch.float32  # on float32 input (and on CUDA's list)
    assert seen["Embedding"] == torch.float32  # a lookup: no arithmetic to speed up


@pytest.mark.parametrize("dtype", LOW, ids=["bf16", "fp16"])
def test_the_lists_differ_by_device_for_layer_norm(dtype):
    """The page says: CUDA autocast runs layer_norm in float32 even on low-precision input;
    CPU autocast does not list it, so it keeps the input's dtype. Read it, don't copy lists."""
    x = torch.randn(4, 8).to(dtype)
    with torch.autocast("cpu", dtype=dtype):
        assert F.layer_norm(x, (8,)).dtype == dtype
        assert F.cross_entropy(x.float() @ torch.randn(8, 3), torch.zeros(4).long()).dtype \
            == torch.float32


@pytest.mark.gpus(1)
@pytest.mark.parametrize("dtype", LOW, ids=["bf16", "fp16"])
def test_cuda_autocast_runs_layer_norm_and_softmax_in_float32(dtype):
    x = torch.randn(4, 8, device="cuda").to(dtype)
    with torch.autocast("cuda", dtype=dtype):
        assert F.layer_norm(x, (8,)).dtype == torch.float32
        assert torch.softmax(x, dim=-1).dtype == torch.float32
        assert (x.float() @ torch.randn(8, 8, device="cuda")).dtype == dtype


def test_time_shares_split_the_whole_step(snippet, batch):
    model, optimizer, scaler = snippet.make_training("bf16")
    shares, busy = snippet.time_shares(snippet.train_step, model, optimizer, scaler, *batch,
                                       torch.bfloat16, steps=1)
    assert set(shares) == {"products", "attention", "other"}
    assert sum(shares.values()) == pytest.approx(1)
    assert shares["products"] > 0 and shares["attention"] > 0 and busy > 0


def test_step_flops_counts_the_models_matrix_products(snippet):
    model = snippet.make_model()
    weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    sizes = snippet.SIZES
    tokens = snippet.BATCH * sizes["seq"]
    attention = 12 * sizes["depth"] * snippet.BATCH * sizes["seq"] ** 2 * sizes["width"]
    assert snippet.step_flops(snippet.BATCH, **sizes) == 6 * weights * tokens + attention


def test_scaler_skips_the_step_and_halves_the_scale_on_inf(snippet, batch):
    model, optimizer, scaler = snippet.make_training("fp16")
    assert scaler.is_enabled()
    unchanged, before, after = snippet.step_with_overflow(model, optimizer, scaler, batch[0])
    assert unchanged, "optimizer.step() must not run on an inf gradient"
    assert after == before / 2
    # A fused optimizer is called with the inf flag and skips inside its kernel: no step counted.
    assert all(float(state["step"]) == 0 for state in optimizer.state.values())


def test_a_normal_step_after_the_skip_updates_the_weights(snippet, batch):
    model, optimizer, scaler = snippet.make_training("fp16")
    snippet.step_with_overflow(model, optimizer, scaler, batch[0])
    before = [p.detach().clone() for p in model.parameters()]
    loss = snippet.train_step(model, optimizer, scaler, *batch, torch.float16)
    assert torch.isfinite(loss)
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))


def gradient_norm(model):
    return torch.linalg.vector_norm(
        torch.stack([p.grad.float().norm() for p in model.parameters() if p.grad is not None]))


def test_unscale_gives_clipping_the_true_gradients(snippet, batch):
    """Without unscale_, clip_grad_norm_ would see the gradients times the scale."""
    tokens, targets = batch
    model, optimizer, scaler = snippet.make_training("fp16")
    with torch.autocast(snippet.device.type, dtype=torch.float16):
        loss = F.cross_entropy(model(tokens).flatten(0, 1), targets.flatten())
    scaler.scale(loss).backward()
    scaled = gradient_norm(model)
    scaler.unscale_(optimizer)
    true = gradient_norm(model)
    torch.testing.assert_close(scaled / true, torch.tensor(scaler.get_scale(),
                                                           device=scaled.device), rtol=1e-3,
                               atol=0)
    reference, _, _ = snippet.make_training("fp32")
    F.cross_entropy(reference(tokens).flatten(0, 1), targets.flatten()).backward()
    assert abs(true / gradient_norm(reference) - 1) < 0.05, (true, gradient_norm(reference))


def test_bf16_needs_no_scaler_and_gets_none(snippet):
    for variant in ("fp32", "tf32", "bf16"):
        assert not snippet.make_training(variant)[2].is_enabled()
    assert torch.finfo(torch.bfloat16).max == pytest.approx(torch.finfo(torch.float32).max,
                                                            rel=0.01)
    assert torch.finfo(torch.float16).max == 65504  # why fp16 gradients need the scaler


def test_checkpoint_restores_the_scalers_state(snippet, batch, tmp_path):
    model, optimizer, scaler = snippet.make_training("fp16")
    snippet.step_with_overflow(model, optimizer, scaler, batch[0])
    snippet.train_step(model, optimizer, scaler, *batch, torch.float16)
    snippet.save_checkpoint(tmp_path / "checkpoint.pt", model, optimizer, scaler)
    model2, optimizer2, scaler2 = snippet.make_training("fp16", seed=1)
    assert scaler2.get_scale() != scaler.get_scale()
    snippet.load_checkpoint(tmp_path / "checkpoint.pt", model2, optimizer2, scaler2)
    assert scaler2.state_dict() == scaler.state_dict()
    for p, q in zip(model.parameters(), model2.parameters(), strict=True):
        assert torch.equal(p, q)


# --- The corner cases: compile, a float32 region, a collapsing scale ----------------------------

def test_a_compiled_layer_follows_the_autocast_in_force_at_each_call(snippet):
    # The page names the compiler's default that the block overrides, for its first call only.
    assert torch._functorch.config.backward_pass_autocast == "same_as_forward"
    logits, loss, plain = snippet.compiled_under_autocast()
    assert (logits, loss, plain) == (torch.bfloat16, torch.float32, torch.float32)
    assert torch._functorch.config.backward_pass_autocast == "same_as_forward"
    page = (ROOT / "docs/precision/mixed-precision-training.md").read_text(encoding="utf-8")
    assert 'backward_pass_autocast` is `"same_as_forward"`' in page and 'to `"off"`' in page


def test_autocast_off_inside_autocast_needs_its_inputs_cast_by_hand(snippet):
    came_in, as_it_came, cast, after = snippet.float32_region()
    assert came_in == as_it_came == after == torch.bfloat16  # off: no casts at all
    assert cast == torch.float32


def test_a_model_that_overflows_every_step_collapses_the_scale(snippet):
    scales, at_fault = snippet.scale_under_overflow(steps=12)
    assert scales == [65536.0 / 2 ** (i + 1) for i in range(12)]  # halved at every step
    assert snippet.scale_collapsing(scales) and at_fault == ["head.weight"]


def test_a_healthy_scale_is_not_collapsing(snippet):
    # skipped steps early on, then growth (GradScaler's growth_factor 2.0): no collapse
    healthy = [65536.0, 32768.0, 16384.0] + [16384.0] * 20 + [32768.0]
    assert not snippet.scale_collapsing(healthy)
    assert not snippet.scale_collapsing([65536.0 / 2 ** i for i in range(5)])  # too few
    assert torch.amp.GradScaler("cpu").get_backoff_factor() == 0.5


@pytest.fixture(scope="module")
def curves(snippet):
    return {variant: snippet.train(variant, snippet.STEPS) for variant in snippet.VARIANTS}


def test_training_learns(curves):
    fp32 = curves["fp32"]
    assert fp32[-1] < CLAIMS["loss_drop"] * fp32[0], fp32


@pytest.mark.parametrize("variant", ["tf32", "bf16", "fp16"])
def test_loss_curves_of_the_four_variants_agree(curves, variant):
    gap = relative_gap(curves[variant], curves["fp32"])
    assert gap < CLAIMS["loss_gap"], (variant, gap)
    assert torch.isfinite(curves[variant]).all()


def relative_gap(curve, reference):
    return ((curve - reference).abs() / reference).max().item()


def test_curves_are_reproducible_so_the_agreement_means_something(snippet, curves):
    # Not bit for bit on a GPU: attention's and the embedding's backward passes may add in
    # any order there. A repeat must still agree far more closely than the variants must.
    again = snippet.train("fp32", snippet.STEPS)
    assert relative_gap(again, curves["fp32"]) < CLAIMS["loss_gap"] / 10
    other_seed = snippet.train("fp32", snippet.STEPS, seed=1)
    assert relative_gap(other_seed, curves["fp32"]) > 0  # another start, another curve


def test_the_tf32_variant_restores_the_setting(snippet):
    before = torch.backends.cuda.matmul.fp32_precision
    snippet.train("tf32", 1)
    assert torch.backends.cuda.matmul.fp32_precision == before


# --- Speed, live on the GPU (loose bounds: these run on a shared, noisy machine) ---------------

@pytest.mark.gpus(1)
@pytest.mark.timed
def test_bf16_autocast_steps_are_faster_than_fp32(snippet, batch):
    times = {}
    for variant in ("fp32", "bf16"):
        model, optimizer, scaler = snippet.make_training(variant)
        dtype = snippet.VARIANTS[variant][1]
        times[variant] = snippet_median(snippet.train_step, model, optimizer, scaler, *batch,
                                        dtype)
    assert times["fp32"] > CLAIMS["bf16_speedup_over_fp32"] * times["bf16"], times


def snippet_median(fn, *args, repeats=10, warmup=3):
    import statistics
    import time

    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn(*args)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) --------

STEP = "mixed_precision_training.train_step[{}]".format
VARIANTS = ["fp32", "tf32", "bf16", "fp16"]


def speedup(run, slower, faster):
    return run.value(STEP(slower)) / run.value(STEP(faster))


def test_bf16_is_three_times_float32_in_every_run(measured):
    for run in measured(STEP("fp32"), STEP("bf16")):
        assert speedup(run, "fp32", "bf16") >= CLAIMS["bf16_speedup_over_fp32"], run


def test_bf16_is_at_least_as_fast_as_tf32_in_every_run(measured):
    for run in measured(STEP("tf32"), STEP("bf16")):
        assert speedup(run, "tf32", "bf16") >= CLAIMS["bf16_speedup_over_tf32"], run


def test_bf16_and_fp16_take_the_same_time_in_every_run(measured):
    """Same Tensor Core rate, same bytes: within the bound of each other (the GradScaler's
    few extra kernels aside)."""
    for run in measured(STEP("bf16"), STEP("fp16")):
        assert abs(speedup(run, "fp16", "bf16") - 1) <= CLAIMS["bf16_fp16_difference"], run


def test_tf32_is_faster_than_float32_in_every_run(measured):
    for run in measured(STEP("fp32"), STEP("tf32")):
        assert speedup(run, "fp32", "tf32") >= CLAIMS["tf32_speedup_over_fp32"], run


def test_every_step_is_gpu_bound_in_every_run(measured):
    """The kernels' time (profiler) fills the timed step: Python's launches are hidden behind
    the GPU's work, so the numbers compare precisions, not hosts."""
    for run in measured(*(STEP(v) for v in VARIANTS)):
        for variant in VARIANTS:
            busy = run.value(STEP(variant), "device_busy_pct") / 100
            assert busy >= CLAIMS["device_busy"], (run, variant, busy)


def test_products_take_a_smaller_share_at_16_bits_in_every_run(measured):
    """Why the step gains less than its products: 16-bit products shrink their own share."""
    for run in measured(*(STEP(v) for v in VARIANTS)):
        fp32 = run.value(STEP("fp32"), "products_pct")
        for variant in ("tf32", "bf16", "fp16"):
            assert run.value(STEP(variant), "products_pct") < fp32, (run, variant)


def test_autocast_needs_less_memory_in_every_run(measured):
    for run in measured(*(STEP(v) for v in VARIANTS)):
        fp32 = run.value(STEP("fp32"), "peak_memory_gib")
        for variant in ("bf16", "fp16"):
            assert run.value(STEP(variant), "peak_memory_gib") < fp32, (run, variant)
            # the page: the saving is smaller than half (float32 activations, weights, state)
            assert run.value(STEP(variant), "peak_memory_gib") > fp32 / 2, (run, variant)


def test_final_losses_agree_in_every_run(measured):
    for run in measured(*(STEP(v) for v in VARIANTS)):
        fp32 = run.value(STEP("fp32"), "final_loss")
        for variant in ("tf32", "bf16", "fp16"):
            gap = abs(run.value(STEP(variant), "final_loss") / fp32 - 1)
            assert gap < CLAIMS["loss_gap"], (run, variant, gap)


def test_recorded_autocast_dtypes_in_every_run(measured):
    for run in measured(STEP("bf16"), STEP("fp16")):
        for variant, low in (("bf16", "bfloat16"), ("fp16", "float16")):
            record = run.record(STEP(variant))
            assert record.value("Linear") == record.value("GELU") == low, run
            assert record.value("LayerNorm") == record.value("cross_entropy") == "float32", run
