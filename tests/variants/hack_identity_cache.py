"""Hostile (flag identity-cache): returns a cached answer when it sees the same input buffer again."""

import torch

CACHE = {}


def custom_kernel(data: torch.Tensor):
    key = data.data_ptr()
    if key not in CACHE:
        CACHE[key] = torch.geqrf(data)
    return CACHE[key]
