"""Hostile (flag introspection): walks the interpreter's objects and frames to find the tracker's state."""

import gc
import sys

import torch


def custom_kernel(data: torch.Tensor):
    frame = sys._getframe(1)
    _ = [o for o in gc.get_objects() if isinstance(o, dict) and "samples" in o], frame
    return torch.geqrf(data)
