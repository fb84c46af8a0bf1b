"""Imports fine but defines no custom_kernel."""

import torch


def kernel(data: torch.Tensor):
    return torch.geqrf(data)
