"""GPU-only diffusion steps: a fused CuPy kernel with periodic indexing, and CUDA graphs that
replay many steps with one launch.

Run it on a CUDA machine: python -m snippets.case_studies.diffusion_gpu
"""

# Not shown on the page, which defines these in its earlier sections (diffusion.py):
import numpy as np
import torch

from snippets.case_studies.diffusion import DT, D, evolve, initial_grid, run_numpy, seconds_per_step

GPUS_NEEDED = 1  # CuPy kernels and CUDA graphs

# --8<-- [start:cupy_kernel]
import cupy as cp

# Each thread walks down a strip of one column. It keeps the cells above, at and below
# its position in registers, so every value comes from memory about once; the left and
# right neighbours are the cells its warp-mates just loaded, served by the L1 cache.
diffuse = cp.RawKernel(r"""
extern "C" __global__ void diffuse_periodic(
        const float* __restrict__ u, float* __restrict__ out,
        int rows, int cols, float coef, int strip) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int first = blockIdx.y * strip;
    if (x >= cols || first >= rows) return;
    const int left = x == 0 ? cols - 1 : x - 1;
    const int right = x == cols - 1 ? 0 : x + 1;
    float above = u[(first == 0 ? rows - 1 : first - 1) * cols + x];
    float centre = u[first * cols + x];
    const int last = min(first + strip, rows);
    for (int y = first; y < last; ++y) {
        const float below = u[(y == rows - 1 ? 0 : y + 1) * cols + x];
        const float* row = u + y * cols;
        out[y * cols + x] =
            centre + coef * (above + below + row[left] + row[right] - 4.0f * centre);
        above = centre;
        centre = below;
    }
}
""", "diffuse_periodic")

THREADS, STRIP = 128, 16  # threads per block along a row; rows per thread


def step_cupy(grid, out):
    """One step in one kernel: one read and one write per cell."""
    assert grid.dtype == cp.float32 and grid.flags.c_contiguous
    rows, cols = grid.shape
    blocks = ((cols + THREADS - 1) // THREADS, (rows + STRIP - 1) // STRIP)
    scalars = (cp.int32(rows), cp.int32(cols), cp.float32(DT * D), cp.int32(STRIP))
    diffuse(blocks, (THREADS,), (grid, out, *scalars))
    return out


def run_cupy(grid, spare, steps):
    for _ in range(steps):
        step_cupy(grid, spare)
        grid, spare = spare, grid
    return grid
# --8<-- [end:cupy_kernel]


# --8<-- [start:torch_graph]
def capture_torch(grid, steps):
    """Record `steps` of the original torch.roll step as one CUDA graph.

    Each replay runs all of them with a single launch and leaves the result in `grid`.
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside the capture, as PyTorch asks
        for _ in range(3):
            evolve(grid, DT, D)
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        state = grid
        for _ in range(steps):
            state = evolve(state, DT, D)
        grid.copy_(state)
    return graph


def replay_torch(graph, replays):
    for _ in range(replays):
        graph.replay()
# --8<-- [end:torch_graph]


# --8<-- [start:cupy_graph]
def capture_cupy(grid, spare, steps):
    """Record `steps` (even) fused steps as one CUDA graph; the result ends in grid."""
    step_cupy(grid, spare)  # compile and load the kernel before capturing
    stream = cp.cuda.Stream(non_blocking=True)  # the default stream cannot capture
    with stream:
        stream.begin_capture()
        for _ in range(steps // 2):
            step_cupy(grid, spare)
            step_cupy(spare, grid)
        graph = stream.end_capture()
    return graph


def replay_cupy(graph, replays):
    for _ in range(replays):
        graph.launch()  # on the current stream, after the work already queued there
# --8<-- [end:cupy_graph]


if __name__ == "__main__":
    # --8<-- [start:gpu_main]
    n, steps, per_graph = 640, 100, 20
    start = initial_grid((n, n))
    reference = run_numpy(start, steps)

    def error(result):
        on_gpu = isinstance(result, cp.ndarray)
        host = cp.asnumpy(result) if on_gpu else result.cpu().numpy()
        return np.abs(host - reference).max()

    a, b = cp.asarray(start), cp.empty((n, n), dtype=cp.float32)
    fused = run_cupy(a, b, steps)
    print(f"fused CuPy kernel, max |difference| from NumPy: {error(fused):.1e}")

    g = torch.from_numpy(start).to("cuda")
    torch_graph = capture_torch(g, per_graph)
    replay_torch(torch_graph, steps // per_graph)
    print(f"torch.roll steps in a CUDA graph, max |difference|: {error(g):.1e}")

    a, b = cp.asarray(start), cp.empty((n, n), dtype=cp.float32)
    cupy_graph = capture_cupy(a, b, per_graph)
    replay_cupy(cupy_graph, steps // per_graph)
    print(f"fused kernel in a CUDA graph, max |difference|: {error(a):.1e}")

    per_step = {
        "fused kernel, one launch per step": seconds_per_step(
            lambda k: run_cupy(a, b, k), steps),
        "fused kernel, CUDA graph": seconds_per_step(
            lambda k: replay_cupy(cupy_graph, k // per_graph), steps),
        "torch.roll, CUDA graph": seconds_per_step(
            lambda k: replay_torch(torch_graph, k // per_graph), steps),
    }
    for name, seconds in per_step.items():
        print(f"  {n}x{n} {name}: {seconds * 1e6:.1f} µs per step")
    # --8<-- [end:gpu_main]
