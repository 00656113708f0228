"""Claims of docs/precision/fp8.md.

The numbers (quantization, error against float64) are checked wherever fp8 products run: on a
CPU with PyTorch's own kernels in CI, on a GPU of compute capability 8.9 or newer. On an older
GPU every test here is skipped with the reason the page shows.
"""


import pytest
import torch

pytestmark = pytest.mark.snippet("snippets/precision/fp8.py")

# The page's bounds, used by its prose (timing-bound), the live GPU tests and the measured data.
CLAIMS = {
    "fp8_speedup_over_bf16": 1.3,  # pre-quantized fp8 product over bf16 at 8192
    "fp8_error_over_bf16": 4,      # fp8's error at least this many times bf16's
    "rowwise_share_of_tensorwise": 0.9,  # row-wise (no fast accumulation) over tensor-wise rate
}


@pytest.fixture(scope="module")
def fp8(snippet):
    """The snippet, where fp8 products run here; skipped with the page's reason elsewhere."""
    reason = snippet.fp8_unavailable()
    if reason:
        pytest.skip(reason)
    return snippet


def test_the_reason_names_the_capability_when_there_is_one(snippet):
    reason = snippet.fp8_unavailable()
    if snippet.device.type == "cpu" or torch.cuda.get_device_capability() >= (8, 9):
        assert reason is None
    else:
        assert "8.9" in reason and "compute capability" in reason


def test_e4m3_range_is_what_the_page_says(snippet):
    assert snippet.FP8_MAX == 448.0
    assert torch.finfo(snippet.FP8).bits == 8


def test_quantize_maps_the_largest_value_to_fp8s_largest(fp8):
    x = torch.randn(64, 256, device=fp8.device) * 1000
    x8, scale = fp8.quantize(x)
    assert x8.dtype == fp8.FP8 and scale.dtype == torch.float32 and scale.numel() == 1
    assert x8.float().abs().max() == fp8.FP8_MAX
    decoded = x8.float() * scale
    assert torch.isfinite(decoded).all()
    # e4m3 keeps 3 mantissa bits: rounding moves a normal value by at most 2^-4 of itself
    normal = x.abs() > 2**-6 * scale * 2  # above fp8's smallest normal after scaling
    relative = ((decoded - x).abs() / x.abs())[normal]
    assert relative.max() <= 2**-4 + 1e-6, relative.max()


def test_casting_past_448_changed_in_pytorch_2_12(snippet):
    """The page: unclamped, 464 rounds to 448 and 465, 1000 and inf become NaN up to PyTorch
    2.11; from 2.12 e4m3 casts saturate at 448, inf included. e5m2 has an infinity and
    overflows to it."""
    import math

    from torch.torch_version import TorchVersion

    e4m3, e5m2 = snippet.cast_past_the_range()
    if TorchVersion(torch.__version__) >= "2.12":
        assert e4m3 == [448.0, 448.0, 448.0, 448.0], e4m3
    else:
        assert e4m3[0] == 448.0 and all(math.isnan(v) for v in e4m3[1:]), e4m3
    assert math.isinf(e5m2), e5m2


def test_a_value_a_hair_above_448_rounds_to_448_on_every_version(snippet):
    # The page: only from 464 (the tie, rounded to even) does a cast reach past 448.
    near = torch.tensor([448.5, 450.0, 463.9, 464.0], device=snippet.device)
    assert near.to(snippet.FP8).float().tolist() == [448.0] * 4


def test_clamping_first_gives_the_same_fp8_values_on_every_version(snippet):
    big = torch.tensor([464.0, 465.0, 1000.0, -1e6], device=snippet.device)
    assert snippet.to_fp8(big).float().tolist() == [448.0, 448.0, 448.0, -448.0]


def test_scaling_is_what_keeps_large_values_representable(fp8):
    x = torch.full((16,), 1000.0, device=fp8.device)
    # 1000 > 448: no fp8 value is near it (the cast saturates or gives NaN, by device)
    assert not torch.allclose(x.to(fp8.FP8).float(), x, rtol=0.1)
    x8, scale = fp8.quantize(x)
    assert torch.allclose(x8.float() * scale, x)


def test_fp8_product_matches_the_dequantized_product(fp8):
    g = torch.Generator(device=fp8.device).manual_seed(0)
    x = torch.randn(64, 128, device=fp8.device, generator=g)
    w = torch.randn(32, 128, device=fp8.device, generator=g)
    (x8, xs), (w8, ws) = fp8.quantize(x), fp8.quantize(w)
    result = fp8.fp8_matmul(x8, xs, w8, ws)
    assert result.dtype == torch.bfloat16 and result.shape == (64, 32)
    expected = (x8.double() * xs.double()) @ (w8.double() * ws.double()).t()
    error = ((result.double() - expected).norm() / expected.norm()).item()
    assert error < 1e-2, error  # only float32 accumulation and bf16 output rounding remain


def test_errors_against_float64_are_within_the_tolerances(fp8):
    n = 2048 if fp8.device.type == "cuda" else 512
    errors = fp8.relative_errors(n)
    for kind, error in errors.items():
        assert error < fp8.TOLERANCE[kind], errors
    assert errors["fp8"] > CLAIMS["fp8_error_over_bf16"] * errors["bf16"], errors


def test_rowwise_product_matches_the_dequantized_product(fp8):
    g = torch.Generator(device=fp8.device).manual_seed(0)
    x = torch.randn(64, 128, device=fp8.device, generator=g)
    w = torch.randn(32, 128, device=fp8.device, generator=g)
    (x8, xs), (w8, ws) = fp8.quantize_rows(x), fp8.quantize_rows(w)
    assert xs.shape == (64, 1) and ws.shape == (32, 1)
    result = fp8.fp8_matmul_rowwise(x8, xs, w8, ws)
    expected = (x8.double() * xs.double()) @ (w8.double() * ws.double()).t()
    assert ((result.double() - expected).norm() / expected.norm()).item() < 1e-2


def test_rowwise_scales_keep_small_rows_precise_beside_a_large_one(fp8):
    """The page: with one scale per tensor, a row 10^5 times larger than the others pushes
    them below fp8's smallest values; a scale per row keeps each row's precision."""
    g = torch.Generator(device=fp8.device).manual_seed(0)
    x = torch.randn(64, 128, device=fp8.device, generator=g)
    x[0] *= 1e5
    w = torch.randn(32, 128, device=fp8.device, generator=g)
    exact = x[1:].double() @ w.double().t()

    def error(result):
        return ((result[1:].double() - exact).norm() / exact.norm()).item()

    tensorwise = error(fp8.fp8_matmul(*fp8.quantize(x), *fp8.quantize(w)))
    rowwise = error(fp8.fp8_matmul_rowwise(*fp8.quantize_rows(x), *fp8.quantize_rows(w)))
    assert rowwise < fp8.TOLERANCE["fp8-rowwise"] and tensorwise > 5 * rowwise, (tensorwise, rowwise)


def test_the_fp8_format_pairs_the_product_accepts(fp8):
    """The page: on a GPU, e4m3 with e4m3 and either mixed pair, never e5m2 with e5m2
    (cuBLAS has no such kernel); PyTorch's CPU kernels take all four."""
    pairs = fp8.supported_pairs()
    mixed = [("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3")]
    assert pairs == (mixed if fp8.device.type == "cuda" else [*mixed, ("e5m2", "e5m2")])


def test_public_wrapper_gives_the_same_result(fp8):
    if not hasattr(torch.nn.functional, "scaled_mm"):
        pytest.skip(f"torch {torch.__version__} has no torch.nn.functional.scaled_mm")
    x = torch.randn(64, 128, device=fp8.device)
    w = torch.randn(48, 128, device=fp8.device)
    args = (*fp8.quantize(x), *fp8.quantize(w))
    assert torch.equal(fp8.fp8_matmul(*args), fp8.fp8_matmul_public(*args))


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_fp8_is_faster_than_bf16_on_the_gpu(fp8):
    x = torch.randn(fp8.N, fp8.N, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(fp8.N, fp8.N, device="cuda", dtype=torch.bfloat16)
    bf16 = fp8.median_seconds(fp8.bf16_matmul, x, w)
    quantized = (*fp8.quantize(x), *fp8.quantize(w))
    fp8_seconds = fp8.median_seconds(fp8.fp8_matmul, *quantized)
    assert bf16 > 0.8 * CLAIMS["fp8_speedup_over_bf16"] * fp8_seconds, (bf16, fp8_seconds)


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) --------

def test_fp8_speed_and_error_in_every_run(measured, snippet):
    bf16, fp8, quantize = (f"fp8.matmul[{k}]" for k in ("bf16", "fp8", "fp8-quantize"))
    prepared = [f"fp8.matmul[{k}]" for k in ("fp8", "fp8-fast-accum", "fp8-rowwise")]
    for run in measured(bf16, quantize, *prepared):
        for name in prepared:
            speedup = run.value(bf16) / run.value(name)
            assert speedup >= CLAIMS["fp8_speedup_over_bf16"], (run, name, speedup)
            kind = name[len("fp8.matmul["):-1]
            assert run.value(name, "relative_error") < snippet.TOLERANCE[kind], (run, name)
        assert run.value(quantize) > run.value(fp8), run  # quantizing costs time
        assert run.value(fp8, "relative_error") < snippet.TOLERANCE["fp8"], run
        assert run.value(bf16, "relative_error") < snippet.TOLERANCE["bf16"], run


def test_rowwise_without_fast_accumulation_runs_at_tensorwise_speed_in_every_run(measured):
    """The page: torchao turns fast accumulation on for row-wise products because its CUTLASS
    kernels were slow without it; here the row-wise product, fast accumulation off, ran at
    least CLAIMS["rowwise_share_of_tensorwise"] of the tensor-wise product's rate."""
    rowwise, tensorwise = "fp8.matmul[fp8-rowwise]", "fp8.matmul[fp8]"
    for run in measured(rowwise, tensorwise):
        share = run.value(rowwise, "tflops") / run.value(tensorwise, "tflops")
        assert share >= CLAIMS["rowwise_share_of_tensorwise"], (run, share)
