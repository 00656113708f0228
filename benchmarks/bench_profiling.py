"""Benchmarks behind docs/execution/profiling.md."""

import time

import pytest
import torch

from snippets.execution import profiling as snippet

pytestmark = [pytest.mark.snippet("snippets/execution/profiling.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {
    "forward": "`forward`, timed with synchronization",
    "busy": "{kind}",
}
WORDS = {"idle": "GPU idle", "tiny": "One single-block kernel at a time",
         "matmul": "Big matrix products"}

STEPS = 5


def bench_forward(gpu_benchmark):
    """What forward really costs on the GPU, beside what cProfile charged to each function."""
    stats = snippet.cprofile_steps(snippet.x, snippet.w, steps=STEPS)
    gpu_benchmark.extra_info.update(
        cprofile_forward_ms=snippet.cumulative_seconds(stats, "forward") / STEPS * 1e3,
        cprofile_loss_value_ms=snippet.cumulative_seconds(stats, "loss_value") / STEPS * 1e3,
        cprofile_item_ms=snippet.cumulative_seconds(stats, "item") / STEPS * 1e3,
        flops=2 * 8 * snippet.n**3,
    )
    gpu_benchmark(snippet.forward, snippet.x, snippet.w, rounds=20, warmup_rounds=2)


def idle_loop():
    return lambda: time.sleep(0.01)


LOOPS = {"idle": idle_loop, "tiny": snippet.tiny_kernel_loop, "matmul": snippet.big_matmul_loop}


@pytest.mark.parametrize("kind", list(LOOPS))
def bench_busy(benchmark, kind):
    """GPU-Util and power while the GPU idles, runs one tiny kernel at a time, or big matmuls."""
    launch = LOOPS[kind]()
    readings = {}

    def watch():
        readings["util"], readings["watts"] = snippet.watch_gpu(launch)

    # plain benchmark: one round watching GPU-Util and power; the readings are the point
    benchmark.pedantic(watch, setup=snippet.sync, rounds=1, warmup_rounds=0)
    sms = torch.cuda.get_device_properties(snippet.device).multi_processor_count
    benchmark.extra_info.update(kind=kind, utilization_pct=readings["util"],
                                power_w=readings["watts"], sms=sms)
    if kind == "tiny":
        benchmark.extra_info["blocks"] = 1
