"""Legitimate but unusual kernels, each run through the real CLI in the sandbox: threads, process pools, a C++
extension built at import, a subprocess, files and settings beside the kernel. The sandbox (tracker.capture.sandbox,
seccomp_exec) must leave them working as outside; what it refuses on purpose (Unix sockets: multiprocessing's
forkserver) must fail with a message that says so."""

from __future__ import annotations

import os

import pytest

from tests.test_hostile import _kernel, _log, _run, pytestmark, world  # noqa: F401 (pytestmark, the fixture)
from tracker.capture.runner import UNIX_SOCKET_HINT
from tracker.store import Store

STACK = "return torch.stack([h for h, _ in parts]), torch.stack([t for _, t in parts])"
# A process pool of one start method (METHOD) doing the work, its workers other processes than the kernel's.
POOL = f"""
    import multiprocessing
    from odd_work import qr, worker_pid

    def custom_kernel(data):
        with multiprocessing.get_context("METHOD").Pool(2) as pool:
            parts = [(torch.from_numpy(h), torch.from_numpy(t)) for h, t in pool.map(qr, data.numpy())]
            assert os.getpid() not in pool.map(worker_pid, range(2))
        print("KB-ODD-OK", flush=True)
        {STACK}
    """
HELPER = """
def qr(a):
    h, tau = torch.geqrf(torch.from_numpy(a))
    return h.numpy(), tau.numpy()


def worker_pid(_):
    return os.getpid()
"""
# Each kernel computes its outputs through the route it names and prints KB-ODD-OK when the route was taken.
ODD = {
    "thread pool": f"""
        from concurrent.futures import ThreadPoolExecutor
        POOL = ThreadPoolExecutor(max_workers=2)

        def custom_kernel(data):
            parts = list(POOL.map(torch.geqrf, data.unbind(0)))
            print("KB-ODD-OK", flush=True)
            {STACK}
        """,
    "fork pool": POOL.replace("METHOD", "fork"),
    "spawn pool": POOL.replace("METHOD", "spawn"),
    # the work function in the kernel itself: spawned children import it from `submission`, as in the contest
    "spawn pool, its work in the kernel": POOL.replace("METHOD", "spawn").replace(
        "from odd_work import qr, worker_pid", HELPER.replace("\n", "\n    ")
    ),
    "subprocess": """
        import subprocess

        def custom_kernel(data):
            code = "import torch, sys; print(torch.__version__, sys.argv[1])"
            out = subprocess.run([sys.executable, "-c", code, "42"], capture_output=True, text=True, check=True)
            assert out.stdout.split()[1] == "42", out
            assert subprocess.run(["uname", "-s"], capture_output=True, text=True).stdout.strip() == "Linux"
            print("KB-ODD-OK", flush=True)
            return torch.geqrf(data)
        """,
    "background thread": """
        import threading

        def custom_kernel(data):
            box = {}
            thread = threading.Thread(target=lambda: box.update(out=torch.geqrf(data)))
            thread.start()
            thread.join()
            print("KB-ODD-OK", flush=True)
            return box["out"]
        """,
    "files, settings, numpy and scipy": """
        import json, tempfile
        from pathlib import Path
        import numpy as np
        import scipy.linalg

        BLOCK = json.loads((Path(__file__).parent / "odd_settings.json").read_text())["block"]
        KNOB = os.environ["KB_ODD_KNOB"]  # named in KERNELBEAM_WORKER_ENV
        assert (BLOCK, KNOB) == (8, "7") and os.cpu_count() >= 1
        with tempfile.TemporaryDirectory() as scratch:
            np.save(os.path.join(scratch, "eye.npy"), np.eye(3))
            assert np.load(os.path.join(scratch, "eye.npy")).trace() == 3

        def custom_kernel(data):
            parts = [tuple(torch.from_numpy(x) for x in scipy.linalg.qr(m, mode="raw")[0]) for m in data.numpy()]
            print("KB-ODD-OK", flush=True)
            return torch.stack([h.contiguous() for h, _ in parts]), torch.stack([t for _, t in parts])
        """,
}


def _odd_env() -> dict:
    named = f"{os.environ.get('KERNELBEAM_WORKER_ENV', '')},KB_ODD_KNOB"
    return dict(os.environ, KERNELBEAM_WORKER_ENV=named, KB_ODD_KNOB="7")


# The thread pool's run is test_a_thread_pool_kernel_passes_the_timed_path's, which checks the same and times it.
@pytest.mark.parametrize("kind", [kind for kind in ODD if kind != "thread pool"])
def test_an_unusual_but_legitimate_kernel_passes_in_the_sandbox(world, kind):  # noqa: F811
    _kernel(world, HELPER, name="odd_work.py")  # the spawned children import their work function by name
    (world["tmp"] / "kernels" / "odd_settings.json").write_text('{"block": 8}')
    kernel = _kernel(world, ODD[kind])
    doc = _run(world, kernel, env=_odd_env())
    assert doc["status"] == "passed", (doc["error"], _log(world, doc["run_id"])[-3000:])
    assert "KB-ODD-OK" in _log(world, doc["run_id"])
    assert Store(world["store"]).get_run(doc["run_id"])["sandbox"].startswith("bubblewrap")


def test_a_thread_pool_kernel_passes_the_timed_path(world):  # noqa: F811
    kernel = _kernel(world, ODD["thread pool"])
    doc = _run(world, kernel, "--suite", "smoke", "--mode", "benchmark", "--cases", "0,1", env=_odd_env())
    assert doc["status"] == "passed", (doc["error"], _log(world, doc["run_id"])[-3000:])
    assert len(doc["cases"]) == 2 and all(c["passed"] for c in doc["cases"])
    assert "KB-ODD-OK" in _log(world, doc["run_id"])
    assert Store(world["store"]).get_run(doc["run_id"])["sandbox"].startswith("bubblewrap")


def test_a_cpu_extension_built_at_import_runs(world):  # noqa: F811
    """torch.utils.cpp_extension's ninja and g++ run inside the sandbox, building in the kernel's compile cache,
    and the variant is not skipped as one that needs CUDA. (A plain CPython module: torch's headers would make it a
    minute's compile; load_inline of at::geqrf passed by hand, README's Trust.)"""
    kernel = _kernel(
        world,
        """
        from pathlib import Path
        from torch.utils import cpp_extension

        EXT = cpp_extension.load("kb_odd_ext", [str(Path(__file__).parent / "kb_odd_ext.cpp")])

        def custom_kernel(data):
            h, tau = torch.geqrf(data)
            return h * EXT.twice(0.5), tau
        """,
    )
    (kernel.parent / "kb_odd_ext.cpp").write_text(
        "#include <Python.h>\n"
        "static PyObject* twice(PyObject*, PyObject* x) { return PyFloat_FromDouble(2 * PyFloat_AsDouble(x)); }\n"
        'static PyMethodDef methods[] = {{"twice", twice, METH_O, nullptr}, {nullptr, nullptr, 0, nullptr}};\n'
        'static PyModuleDef mod = {PyModuleDef_HEAD_INIT, "kb_odd_ext", nullptr, -1, methods};\n'
        "PyMODINIT_FUNC PyInit_kb_odd_ext() { return PyModule_Create(&mod); }\n"
    )
    doc = _run(world, kernel)
    assert doc["status"] == "passed", (doc["error"], _log(world, doc["run_id"])[-3000:])


def test_a_forkserver_pool_fails_saying_the_sandbox_refuses_unix_sockets(world):  # noqa: F811
    """Its server listens on a Unix socket, which the seccomp filter refuses (a host service's would be reachable
    the same way): the run fails, and its error names the cause and the ways that work."""
    kernel = _kernel(world, ODD["fork pool"].replace('get_context("fork")', 'get_context("forkserver")'))
    _kernel(world, HELPER, name="odd_work.py")
    doc = _run(world, kernel)
    assert doc["status"] == "failed"
    assert doc["error"].endswith(f"({UNIX_SOCKET_HINT})"), doc["error"]
    assert "KB-ODD-OK" not in _log(world, doc["run_id"])
