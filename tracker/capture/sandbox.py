"""The worker's sandbox: bubblewrap (the tool Flatpak uses) around the process that imports the kernel.

Inside, the kernel sees its own PID namespace (it is pid 1, nothing of the tracker shows in /proc, and every
process it starts dies with the sandbox, double-forked daemons included), no network and no connect() to any socket
(tracker.capture.seccomp_exec), a read-only root filesystem in which only its own run folder (also its TMPDIR
and HOME) and a private /dev/shm are writable (/tmp stays readable, so kernels and problem folders kept there
work, but not other runs' folders: all are made under runs_root(), which the sandbox covers with an empty tmpfs
before it binds in the run's own), the side-file key and the checker's folder hidden, and an environment of a
few named variables (no tokens, no store path). /dev is a fresh one with the GPU's device nodes bound in
(GPU_DEVICES), so the GPU works as outside while the user's terminals (/dev/pts) stay out of reach.

Where bwrap is missing or cannot make namespaces, `describe()` says why; the runner then runs the worker
without it and records so. `--no-sandbox` turns it off on purpose. bwrap comes from the system (`apt-get
install bubblewrap`), `$KERNELBEAM_BWRAP`, or `.tools/bwrap` in the checkout (`scripts/fetch-sandbox.sh`
unpacks Debian's package there, for machines without a package index).
"""

from __future__ import annotations

import functools
import glob
import os
import select
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tracker.common.errors import InputError
from tracker.common.files import folder_excess

_CHECKOUT = Path(__file__).resolve().parents[2]
CARRIED_BWRAP = _CHECKOUT / ".tools" / "bwrap"
# Every sandboxed command starts under this launcher, which denies it connect() and Unix datagram sockets (the
# network namespace leaves sockets with a path, a host service's, within reach).
SECCOMP_EXEC = Path(__file__).resolve().parent / "seccomp_exec.py"
YAMA_SCOPE = Path("/proc/sys/kernel/yama/ptrace_scope")

# Variables the worker may see (prefixes end in "_"): paths to binaries and libraries, CUDA and Triton settings,
# thread counts and locale. Nothing else of the tracker's environment crosses, KERNELBEAM_* above all.
PASSED_ENV = (
    "PATH",
    "LANG",
    "LC_",
    "TZ",
    "LD_LIBRARY_PATH",
    "CUDA_",
    "NVIDIA_",
    "CUBLAS_WORKSPACE_CONFIG",
    "TRITON_INTERPRET",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "TORCH_CUDA_ARCH_LIST",
    "PYTORCH_",
    "VIRTUAL_ENV",
)


# Device nodes a GPU needs (NVIDIA's, the DRM render nodes, ROCm's), bound into the sandbox's own /dev. Nothing else
# of the host's /dev: its /dev/pts holds the user's terminals, which a kernel could write fake lines to or read.
GPU_DEVICES = ("/dev/nvidia*", "/dev/dri", "/dev/kfd")
RUNS_ROOT_NAME = f"kernelbeam-runs-{os.getuid()}"  # a user's own: on a shared machine, another's is not writable
# What a run's own folder may hold (all a kernel may write but its compile cache): past it the run ends as the
# kernel's failure, before it fills the machine's disk for every other run.
RUN_FOLDER_GB_ENV, RUN_FOLDER_GB, RUN_FOLDER_FILES = "KERNELBEAM_RUN_FOLDER_GB", 20.0, 200_000


def runs_root() -> Path:
    """The folder every run's folders are made in (the worker's, the checker's, Nsight Compute's), in the system's
    temporary folder: one folder the sandbox can hide whole, so a kernel reads no other run's kernel, outputs or
    evidence (runs on other GPUs of the machine go on beside it)."""
    return Path(tempfile.gettempdir()) / RUNS_ROOT_NAME


def ready_runs_root() -> Path:
    """runs_root(), made (0700) if missing; an InputError where it is not a folder of this user's."""
    root = runs_root()
    root.mkdir(mode=0o700, exist_ok=True)
    info = root.lstat()
    # planted by someone: run folders made through a link could go anywhere, in another's folder they could be read
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise InputError(f"{root} is not a folder of this user's: remove it (the tracker makes its run folders there)")
    return root


def run_folder(prefix: str) -> Path:
    """A new private folder (0700) for one run under runs_root()."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=ready_runs_root()))


class FolderWatch:
    """A run folder measured every few seconds while its run goes on (tracker.common.files.folder_excess)."""

    def __init__(self, folder: Path, every_s: float = 2.0) -> None:
        self.folder, self.every_s, self.last = folder, every_s, time.monotonic()
        self.max_bytes = int(float(os.environ.get(RUN_FOLDER_GB_ENV) or RUN_FOLDER_GB) * 1e9)

    def excess(self) -> str | None:
        """The error the run ends with once its folder holds too much; None until then (and between measures)."""
        if time.monotonic() - self.last < self.every_s:
            return None
        over = folder_excess(self.folder, self.max_bytes, RUN_FOLDER_FILES)
        self.last = time.monotonic()
        return None if over is None else f"the kernel's run folder {over} (${RUN_FOLDER_GB_ENV} sets the size)"


def find_bwrap() -> str | None:
    for candidate in (os.environ.get("KERNELBEAM_BWRAP"), shutil.which("bwrap"), str(CARRIED_BWRAP)):
        if candidate and os.access(candidate, os.X_OK) and Path(candidate).is_file():
            return candidate
    return None


def sandbox_env(workdir: Path, extra: dict[str, str]) -> dict[str, str]:
    """The worker's whole environment: the allowed variables, those named in $KERNELBEAM_WORKER_ENV (a comma
    list, for a kernel's own settings), and a home and caches in its run folder."""
    named = {n.strip() for n in os.environ.get("KERNELBEAM_WORKER_ENV", "").split(",") if n.strip()}
    env = {
        k: v
        for k, v in os.environ.items()
        if k in named or any(k == p or (p.endswith("_") and k.startswith(p)) for p in PASSED_ENV)
    }
    env.update(
        HOME=str(workdir),
        TMPDIR=str(workdir / "tmp"),
        TRITON_CACHE_DIR=str(workdir / "triton"),  # a fresh cache: nothing compiled by one run is loaded by the next
        TORCH_EXTENSIONS_DIR=str(workdir / "torch_extensions"),
        XDG_CACHE_HOME=str(workdir / "cache"),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONNOUSERSITE="1",
    )
    env.update(extra)
    return env


@functools.cache
def ready_gpu_nodes() -> None:
    """Have the NVIDIA driver make its unified-memory nodes (/dev/nvidia-uvm*) before a sandbox is built.

    The driver makes them on the machine's first CUDA call (through nvidia-modprobe). Made inside the sandbox,
    they would land in its own /dev, by a process with no capability to make a device node, and CUDA fails to
    start. Outside, a bare cuInit in a child process (the driver alone, no kernel code) makes them.
    """
    if not os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia-uvm"):
        return
    try:
        subprocess.run(
            [sys.executable, "-I", "-S", "-c", "import ctypes; ctypes.CDLL('libcuda.so.1').cuInit(0)"],
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired):
        pass  # the run says then what CUDA said (worker: no CUDA device, and why)


def command(
    bwrap: str,
    argv: list[str],
    workdir: Path,
    env: dict[str, str],
    hidden: list[Path],
    writable: list[Path] = (),
    front: list[str] = (),
) -> list[str]:
    """bwrap's command line for `argv`: everything read-only but `workdir` (and the `writable` files, such as
    Nsight Compute's lock file), `hidden` files masked. `front` (a profiler that starts `argv`) runs in the sandbox
    but before the socket filter: only where ancestors_protected()."""
    cover = workdir.parent == runs_root()
    cmd = [
        bwrap,
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--tmpfs", "/dev/shm",
        "--proc", "/proc",
        # other runs' folders out of sight: an empty tmpfs over their root, the run's own bound in (read-only below)
        *(("--tmpfs", str(runs_root())) if cover else ()),
        "--bind", str(workdir), str(workdir),
        "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
        # the command is pid 1, no bwrap reaper: that one ran unfiltered and a kernel could trace it or write its memory
        "--as-pid-1",
        "--cap-drop", "ALL",  # run as root, bwrap keeps every capability: the kernel could remount / read-write
        "--die-with-parent",
        "--new-session",  # no TIOCSTI into the tracker's terminal
        "--clearenv",
        "--chdir", str(workdir),
    ]  # fmt: skip
    for path in sorted(p for pattern in GPU_DEVICES for p in glob.glob(pattern)):
        cmd += ["--dev-bind", path, path]
    for path in writable:
        cmd += ["--bind", str(path), str(path)]
    for path in hidden:
        if path.is_file():
            cmd += ["--ro-bind", "/dev/null", str(path)]
        elif path.is_dir():  # an empty folder, read-only: nothing a kernel writes there looks like a lock or a file
            cmd += ["--tmpfs", str(path), "--remount-ro", str(path)]
    if cover:  # last: the mount points of hidden folders under it are made first
        cmd += ["--remount-ro", str(runs_root())]
    for name, value in env.items():
        cmd += ["--setenv", name, value]
    launch = [sys.executable, "-I", "-S", str(SECCOMP_EXEC)]
    # a front starts after a stage of its own, which tells sandbox.start that the sandbox was set up
    return [*cmd, "--", *((*launch, "--unfiltered", *front) if front else ()), *launch, *argv]


# bwrap masks each hidden path that exists when its command line is made; one removed before bwrap mounts over it
# (the store's WAL, which every checkpoint of another process deletes) fails the mount and the run. A command that
# never reached its launcher is made again, with the paths as they are then.
SETUP_TRIES = 3
READY_WAIT_S = 60.0  # past this, the launcher is taken as started: the run's own deadlines take over
SETUP_EXIT_S = 5.0  # how long a command whose ready pipe closed empty gets to show it ended (bwrap exits at once)


def start(build, **popen) -> tuple[subprocess.Popen, str]:
    """Popen the command that `build()` makes (wrap's (command line, environment, how it runs)), made and started
    again where the sandbox could not be set up; returns the process and how it runs. `popen`: Popen's arguments
    but args and env."""
    for attempt in range(1, SETUP_TRIES + 1):
        argv, env, how = build()
        if not contained(how):
            return subprocess.Popen(argv, env=env, **popen), how
        ready_r, ready_w = os.pipe()
        at = argv.index(str(SECCOMP_EXEC)) + 1
        argv = [*argv[:at], "--ready", str(ready_w), *argv[at:]]
        fds = (*popen.get("pass_fds", ()), ready_w)
        try:
            proc = subprocess.Popen(argv, env=env, **{**popen, "pass_fds": fds})
        finally:
            os.close(ready_w)
        with os.fdopen(ready_r, "rb", buffering=0) as ready:
            waited = select.select([ready], [], [], READY_WAIT_S)[0]
            started = not waited or ready.read(1) == b"1"
        if not started:  # the pipe closed without the byte: bwrap died, or the launcher could not start
            try:
                started = proc.wait(timeout=SETUP_EXIT_S) == 0  # bwrap's set-up failures exit 1
            except subprocess.TimeoutExpired:
                started = True  # still running: not a failed set-up
        if started or attempt == SETUP_TRIES:
            return proc, how
    raise AssertionError("unreachable")


def hidden_from_kernel(private: Path | None, store: str | os.PathLike | None = None) -> list[Path]:
    """What every sandbox masks: the side-file key (it signs side files), the device locks (readable, a kernel took
    another device's flock and held it for its whole run, so runs there waited on it), the run's private folder
    (the checker's), and the store with what lies beside it (its WAL, side files, traces, dashboard jobs) and the
    fallback folders of side files: a kernel read other variants' sources and results from the store file."""
    from tracker.capture.devicelock import lock_dir
    from tracker.capture.jobs import jobs_dir
    from tracker.store import side_key_path
    from tracker.store.sidefiles import fallback_dirs, pending_dir, traces_root

    beside: list[Path] = []
    if store is not None:
        store = Path(store).resolve()  # bwrap mounts at absolute paths
        beside = [store, Path(f"{store}.wal"), pending_dir(store), traces_root(store), jobs_dir(store)]
    return [side_key_path(), lock_dir(), *([private] if private is not None else []), *beside, *fallback_dirs()]


def ancestors_protected(scope_file: Path = YAMA_SCOPE) -> bool:
    """Whether a process cannot write or read the memory of one above it (Yama's ptrace_scope 1 or more): what lets
    a profiler run unfiltered above the kernel. The filter refuses ptrace and process_vm_*; /proc/PID/mem is a
    path, which only Yama closes."""
    try:
        return int(scope_file.read_text().split()[0]) >= 1
    except (OSError, ValueError, IndexError):
        return False  # no Yama in this kernel: every process of the user may open another's memory


def contained(how: str | None) -> bool:
    """Whether `how` (wrap's third value, runs.sandbox) says the command ran in the sandbox: "off: ..." and
    "none: ..." say it did not."""
    return how is not None and not how.startswith(("off", "none"))


def wrap(
    argv: list[str],
    workdir: Path,
    inner: dict[str, str],
    hidden: list[Path],
    writable: list[Path] = (),
    sandboxed: bool = True,
    front: list[str] = (),
) -> tuple[list[str], dict[str, str], str]:
    """(command line, environment for Popen, how it runs) for `front` + `argv` with `inner` in its environment: in
    the sandbox where one can be made, else in the tracker's own environment, saying why (runs.sandbox)."""
    how = how_it_runs(sandboxed)
    if not contained(how):
        return [*front, *argv], dict(os.environ, **inner), how
    ready_gpu_nodes()
    return command(find_bwrap(), argv, workdir, sandbox_env(workdir, inner), hidden, writable, front), {}, how


def how_it_runs(sandboxed: bool = True) -> str:
    """What wrap's commands run in (runs.sandbox): bwrap's version, or "off: ..." / "none: <why>"."""
    if not sandboxed:
        return "off: --no-sandbox"
    reason = unavailable()
    return f"none: {reason}" if reason is not None else version(find_bwrap())


@functools.cache
def unavailable() -> str | None:
    """Why no sandbox can be made on this machine, or None when one works (tried once per process)."""
    bwrap = find_bwrap()
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap, or bash scripts/fetch-sandbox.sh"
    probe = Path(sys.executable).resolve()
    try:
        done = subprocess.run(
            command(bwrap, [str(probe), "-c", "pass"], Path("/tmp"), {}, []),
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not start: {exc}"
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        return f"bwrap cannot make namespaces here: {why[-1] if why else f'exit {done.returncode}'}"
    return None


@functools.cache
def version(bwrap: str) -> str:
    try:
        out = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    return out or "bubblewrap"
