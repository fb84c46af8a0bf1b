"""torch.profiler over one call of a kernel: kernel rows, launch count, host time, and a Chrome trace file."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

TOP_ROWS = 30


def profile_call(kernel: Callable, x: torch.Tensor, trace_path: Path | None) -> dict[str, Any]:
    """Profile `kernel(x)` once (after one unprofiled call, so compilation stays out).

    On a GPU the rows are device kernels; on a CPU they are the operators with the most self time.
    """
    cuda = x.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    kernel(x)
    if cuda:
        torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        kernel(x)
        if cuda:
            torch.cuda.synchronize()
        host_us = (time.perf_counter() - t0) * 1e6
    rows = []
    launches = 0
    for avg in prof.key_averages():
        if cuda and avg.device_type == DeviceType.CUDA:
            launches += avg.count
            rows.append((avg.key, avg.count, avg.device_time_total, avg.self_device_time_total))
        elif not cuda and avg.device_type == DeviceType.CPU:
            rows.append((avg.key, avg.count, None, avg.self_cpu_time_total))
    rows.sort(key=lambda r: -(r[2] if r[2] is not None else r[3]))
    if trace_path is not None:
        trace_path.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(trace_path))
    return {
        "launches": launches if cuda else None,
        "host_us": host_us,
        "device_us": sum(r[2] for r in rows) if cuda else None,
        "trace_path": str(trace_path) if trace_path is not None else None,
        "kernels": [
            {"kernel": name, "calls": calls, "device_us": dev, "self_us": self_us}
            for name, calls, dev, self_us in rows[:TOP_ROWS]
        ],
    }
