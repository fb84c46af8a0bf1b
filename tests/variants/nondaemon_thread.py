"""Correct, but leaves a non-daemon thread sleeping for ever: the run must still finish (and pass) quickly."""

import threading
import time

import torch

threading.Thread(target=lambda: time.sleep(10**6), daemon=False).start()


def custom_kernel(data: torch.Tensor):
    return torch.geqrf(data)
