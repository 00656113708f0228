"""Benchmarks behind docs/first-steps/pytorch-on-a-gpu.md: creating on the GPU vs creating, then moving."""

import pytest
import torch

from snippets.first_steps import pytorch_on_a_gpu as snippet

pytestmark = [pytest.mark.snippet("snippets/first_steps/pytorch_on_a_gpu.py"), pytest.mark.gpus(1)]

# How tables and charts name these benchmarks (read by the site build; see fieldguide/rendering/labels.py)
LABELS = {"create": "{fill}, {bytes} of float32, {where}"}
WORDS = {"zeros": "`torch.zeros`", "randn": "`torch.randn`",
         "on-device": "created on the GPU", "cpu-then-to": "created on the CPU, then moved"}

# What of the host these numbers measure (fieldguide/measuring/host_bound.py): pages show them
# with their range over runs and machines; claims about them compare within a run.
HOST_BOUND = {
    "create[*-cpu-then-to]": "filling host memory and a pageable copy",
}

SHAPE = (4096, 4096)  # float32: 64 MiB


def on_device_zeros():
    torch.zeros(SHAPE, device=snippet.device)


def moved_zeros():
    torch.zeros(SHAPE).to(snippet.device)


def on_device_randn():
    snippet.created_on_device(SHAPE)


def moved_randn():
    snippet.created_then_moved(SHAPE)


CASES = {
    "zeros-on-device": on_device_zeros,
    "zeros-cpu-then-to": moved_zeros,
    "randn-on-device": on_device_randn,
    "randn-cpu-then-to": moved_randn,
}


@pytest.mark.parametrize("case", list(CASES))
def bench_create(gpu_benchmark, case):
    """A 4096x4096 float32 tensor (64 MiB) made on the GPU, or made on the CPU and copied over."""
    fill, where = case.split("-", 1)
    props = torch.cuda.get_device_properties(0)
    gpu_benchmark.extra_info.update(bytes=4 * SHAPE[0] * SHAPE[1], fill=fill, where=where,
                                    torch_threads=torch.get_num_threads(),
                                    device_line=snippet.describe_gpus()[0],
                                    torch_cuda=torch.version.cuda, gpu_name=props.name,
                                    capability=f"{props.major}.{props.minor}")
    gpu_benchmark(CASES[case], rounds=15, warmup_rounds=2)
