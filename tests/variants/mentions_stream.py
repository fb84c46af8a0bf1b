"""Correct, but mentions the banned word: everything here runs on the default stream."""

import torch


def custom_kernel(data: torch.Tensor):
    return torch.geqrf(data)
