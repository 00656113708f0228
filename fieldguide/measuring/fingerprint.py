"""What pytest-benchmark does not know about a timing run: the GPUs and their software.

pytest-benchmark records the host (CPU model and cores, OS, Python) in `machine_info` and the
commit in `commit_info`; the timing run adds this under `machine_info["fieldguide"]`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any


def _run(*args: str) -> str:
    try:
        out = subprocess.run(list(args), capture_output=True, text=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except ImportError:
        return None


def boot_id() -> str | None:
    """Changes on every boot: tells two machine leases apart."""
    path = Path("/proc/sys/kernel/random/boot_id")
    return path.read_text().strip() if path.is_file() else None


def collect(device_index: int = 0) -> dict[str, Any]:
    """The GPU side of a run's fingerprint (CUDA device `device_index` and the GPU stack)."""
    import torch  # only the timing run, on a CUDA machine, gets here

    props = torch.cuda.get_device_properties(device_index)
    count = torch.cuda.device_count()
    try:  # a tuple (2, 27, 3) in current releases; whatever it is, record it, never fail on it
        version = torch.cuda.nccl.version()
        nccl = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
    except (AttributeError, RuntimeError):
        nccl = None
    return {
        "gpu_name": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "memory_bytes": props.total_memory,
        "gpu_count": count,
        # How the GPUs are joined (NVLink, PCIe): what a multi-GPU number depends on.
        "interconnect": _run("nvidia-smi", "topo", "-m") if count > 1 else None,
        "driver": (_run("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader")
                   .splitlines() or ["unknown"])[0],
        "cuda_runtime": torch.version.cuda,
        "torch": torch.__version__,
        "cupy": _version("cupy"),
        "triton": _version("triton"),  # what Inductor and hand-written kernels compile with
        "numpy": _version("numpy"),
        "nccl": nccl,
        "boot_id": boot_id(),
    }
