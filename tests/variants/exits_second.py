"""Correct on the first call; kills its own process with os._exit(3) on the second."""

import os

import torch

CALLS = 0


def custom_kernel(data: torch.Tensor):
    global CALLS
    CALLS += 1
    if CALLS >= 2:
        print("KB-MARKER about to exit", flush=True)
        os._exit(3)
    return torch.geqrf(data)
