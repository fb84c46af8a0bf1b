"""Runs a command that can reach no other process's socket: the first program of every sandbox
(tracker.capture.sandbox).

The sandbox binds the root file system read-only, but connecting to a Unix socket on it needs no write, and the
network namespace does not cover sockets with a path: a host service's socket (the session D-Bus, which starts
programs outside the sandbox; an ssh agent; docker) would take a kernel's requests. A seccomp filter, installed here
and kept across exec by every process the command starts, refuses connect() (ENOENT, what a program sees where no
such socket exists), Unix datagram sockets and socketpairs (EACCES: they send to any path without connect), io_uring
(whose operations open and connect sockets past the filter), any system call of another ABI (i386 or x32 calls from a
64-bit process), and the calls that reach into another process (ptrace, process_vm_readv/writev, pidfd_getfd: EPERM):
the Nsight Compute pass runs its profiler unfiltered above the kernel (tracker.capture.ncu_pass), which must not be
taken over. Unix stream sockets may be made: under a filter that refused every Unix socket the CUDA driver did not
start (cuInit 304, CUDA_ERROR_OPERATING_SYSTEM; H100, 2026-12-05), most likely because it makes one to look for the
MPS daemon's (validation/seccomp_cuda_probe.py tells which rule does it). The sockets the worker inherits are
connected stream pairs, which connect() cannot point elsewhere.

Run as a script (`python -I -S seccomp_exec.py [--ready FD] [--unfiltered] PROGRAM ARG...`): standard library only,
before anything else. With --ready, it writes one byte to FD and closes it once the filter is in place: what tells
sandbox.start that the sandbox was set up. With --unfiltered it installs no filter: the stage before a front (a
profiler) that runs above the filter, so the byte comes before the front, which never holds the pipe.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys

# Per architecture: its audit number, socket, socketpair, connect, the first number of a foreign ABI sharing it
# (x32), ptrace, process_vm_readv, process_vm_writev.
ARCHES = {
    "x86_64": (0xC000003E, 41, 53, 42, 0x40000000, 101, 310, 311),
    "aarch64": (0xC00000B7, 198, 199, 203, None, 117, 270, 271),
}
IO_URING_SETUP, PIDFD_GETFD = 425, 438  # the same numbers on every architecture
AF_UNIX, SOCK_DGRAM, SOCK_TYPE_MASK = 1, 2, 0xF
ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW


def fails_with(code: int) -> int:
    """SECCOMP_RET_ERRNO: the call is not made and returns -1 with errno `code`."""
    return 0x00050000 | code


DENY = fails_with(errno.EACCES)
NOT_PERMITTED = fails_with(errno.EPERM)  # what ptrace says to a process it may not trace
NO_SUCH = fails_with(errno.ENOENT)  # what connect() says where no such socket exists
LD, JEQ, JGE, AND, RET = 0x20, 0x15, 0x35, 0x54, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JGE|K, ALU|AND|K, RET|K
NR, ARCH, ARG0, ARG1 = 0, 4, 16, 24  # offsets in struct seccomp_data (the low half of each argument)


def any_of(numbers: list[int], action: int) -> list[tuple[int, int, int, int]]:
    """Instructions that return `action` when the loaded value is one of `numbers`, else go on after them."""
    last = len(numbers) - 1
    return [(JEQ, last - i, 0, nr) for i, nr in enumerate(numbers[:-1])] + [
        (JEQ, 0, 1, numbers[-1]),
        (RET, 0, 0, action),
    ]


def program(machine: str) -> bytes:
    """The filter (struct sock_filter[]) for this machine; KeyError for an architecture it does not know."""
    audit, socket_nr, pair_nr, connect_nr, foreign, ptrace_nr, vm_read_nr, vm_write_nr = ARCHES[machine]
    code = [
        (LD, 0, 0, ARCH),
        (JEQ, 1, 0, audit),
        (RET, 0, 0, DENY),  # another ABI's call
        (LD, 0, 0, NR),
        (JGE, 0, 1, foreign if foreign is not None else 0xFFFFFFFF),
        (RET, 0, 0, DENY),
        *any_of([IO_URING_SETUP], DENY),
        # A stream socket may be made (the CUDA driver's start seems to need one: see above), but never connected,
        # the one way it reaches another's: ENOENT, as where no MPS daemon listens.
        *any_of([connect_nr], NO_SUCH),
        *any_of([ptrace_nr, vm_read_nr, vm_write_nr, PIDFD_GETFD], NOT_PERMITTED),
        (JEQ, 1, 0, socket_nr),
        (JEQ, 0, 5, pair_nr),
        (LD, 0, 0, ARG0),  # socket or socketpair(domain, type, ...): a Unix datagram one can send to any path
        (JEQ, 0, 3, AF_UNIX),
        (LD, 0, 0, ARG1),
        (AND, 0, 0, SOCK_TYPE_MASK),
        (JEQ, 1, 0, SOCK_DGRAM),
        (RET, 0, 0, ALLOW),
        (RET, 0, 0, DENY),
    ]
    return assemble(code)


def assemble(code: list[tuple[int, int, int, int]]) -> bytes:
    """struct sock_filter[] of (code, jt, jf, k) instructions."""
    return b"".join(struct.pack("HBBI", *insn) for insn in code)


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def install(code: bytes | None = None) -> None:
    """Install the filter (this machine's, or `code`) on this process and so on everything it execs or forks;
    OSError if it cannot, KeyError for an architecture it does not know."""
    code = program(platform.machine()) if code is None else code
    libc = ctypes.CDLL(None, use_errno=True)
    prog = _Prog(len(code) // 8, code)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: required for an unprivileged filter
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
    if libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "the seccomp filter was refused")


def main() -> None:
    argv = sys.argv[1:]
    ready = int(argv[1]) if argv[:1] == ["--ready"] else None
    argv = argv[2:] if ready is not None else argv
    if argv[:1] == ["--unfiltered"]:
        argv = argv[1:]
    else:
        try:
            install()
        except (KeyError, OSError) as exc:
            sys.exit(f"seccomp_exec: cannot confine Unix sockets on {platform.machine()}: {exc}")
    if ready is not None:
        os.write(ready, b"1")
        os.close(ready)  # before exec: the command never holds it
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
