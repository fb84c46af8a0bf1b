"""Hostile kernels, one per route a kernel author could take against the harness, each run through the real CLI.

Each kernel is written here (not taken from anyone's submission) and does what a reward-hacking author would:
rewrite or destroy the store, plant code for later processes, outlive its run, forge its verdict or its timing,
read the dashboard's token. Each test checks what the run was recorded as, that the store holds nothing but the
run's own record beside what was there, that no process of the kernel is left, and that nothing was written
outside the run's own folder. They need the sandbox (bubblewrap): without it they are skipped with the reason.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import socket
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, T0, host_processes, make_record, wait_no_process
from tracker.capture import sandbox
from tracker.common.files import folder_excess
from tracker.store import Store

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(
        sandbox.unavailable() is not None and not os.environ.get("KERNELBEAM_REQUIRE_SANDBOX"),
        reason=f"no sandbox here: {sandbox.unavailable()}",
    ),
]

HEADER = "from task import input_t, output_t\nimport os, sys, time, torch\n" + textwrap.dedent(
    """
    def attempt(what, fn, blocked=Exception):
        # a hostile kernel's try at one route: DONE if it got through, BLOCKED (and why) if `blocked` stopped it
        try:
            fn()
            print("KB-HOSTILE-DONE", what, flush=True)
        except blocked as exc:
            print("KB-HOSTILE-BLOCKED", what, type(exc).__name__, flush=True)
    """
)
# Marker children's command lines carry this test process's pid (tests/conftest.py): no other suite's match.
DAEMON, HANGER = f"777.{os.environ['KB_MARK']}", f"778.{os.environ['KB_MARK']}"


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A store holding one earlier run, a lock folder and a canary folder, all of the test's own."""
    store = tmp_path / "store" / "runs.duckdb"
    store.parent.mkdir()
    record = make_record(
        "earlier00001", variant="earlier", source="# earlier\n", path="kernels/earlier.py", family="f",
        started=T0, means=[10.0] * 12,
    )  # fmt: skip
    Store(store).finish_run(record)
    canary = tmp_path / "canary"
    canary.mkdir()
    locks = tmp_path / "locks"
    monkeypatch.setenv("KERNELBEAM_LOCK_DIR", str(locks))
    return {"store": store, "canary": canary, "locks": locks, "tmp": tmp_path, "before": _snapshot(store)}


def _snapshot(store: Path) -> dict:
    """Every run as text (NaN compares equal to itself there)."""
    runs = Store(store).list_runs()
    return {
        run_id: json.dumps(
            [Store(store).get_run(run_id), Store(store).case_results(run_id).to_dict("records")],
            default=str,
            sort_keys=True,
        )
        for run_id in runs["run_id"]
    }


def _kernel(world: dict, body: str, name: str = "k.py") -> Path:
    folder = world["tmp"] / "kernels"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(HEADER + textwrap.dedent(body))
    return path


def _run(world: dict, kernel: Path, *args: str, env: dict | None = None, timeout: float = 200) -> dict:
    cmd = [sys.executable, "-m", "tracker", "run", str(kernel), "--store", str(world["store"]), "--json", "--quiet"]
    cmd += list(args) or ["--suite", "smoke", "--mode", "test", "--cases", "0"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.stdout, proc.stderr
    doc = json.loads(proc.stdout)
    _assert_store_kept(world, doc["run_id"])
    return doc


def _assert_store_kept(world: dict, run_id: str) -> None:
    """Every earlier run exactly as it was; the only new run is this one; no side file waits."""
    after = _snapshot(world["store"])
    assert set(after) == set(world["before"]) | {run_id}
    for old, value in world["before"].items():
        assert after[old] == value
    assert Store(world["store"]).pending_run_ids() == set()
    assert list(world["canary"].iterdir()) == []


def _log(world: dict, run_id: str) -> str:
    return Store(world["store"]).get_run(run_id)["log_tail"] or ""


def _flags(doc: dict) -> set[str]:
    return {f["code"] for f in doc.get("flags") or []}


def test_the_record_cannot_be_rewritten_destroyed_or_forged_and_no_code_can_be_planted(world):
    """Routes 1, 2 and the lock symlink: every write outside the run folder fails, the store is found nowhere."""
    site = sysconfig.get_paths()["purelib"]
    kernel = _kernel(
        world,
        f"""
        STORE, CANARY, LOCKS = {str(world["store"])!r}, {str(world["canary"])!r}, {str(world["locks"])!r}
        SITE, TRACKER = {site!r}, {str(ROOT / "tracker")!r}

        def store_in_proc():
            for pid in os.listdir("/proc"):
                if pid.isdigit():
                    try:
                        if STORE.encode() in open(f"/proc/{{pid}}/cmdline", "rb").read():
                            return
                    except OSError:
                        pass
            raise LookupError("no process names the store")

        def duckdb_update():
            import duckdb
            duckdb.connect(STORE).execute("UPDATE runs SET status = 'failed', geomean_us = 0.001")

        def forge_side_file():
            os.makedirs(STORE + ".pending", exist_ok=True)
            open(STORE + ".pending/forged000001.json", "w").write('{{"run": {{"run_id": "forged000001"}}}}')

        def custom_kernel(data):
            attempt("parent-cmdline", store_in_proc)
            attempt("store-truncate", lambda: open(STORE, "r+b").truncate(0))
            attempt("store-update", duckdb_update)
            attempt("side-file", forge_side_file)
            attempt("pth", lambda: open(os.path.join(SITE, "kb_planted.pth"), "w").write("import os\\n"))
            attempt("tracker", lambda: open(os.path.join(TRACKER, "kb_planted.py"), "w").write("x = 1\\n"))
            attempt("lock", lambda: os.symlink(CANARY + "/target", LOCKS + "/cpu.holder.kb"))
            attempt("canary", lambda: open(CANARY + "/written", "w").write("x"))
            attempt("home", lambda: open(os.path.expanduser("~") + "/../kb_planted", "w").write("x"))
            return torch.geqrf(data)
        """,
    )
    doc = _run(world, kernel)
    assert doc["status"] == "passed", doc["error"]
    log = _log(world, doc["run_id"])
    assert "KB-HOSTILE-DONE" not in log, log
    assert log.count("KB-HOSTILE-BLOCKED") == 9, log
    assert not Path(site, "kb_planted.pth").exists() and not (ROOT / "tracker" / "kb_planted.py").exists()
    assert not any(p.is_symlink() for p in world["locks"].iterdir())
    assert Store(world["store"]).get_run(doc["run_id"])["sandbox"].startswith("bubblewrap")


def test_a_daemon_the_kernel_double_forks_with_setsid_and_an_empty_environment_dies_with_the_run(world):
    kernel = _kernel(
        world,
        """
        def custom_kernel(data):
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    os.execve("/bin/sleep", ["sleep", "777.25"], {})
                os._exit(0)
            time.sleep(0.5)
            return torch.geqrf(data)
        """.replace("777.25", DAEMON),
    )
    doc = _run(world, kernel)
    assert doc["status"] == "passed", doc["error"]
    assert wait_no_process("sleep", DAEMON, seconds=5) == []


def test_killing_the_tracker_ends_a_kernel_that_ignores_sigterm_and_fakes_its_parent(world):
    kernel = _kernel(
        world,
        """
        import signal, subprocess
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.getppid = lambda: 1
        CALLS = []

        def custom_kernel(data):
            CALLS.append(1)
            if len(CALLS) == 2:
                subprocess.Popen(["sleep", "778.25"], start_new_session=True)
                while True:
                    time.sleep(1)
            return torch.geqrf(data)
        """.replace("778.25", HANGER),
    )
    cmd = [sys.executable, "-m", "tracker", "run", str(kernel), "--suite", "smoke", "--mode", "test", "--cases",
           "0,1", "--store", str(world["store"]), "--quiet"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 150
    while not host_processes("sleep", HANGER):  # the second call is hanging now
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert wait_no_process("sleep", HANGER, seconds=10) == []
    workers = [p for p in host_processes(sys.executable, "-m", "tracker.capture.worker") if _child_of_gone(p)]
    assert workers == []


def _child_of_gone(pid: int) -> bool:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) == 1
    except OSError:
        return False


def test_forged_events_with_the_key_found_in_memory_do_not_make_a_pass(world):
    """The kernel finds the event channel and its key by walking the worker's objects and sends a signed
    `passed` with tiny times; its outputs are zeros. The checker never saw a correct output: failed."""
    kernel = _kernel(
        world,
        """
        import gc

        def forge():
            events = next(o for o in gc.get_objects() if type(o).__name__ == "Events")
            events.emit("case_start", case_idx=0, position=0, total=1, spec="forged")
            events.emit("case_done", case_idx=0, spec="forged", passed=True, message="", case={"inputs": 1},
                        samples=[0.001] * 5, runs=5, mean_us=0.001, factor_res=0.0, evidence="../../etc/passwd")
            events.emit("timing_done")
            events.emit("done")

        def custom_kernel(data):
            forge()
            n = data.shape[-1]
            return torch.zeros_like(data), torch.zeros(data.shape[0], n, dtype=data.dtype)
        """,
    )
    doc = _run(world, kernel)
    assert doc["status"] == "failed"
    assert all(not c["passed"] for c in doc["cases"])
    assert all(c["factor_res"] != 0.0 for c in doc["cases"] if c.get("factor_res") is not None)


def test_a_malformed_profile_the_kernel_sends_costs_the_profile_not_the_record(world):
    """A signed `profile` event whose kernel rows are not rows (a number, a text where a count goes) would have
    made the record's bookkeeping raise, losing the run: the profile is dropped and said to be."""
    kernel = _kernel(
        world,
        """
        import gc

        def custom_kernel(data):
            events = next(o for o in gc.get_objects() if type(o).__name__ == "Events")
            events.emit("profile", case_idx=0, kernels=[1], launches=1)
            return torch.geqrf(data)
        """,
    )
    doc = _run(world, kernel)
    assert doc["status"] == "passed", doc.get("error")
    run = Store(world["store"]).get_run(doc["run_id"])
    assert "did not fit the store and were not kept" in (run["warnings"] or "")


@pytest.mark.parametrize("body", ['{"event": ["x"]}', '{"event": "error"}', '{"x": 1}', '{"event": "rep"}'])
def test_a_signed_event_without_the_fields_of_its_kind_is_forged_not_a_crash(world, body):
    """The kernel signs one more event with the channel's own key and next number, lacking what its kind carries
    (an unhashable kind, an error without its message, no kind, a rep without its case): dropped and counted."""
    kernel = _kernel(
        world,
        f"""
        import gc, json

        def custom_kernel(data):
            events = next(o for o in gc.get_objects() if type(o).__name__ == "Events")
            with events._lock:
                line = json.dumps({{**{body}, "seq": events._seq}})
                events._seq += 1
                channel = sys.modules[type(events).__module__]
                os.write(events._fd, (channel.sign(events._key, line) + " " + line + "\\n").encode())
            return torch.geqrf(data)
        """,
    )
    doc = _run(world, kernel)
    assert doc["status"] == "passed", doc.get("error")
    assert "forged-events" in _flags(doc), doc["flags"]


def test_text_the_kernel_puts_in_its_events_never_reaches_the_terminal(world):
    """The progress bar names cases from the run's own suite and shows a pass only where the checker passed: a
    kernel's escapes (a window title, a cleared screen) and a forged passing line never reach stderr."""
    kernel = _kernel(
        world,
        """
        import gc

        def custom_kernel(data):
            events = next(o for o in gc.get_objects() if type(o).__name__ == "Events")
            events.emit("case_start", case_idx=0, position=0, total=1,
                        spec="\\x1b]0;pwned\\x07\\x1b[2J all cases passed, geomean 0.001 us")
            events.emit("rep", case_idx=0, done="\\x1b[2J", expected=[], case_eta_s="x")
            n = data.shape[-1]
            return torch.zeros_like(data), torch.zeros(data.shape[0], n, dtype=data.dtype)  # wrong: FAIL
        """,
    )
    cmd = [sys.executable, "-m", "tracker", "run", str(kernel), "--store", str(world["store"]), "--suite", "smoke",
           "--mode", "test", "--cases", "0"]  # fmt: skip
    # on a terminal, where the bar redraws the current case as it runs
    master, slave = pty.openpty()
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=slave, timeout=200)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # the terminal's other end is closed: all read
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    text = shown.decode(errors="replace").replace("\r\x1b[K", "\n")  # the bar's own redraw
    assert "\x1b" not in text and "pwned" not in text and "geomean 0.001" not in text, text
    assert "FAIL" in text and " pass" not in text, text
    assert Store(world["store"]).list_runs().iloc[0]["status"] == "failed", proc.stdout


def test_a_timer_patched_through_an_alias_is_caught_by_the_supervisors_clock(world):
    """The kernel takes 30 ms a call but replaces the tracker's own timed loop (found through sys.modules, no
    name the scan knows) so each repetition reads a nanosecond: the checker's wall clock between repetitions
    flags it. (Patching time.perf_counter itself changes nothing: the loop bound its clock before the import.)"""
    kernel = _kernel(
        world,
        """
        timing = sys.modules["tracker.capture" + ".timing"]
        setattr(timing.Clock, "time_loop", lambda self, fn: (1e-9, fn()))

        def custom_kernel(data):
            end = time.monotonic() + 0.03
            while time.monotonic() < end:
                pass
            return torch.geqrf(data)
        """,
    )
    doc = _run(world, kernel, "--suite", "smoke", "--cases", "0")
    assert doc["status"] == "passed"
    assert "timing-gap" in _flags(doc), doc["flags"]


def test_an_output_cache_keyed_by_the_tensor_object_is_flagged(world):
    """The same input objects come back each repetition (as in the contest), so a cache by object returns at once;
    the call on fresh copies after the loop shows what the work really takes."""
    kernel = _kernel(
        world,
        """
        CACHE = {}

        def custom_kernel(data):
            hit = CACHE.get(id(data))
            if hit is None or hit[0] is not data:
                hit = CACHE[id(data)] = (data, torch.geqrf(data))
            return hit[1]
        """,
    )
    doc = _run(world, kernel, "--suite", "smoke", "--cases", "1")
    assert doc["status"] == "passed", doc["error"]
    assert "identity-cache" in _flags(doc), doc["flags"]


def test_an_output_cache_keyed_by_the_inputs_values_is_flagged(world):
    """A cache keyed by a few of the input's values (no object identity for the scan to see) hits on copies of the
    inputs too: the fresh call draws other values of the same shapes."""
    kernel = _kernel(
        world,
        """
        CACHE = {}

        def custom_kernel(data):
            key = (tuple(data.shape), tuple(data.reshape(-1)[:6].tolist()))
            if key not in CACHE:
                for _ in range(30):  # the work the cache saves, a few ms on the CPU
                    out = torch.geqrf(data)
                CACHE[key] = out
            return CACHE[key]
        """,
    )
    doc = _run(world, kernel, "--suite", "smoke", "--cases", "1")
    assert doc["status"] == "passed", doc["error"]
    assert "identity-cache" in _flags(doc), doc["flags"]


def test_work_done_while_the_inputs_are_made_is_flagged(world):
    """The inputs are made in the kernel's process: a hook on the torch functions the generator calls sees each one
    as it is made and computes its outputs there, outside every timed call, so the loop and even the call on fresh
    inputs only look them up (the fresh seed is drawn late, but the fresh inputs are made here too). The fresh
    inputs are made inside that call's timed window, and the checker makes the same ones on its own clock: the
    difference is the hidden work. The hook's 80 ms stand for a QR that costs that much."""
    kernel = _kernel(
        world,
        """
        DONE = {}
        contiguous = torch.Tensor.contiguous

        def key(a):
            return (tuple(a.shape), tuple(a.reshape(-1)[:4].tolist()))

        def made(self, *args, **kwargs):  # the generator's last step: a new input is in hand
            out = contiguous(self, *args, **kwargs)
            if out.dim() == 3 and out.shape[-1] == out.shape[-2] and key(out) not in DONE:
                time.sleep(0.08)
                DONE[key(out)] = torch.geqrf(out)
            return out

        torch.Tensor.contiguous = made

        def custom_kernel(data):
            return DONE.get(key(data)) or torch.geqrf(data)
        """,
    )
    doc = _run(world, kernel, "--suite", "smoke", "--cases", "1")
    assert doc["status"] == "passed", doc["error"]
    assert "hidden-work" in _flags(doc), doc["flags"]
    assert "torch-patch" in {f["code"] for f in json.loads(Store(world["store"]).get_run(doc["run_id"])["flags"])}


def test_an_inflated_hand_off_size_does_not_hide_work_between_repetitions(world):
    """The call returns placeholders at once and the real work happens while the worker packs the outputs for the
    checker (its Sender patched), 30 ms a repetition; the header claims 64 MiB of outputs (a sparse memfd costs
    nothing) so that the allowance for handing them over would swallow the gap. The checker sizes that allowance
    by the bytes it actually rebuilt: the gap shows."""
    kernel = _kernel(
        world,
        """
        handoff = sys.modules["tracker.capture" + ".handoff"]
        pack = handoff.Sender.pack
        BIG = 64 << 20

        def slow_pack(self, outputs):
            end = time.monotonic() + 0.03
            while time.monotonic() < end:
                pass
            outputs = [torch.geqrf(h.kb_source) if hasattr(h, "kb_source") else (h, t) for h, t in outputs]
            self._buffer(BIG)
            header, fd = pack(self, outputs)
            header["bytes"] = BIG
            return header, fd

        handoff.Sender.pack = slow_pack

        def custom_kernel(data):
            h = torch.empty_like(data)
            h.kb_source = data.clone()
            return h, torch.empty(data.shape[:-1], dtype=data.dtype)
        """,
    )
    doc = _run(world, kernel, "--suite", "smoke", "--cases", "0")
    assert doc["status"] == "passed", doc["error"]
    assert "timing-gap" in _flags(doc), doc["flags"]


def test_a_malformed_request_on_the_checkers_socket_fails_the_kernel_not_the_checker(world):
    """The kernel finds the worker's socket to the checker and asks for fresh inputs of a case named by a list:
    the checker answers that it drew no seed and goes on, so the run is the kernel's failure (its outputs are
    zeros, and the stray answer reaches the worker as a verdict), not the checker's crash."""
    kernel = _kernel(
        world,
        """
        import json, socket

        def poke():
            for name in os.listdir("/proc/self/fd"):
                try:
                    s = socket.socket(fileno=os.dup(int(name)))
                except OSError:
                    continue
                if s.family == socket.AF_UNIX and s.type == socket.SOCK_SEQPACKET:
                    s.sendall(json.dumps({"pos": [], "fresh": True}).encode())
                s.close()

        def custom_kernel(data, poked=[]):
            if not poked:
                poked.append(poke())
            return torch.zeros_like(data), torch.zeros(data.shape[:-1], dtype=data.dtype)
        """,
    )
    doc = _run(world, kernel, "--suite", "smoke", "--cases", "0")
    assert doc["status"] == "failed", (doc["status"], doc["error"])
    assert "checker process died" not in (doc["error"] or ""), doc["error"]


def test_tensor_subclasses_are_refused_before_they_reach_the_checker(world):
    """Case 0 returns a subclass that computes only when the checker touches it, case 1 one that reports float32
    while holding float64: only plain torch.Tensor outputs are accepted."""
    kernel = _kernel(
        world,
        """
        class Lazy(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return super().__torch_function__(func, types, args, kwargs or {})

        class Liar(torch.Tensor):
            @property
            def dtype(self):
                return torch.float32

        CALLS = []

        def custom_kernel(data):
            CALLS.append(1)
            if len(CALLS) == 1:
                h, tau = torch.geqrf(data)
                return h.as_subclass(Lazy), tau
            h, tau = torch.geqrf(data.double())
            return h.as_subclass(Liar), tau.float()
        """,
    )
    doc = _run(world, kernel, "--suite", "smoke", "--mode", "test", "--cases", "0,1")
    assert doc["status"] == "failed"
    messages = [c["message"] for c in doc["cases"]]
    assert "Lazy, not a plain torch.Tensor" in messages[0] and "Liar, not a plain torch.Tensor" in messages[1]


def test_patching_torch_and_the_gates_in_the_kernels_process_changes_no_verdict(world):
    kernel = _kernel(
        world,
        """
        import importlib
        checks = importlib.import_module("tracker.workloads.qr_v2.checks")
        base = importlib.import_module("tracker.workloads.base")
        checks.check_outputs = lambda *a, **k: base.CheckResult(True)
        torch.Tensor.abs = lambda self: torch.zeros_like(self)
        torch.isfinite = lambda x: torch.ones_like(x, dtype=torch.bool)

        def custom_kernel(data):
            n = data.shape[-1]
            return torch.zeros_like(data), torch.zeros(data.shape[0], n, dtype=data.dtype)
        """,
    )
    doc = _run(world, kernel)
    assert doc["status"] == "failed"
    assert not doc["cases"][0]["passed"]


def test_a_hack_in_a_helper_module_is_recorded_and_scanned(world):
    _kernel(world, "import time\ntime.perf_counter = lambda: 0.0\n", name="kb_helper.py")
    kernel = _kernel(world, "import kb_helper\n\ndef custom_kernel(data):\n    return torch.geqrf(data)\n")
    doc = _run(world, kernel)
    run = Store(world["store"]).get_run(doc["run_id"])
    assert "kb_helper.py" in json.loads(run["helper_sources"])
    assert any("kb_helper.py" in f["message"] for f in doc["flags"]), doc["flags"]


def test_the_helper_list_the_worker_sends_never_reads_the_key_or_other_files(world):
    """The runner reads the modules the worker names from beside the kernel: a forged list naming the side-file
    key (here kept below the kernel's folder) or a data file gets neither into the record."""
    key = world["tmp"] / "kernels" / "state" / "side-file.key"
    (world["tmp"] / "kernels").mkdir(exist_ok=True)
    (world["tmp"] / "kernels" / "notes.txt").write_text("KB-NOT-A-MODULE\n")
    with open(world["tmp"] / "kernels" / "big.py", "wb") as f:
        f.truncate(64 << 30)  # sparse: 64 GiB read into memory would end the tracker
    kernel = _kernel(
        world,
        f"""
        import gc

        def custom_kernel(data):
            events = next(o for o in gc.get_objects() if type(o).__name__ == "Events")
            events.emit("timing_done", helpers=[{str(key)!r}, {str(key.parent.parent / "notes.txt")!r},
                                                {str(key.parent.parent / "big.py")!r}])
            return torch.geqrf(data)
        """,
    )
    doc = _run(world, kernel, env=dict(os.environ, KERNELBEAM_KEY_FILE=str(key)))
    stored = json.dumps(Store(world["store"]).get_run(doc["run_id"]), default=str)
    assert doc["status"] == "passed" and key.read_text().strip() not in stored and "KB-NOT-A-MODULE" not in stored
    assert "big.py" not in stored


def test_keyboard_interrupt_or_system_exit_from_a_kernel_is_its_failure(world):
    kernel = _kernel(
        world,
        """
        CALLS = []

        def custom_kernel(data):
            CALLS.append(1)
            raise KeyboardInterrupt if len(CALLS) == 1 else SystemExit(0)
        """,
    )
    doc = _run(world, kernel, "--suite", "smoke", "--mode", "test", "--cases", "0,1")
    assert doc["status"] == "failed"
    messages = [c["message"] for c in doc["cases"]]
    assert "raised KeyboardInterrupt" in messages[0] and "raised SystemExit" in messages[1]


def test_the_dashboard_token_and_the_store_path_are_not_in_the_kernels_reach(world):
    kernel = _kernel(
        world,
        """
        def custom_kernel(data):
            print("KB-ENV", dict(os.environ), flush=True)
            for pid in os.listdir("/proc"):
                if pid.isdigit():
                    try:
                        print("KB-PROC", pid, open(f"/proc/{pid}/environ", "rb").read(), flush=True)
                    except OSError:
                        pass
            return torch.geqrf(data)
        """,
    )
    env = dict(os.environ, KERNELBEAM_TOKEN="kb-secret-token-123", KERNELBEAM_STORE=str(world["store"]))
    doc = _run(world, kernel, env=env)
    assert doc["status"] == "passed"
    log = _log(world, doc["run_id"])
    assert "KB-ENV" in log and "kb-secret-token-123" not in log and str(world["store"]) not in log


@pytest.mark.parametrize("swap", ["link to the runner's environment", "fifo", "link to /dev/zero"])
def test_a_log_the_kernel_swaps_in_its_run_folder_is_never_read_through(world, swap):
    """The runner reads the worker's log outside the sandbox after the run: a worker.log the kernel makes in its
    folder (a link to the runner's /proc/self/environ, a FIFO that would block the read, /dev/zero that never
    ends) is not the log, and the run ends as usual."""
    make = {
        "link to the runner's environment": 'os.symlink("/proc/self/environ", "worker.log")',
        "fifo": 'os.mkfifo("worker.log")',
        "link to /dev/zero": 'os.symlink("/dev/zero", "worker.log")',
    }[swap]
    kernel = _kernel(
        world,
        f"""
        if os.path.lexists("worker.log"):
            os.unlink("worker.log")
        {make}
        print("KB-SWAPPED", flush=True)

        def custom_kernel(data):
            return torch.geqrf(data)
        """,
    )
    env = dict(os.environ, KERNELBEAM_TOKEN="kb-secret-token-123")
    doc = _run(world, kernel, env=env, timeout=120)
    assert doc["status"] == "passed", doc.get("error")
    log = _log(world, doc["run_id"])
    assert "KB-SWAPPED" in log and "kb-secret-token-123" not in log and len(log) < 10_000


def test_an_event_flood_without_newlines_is_cut_off_and_counted(world):
    kernel = _kernel(
        world,
        """
        import stat
        FLOOD = b"x" * (1 << 20)

        def custom_kernel(data):
            for name in os.listdir("/proc/self/fd"):
                fd = int(name)
                try:
                    if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode):
                        for _ in range(24):
                            os.write(fd, FLOOD)
                except OSError:
                    pass
            return torch.geqrf(data)
        """,
    )
    doc = _run(world, kernel)
    assert doc["status"] in ("passed", "crashed")
    assert "forged-events" in _flags(doc), doc["flags"]


def test_a_flood_of_junk_lines_on_the_channel_does_not_keep_the_runner_from_its_deadline(world):
    """Processes the kernel forks keep the event pipe full of junk lines: the runner's read hands control back after
    a bounded amount, so the run's --timeout still ends it (the read looped until the pipe was empty, which it
    never was, holding the device lock with a growing buffer)."""
    kernel = _kernel(
        world,
        """
        import gc

        JUNK = (b"x" * 4095 + b"\\n") * 16  # long lines: cheap to write, and the pipe is never empty

        def flood():
            events = next(o for o in gc.get_objects() if type(o).__name__ == "Events")
            for _ in range(3):
                if os.fork() == 0:
                    while True:
                        try:
                            os.write(events._fd, JUNK)
                        except OSError:
                            os._exit(0)

        def custom_kernel(data):
            if not globals().get("flooding"):
                globals()["flooding"] = True
                flood()
            return torch.geqrf(data)
        """,
    )
    start = time.monotonic()
    doc = _run(world, kernel, "--suite", "smoke", "--cases", "0", "--timeout", "10", "--compile-timeout", "20",
               timeout=150)  # fmt: skip
    assert time.monotonic() - start < 100, doc
    assert doc["status"] in ("timeout", "passed", "failed"), doc
    assert "forged-events" in _flags(doc), doc["flags"]


def test_a_kernel_writes_only_its_own_compile_cache_and_what_it_plants_there_reaches_only_its_own_runs(world):
    """The compile cache (tracker.capture.compile_cache) is the one folder that outlives a run: the next run of the
    same source finds what this one left, a run of another source can write neither that folder nor the root."""
    cache = world["tmp"] / "compile-cache"
    env = dict(os.environ, KERNELBEAM_COMPILE_CACHE=str(cache))

    def run(kernel: Path, *args: str) -> dict:
        doc = _run(world, kernel, *args, env=env)
        world["before"] = _snapshot(world["store"])  # each run checks that it added only itself
        return doc

    planter = _kernel(
        world,
        f"""
        CANARY = {str(world["canary"])!r}

        def custom_kernel(data):
            own = os.environ["TRITON_CACHE_DIR"]
            print("KB-SAW-PLANT", os.path.exists(os.path.join(own, "planted.py")), flush=True)
            open(os.path.join(own, "planted.py"), "w").write("import os\\n")
            if not os.path.lexists(os.path.join(own, "escape")):
                os.symlink(CANARY, os.path.join(own, "escape"))
            return torch.geqrf(data)
        """,
        name="planter.py",
    )
    first, second = run(planter), run(planter)
    assert first["status"] == second["status"] == "passed"
    runs = Store(world["store"])
    assert [runs.get_run(d["run_id"])["compile_cache"] for d in (first, second)] == ["cold", "warm"]
    assert "KB-SAW-PLANT False" in _log(world, first["run_id"]) and "KB-SAW-PLANT True" in _log(world, second["run_id"])
    sha = runs.get_run(first["run_id"])["variant_sha256"]
    own = cache / sha / "triton"
    assert (own / "planted.py").is_file() and (own / "escape").is_symlink()

    intruder = _kernel(
        world,
        f"""
        OTHER, ROOT = {str(own)!r}, {str(cache)!r}

        def custom_kernel(data):
            print("KB-OWN", os.environ["TRITON_CACHE_DIR"], flush=True)
            attempt("other-cache", lambda: open(OTHER + "/planted.py", "a").write("print('pwned')\\n"))
            attempt("other-escape", lambda: open(OTHER + "/escape/written", "w").write("x"))
            attempt("root", lambda: os.mkdir(ROOT + "/" + "0" * 64))
            return torch.geqrf(data)
        """,
        name="intruder.py",
    )
    doc = run(intruder)
    assert doc["status"] == "passed", doc["error"]
    log = _log(world, doc["run_id"])
    assert "KB-HOSTILE-DONE" not in log and log.count("KB-HOSTILE-BLOCKED") == 3, log
    assert f"KB-OWN {cache / runs.get_run(doc['run_id'])['variant_sha256'] / 'triton'}" in log
    assert (own / "planted.py").read_text() == "import os\n"
    fresh = run(planter, "--suite", "smoke", "--mode", "test", "--cases", "0", "--fresh-compile")
    assert runs.get_run(fresh["run_id"])["compile_cache"] == "off: --fresh-compile"
    assert "KB-SAW-PLANT False" in _log(world, fresh["run_id"])


def test_a_link_a_kernel_plants_in_its_compile_cache_is_never_run_as_a_kernel(world):
    """A kernel plants `leak.py` in its compile cache (the one folder it writes that outlives its run), a link to the
    side-file key; an agent told to run it (`run`, or the MCP server's start_run) would have recorded the key as
    the variant's source, in the store and its exports, and anyone with it signs side files. A kernel path whose
    target is not a Python file is refused before anything starts."""
    from tracker.store.sidefiles import side_key

    cache = world["tmp"] / "compile-cache"
    env = dict(os.environ, KERNELBEAM_COMPILE_CACHE=str(cache))
    side_key()  # made now if this session has none yet: the link points at a real key
    planter = _kernel(
        world,
        f"""
        os.symlink({os.environ["KERNELBEAM_KEY_FILE"]!r}, os.path.join(os.environ["TRITON_CACHE_DIR"], "leak.py"))

        def custom_kernel(data):
            return torch.geqrf(data)
        """,
    )
    assert _run(world, planter, env=env)["status"] == "passed"
    world["before"] = _snapshot(world["store"])
    (leak,) = cache.glob("*/triton/leak.py")
    assert leak.is_symlink()
    cmd = [sys.executable, "-m", "tracker", "run", str(leak), "--store", str(world["store"]), "--suite", "smoke"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "not to a Python file" in proc.stderr, proc.stderr
    assert _snapshot(world["store"]) == world["before"]  # no run, so no source: the key is nowhere in the store


def test_a_traces_folder_the_kernel_links_elsewhere_moves_none_of_the_users_files(world):
    """The kernel swaps its run folder's traces/ for a link to a folder of the user's and signs a `profile` event
    (with the key it finds in its own process) naming a file there: the runner, outside the sandbox, moved that file
    into the store's traces (the store itself, the side-file key, an ssh key were all moved so). Nothing moves,
    with --profile or without."""
    victim = world["tmp"] / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("the user's\n")
    kernel = _kernel(
        world,
        f"""
        import gc

        def custom_kernel(data, done=[]):
            if not done:
                done.append(1)
                events = next(o for o in gc.get_objects() if type(o).__name__ == "Events" and hasattr(o, "emit"))
                traces = os.path.join(os.environ["HOME"], "traces")
                if os.path.isdir(traces) and not os.path.islink(traces):
                    os.rmdir(traces)
                os.symlink({str(victim)!r}, traces)
                events.emit("profile", case_idx=0, trace_path="precious.txt")
            return torch.geqrf(data)
        """,
    )
    for args in ((), ("--profile",)):
        doc = _run(world, kernel, "--suite", "smoke", "--cases", "0", *args)
        world["before"] = _snapshot(world["store"])
        assert (victim / "precious.txt").read_text() == "the user's\n", args
        assert not any(Path(str(world["store"]) + ".traces").rglob("precious.txt")), args
        assert doc["status"] in ("passed", "failed"), doc


def test_a_kernel_cannot_see_or_hold_the_device_locks(world):
    """The lock folder was readable in the sandbox, and flock needs only a read-only file: a kernel took another
    device's lock and held it for its whole run (every run there waited, none named a holder). It is masked."""
    kernel = _kernel(
        world,
        f"""
        import fcntl

        LOCKS = {str(world["locks"])!r}
        print("KB-LOCKS", sorted(os.listdir(LOCKS)) if os.path.isdir(LOCKS) else None, flush=True)

        def custom_kernel(data):
            return torch.geqrf(data)
        """,
    )
    doc = _run(world, kernel)
    assert doc["status"] == "passed", doc["error"]
    assert any(world["locks"].iterdir()), "the run took no lock: nothing to hide"
    assert "KB-LOCKS []" in _log(world, doc["run_id"]), _log(world, doc["run_id"])


def test_a_kernel_cannot_read_the_store_or_what_lies_beside_it(world):
    """The root is readable in the sandbox, and the store with it: a kernel that found the .duckdb file read other
    variants' sources and results (and the side files and traces beside it). They are masked: the store reads
    empty, the folders beside it are empty."""
    store = world["store"]
    pending = Path(f"{store}.pending")
    pending.mkdir()
    (pending / "kept.txt").write_text("x")  # not a side file: the flush leaves it, and the kernel must not see it
    kernel = _kernel(
        world,
        f"""
        STORE = {str(store)!r}
        print("KB-STORE", os.path.getsize(STORE) if os.path.exists(STORE) else None, flush=True)
        print("KB-PENDING", os.listdir(STORE + ".pending") if os.path.isdir(STORE + ".pending") else None, flush=True)

        def custom_kernel(data):
            return torch.geqrf(data)
        """,
    )
    doc = _run(world, kernel)
    assert doc["status"] == "passed", doc["error"]
    log = _log(world, doc["run_id"])
    assert "KB-STORE 0" in log and "KB-PENDING []" in log, log


def test_a_masked_file_removed_before_the_sandbox_mounts_over_it_costs_the_run_nothing(tmp_path):
    """The store's WAL comes and goes with every checkpoint of another process. One that was there when the
    command line was made and gone when bwrap mounted over it failed the run (exit 1, "Can't create file"): seen
    in CI on runs through the Dask queue. The command is made and started again; the launcher's ready byte never
    reaches the command."""
    wal = tmp_path / "runs.duckdb.wal"
    wal.write_text("rows of other runs")
    work = tmp_path / "work"
    work.mkdir()
    made = []

    def build():
        made.append(sandbox.wrap([sys.executable, "-c", "import os; print('KB-FDS', os.listdir('/proc/self/fd'))"],
                                 work, {}, sandbox.hidden_from_kernel(None) + [wal]))  # fmt: skip
        wal.unlink(missing_ok=True)  # a checkpoint elsewhere, between the command line and the mount
        return made[-1]

    with open(tmp_path / "log", "wb") as log:
        proc, how = sandbox.start(build, stdout=log, stderr=subprocess.STDOUT)
    assert proc.wait(timeout=60) == 0
    text = (tmp_path / "log").read_text()
    assert sandbox.contained(how) and len(made) == 2, text
    assert "bwrap: Can't" in text  # the first start failed as in CI
    assert "KB-FDS ['0', '1', '2', '3']" in text, text  # stdin, stdout, stderr and listdir's own


def test_a_front_never_holds_the_ready_pipe_and_its_command_starts_once_at_once(tmp_path):
    """A profiler in front of the launcher (the ncu pass) that runs its target as a child and closes the files it
    passes on (as a fake ncu does): the ready byte comes from a stage before the front, so sandbox.start neither
    waits for the command to end nor starts it again, and the front sees no pipe of the tracker's."""
    work = tmp_path / "work"
    work.mkdir()
    seen = tmp_path / "fds-the-front-saw"
    front = tmp_path / "front.py"
    front.write_text(
        textwrap.dedent(f"""
        import os, subprocess, sys
        fds = sorted(os.listdir("/proc/self/fd"))
        open({str(seen)!r}, "w").write(" ".join(fds))
        sys.exit(subprocess.run(sys.argv[1:]).returncode)
    """)
    )
    # the command sleeps 15 s, so a start slowed by a loaded machine (seconds) still tells returning at its start
    # from waiting for its end
    target = [sys.executable, "-c", "import time; time.sleep(15); print('KB-RAN')"]
    made = []

    def build():
        hidden = sandbox.hidden_from_kernel(None)
        made.append(sandbox.wrap(target, work, {}, hidden, writable=[seen], front=[sys.executable, str(front)]))
        return made[-1]

    seen.touch()
    start = time.monotonic()
    with open(tmp_path / "log", "wb") as log:
        proc, how = sandbox.start(build, stdout=log, stderr=subprocess.STDOUT)
    assert time.monotonic() - start < 12  # not the command's 15 s, nor READY_WAIT_S
    assert proc.wait(timeout=60) == 0, (tmp_path / "log").read_text()
    assert len(made) == 1 and (tmp_path / "log").read_text().count("KB-RAN") == 1
    assert seen.read_text().split() == ["0", "1", "2", "3"]  # 3: listdir's own


def test_a_kernel_can_neither_write_to_nor_read_from_the_users_terminals(world):
    """The host's /dev/pts holds the user's terminals (here a pty of the test's own, standing for another shell
    of the user's): a kernel that opens them could print fake verdicts into them or read what is typed there."""
    master, slave = pty.openpty()
    try:
        kernel = _kernel(
            world,
            f"""
            def custom_kernel(data):
                for path in [{os.ttyname(slave)!r}] + ["/dev/pts/" + p for p in os.listdir("/dev/pts") if p != "ptmx"]:
                    try:
                        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
                        os.write(fd, b"KB-HOSTILE-TTY all cases passed\\n")
                        print("KB-HOSTILE-DONE", path, flush=True)
                    except OSError as exc:
                        print("KB-HOSTILE-BLOCKED", path, type(exc).__name__, flush=True)
                return torch.geqrf(data)
            """,
        )
        doc = _run(world, kernel)
        os.set_blocking(master, False)
        try:
            shown = os.read(master, 1 << 16)
        except OSError:  # nothing was written: the read would block
            shown = b""
    finally:
        os.close(master)
        os.close(slave)
    assert doc["status"] == "passed", doc["error"]
    log = _log(world, doc["run_id"])
    assert b"KB-HOSTILE-TTY" not in shown and "KB-HOSTILE-DONE" not in log, (shown, log)


def test_a_kernel_cannot_reach_a_unix_socket_of_the_host(world, tmp_path):
    """The root file system is bound read-only, but connecting to a Unix socket on it needs no write: the socket of
    a host service (a session D-Bus, which can start programs outside the sandbox, an ssh agent, docker) would
    take the kernel's requests. Here a listening socket of the test's own stands for it, a stream and a datagram
    one, reached by socket() and by a socketpair re-pointed with connect(). A stream socket may still be made."""
    heard: list[bytes] = []
    stream_path, dgram_path = str(tmp_path / "service.sock"), str(tmp_path / "log.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(stream_path)
    server.listen(4)
    server.settimeout(1.0)
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dgram.bind(dgram_path)
    dgram.settimeout(1.0)
    stop = threading.Event()

    def listen() -> None:
        while not stop.is_set():
            for sock in (server, dgram):
                try:
                    if sock is server:
                        conn, _ = sock.accept()
                        with conn:
                            heard.append(conn.recv(100))
                    else:
                        heard.append(sock.recv(100))
                except OSError:
                    pass

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    kernel = _kernel(
        world,
        f"""
        import socket

        def stream():
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect({stream_path!r})
            s.sendall(b"KB-ESCAPED stream")

        def datagram():
            socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"KB-ESCAPED dgram", {dgram_path!r})

        def repointed_pair():
            a, _ = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            a.connect({dgram_path!r})
            a.send(b"KB-ESCAPED pair")

        def custom_kernel(data):
            attempt("stream", stream, OSError)
            attempt("datagram", datagram, OSError)
            attempt("pair", repointed_pair, OSError)
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()  # made, never connected: as the CUDA driver does
            print("KB-STREAM-MADE")
            return torch.geqrf(data)
        """,
    )
    try:
        doc = _run(world, kernel)
    finally:
        stop.set()
        thread.join(5)
        server.close()
        dgram.close()
    assert doc["status"] == "passed", doc["error"]
    log = _log(world, doc["run_id"])
    assert heard == [] and "KB-HOSTILE-DONE" not in log, (heard, log)
    assert log.count("KB-HOSTILE-BLOCKED") == 3, log
    # The CUDA driver's start makes a Unix stream socket (to look for the MPS daemon's) and fails with error 304
    # where it cannot: the filter must let one be made (seen on an H100, 2026-12-05).
    assert "KB-STREAM-MADE" in log, log


def test_a_package_planted_in_the_folder_the_tracker_runs_from_never_loads_outside_the_sandbox(world):
    """A user runs `kernelbeam run k.py` from the agent's own folder, where the agent left a `tracker` package (the
    console script keeps the working folder off sys.path, as `python -P` does here). The processes the tracker starts
    with `python -m` (the checker, beside the sandbox) put the working folder first on their path and would run the
    planted package as this user: it writes here only a canary, but could rewrite the store or pass every case."""
    folder = world["tmp"] / "kernels"
    kernel = _kernel(world, "def custom_kernel(data):\n    return torch.geqrf(data)\n")
    planted = folder / "tracker" / "__init__.py"
    planted.parent.mkdir()
    planted.write_text(
        textwrap.dedent(
            f"""
            import os, sys
            open({str(world["canary"] / "planted-ran")!r}, "w").write(str(sys.argv))
            real = next(p for p in sys.path[1:] if os.path.isfile(os.path.join(p, "tracker", "__init__.py")))
            __path__[:] = [os.path.join(real, "tracker")]  # the real package goes on, so nothing seems amiss
            exec(compile(open(os.path.join(real, "tracker", "__init__.py")).read(), __file__, "exec"))
            """
        )
    )
    cmd = [sys.executable, "-P", "-m", "tracker", "run", kernel.name, "--store", str(world["store"]), "--json",
           "--quiet", "--suite", "smoke", "--mode", "test", "--cases", "0"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=200, env=env)
    assert not (world["canary"] / "planted-ran").exists(), (world["canary"] / "planted-ran").read_text()
    doc = json.loads(proc.stdout)
    assert doc["status"] == "passed", (doc["error"], proc.stderr)
    _assert_store_kept(world, doc["run_id"])


def test_a_cache_that_returns_garbage_for_the_call_on_fresh_inputs_fails(world):
    """The call on fresh inputs after the loop is what shows a value-keyed cache: on a miss for a shape it has
    already served, the kernel returns empty tensors at once, so the fresh call reads as fast as the loop. Those
    outputs are judged by the checker like every other call's."""
    kernel = _kernel(
        world,
        """
        CACHE, SERVED = {}, set()

        def custom_kernel(data):
            key = (tuple(data.shape), tuple(data.reshape(-1)[:6].tolist()))
            if key in CACHE:
                SERVED.add(tuple(data.shape))
                return CACHE[key]
            if tuple(data.shape) in SERVED:  # new values of a shape served from the cache: the fresh call
                return torch.empty_like(data), data.new_empty(data.shape[:-1])
            for _ in range(30):  # the work the cache saves
                out = torch.geqrf(data)
            CACHE[key] = out
            return out
        """,
    )
    doc = _run(world, kernel, "--suite", "smoke", "--cases", "1")
    assert doc["status"] == "failed", doc
    assert doc["cases"][0]["message"].startswith("the call on fresh inputs: "), doc["cases"][0]["message"]


def test_outputs_computed_at_import_for_the_suites_public_inputs_are_flagged(world):
    """The suite's seeds are public, so a kernel can make every input of the run while it is imported (outside
    any timed window; here with the tracker's own generator, reached by a name the scan does not read) and answer
    the timed calls from a table. The fresh call's seed is drawn by the checker when the loop is over: the table
    misses there, and the cache is flagged."""
    kernel = _kernel(
        world,
        """
        import importlib
        wl = importlib.import_module("trac" + "ker.workloads")
        workload = wl.get_workload(None)
        TABLE = {}

        def key(x):
            return tuple(x.shape), tuple(x.reshape(-1)[:6].tolist())

        for case in wl.cases_for(wl.get_suite(workload, "smoke"), "benchmark"):
            for seeded in (case, workload.hidden_seed(case, 0x5EED)):  # 0x5EED: the fresh call's seed it read
                for x in workload.benchmark_inputs(seeded, "cpu"):
                    TABLE[key(x)] = torch.geqrf(x)

        def custom_kernel(data):
            hit = TABLE.get(key(data))
            if hit is None:
                for _ in range(30):  # the work the table saves
                    hit = torch.geqrf(data)
            return hit
        """,
    )
    doc = _run(world, kernel, "--suite", "smoke", "--cases", "1")
    assert doc["status"] == "passed", doc["error"]
    assert "identity-cache" in _flags(doc), doc["flags"]


def test_a_kernel_cannot_remount_the_read_only_root_even_when_the_tracker_runs_as_root(world):
    """Run as root (as on a rented GPU machine), bwrap kept every capability for the sandboxed process, so the
    kernel could remount the read-only root read-write and write anywhere: the store, the checkout, the canary."""
    kernel = _kernel(
        world,
        f"""
        import ctypes
        CANARY = {str(world["canary"])!r}
        MS_REMOUNT, MS_BIND = 32, 4096

        def custom_kernel(data):
            libc = ctypes.CDLL(None, use_errno=True)
            for target in (b"/", CANARY.encode()):
                done = libc.mount(None, target, None, MS_REMOUNT | MS_BIND, None)
                print("KB-REMOUNT", target, done, os.strerror(ctypes.get_errno()), flush=True)
            try:
                open(CANARY + "/written", "w").write("x")
                print("KB-HOSTILE-DONE", flush=True)
            except OSError as exc:
                print("KB-HOSTILE-BLOCKED", type(exc).__name__, flush=True)
            return torch.geqrf(data)
        """,
    )
    doc = _run(world, kernel)
    assert doc["status"] == "passed", doc["error"]
    log = _log(world, doc["run_id"])
    assert "KB-HOSTILE-BLOCKED" in log and "KB-HOSTILE-DONE" not in log, log


def test_a_kernel_cannot_stop_or_write_the_sandboxs_first_process(world):
    """bwrap's own process inside the sandbox (pid 1, its reaper) ran without the socket filter and could be traced:
    a kernel that attached to it stopped it (the run hung until its timeout, holding the device) and could have
    written code into it through /proc/1/mem. The worker is the sandbox's first process now: pid 1 is the kernel's
    own, filtered, and there is no other process inside to take over."""
    kernel = _kernel(
        world,
        """
        import ctypes
        PTRACE_ATTACH = 16

        def custom_kernel(data):
            libc = ctypes.CDLL(None, use_errno=True)
            mine = os.getpid() == 1
            attached = libc.ptrace(PTRACE_ATTACH, 1, None, None) == 0
            print("KB-PID1", "self" if mine else "other", "attached" if attached else "refused", flush=True)
            try:
                with open("/proc/1/mem", "wb"):
                    wrote = "opened"
            except OSError as exc:
                wrote = type(exc).__name__
            print("KB-PID1-MEM", wrote, flush=True)
            return torch.geqrf(data)
        """,
    )
    t0 = time.monotonic()
    doc = _run(world, kernel, "--suite", "smoke", "--mode", "test", "--cases", "0", "--timeout", "60")
    assert doc["status"] == "passed", doc["error"]
    assert time.monotonic() - t0 < 50
    log = _log(world, doc["run_id"])
    assert "KB-PID1 self refused" in log, log


def test_a_kernel_cannot_reach_into_another_process(world):
    """Under `run --ncu` the kernel's process has a parent in the sandbox that runs without the socket filter:
    Nsight Compute, which hung under it. Taking that process over (tracing it, writing its memory, taking its file
    descriptors) would reach every socket the filter refuses. The filter refuses the calls that do it, for any
    process: here the kernel's own child, which nothing else would stop it from tracing."""
    kernel = _kernel(
        world,
        """
        import ctypes, subprocess, sys
        PTRACE_ATTACH, PROCESS_VM_WRITEV, PIDFD_GETFD = 16, 311, 438

        def refused(what, result):
            err = ctypes.get_errno()
            print("KB-REACH", what, "refused" if result == -1 and err == 1 else f"done {result} {err}", flush=True)

        def custom_kernel(data):
            libc = ctypes.CDLL(None, use_errno=True)
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            try:
                refused("ptrace", libc.ptrace(PTRACE_ATTACH, child.pid, None, None))
                buf = ctypes.create_string_buffer(8)
                iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)
                refused("vm-write", libc.syscall(PROCESS_VM_WRITEV, child.pid, iov, 1, iov, 1, 0))
                pidfd = os.pidfd_open(child.pid)
                refused("getfd", libc.syscall(PIDFD_GETFD, pidfd, 0, 0))
            finally:
                child.kill()
            return torch.geqrf(data)
        """,
    )
    doc = _run(world, kernel)
    assert doc["status"] == "passed", doc["error"]
    log = _log(world, doc["run_id"])
    assert [line for line in log.splitlines() if "KB-REACH" in line] == [
        "KB-REACH ptrace refused",
        "KB-REACH vm-write refused",
        "KB-REACH getfd refused",
    ], log


def test_a_kernel_cannot_read_another_runs_folder(world):
    """Runs on other GPUs of the machine go on beside this one; their folders (kernel copies, outputs, the checker's
    evidence) share one root, which the sandbox covers: the kernel sees its own folder there and nothing else."""
    other = sandbox.run_folder("kernelbeam-")  # as another run's folder is while that run goes on
    try:
        (other / "secret.txt").write_text("another run's output")
        kernel = _kernel(
            world,
            f"""
            OTHER, ROOT = {str(other / "secret.txt")!r}, {str(sandbox.runs_root())!r}

            def custom_kernel(data):
                print("KB-SEE", sorted(os.listdir(ROOT)), os.path.basename(os.getcwd()), flush=True)
                attempt("other-run", lambda: print(open(OTHER).read(), flush=True))
                return torch.geqrf(data)
            """,
        )
        doc = _run(world, kernel)
        assert doc["status"] == "passed", doc["error"]
        log = _log(world, doc["run_id"])
        assert "KB-HOSTILE-BLOCKED other-run FileNotFoundError" in log and "another run's output" not in log, log
        seen = next(line for line in log.splitlines() if line.startswith("KB-SEE"))
        assert other.name not in seen, seen
    finally:
        (other / "secret.txt").unlink()
        other.rmdir()


def test_a_kernel_that_fills_its_run_folder_fails_before_it_fills_the_disk(world):
    """The run folder is the one place a kernel may write (its compile cache aside): past $KERNELBEAM_RUN_FOLDER_GB
    the run ends as the kernel's failure, and its folder goes with it."""
    kernel = _kernel(
        world,
        """
        def custom_kernel(data):
            chunk, n = os.urandom(1 << 20), 0
            while True:  # a megabyte at a time, into files of its own folder, until something stops it
                with open(f"fill-{n // 8}.bin", "ab") as f:
                    f.write(chunk)
                n += 1
                time.sleep(0.005)
        """,
    )
    doc = _run(world, kernel, env=dict(os.environ, KERNELBEAM_RUN_FOLDER_GB="0.02"))
    assert doc["status"] == "failed", doc
    assert doc["error"] == "the kernel's run folder holds more than 0.02 GB ($KERNELBEAM_RUN_FOLDER_GB sets the size)"


def test_a_flood_of_empty_files_counts_against_the_run_folder(tmp_path):
    """Empty files take no blocks but an inode each: counted, and the walk stops at the limit."""
    for n in range(50):
        (tmp_path / f"e{n}").touch()
    assert folder_excess(tmp_path, max_bytes=1 << 30, max_entries=100) is None
    assert folder_excess(tmp_path, max_bytes=1 << 30, max_entries=10) == "holds more than 10 files"
    assert (
        folder_excess(tmp_path, max_bytes=50 * 512 - 1, max_entries=100)
        == f"holds more than {(50 * 512 - 1) / 1e9:g} GB"
    )
    assert folder_excess(tmp_path / "gone", max_bytes=1, max_entries=1) is None


def test_a_runs_root_planted_as_a_link_is_refused_with_one_error_line(world, tmp_path):
    """Run folders made through a link another process planted in TMPDIR could land anywhere: refused, named."""
    tmpdir, elsewhere = tmp_path / "planted-tmp", tmp_path / "elsewhere"
    tmpdir.mkdir()
    elsewhere.mkdir()
    (tmpdir / sandbox.RUNS_ROOT_NAME).symlink_to(elsewhere)
    cmd = [sys.executable, "-m", "tracker", "run", str(_kernel(world, "custom_kernel = torch.geqrf\n")), "--store",
           str(world["store"]), "--suite", "smoke", "--mode", "test", "--cases", "0", "--quiet"]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env=dict(os.environ, TMPDIR=str(tmpdir))
    )
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and len(proc.stderr.splitlines()) == 1, (
        proc.stderr
    )
    assert sandbox.RUNS_ROOT_NAME in proc.stderr and list(elsewhere.iterdir()) == []
    assert _snapshot(world["store"]) == world["before"]  # refused before the run began: nothing recorded
