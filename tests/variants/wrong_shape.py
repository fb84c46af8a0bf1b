"""Returns H with one row too few."""

import torch


def custom_kernel(data: torch.Tensor):
    h, tau = torch.geqrf(data)
    return h[:, :-1, :].contiguous(), tau
