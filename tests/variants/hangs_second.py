"""Correct on the first call; on the second it starts a child process, prints both pids, and hangs."""

import os
import subprocess
import time

import torch

CALLS = 0


def custom_kernel(data: torch.Tensor):
    global CALLS
    CALLS += 1
    if CALLS >= 2:
        # a command line the tests can find (tests/conftest.py's HANG_SLEEP: their process's pid in it)
        child = subprocess.Popen(["sleep", f"300.{os.environ.get('KB_MARK', '25')}"])
        print(f"KB-PIDS {os.getpid()} {child.pid}", flush=True)
        time.sleep(300)
    return torch.geqrf(data)
