"""Factors its input correctly, then modifies the input in place before returning."""

import torch


def custom_kernel(data: torch.Tensor):
    out = torch.geqrf(data)
    data[0, 0, 0] += 1.0
    return out
