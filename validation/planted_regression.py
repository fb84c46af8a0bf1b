from task import input_t, output_t

"""A planted regression for validating the statistics: the base variant, made slower on one shape only.

Environment: PLANT_BASE (kernel file to wrap, default kernels/geqrf_reference.py), PLANT_SHAPE ("40x176": batch x n
of the slowed case) and PLANT_FRACTION (0.05 = 5% slower). On the first call of that shape it measures the base
kernel (median of 5 CUDA-event-timed calls); afterwards each call of that shape synchronizes, spins the host for
that fraction of the base time (the GPU idles meanwhile, so the delay adds exactly), then calls the base kernel.
"""

import importlib.util
import os
import statistics
import time
from pathlib import Path

import torch

_root = Path(__file__).resolve().parent.parent
_base_path = Path(os.environ.get("PLANT_BASE", _root / "kernels" / "geqrf_reference.py"))
_spec = importlib.util.spec_from_file_location("planted_base", _base_path)
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)
_shape = tuple(int(x) for x in os.environ.get("PLANT_SHAPE", "40x176").split("x"))
_fraction = float(os.environ.get("PLANT_FRACTION", "0.05"))
_delay_s: float | None = None


def _calibrate(data: torch.Tensor) -> float:
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        _base.custom_kernel(data)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return _fraction * statistics.median(times)


def custom_kernel(data: input_t) -> output_t:
    global _delay_s
    if (data.shape[0], data.shape[-1]) != _shape or not data.is_cuda:
        return _base.custom_kernel(data)
    if _delay_s is None:
        _delay_s = _calibrate(data)
    torch.cuda.synchronize()
    until = time.perf_counter() + _delay_s
    while time.perf_counter() < until:
        pass
    return _base.custom_kernel(data)
