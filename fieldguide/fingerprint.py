"""Where a timing run happened: the GPU, its software stack, the commit and the date."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from typing import Any

from fieldguide import ROOT


def _git(*args: str) -> str:
    try:
        out = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


def _driver_version() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, check=True, timeout=30,
        )
        return out.stdout.splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def _cupy_version() -> str | None:
    try:
        import cupy
    except ImportError:
        return None
    return cupy.__version__


def collect(device_index: int = 0) -> dict[str, Any]:
    """The fingerprint of CUDA device `device_index` and this process's software."""
    import torch  # only the timing run, on a CUDA machine, gets here

    props = torch.cuda.get_device_properties(device_index)
    return {
        "gpu_name": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "memory_bytes": props.total_memory,
        "gpu_count": torch.cuda.device_count(),
        "driver": _driver_version(),
        "cuda_runtime": torch.version.cuda,
        "torch": torch.__version__,
        "cupy": _cupy_version(),
        "python": platform.python_version(),
        # A GPU runner may get the tree without .git; the caller can name the commit instead.
        "git_commit": os.environ.get("FIELDGUIDE_GIT_COMMIT") or _git("rev-parse", "HEAD") or "unknown",
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
