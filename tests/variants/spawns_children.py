"""Correct, but starts processes on its first call: a plain child, a double-forked daemon and a setsid child.
Prints their pids; the tracker must end all three when the run ends (flag process-spawn, informational)."""

import os
import subprocess

import torch

STARTED = []


def _daemon() -> int:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        if os.fork() == 0:
            os.setsid()
            os.write(w, str(os.getpid()).encode())
            os.execvp("sleep", ["sleep", "1001"])
        os._exit(0)
    os.waitpid(pid, 0)
    os.close(w)
    return int(os.read(r, 32))


def custom_kernel(data: torch.Tensor):
    if not STARTED:
        STARTED.append(subprocess.Popen(["sleep", "1000"]).pid)
        STARTED.append(_daemon())
        STARTED.append(subprocess.Popen(["sleep", "1002"], start_new_session=True).pid)
        print("KB-CHILDREN", *STARTED, flush=True)
    return torch.geqrf(data)
