"""Which rule of the sandbox's seccomp filter keeps CUDA (and Nsight Compute) from starting, on a GPU machine.

Session 38 (H100, 2026-12-05): inside the sandbox cuInit returned 304 (CUDA_ERROR_OPERATING_SYSTEM) and returned 0
with tracker/capture/seccomp_exec.py taken out of the command; every other part of the sandbox was innocent. This
runs cuInit under filters that each refuse one thing and under tracker/capture/seccomp_exec.py's filter as it
stands, then Nsight Compute whole under each filter that refuses every Unix socket with an errno CUDA started under,
and prints one line each (`cuInit 0` is a start; ncu's last lines say whether it profiled the kernel).

Session 39 (H100, 2026-12-05): the filter as it stands starts CUDA (the rule at fault was the one refusing every
Unix socket); Nsight Compute with its front end under the filter hung past 150 s, with only its target under it it
profiled (tracker.capture.ncu_pass runs it so where Yama allows). Neither case is run any more; the question left is
whether CUDA takes a refused Unix socket with another errno, which would let ncu run whole under the filter.

    python3 validation/seccomp_cuda_probe.py          # on the GPU machine, no sandbox needed
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from the checkout
from tracker.capture import seccomp_exec as sx  # noqa: E402 - standard library only, as this script

LAUNCHER = Path(sx.__file__)
_, SOCKET, SOCKETPAIR, CONNECT, *_ = sx.ARCHES["x86_64"]
EACCES, ENOENT, EPERM = sx.DENY, sx.NO_SUCH, sx.NOT_PERMITTED
ENOSYS, EAFNOSUPPORT = sx.fails_with(errno.ENOSYS), sx.fails_with(errno.EAFNOSUPPORT)
AF_UNIX, SOCK_DGRAM = sx.AF_UNIX, sx.SOCK_DGRAM

# name -> rules (system call, domain or None, socket type or None, action); the first rule that matches acts.
FILTERS = {
    "no rule (no_new_privs alone)": [],
    "socket(AF_UNIX, any) refused": [(SOCKET, AF_UNIX, None, EACCES)],
    # If the driver takes one of these errnos as "no Unix sockets here", the filter could refuse every Unix socket
    # and allow connect(): Nsight Compute (which connects to its target) and TCP would then work under it.
    "socket(AF_UNIX, any) refused (EAFNOSUPPORT)": [(SOCKET, AF_UNIX, None, EAFNOSUPPORT)],
    "socket(AF_UNIX, any) refused (EPERM)": [(SOCKET, AF_UNIX, None, EPERM)],
    "socket(AF_UNIX, any) refused (ENOSYS)": [(SOCKET, AF_UNIX, None, ENOSYS)],
    "socket(AF_UNIX, SOCK_DGRAM) refused": [(SOCKET, AF_UNIX, SOCK_DGRAM, EACCES)],
    "socketpair(AF_UNIX, SOCK_DGRAM) refused": [(SOCKETPAIR, AF_UNIX, SOCK_DGRAM, EACCES)],
    "io_uring_setup refused": [(sx.IO_URING_SETUP, None, None, EACCES)],
    "connect refused (ENOENT)": [(CONNECT, None, None, ENOENT)],
}
CUINIT = "import ctypes; print('cuInit', ctypes.CDLL('libcuda.so.1').cuInit(0))"
TORCH = "import torch; print('torch', torch.ones(4, device='cuda').sum().item())"


def program(rules: list) -> bytes:
    """One filter of `rules` (x86_64), each a chain of tests that falls through to the next rule on a mismatch."""
    code = []
    for nr, domain, kind, action in rules:
        body = [(sx.LD, 0, 0, sx.NR), (sx.JEQ, 0, None, nr)]
        if domain is not None:
            body += [(sx.LD, 0, 0, sx.ARG0), (sx.JEQ, 0, None, domain)]
        if kind is not None:
            body += [(sx.LD, 0, 0, sx.ARG1), (sx.AND, 0, 0, sx.SOCK_TYPE_MASK), (sx.JEQ, 0, None, kind)]
        body.append((sx.RET, 0, 0, action))
        code += [(c, jt, len(body) - i - 1 if jf is None else jf, k) for i, (c, jt, jf, k) in enumerate(body)]
    return sx.assemble([*code, (sx.RET, 0, 0, sx.ALLOW)])


def install(name: str) -> None:
    try:
        sx.install(program(FILTERS[name]))
    except OSError as exc:
        sys.exit(f"cannot install the filter: {exc}")


def report(name: str, argv: list[str], timeout: int = 150) -> str:
    """Run argv, print one line for it, return its output ("" when it timed out)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"{name}: timed out", flush=True)
        return ""
    lines = (done.stdout + done.stderr).strip().splitlines()
    print(f"{name}: exit {done.returncode} | {' / '.join(lines[-3:])[:400]}", flush=True)
    return done.stdout


def main() -> None:
    if sys.argv[1:2] == ["--under"]:  # the child: its filter, then the command
        install(sys.argv[2])
        os.execvp(sys.argv[3], sys.argv[3:])
    me = [sys.executable, __file__, "--under"]
    started = [name for name in FILTERS if "cuInit 0" in report(name, [*me, name, sys.executable, "-c", CUINIT])]
    launcher = [sys.executable, "-I", "-S", str(LAUNCHER)]
    report("seccomp_exec.py as it stands", [*launcher, sys.executable, "-c", CUINIT])
    # Nsight Compute whole under a filter that refuses every Unix socket but lets connect() through: only for the
    # errnos CUDA started under (ncu with its front end under connect() refused hangs: session 39)
    ncu = shutil.which("ncu")
    candidates = [name for name in started if name.startswith("socket(AF_UNIX, any) refused (")]
    if ncu and candidates:
        profile = [ncu, "--target-processes", "all", "-c", "1"]
        report("ncu, no filter", [*profile, sys.executable, "-c", TORCH])
        for name in candidates:
            report(f"ncu under {name}", [*me, name, *profile, sys.executable, "-c", TORCH], timeout=60)
    else:
        print("ncu: " + ("not on PATH" if not ncu else "CUDA started under no filter that refuses every Unix socket"))


if __name__ == "__main__":
    main()
