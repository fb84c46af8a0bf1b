"""Fails at import: the module it needs does not exist."""

import kb_no_such_module  # noqa: F401
import torch


def custom_kernel(data: torch.Tensor):
    return torch.geqrf(data)
