"""Modifies its input in place, then factors a copy of the modified input (a correct QR of what it saw)."""

import torch


def custom_kernel(data: torch.Tensor):
    data[0, 0, 0] += 1.0
    return torch.geqrf(data.clone())
