from task import input_t, output_t

"""A planted regression for validating the statistics: the base variant, made slower on one shape only.

Environment: PLANT_BASE (kernel file to wrap, default kernels/graphed.py), PLANT_SHAPE ("40x352": batch x n of
the slowed case) and PLANT_DELAY_US, the extra time per call. The delay is calibrated with the contest's timing
method, not with eager calls: the driver (validation/h200_stats.sh) takes the mean that the tracker measured for
that case in the baseline runs and multiplies it by the fraction to plant (2% or 5%). After the base kernel, each
call of that shape queues a GPU spin of that many microseconds (torch.cuda._sleep, converted with a
cycles-per-microsecond rate measured once at import): the spin is ordered after the kernel's own work, so
it adds exactly that device time whether the case is GPU-bound or not, and the host never waits.
"""

import importlib.util
import os
from pathlib import Path

import torch

_root = Path(__file__).resolve().parent.parent
_base_path = Path(os.environ.get("PLANT_BASE", _root / "kernels" / "graphed.py"))
_spec = importlib.util.spec_from_file_location("planted_base", _base_path)
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)
_shape = tuple(int(x) for x in os.environ.get("PLANT_SHAPE", "40x352").split("x"))
_delay_us = float(os.environ.get("PLANT_DELAY_US", "0"))
_cycles: int | None = None


def _cycles_for(delay_us: float) -> int:
    """GPU spin cycles lasting delay_us: time a long spin once, scale."""
    probe = 50_000_000
    torch.cuda._sleep(probe // 10)  # wake the clocks
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(probe)
    end.record()
    torch.cuda.synchronize()
    per_us = probe / (start.elapsed_time(end) * 1e3)
    return max(1, round(delay_us * per_us))


def custom_kernel(data: input_t) -> output_t:
    global _cycles
    out = _base.custom_kernel(data)
    if _delay_us > 0 and data.is_cuda and (data.shape[0], data.shape[-1]) == _shape:
        if _cycles is None:
            _cycles = _cycles_for(_delay_us)
        torch.cuda._sleep(_cycles)
    return out
