"""CuPy kernels beside Triton: an ElementwiseKernel and cp.fuse for a fused elementwise
chain and a RawKernel for a row-wise softmax, for code that works with CuPy arrays.

Run it on a CUDA machine: python -m snippets.compilers.custom_kernels
"""

GPUS_NEEDED = 1  # CuPy kernels are CUDA kernels: there is no CPU interpreter for them

# --8<-- [start:elementwise]
import cupy as cp

# One kernel for bias + sigmoid-GELU: CuPy writes the loop over elements and the
# broadcasting (bias has one value per column); the body is C++ for one element.
bias_gelu_kernel = cp.ElementwiseKernel(
    "float32 x, float32 bias", "float32 y",
    "float v = x + bias; y = v / (1.0f + expf(-1.702f * v));",
    "bias_gelu")


def bias_gelu_eager(x, bias):
    """The same in CuPy array operations: six kernels (add, multiply, exp, add, divide,
    multiply), six passes over memory."""
    y = x + bias
    return y * (1 / (1 + cp.exp(-1.702 * y)))
# --8<-- [end:elementwise]


# --8<-- [start:fuse]
@cp.fuse()
def bias_gelu_fused(x, bias):
    """bias_gelu_eager's array operations, which cp.fuse compiles into one kernel at
    the first call for each set of input dtypes and dimensions."""
    y = x + bias
    return y * (1 / (1 + cp.exp(-1.702 * y)))
# --8<-- [end:fuse]


# --8<-- [start:raw]
# One block of threads per row, as the Triton kernel has one program per row. The
# block reduces with warp shuffles, then across warps through shared memory.
softmax_source = r"""
__device__ float warp_reduce(float v, bool is_max) {
    for (int offset = 16; offset > 0; offset /= 2) {
        float other = __shfl_xor_sync(0xffffffff, v, offset);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    return v;
}

__device__ float block_reduce(float v, bool is_max, float* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_reduce(v, is_max);
    if (lane == 0) scratch[warp] = v;          // one partial result per warp
    __syncthreads();
    const float identity = is_max ? __int_as_float(0xff800000) : 0.0f;  // -inf, 0
    v = lane < blockDim.x / 32 ? scratch[lane] : identity;
    v = warp_reduce(v, is_max);                 // every warp combines the partials
    __syncthreads();                            // scratch is reused by the next call
    return v;
}

extern "C" __global__ void softmax_rows(const float* x, float* y, int n_cols) {
    __shared__ float scratch[32];
    const float* row = x + (size_t)blockIdx.x * n_cols;
    float* out = y + (size_t)blockIdx.x * n_cols;
    float peak = __int_as_float(0xff800000);
    for (int c = threadIdx.x; c < n_cols; c += blockDim.x) peak = fmaxf(peak, row[c]);
    peak = block_reduce(peak, true, scratch);
    float total = 0.0f;
    for (int c = threadIdx.x; c < n_cols; c += blockDim.x) total += expf(row[c] - peak);
    total = block_reduce(total, false, scratch);
    // The row was read twice already; at 16 KiB it is still in the cache for the third.
    for (int c = threadIdx.x; c < n_cols; c += blockDim.x)
        out[c] = expf(row[c] - peak) / total;
}
"""
softmax_kernel = cp.RawKernel(softmax_source, "softmax_rows")


def softmax(x, threads=256):
    """Row-wise softmax of a C-contiguous 2-D float32 CuPy array."""
    # The warp shuffles name all 32 lanes (mask 0xffffffff) and scratch holds 32 warps:
    # a partial warp or a block over 1024 threads would give wrong sums.
    if threads % 32 or not 32 <= threads <= 1024:
        raise ValueError(f"softmax: threads={threads} must be a multiple of 32 between "
                         "32 and 1024 (the kernel reduces whole warps); try 256")
    if x.dtype != cp.float32 or x.ndim != 2 or not x.flags.c_contiguous:
        raise ValueError(f"softmax wants a C-contiguous 2-D float32 array, got "
                         f"{x.dtype} with shape {x.shape}")
    y = cp.empty_like(x)
    n_rows, n_cols = x.shape
    softmax_kernel((n_rows,), (threads,), (x, y, cp.int32(n_cols)))  # grid, block, args
    return y
# --8<-- [end:raw]


if __name__ == "__main__":
    # --8<-- [start:check]
    import torch

    x = cp.random.standard_normal((4096, 4096), dtype=cp.float32)
    bias = cp.random.standard_normal(4096, dtype=cp.float32)
    cp.testing.assert_allclose(bias_gelu_kernel(x, bias), bias_gelu_eager(x, bias),
                               rtol=1e-5, atol=1e-6)
    cp.testing.assert_allclose(bias_gelu_fused(x, bias), bias_gelu_eager(x, bias),
                               rtol=1e-5, atol=1e-6)
    # CuPy and PyTorch share the memory through DLPack: no copy for the comparison.
    expected = torch.softmax(torch.from_dlpack(x), dim=-1)
    torch.testing.assert_close(torch.from_dlpack(softmax(x)), expected)
    print("ElementwiseKernel, cp.fuse and RawKernel match CuPy and torch.softmax")
    # --8<-- [end:check]
