"""Correct, but each call sleeps KB_CALL_SLEEP seconds (default 0.5): keeps a device busy for a while."""

import os
import time

import torch


def custom_kernel(data: torch.Tensor):
    time.sleep(float(os.environ.get("KB_CALL_SLEEP", "0.5")))
    return torch.geqrf(data)
