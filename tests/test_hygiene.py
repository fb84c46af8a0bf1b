"""Process hygiene and the compile budget, with real tracker processes: the worker dies with its tracker and
keeps what it finished, every process a kernel starts ends with the run, stray threads do not hang a finished
run, limits must be finite and positive, compilation has its own budget, and temporary folders are removed."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import HANG_SLEEP, leftover_run_folders, wait_no_process, wait_process
from tracker.capture.progress import ProgressState
from tracker.capture.runner import RunRequest, run_variant
from tracker.capture.sandbox import RUNS_ROOT_NAME
from tracker.common.processes import descendants
from tracker.store import Store, read_side_file

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = Path(__file__).resolve().parent / "variants"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_gone(pids, seconds=15.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.2)
    return [p for p in pids if _alive(p)]


@pytest.fixture
def private_tmp(tmp_path, monkeypatch) -> Path:
    """A temp folder of our own, for this process and the trackers it starts, so kernelbeam-* can be counted."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("KERNELBEAM_LOCK_DIR", str(tmp_path / "locks"))
    return folder


def _start_tracker(tmp_path: Path, variant: str, **request) -> tuple[subprocess.Popen, Path, Path]:
    """A tracker process running one request: a dashboard job's program (tracker.capture.job), which writes
    the progress file the test waits on."""
    store, job = tmp_path / "s.duckdb", tmp_path / "job"
    job.mkdir()
    req = RunRequest(path=str(VARIANTS / variant), suite="smoke", store=str(store), **request)
    (job / "job.json").write_text(json.dumps({"request": dataclasses.asdict(req), "gpus": None}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracker.capture.job", str(job / "job.json")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    return proc, store, job / "progress.json"


def _wait_progress(progress: Path, done: int, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if json.loads(progress.read_text()).get("done", 0) >= done:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"no progress to {done} cases in {seconds} s")


def _wait_checkpoint(pending: Path, cases: int, seconds: float = 60) -> None:
    """Until the run's checkpoint beside the store holds `cases` cases (the runner writes it on each case's start
    and end, a moment after the worker's event: a kill before that would find the previous checkpoint)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for side in pending.glob("*.json"):
            try:
                if len(read_side_file(side).cases) >= cases:
                    return
            except Exception:  # being replaced right now
                pass
        time.sleep(0.1)
    raise AssertionError(f"no checkpoint with {cases} cases in {seconds} s")


def _worker_tree(tracker_pid: int) -> list[int]:
    return [pid for pid, _ in descendants(tracker_pid)]


def test_kill_9_of_the_tracker_ends_the_worker_which_keeps_what_it_finished(tmp_path, private_tmp):
    proc, store, progress = _start_tracker(tmp_path, "hangs_second.py", mode="test", cases=[0, 1])
    _wait_progress(progress, 1)
    wait_process("sleep", HANG_SLEEP)  # the second call is hanging now, with its child
    _wait_checkpoint(tmp_path / "s.duckdb.pending", 2)
    tree = _worker_tree(proc.pid)
    assert len(tree) >= 2, tree
    proc.kill()
    proc.wait()
    assert _wait_gone(tree) == []
    side = list((tmp_path / "s.duckdb.pending").glob("*.json"))
    assert len(side) == 1
    saved = read_side_file(side[0]).run  # signed by the tracker, which wrote it after each case
    assert saved.status == "crashed" and saved.error == "the tracker process went away"
    # `import` with no folders brings it in; the first case's pass is kept
    out = subprocess.run([sys.executable, "-m", "tracker", "import", "--store", str(store)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0 and "wrote 1 pending" in out.stderr, out.stderr
    run = Store(store).get_run(saved.run_id)
    assert run["status"] == "crashed" and run["error"] == "the tracker process went away"
    cases = Store(store).case_results(run["run_id"]).sort_values("case_idx")
    assert cases["passed"].tolist() == [True, False]
    assert leftover_run_folders(private_tmp) == []


def test_sigterm_of_the_tracker_stops_the_worker_and_records_the_run(tmp_path, private_tmp):
    proc, store, progress = _start_tracker(tmp_path, "hangs_second.py", mode="test", cases=[0, 1])
    _wait_progress(progress, 1)
    wait_process("sleep", HANG_SLEEP)  # inside the hanging second call
    tree = _worker_tree(proc.pid)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert _wait_gone(tree) == []
    run_id = Store(store).list_runs()["run_id"][0]
    run = Store(store).get_run(run_id)
    assert run["status"] == "cancelled" and run["error"] == "the tracker was stopped by SIGTERM"
    assert Store(store).case_results(run_id).sort_values("case_idx")["passed"].tolist() == [True, False]
    assert leftover_run_folders(private_tmp) == []


def test_every_process_a_kernel_starts_ends_with_the_run(tmp_path, private_tmp):
    req = RunRequest(path=str(VARIANTS / "spawns_children.py"), suite="smoke", mode="test", cases=[0],
                     store=str(tmp_path / "s.duckdb"), timeout=60)  # fmt: skip
    outcome = run_variant(req)
    assert outcome.status == "passed", outcome.record.run.error
    assert re.search(r"KB-CHILDREN (\d+) (\d+) (\d+)", outcome.record.run.log_tail)
    for seconds in ("1000", "1001", "1002"):  # the plain child, the double-forked daemon, the setsid child
        seconds = f"{seconds}.{os.environ['KB_MARK']}"
        assert wait_no_process("sleep", seconds, seconds=5) == []
    assert leftover_run_folders(private_tmp) == []


def test_a_non_daemon_thread_does_not_turn_a_finished_run_into_a_timeout(tmp_path, private_tmp):
    start = time.monotonic()
    req = RunRequest(path=str(VARIANTS / "nondaemon_thread.py"), suite="smoke", mode="test", cases=[0, 1],
                     store=str(tmp_path / "s.duckdb"), timeout=60)  # fmt: skip
    outcome = run_variant(req)
    assert outcome.status == "passed", outcome.record.run.error
    assert time.monotonic() - start < 40


@pytest.mark.parametrize("flag", ["--timeout", "--compile-timeout"])
@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1"])
def test_limits_must_be_finite_and_positive(tmp_path, flag, value):
    out = subprocess.run(
        [sys.executable, "-m", "tracker", "run", "kernels/geqrf_reference.py", "--suite", "smoke",
         "--store", str(tmp_path / "s.duckdb"), f"{flag}={value}"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("error:") and flag in out.stderr and "finite" in out.stderr
    assert not (tmp_path / "s.duckdb").exists()


def test_compilation_has_its_own_budget_and_the_timeout_covers_the_timed_work(tmp_path, private_tmp, monkeypatch):
    monkeypatch.setenv("KB_IMPORT_SLEEP", "5")
    store = str(tmp_path / "s.duckdb")
    slow = str(VARIANTS / "slow_import.py")
    # a 3 s timeout is not spent on a 5 s import, and progress says "compiling" meanwhile
    state, phases = ProgressState(), []

    def follow(event):
        state.update(event)
        if not phases or phases[-1] != state.phase:
            phases.append(state.phase)

    outcome = run_variant(
        RunRequest(path=slow, suite="smoke", mode="test", cases=[0], store=store, timeout=3), on_event=follow
    )
    assert outcome.status == "passed", outcome.record.run.error
    assert outcome.record.run.compile_s >= 5
    assert phases == ["starting", "compiling", "running"]
    assert Store(store).get_run(outcome.run_id)["compile_s"] >= 5
    # a compile budget shorter than the import: failed (not a timeout), with the log tail
    outcome = run_variant(
        RunRequest(path=slow, suite="smoke", mode="test", cases=[0], store=store, timeout=60, compile_timeout=2)
    )
    run = Store(store).get_run(outcome.run_id)
    assert run["status"] == "failed" and run["error"].startswith("compiling took longer than 2 s")
    assert run["log_tail"] is not None
    assert leftover_run_folders(private_tmp) == []


def test_temporary_folders_are_removed_after_timeout_and_crash(tmp_path, private_tmp):
    store = str(tmp_path / "s.duckdb")
    timed_out = run_variant(RunRequest(path=str(VARIANTS / "hangs_second.py"), suite="smoke", mode="test",
                                       cases=[0, 1], store=store, timeout=3))  # fmt: skip
    crashed = run_variant(RunRequest(path=str(VARIANTS / "segfault.py"), suite="smoke", mode="test", cases=[0],
                                     store=store, timeout=30))  # fmt: skip
    assert (timed_out.status, crashed.status) == ("timeout", "crashed")
    assert leftover_run_folders(private_tmp) == []
    # torch's own compile cache (torchinductor_<user>) may appear when the checker's numerics touch it; ours not
    assert [f for f in os.listdir(private_tmp) if not f.startswith("torchinductor_") and f != RUNS_ROOT_NAME] == []


@pytest.mark.parametrize("mode", ["test", "benchmark"])
def test_a_first_call_whose_build_fails_is_a_compile_failure(tmp_path, private_tmp, mode):
    req = RunRequest(path=str(VARIANTS / "build_fails.py"), suite="smoke", mode=mode, cases=[0, 1],
                     store=str(tmp_path / "s.duckdb"), timeout=60)  # fmt: skip
    outcome = run_variant(req)
    run = Store(req.store).get_run(outcome.run_id)
    assert run["status"] == "failed"
    assert run["error"].startswith("compile failed: custom_kernel raised RuntimeError: Error building extension")
    assert "Error building extension" in run["log_tail"]


def test_after_sigterm_no_further_run_of_the_session_starts(tmp_path, private_tmp):
    # ab and fidelity went on with their next rounds after a SIGTERM cancelled the current run; so did many files.
    second = tmp_path / "hangs_again.py"
    second.write_text((VARIANTS / "hangs_second.py").read_text())
    store = tmp_path / "s.duckdb"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracker", "run", str(VARIANTS / "hangs_second.py"), str(second), "--suite", "smoke",
         "--mode", "test", "--cases", "0,1", "--store", str(store), "--quiet"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not _worker_tree(proc.pid):
        time.sleep(0.2)
    time.sleep(2.0)  # into the first run's hang
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    runs = Store(store).list_runs()
    assert runs["status"].tolist() == ["cancelled"] and runs["variant"].tolist() == ["hangs_second"]


def test_progress_counts_each_case_once_whatever_the_events_say():
    """A case_done repeated (a kernel's forged one among them) is no progress: done never passes the run's total, so
    the dashboard's bar stays a bar; a queue's runs share case numbers and each counts."""
    state = ProgressState()
    state.update({"event": "started", "run_id": "r1", "total": 2})
    for _ in range(5):
        state.update({"event": "case_done", "case_idx": 0, "passed": True})
    assert (state.done, state.total) == (1, 2)
    state.update({"event": "case_done", "case_idx": 0, "run_id": "r2", "passed": True})
    assert state.done == 2
