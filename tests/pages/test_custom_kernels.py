"""Claims of docs/compilers/custom-kernels.md.

The CuPy kernels need a GPU (the snippet's GPUS_NEEDED = 1); the claims about the measured numbers
are checked in CI against every recorded run.
"""

import pytest
import torch

# The attention module runs anywhere; the CuPy kernels need a GPU (their tests are marked).
pytestmark = pytest.mark.snippet("snippets/compilers/custom_kernels_attention.py")
CUPY = pytest.mark.snippet("snippets/compilers/custom_kernels.py")

# The page's bounds, used by its prose (timing-bound), the live GPU tests and the measured data.
CLAIMS = {
    "elementwise_speedup": 3.0,  # CuPy's six array operations over its one ElementwiseKernel
    # GPU times of one call (the `kernel` benchmarks: no host work in them), bias + GELU:
    "compile_share_of_copy": 0.85,  # torch.compile's kernel reaches this share of a copy
    # attention (custom_kernels_attention), GPU time at the longest sequence:
    "longest_seq": 8192,
    # the formula as Inductor rewrote it against the cuDNN backend: GPU time this close (a
    # share), the same bytes, at every length
    "compiled_vs_cudnn": 0.02,
}
REFERENCE = "nvidia-h200"  # the GPU the page's "on the H200" sentences name

ATTENTION = "custom_kernels_attention.attention"
FUSED = ["flash", "efficient", "cudnn", "flex"]  # the kernels that never write the scores
SEQS = [512, 2048, 8192]                # bench_custom_kernels_attention.SEQS
IMPLS = ["compiled", "unfused", *FUSED]  # bench_custom_kernels_attention.IMPLS


@pytest.fixture(scope="module")
def kernels():
    """The CuPy kernels' module. (The `snippet` fixture is module-scoped: it names the module's
    own marker, the attention module, whatever marker a test adds.)"""
    import importlib

    return importlib.import_module("snippets.compilers.custom_kernels")


def cupy_and_torch():
    import cupy as cp
    import torch
    return cp, torch


@CUPY
def test_elementwise_kernel_matches_the_array_operations(kernels):
    cp, _ = cupy_and_torch()
    x = cp.random.standard_normal((64, 300), dtype=cp.float32) * 10
    bias = cp.random.standard_normal(300, dtype=cp.float32)
    cp.testing.assert_allclose(kernels.bias_gelu_kernel(x, bias), kernels.bias_gelu_eager(x, bias),
                               rtol=1e-5, atol=1e-6)


@CUPY
def test_cupy_fuse_makes_one_kernel_of_the_array_operations(kernels):
    cp, _ = cupy_and_torch()
    x = cp.random.standard_normal((64, 300), dtype=cp.float32) * 10
    bias = cp.random.standard_normal(300, dtype=cp.float32)
    cp.testing.assert_allclose(kernels.bias_gelu_fused(x, bias), kernels.bias_gelu_eager(x, bias),
                               rtol=1e-5, atol=1e-6)


@CUPY
@pytest.mark.parametrize("cols", [1, 33, 1000, 4096, 5000])
def test_raw_kernel_softmax_matches_torch(kernels, cols):
    cp, torch = cupy_and_torch()
    x = cp.random.standard_normal((7, cols), dtype=cp.float32) * 30  # exp() would overflow
    expected = torch.softmax(torch.from_dlpack(x), dim=-1)
    torch.testing.assert_close(torch.from_dlpack(kernels.softmax(x)), expected)


@CUPY
def test_raw_kernel_refuses_what_it_cannot_read(kernels):
    cp, _ = cupy_and_torch()
    with pytest.raises(ValueError, match="C-contiguous 2-D float32"):
        kernels.softmax(cp.ones((4, 8), dtype=cp.float64))
    with pytest.raises(ValueError, match="C-contiguous 2-D float32"):
        kernels.softmax(cp.ones((8, 4), dtype=cp.float32).T)


@CUPY
@pytest.mark.parametrize("threads", [100, 16, 2048])
def test_raw_kernel_refuses_a_block_of_partial_warps(kernels, threads):
    cp, _ = cupy_and_torch()
    with pytest.raises(ValueError, match="multiple of 32 between 32 and 1024"):
        kernels.softmax(cp.ones((4, 8), dtype=cp.float32), threads=threads)


def small_inputs(snippet, seq=128):
    """float32 on a CPU (its flash kernel and FlexAttention's take float32), bfloat16 on a GPU."""
    if snippet.device.type == "cpu":
        return snippet.attention_inputs(seq, batch=2, heads=2, dtype=torch.float32), 1e-5
    return snippet.attention_inputs(seq, batch=2, heads=2), 2e-2


def test_every_attention_computes_the_formula(snippet):
    (q, k, v), tolerance = small_inputs(snippet)
    expected = snippet.naive_attention(q, k, v)
    impls = snippet.implementations()
    assert set(impls) >= {"compiled", "unfused", "flash", "flex"}
    for name, fn in impls.items():
        torch.testing.assert_close(fn(q, k, v), expected, atol=tolerance, rtol=tolerance,
                                   msg=lambda m, name=name: f"{name}: {m}")


def test_inductor_rewrites_the_formula_into_fused_attention(snippet):
    # The pattern matcher (torch/_inductor/fx_passes/fuse_attention.py) replaces
    # softmax(Q K^T * scale) V with one scaled_dot_product_attention call; with
    # pattern_matcher off the generated code makes the two products and the softmax.
    (q, k, v), _ = small_inputs(snippet)
    rewritten = snippet.calls_in_generated_code(snippet.compiled_attention, q, k, v)
    assert any("scaled_dot_product" in call for call in rewritten), rewritten
    unfused = snippet.calls_in_generated_code(snippet.unfused_attention, q, k, v)
    assert not any("scaled_dot_product" in call for call in unfused), unfused
    assert "extern_kernels.bmm" in unfused, unfused      # the products, as written


def test_a_backend_that_cannot_run_is_an_error_not_a_fallback(snippet):
    # sdpa_kernel holds SDPA to the backend named: where it cannot run (the memory-efficient
    # kernel on a CPU, the flash kernel on float64 on a GPU), the call raises instead of
    # running another kernel.
    on_gpu = snippet.device.type == "cuda"
    dtype, backend = (torch.float64, "flash") if on_gpu else (torch.float32, "efficient")
    q, k, v = (torch.randn(1, 1, 8, 8, dtype=dtype, device=snippet.device) for _ in range(3))
    with pytest.raises(RuntimeError):
        snippet.sdpa(q, k, v, backend)


@pytest.mark.gpus(1)
@pytest.mark.whole_gpu
def test_fused_attention_allocates_less_than_the_formula(snippet):
    q, k, v = snippet.attention_inputs(2048, batch=2)
    impls = snippet.implementations()
    for fn in impls.values():
        fn(q, k, v)                    # compiled first: the compile's own memory left out
    naive = snippet.peak_memory(impls["unfused"], q, k, v)
    scores = 2 * 16 * 2048 * 2048 * 2   # (batch, heads, seq, seq) bfloat16 values
    assert naive >= scores
    for name in ("compiled", "flash", "efficient", "cudnn", "flex"):
        assert snippet.peak_memory(impls[name], q, k, v) < scores, name


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) --------

def bias_gelu(impl):
    return f"custom_kernels.bias_gelu[{impl}]"


def test_one_kernel_beats_six_in_every_run(measured):
    for run in measured(bias_gelu("cupy-eager"), bias_gelu("cupy-elementwise")):
        ratio = run.value(bias_gelu("cupy-eager")) / run.value(bias_gelu("cupy-elementwise"))
        assert ratio >= CLAIMS["elementwise_speedup"], (run, ratio)


def kernel(impl):
    return f"custom_kernels.kernel[{impl}]"


def test_compile_reaches_the_copy_on_the_elementwise_chain_in_every_run(measured):
    # The ceiling case: one pass, generated by Inductor, against a copy of the same tensor.
    for run in measured(kernel("torch-compiled"), kernel("copy")):
        share = run.value(kernel("copy"), "kernel_s") / run.value(kernel("torch-compiled"),
                                                                  "kernel_s")
        assert share >= CLAIMS["compile_share_of_copy"], (run, share)


def test_the_elementwise_kernel_is_slower_than_compiles_on_the_gpu_in_every_run(measured):
    # GPU time, not calls: a compiled call's host work (guards, wrapper) moves its call time
    # by about 20 % between leases (0.111 to 0.155 ms for the same call), while the
    # ElementwiseKernel's call stays at 0.18-0.20 ms on both GPUs.
    for run in measured(kernel("cupy-elementwise"), kernel("torch-compiled")):
        assert (run.value(kernel("cupy-elementwise"), "kernel_s")
                > run.value(kernel("torch-compiled"), "kernel_s")), run


def test_the_raw_kernel_is_slower_than_the_triton_kernel_at_512_mib_in_every_run(measured):
    # GPU times: the Triton operator's call carries about 0.12 ms of host work that the
    # RawKernel's call does not, so calls would compare the hosts.
    raw, triton = "custom_kernels.softmax_kernel[32768]", "triton_kernels.kernel[triton-32768]"
    for run in measured(raw, triton):
        assert run.value(raw, "kernel_s") > run.value(triton, "kernel_s"), run


def attention(impl, seq):
    return f"{ATTENTION}[{impl}-{seq}]"


def scores_bytes(seq):
    """The (batch, heads, seq, seq) bfloat16 scores of the benchmark's inputs (8 x 16 heads)."""
    return 8 * 16 * seq * seq * 2


def test_only_the_unfused_formula_holds_the_scores_in_every_run(measured):
    # Inductor's rewrite (compiled) and the fused kernels never write the scores; the formula
    # compiled without pattern rewrites must allocate them.
    for seq in SEQS:
        names = [attention(impl, seq) for impl in IMPLS]
        for run in measured(*names):
            unfused = run.value(attention("unfused", seq), "peak_bytes")
            assert unfused >= scores_bytes(seq), (run, seq, unfused)
            for impl in ["compiled", *FUSED]:
                peak = run.value(attention(impl, seq), "peak_bytes")
                assert peak < scores_bytes(seq), (run, impl, seq, peak)


def test_fused_attention_beats_the_unfused_formula_at_the_longest_sequence_in_every_run(
        measured):
    # The hand-written kernel (flash) and what torch.compile rewrote the formula into
    # (compiled) against the formula compiled as written.
    seq = CLAIMS["longest_seq"]
    names = [attention(impl, seq) for impl in ("unfused", "compiled", "flash")]
    for run in measured(*names):
        unfused = run.value(attention("unfused", seq), "kernel_s")
        for impl in ("compiled", "flash"):
            assert run.value(attention(impl, seq), "kernel_s") < unfused, (run, impl)


def test_every_fused_kernel_beats_the_unfused_formula_at_every_length_in_every_run(measured):
    # "Every fused kernel beat the formula compiled as written at every length measured".
    for seq in SEQS:
        for run in measured(*(attention(impl, seq) for impl in IMPLS)):
            unfused = run.value(attention("unfused", seq), "kernel_s")
            for impl in ["compiled", *FUSED]:
                assert run.value(attention(impl, seq), "kernel_s") < unfused, (run, impl, seq)


def reference_runs(measured, *names):
    """The runs of the GPU the page's sentence names; none is a failure, not a pass."""
    runs = [run for run in measured(*names) if run.timings.slug == REFERENCE]
    assert runs, f"no {REFERENCE} run measured {names}"
    return runs


def test_the_rewritten_formula_matches_the_cudnn_backend_in_every_run(measured):
    # "At every length it allocated the same bytes as the cuDNN backend and took the same
    # time, within" the bound: on the H200 Inductor's rewrite behaves as cuDNN's kernel.
    for seq in SEQS:
        compiled, cudnn = attention("compiled", seq), attention("cudnn", seq)
        for run in reference_runs(measured, compiled, cudnn):
            assert (run.value(compiled, "peak_bytes")
                    == run.value(cudnn, "peak_bytes")), (run, seq)
            ratio = run.value(compiled, "kernel_s") / run.value(cudnn, "kernel_s")
            assert abs(ratio - 1) <= CLAIMS["compiled_vs_cudnn"], (run, seq, ratio)


def test_flash_is_slower_than_cudnn_and_flex_between_them_in_every_run(measured):
    # "There the flash backend took longer than cuDNN at every length, ... and
    # FlexAttention's generated kernel came between the two".
    for seq in SEQS:
        names = [attention(impl, seq) for impl in ("cudnn", "flex", "flash")]
        for run in reference_runs(measured, *names):
            cudnn, flex, flash = (run.value(name, "kernel_s") for name in names)
            assert cudnn < flex < flash, (run, seq, cudnn, flex, flash)


def test_the_fp32_mlp_is_right_of_the_fp32_ridge_in_every_run(measured):
    # The page: at float32 (TF32 off) the torch.compile page's MLP on 64 tokens is bound by
    # arithmetic, not by the weight reads. Its FLOP and bytes are the benchmark's own counts;
    # the roofs are the float32 product and the copy of CPU vs GPU.
    from benchmarks.bench_torch_compile import mlp_bytes, mlp_flops

    intensity = mlp_flops(64) / mlp_bytes(64)
    assert 31 < intensity < 33                          # the page's "about 32 FLOP/B"
    fp32, copy = "cpu_vs_gpu.matmul[fp32]", "cpu_vs_gpu.copy"
    for run in measured(fp32, copy):
        ridge = run.value(fp32, "tflops") * 1e12 / (run.value(copy, "bandwidth_gbs") * 1e9)
        assert ridge < intensity, (run, ridge)
