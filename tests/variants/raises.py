"""Raises inside custom_kernel."""

import torch


def custom_kernel(data: torch.Tensor):
    raise RuntimeError("kb-boom: this variant fails on purpose")
