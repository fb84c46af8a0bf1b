"""The environment a run measured on: host, GPU, driver and software versions (`capture_environment`, in the
worker), and what else was using the device and the host when the run started and ended (`device_load`, in the
runner, under the device lock)."""

from __future__ import annotations

import functools
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
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


def _nvidia_smi(*query: str) -> list[list[str]] | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", *query, "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return [[x.strip() for x in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def device_load(key: str, own_pids: set[int] = frozenset()) -> dict[str, Any]:
    """What else used the device and the host: GPU compute processes and utilisation (nvidia-smi, when there is
    one), the load average and the core count. `shared` says whether the run did not have them to itself."""
    load1, load5, load15 = os.getloadavg()
    cores = os.cpu_count() or 1
    info: dict[str, Any] = {"time": time.time(), "loadavg": [load1, load5, load15], "cores": cores}
    shared = load1 > cores
    if key != "cpu":
        index = key[3:]
        apps = _nvidia_smi("--query-compute-apps=pid,process_name,used_memory,gpu_uuid", "-i", index)
        util = _nvidia_smi("--query-gpu=utilization.gpu", "-i", index)
        others = [
            {"pid": int(a[0]), "name": a[1], "memory_mib": a[2]}
            for a in apps or []
            if a and a[0].isdigit() and int(a[0]) not in own_pids
        ]
        info.update(gpu_processes=others, gpu_utilization=util[0][0] if util else None)
        shared = shared or bool(others)
    info["shared"] = shared
    return info
