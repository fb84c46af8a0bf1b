"""Correct, but starts processes on its first call: a plain child, a double-forked daemon and a setsid child.
Prints their pids; the tracker must end all three when the run ends (flag process-spawn, informational)."""

import os
import subprocess

import torch

STARTED = []
MARK = os.environ.get("KB_MARK", "0")  # in the children's command lines: tests/conftest.py's, the tests' pid


def _daemon() -> int:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        if os.fork() == 0:
            os.setsid()
            os.write(w, str(os.getpid()).encode())
            os.execvp("sleep", ["sleep", f"1001.{MARK}"])
        os._exit(0)
    os.waitpid(pid, 0)
    os.close(w)
    return int(os.read(r, 32))


def custom_kernel(data: torch.Tensor):
    if not STARTED:
        STARTED.append(subprocess.Popen(["sleep", f"1000.{MARK}"]).pid)
        STARTED.append(_daemon())
        STARTED.append(subprocess.Popen(["sleep", f"1002.{MARK}"], start_new_session=True).pid)
        print("KB-CHILDREN", *STARTED, flush=True)
    return torch.geqrf(data)
