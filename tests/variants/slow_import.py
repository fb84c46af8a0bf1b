"""Correct, but its import takes KB_IMPORT_SLEEP seconds (default 4), like a load_inline build."""

import os
import time

import torch

time.sleep(float(os.environ.get("KB_IMPORT_SLEEP", "4")))


def custom_kernel(data: torch.Tensor):
    return torch.geqrf(data)
