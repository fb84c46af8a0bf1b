"""Hostile (flag sys-modules): swaps a module the checker imports."""

import sys
import types

import torch

sys.modules["kb_fake_checks"] = types.ModuleType("kb_fake_checks")


def custom_kernel(data: torch.Tensor):
    return torch.geqrf(data)
