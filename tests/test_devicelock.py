"""One device, one run: two trackers on the same device wait for each other (across processes), the queue is
visible in `queue` and `list`, each run records what else used the device and the host at start and end, and
Compare and Regressions warn when a side ran on a shared device."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import open_page, open_url
from tracker.capture import devicelock
from tracker.store import Store

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = Path(__file__).resolve().parent / "variants"


@pytest.fixture
def lock_env(tmp_path, monkeypatch) -> dict:
    monkeypatch.setenv("KERNELBEAM_LOCK_DIR", str(tmp_path / "locks"))
    return dict(os.environ, KERNELBEAM_LOCK_DIR=str(tmp_path / "locks"), KB_CALL_SLEEP="1.5")


def _tracker(store: Path, env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tracker", "run", str(VARIANTS / "slow_calls.py"), "--suite", "smoke", "--mode",
         "test", "--device", "cpu", "--store", str(store), *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracker", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip


def test_two_runs_on_one_device_wait_for_each_other_and_the_queue_shows_it(tmp_path, lock_env):
    store_a, store_b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"  # two stores: the lock is per device
    first = _tracker(store_a, lock_env, "--cases", "0,1,2,3")
    deadline = time.monotonic() + 60
    while not devicelock.queue() and time.monotonic() < deadline:
        time.sleep(0.1)
    second = _tracker(store_b, lock_env, "--cases", "0")
    seen = None
    while time.monotonic() < deadline and first.poll() is None:
        # The listing before the queue: a run takes the device once and lets it go once, so if the queue read after
        # the listing still shows the first run holding it, the listing saw that too, however slow the two calls
        # are under load (read the other way round, the device had passed to the second run in between, in CI).
        listing = _cli("list", "--store", str(store_a), env=lock_env).stdout
        q = json.loads(_cli("queue", "--json", env=lock_env).stdout)
        if q and q[0]["waiting"] and q[0]["holder"]["pid"] == first.pid:
            seen = q
            break
        time.sleep(0.3)
    assert seen is not None, "the second run never showed as waiting"
    (entry,) = seen
    assert entry["device"] == "cpu" and entry["holder"]["pid"] == first.pid
    assert [w["pid"] for w in entry["waiting"]] == [second.pid]
    assert f"device cpu: run {entry['holder']['run_id']} (pid {first.pid}" in listing
    out_a, err_a = first.communicate(timeout=120)
    out_b, err_b = second.communicate(timeout=120)
    assert first.returncode == 0 and second.returncode == 0, err_a + err_b
    run_a = Store(store_a).get_run(Store(store_a).list_runs()["run_id"][0])
    run_b = Store(store_b).get_run(Store(store_b).list_runs()["run_id"][0])
    assert f"waiting for device cpu (held by pid {first.pid}, run {run_a['run_id']})" in err_b
    # The compile time the progress shows is the run's compile_s, not the wait for the device before it.
    shown = float(re.search(r"^compiled \(([\d.]+) s\)", err_b, re.M).group(1))
    assert shown == pytest.approx(run_b["compile_s"], abs=0.3), err_b
    # the second worker started only after the first run finished: their device time does not overlap
    assert run_b["finished_at"] > run_a["finished_at"]
    assert json.loads(run_b["device_load_start"])["time"] >= run_a["finished_at"].timestamp() - 1
    assert devicelock.queue() == []


def test_a_run_records_the_device_and_host_load_at_start_and_end(tmp_path, lock_env):
    store = tmp_path / "s.duckdb"
    proc = _tracker(store, dict(lock_env, KB_CALL_SLEEP="0"), "--cases", "0")
    proc.communicate(timeout=120)
    run = Store(store).get_run(Store(store).list_runs()["run_id"][0])
    start, end = json.loads(run["device_load_start"]), json.loads(run["device_load_end"])
    for load in (start, end):
        assert len(load["loadavg"]) == 3 and load["cores"] == os.cpu_count()
        assert load["shared"] == (load["loadavg"][0] > load["cores"])
    assert end["time"] >= start["time"]
    assert bool(run["shared_device"]) == (start["shared"] or end["shared"])


def test_a_dead_holder_frees_the_device(tmp_path, lock_env):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys; from tracker.capture.devicelock import DeviceLock; DeviceLock('gpu7', 'r1').acquire(); "
        "print('held', flush=True); sys.stdin.read()")],
        cwd=ROOT, env=lock_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    assert devicelock.queue()[0]["holder"]["run_id"] == "r1"
    waited = []
    lock = devicelock.DeviceLock("gpu7", "r2")

    def on_wait(h):
        waited.append(h)
        if len(waited) == 2:
            holder.kill()  # kill -9: the kernel drops the flock

    lock.acquire(on_wait=on_wait, poll_s=0.05)
    lock.release()
    assert waited[0]["run_id"] == "r1"
    holder.wait()


def test_compare_and_regressions_warn_about_a_shared_device(demo_store):
    from tests.conftest import T0, make_record  # the demo store's record builder

    path, ids = demo_store
    base = Store(path).get_run(ids["householder"][9])
    rec = make_record("shared0aaaaa", variant="householder_v10", source="x = 1\n", path=base["path"],
                      family="householder", started=T0.replace(day=2), means=[20.0] * 12, seed=5)  # fmt: skip
    rec.run.shared_device = True
    assert Store(path).finish_run(rec) is None
    assert Store(path).shared_device_runs([ids["householder"][9], "shared0aaaaa"]) == ["shared0aaaaa"]
    at = open_page("pages/compare.py", a=ids["householder"][9], b="shared0aaaaa")
    assert any("B ran on a shared device" in w.value for w in at.warning), [w.value for w in at.warning]
    at = open_url("pages/regressions.py", family="householder")
    assert any("ran on a shared device" in w.value and "shared0aaaaa" in w.value for w in at.warning)


def test_the_benchmark_page_shows_the_device_queue(empty_store, lock_env, monkeypatch):
    monkeypatch.setenv("KERNELBEAM_OWN_STORE", str(empty_store))  # the page writes (and so shows) only its own
    lock = devicelock.DeviceLock("gpu9", "holder0run00")
    lock.acquire()
    try:
        at = open_page("pages/benchmark.py")
        # The holder is no run of the open store: said as such, not linked to a run page that cannot open it.
        shown = [i.value for i in at.info if "Device **gpu9**" in i.value]
        assert shown and "a run of another store (pid" in shown[0] and "holder0run00" not in shown[0], shown
    finally:
        lock.release()
    assert devicelock.queue() == []


def test_a_link_planted_in_the_lock_folder_is_never_written_through(tmp_path, monkeypatch):
    """The <tmp> fallback folder is shared by the host's users: another user made it and planted `cpu.holder` as a
    link to a file of ours, and our next run wrote its holder record over that file. Nothing is written through a
    link: the run goes ahead without its holder record."""
    folder = tmp_path / "shared-locks"
    folder.mkdir()
    monkeypatch.setenv("KERNELBEAM_LOCK_DIR", str(folder))
    victim = tmp_path / "precious"
    victim.write_text("mine\n")
    (folder / "cpu.holder").symlink_to(victim)
    (folder / f"cpu.wait.{os.getpid()}").symlink_to(victim)
    lock = devicelock.DeviceLock("cpu", "victim000001")
    lock.acquire()
    lock.release()
    assert victim.read_text() == "mine\n"
    (folder / "gpu0.lock").symlink_to(victim)  # the lock file itself: refused, not followed
    with pytest.raises(OSError):
        devicelock.DeviceLock("gpu0", "victim000002").acquire()
    assert victim.read_text() == "mine\n"
