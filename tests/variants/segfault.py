"""Dereferences a null pointer: the process dies with SIGSEGV."""

import ctypes

import torch


def custom_kernel(data: torch.Tensor):
    ctypes.string_at(0)
    return torch.geqrf(data)
