"""Claims of docs/precision/tensor-cores-and-shapes.md.

Accuracy and padding are checked on any device; TF32 and the speed of shapes need a GPU (live,
with margin) and are checked against every recorded run (the page's numbers).
"""


import pytest
import torch

pytestmark = pytest.mark.snippet("snippets/precision/tensor_cores_and_shapes.py")

# The page's bounds, used by its prose (timing-bound), the live GPU tests and the measured data.
CLAIMS = {
    "odd_slowdown": 1.5,           # 8191 and 8193 at least this much slower than 8192
    "fastest_share_at_8192": 0.95,  # 8192's rate within 5 % of the fastest size in the sweep
    "padded_speedup": 1.2,         # padding 8191 to 8192 beats the unpadded product by this
    "tf32_speedup": 2.0,           # TF32 over full float32 at 8192
    "tf32_error_ratio": 30,        # TF32's error at least this many times float32's
    "wave_spread": 1.1,            # fastest over slowest aligned size of the waves sweep
    "wave_dip_896": 1.05,          # m = 1024 over m = 896, in TFLOP/s
}


def error_size(snippet):
    return 2048 if snippet.device.type == "cuda" else 512


@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16", "bf16"])
def test_every_precision_stays_within_its_stated_tolerance(snippet, precision):
    for seed in (0, 1):
        error = snippet.relative_error(error_size(snippet), precision, seed=seed)
        assert error < snippet.TOLERANCE[precision], (precision, seed, error)


def test_fewer_mantissa_bits_cost_accuracy_in_order(snippet):
    n = error_size(snippet)
    errors = {p: snippet.relative_error(n, p) for p in ("fp32", "fp16", "bf16")}
    assert errors["fp32"] * 100 < errors["fp16"], errors  # 24 bits against 11
    assert errors["fp16"] * 4 < errors["bf16"], errors     # 11 against 8: ~8x


@pytest.mark.gpus(1)
def test_tf32_rounds_the_inputs_and_ieee_does_not(snippet):
    fp32 = snippet.relative_error(2048, "fp32")
    tf32 = snippet.relative_error(2048, "tf32")
    assert fp32 < 1e-5, fp32
    assert tf32 > CLAIMS["tf32_error_ratio"] * fp32, (fp32, tf32)


def test_the_setting_is_restored_after_the_product(snippet):
    before = torch.backends.cuda.matmul.fp32_precision
    a = torch.randn(8, 8, device=snippet.device)
    snippet.matmul(a, a, "tf32")
    assert torch.backends.cuda.matmul.fp32_precision == before
    with pytest.raises(RuntimeError), snippet.fp32_matmul_precision("tf32"):
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
        raise RuntimeError("a failing product")
    assert torch.backends.cuda.matmul.fp32_precision == before


@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16", "bf16"])
def test_products_keep_the_dtype_they_were_given(snippet, precision):
    a, b = snippet.operands(24, snippet.PRECISIONS[precision][0])
    c = snippet.matmul(a, b, precision)
    assert c.dtype == snippet.PRECISIONS[precision][0] and c.shape == (24, 24)


@pytest.mark.parametrize(("shape", "padded"), [((255, 255), (256, 256)), ((64, 65), (64, 128)),
                                               ((1, 130), (64, 192))])
def test_pad_to_rounds_both_dimensions_up_with_zeros(snippet, shape, padded):
    x = torch.ones(shape)
    y = snippet.pad_to(x, 64)
    assert y.shape == padded
    assert torch.equal(y[: shape[0], : shape[1]], x) and y.sum() == x.sum()


@pytest.mark.parametrize("n", [255, 257])
def test_padding_gives_the_same_product(snippet, n):
    a, b = snippet.operands(n, torch.float16)
    c = snippet.padded_matmul(a, b, multiple=64)
    assert c.shape == (n, n)
    exact = a.double() @ b.double()
    error = ((c.double() - exact).norm() / exact.norm()).item()
    assert error < snippet.TOLERANCE["fp16"], error


# --- Speed, live on the GPU (loose bounds: these run on a shared, noisy machine) ---------------

@pytest.mark.gpus(1)
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
@pytest.mark.timed
def test_8192_is_faster_than_its_odd_neighbours(snippet, precision):
    aligned = snippet.tflops(8192, precision)
    for odd in (8191, 8193):
        assert aligned > CLAIMS["odd_slowdown"] * snippet.tflops(odd, precision), (odd, precision)


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_padding_an_odd_size_pays_for_itself(snippet):
    a, b = snippet.operands(8191, torch.float16)
    plain = snippet.median_seconds(snippet.matmul, a, b, "fp16")
    padded = snippet.median_seconds(snippet.padded_matmul, a, b)
    assert plain > CLAIMS["padded_speedup"] * padded, (plain, padded)


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_tf32_is_faster_than_full_float32(snippet):
    fp32 = snippet.tflops(8192, "fp32")
    tf32 = snippet.tflops(8192, "tf32")
    assert tf32 > CLAIMS["tf32_speedup"] * fp32, (fp32, tf32)


def test_reduced_precision_reductions_are_allowed_by_default(snippet):
    """The page: float16 and bfloat16 products may sum partial results in 16 bits unless
    you turn it off; the inputs are not the only rounding."""
    assert snippet.reduced_precision_reductions() == {"fp16": True, "bf16": True}


def test_inductor_pads_matrix_products_by_default():
    """The page: torch.compile's shape padding pads a product's dimensions to 8 elements
    (16-bit formats) or 4 (float32) where its benchmark says that is faster."""
    import torch._inductor.config as inductor
    from torch._inductor.fx_passes.pad_mm import get_alignment_size_dtype

    assert inductor.shape_padding is True
    assert [get_alignment_size_dtype(d) for d in (torch.float16, torch.bfloat16, torch.float32)] == [8, 8, 4]


def test_tiles_and_waves_count_rounds_of_the_sms(snippet, monkeypatch):
    """The page's arithmetic: 512 rows by 8192 columns are 4 x 32 = 128 tiles of 128 x 256,
    one wave on 132 SMs; 640 rows are 160 tiles, two waves, the second mostly idle."""
    from types import SimpleNamespace

    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device: SimpleNamespace(multi_processor_count=132))
    assert snippet.tiles_and_waves(512, 8192) == (128, 1)
    assert snippet.tiles_and_waves(640, 8192) == (160, 2)
    assert snippet.tiles_and_waves(896, 8192) == (224, 2)
    assert snippet.tiles_and_waves(1024, 8192) == (256, 2)


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) --------

SWEEP = range(8184, 8201)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_odd_sizes_are_slower_than_8192_in_every_run(measured, precision):
    name = f"tensor_cores_and_shapes.sweep[{precision}-{{}}]".format
    for run in measured(name(8191), name(8192), name(8193)):
        for odd in (8191, 8193):
            slowdown = run.value(name(odd)) / run.value(name(8192))  # time per 2n^3 flops
            assert slowdown >= CLAIMS["odd_slowdown"], (run, precision, odd, slowdown)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_8192_is_within_reach_of_the_fastest_size_in_every_run(measured, precision):
    names = [f"tensor_cores_and_shapes.sweep[{precision}-{n}]" for n in SWEEP]
    for run in measured(*names):
        fastest = max(run.value(name, "tflops") for name in names)
        share = run.value(names[SWEEP.index(8192)], "tflops") / fastest
        assert share >= CLAIMS["fastest_share_at_8192"], (run, precision, share)


@pytest.mark.parametrize("case", ["fp16-8191", "bf16-8191", "fp16-8193"])
def test_padding_beats_the_odd_size_in_every_run(measured, case):
    plain, padded = (f"tensor_cores_and_shapes.{kind}[{case}]" for kind in ("sweep", "padded"))
    for run in measured(plain, padded):
        speedup = run.value(plain) / run.value(padded)
        assert speedup >= CLAIMS["padded_speedup"], (run, case, speedup)


def test_tf32_speed_and_every_precisions_error_in_every_run(measured, snippet):
    names = {p: f"tensor_cores_and_shapes.matmul[{p}]" for p in snippet.PRECISIONS}
    for run in measured(*names.values()):
        assert run.value(names["fp32"]) >= CLAIMS["tf32_speedup"] * run.value(names["tf32"]), run
        for precision, name in names.items():
            assert run.value(name, "relative_error") < snippet.TOLERANCE[precision], (run, name)
        assert run.value(names["tf32"], "relative_error") > CLAIMS["tf32_error_ratio"] * run.value(
            names["fp32"], "relative_error"), run


WAVES = [f"tensor_cores_and_shapes.waves[{m}]" for m in range(256, 2049, 128)]


def test_aligned_sizes_still_differ_in_rate_in_every_run(measured):
    """The page: every size of the waves sweep is a multiple of 128, and still the fastest
    (from m = 512 on) ran at least CLAIMS["wave_spread"] times the slowest's rate."""
    for run in measured(*WAVES):
        rates = [run.value(name, "tflops") for name in WAVES[2:]]
        assert max(rates) >= CLAIMS["wave_spread"] * min(rates), (run, rates)


def test_a_nearly_full_last_wave_beats_a_partial_one_in_every_run(measured):
    """The page: m = 1024 (256 tiles, two nearly full waves) beat m = 896 (224 tiles, a
    last wave of 92 tiles) in TFLOP/s, although 896 is the smaller product."""
    fuller, partial = "tensor_cores_and_shapes.waves[1024]", "tensor_cores_and_shapes.waves[896]"
    for run in measured(fuller, partial):
        ratio = run.value(fuller, "tflops") / run.value(partial, "tflops")
        assert ratio >= CLAIMS["wave_dip_896"], (run, ratio)
