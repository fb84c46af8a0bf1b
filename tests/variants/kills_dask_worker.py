"""Correct on the first call; on the second it SIGKILLs its parent, the Dask worker that runs it, as a dying
machine would, writes its pid to $KB_TEST_PIDS and sleeps on, as a kernel whose host lost its runner.
Refuses to do so outside a scale-out worker (KERNELBEAM_CPUS is set only there)."""

import os
import signal
import time

import torch

CALLS = 0


def custom_kernel(data: torch.Tensor):
    global CALLS
    CALLS += 1
    if CALLS >= 2:
        if not os.environ.get("KERNELBEAM_CPUS"):
            raise RuntimeError("not under a scale-out worker: refusing to kill the parent")
        with open(os.environ["KB_TEST_PIDS"], "a") as f:
            f.write(f"{os.getpid()}\n")
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(300)
    return torch.geqrf(data)
