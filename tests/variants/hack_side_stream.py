"""Hostile (flag side-stream): launches work on a side stream and returns without waiting for it."""

import torch


def custom_kernel(data: torch.Tensor):
    if data.is_cuda:
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            return torch.geqrf(data)
    return torch.geqrf(data)
