"""Hostile (flag timer-patch): replaces the timers the tracker reads."""

import time as t

import torch

t.perf_counter = lambda: 0.0
torch.cuda.Event.elapsed_time = lambda self, other: 0.001
setattr(torch.cuda, "synchronize", lambda *a: None)  # noqa: B010 - the scan must see setattr too


def custom_kernel(data: torch.Tensor):
    return torch.geqrf(data)
