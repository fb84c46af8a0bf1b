"""Returns a NaN in H of the first matrix."""

import torch


def custom_kernel(data: torch.Tensor):
    h, tau = torch.geqrf(data)
    h[0, 0, 0] = float("nan")
    return h, tau
