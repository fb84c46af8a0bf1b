"""Perturbs R of matrix 1 (entry (2, 5) of H, on the upper triangle): the factor gate must fail on matrix 1."""

import torch


def custom_kernel(data: torch.Tensor):
    h, tau = torch.geqrf(data)
    h[1, 2, 5] += 0.5
    return h, tau
