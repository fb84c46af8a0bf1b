"""Hostile (flag tracker-internals): reaches into the tracker's timing module."""

import torch

import tracker.capture.timing as timing  # noqa: F401


def custom_kernel(data: torch.Tensor):
    return torch.geqrf(data)
