"""The environment a run measured on: host, GPU, driver and software versions."""

from __future__ import annotations

import functools
import os
import platform
import shutil
import socket
import subprocess
import sys
from typing import Any


def _driver_version() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


@functools.cache
def gpu_available() -> bool:
    """Whether a CUDA GPU is usable here (checked once, in a subprocess, so the dashboard never imports torch)."""
    if os.environ.get("KERNELBEAM_NO_GPU"):
        return False
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        out = subprocess.run(
            [sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return out.stdout.strip().endswith("True")


def capture_environment(device) -> dict[str, Any]:
    """Describe the machine; on a CPU run `gpu` is 'CPU' so CPU timings are never compared with GPU ones."""
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    env: dict[str, Any] = {
        "host": socket.gethostname(),
        "device": device.type,
        "gpu": "CPU",
        "sm_count": None,
        "driver": None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton_version,
        "python": platform.python_version(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(
            gpu=props.name,
            sm_count=props.multi_processor_count,
            driver=_driver_version(),
        )
    return env
