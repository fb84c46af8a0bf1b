"""The DuckDB store: schema versions and migrations, reaping of dead runs, all-or-nothing run writes, lock
retries for writers and readers with the JSON side file as the last resort, Parquet export/import, seeding."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from conftest import old_store

from tracker import store as store_mod
from tracker.capture.runner import RunRequest, build_record
from tracker.store import Store
from tracker.store.transfer import export_runs, import_runs, seed_from_samples
from tracker.workloads.qr_v2.suites import SMOKE

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "kernels" / "geqrf_reference.py"
TABLES = (
    "runs",
    "variants",
    "variant_names",
    "case_results",
    "samples",
    "profile_cases",
    "profile_kernels",
    "verdicts",
    "evidence",
    "ncu_cases",
    "ncu_kernels",
)


def make_run(
    run_id: str,
    *,
    source: str | None = None,
    status: str = "passed",
    reps: int = 5,
    profile: bool = False,
    pid: int | None = None,
) -> store_mod.RunRecord:
    """A finished CPU benchmark run of the smoke suite, as the runner holds it before its one write."""
    source = source if source is not None else REFERENCE.read_text()
    req = RunRequest(path=str(REFERENCE), suite="smoke", mode="benchmark")
    record = build_record(req, run_id, store_mod.now(), source)
    record.variant["source"] = source
    if pid is not None:
        record.run.pid = pid
    for i, case in enumerate(SMOKE.benchmarks[:2]):
        times = [100.0 + 10 * i + rep for rep in range(reps)]
        mean = sum(times) / reps
        record.cases.append(
            {
                "case_idx": i, "spec": case.spec, "kind": "benchmark", "batch": case.batch, "n": case.n,
                "cond": case.cond, "seed": case.seed, "case_name": case.case, "inputs": 4, "passed": True,
                "message": "", "factor_res": 0.3, "tril_res": 0.1, "recon_res": 0.2, "orth_res": 1.5,
                "runs": reps, "mean_us": mean, "std_us": 1.0, "err_us": 0.5, "best_us": min(times),
                "worst_us": max(times),
            }
        )  # fmt: skip
        record.samples.extend((i, rep, t) for rep, t in enumerate(times))
        if profile:
            record.profile_cases.append({"case_idx": i, "launches": None, "host_us": 50.0, "device_us": None})
            record.profile_kernels.append({"case_idx": i, "kernel": "aten::geqrf", "calls": 1, "self_us": 40.0})
    record.run.update(status=status, finished_at=store_mod.now(), gpu="CPU", device="cpu", geomean_us=110.0)
    return record


def counts(path: Path) -> dict[str, int]:
    with Store(path).connect(read_only=True) as con:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


def run_ids(path: Path) -> set[str]:
    """Runs in the store itself (list_runs also shows runs waiting in side files)."""
    with Store(path).connect(read_only=True) as con:
        return {r[0] for r in con.execute("SELECT run_id FROM runs").fetchall()}


@contextlib.contextmanager
def held(path: Path, *, read_only: bool = False, seconds: float | None = None):
    """Another process holding the store open: until the block ends, or for `seconds` after it is ready."""
    wait = f"time.sleep({seconds})" if seconds is not None else "sys.stdin.readline()"
    code = textwrap.dedent(
        f"""
        import sys, time, duckdb
        con = duckdb.connect({str(path)!r}, read_only={read_only})
        print("ready", flush=True)
        {wait}
        con.close()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        if proc.poll() is None and seconds is None:
            proc.stdin.close()
        proc.wait(timeout=30)


@pytest.fixture
def store(tmp_path) -> Path:
    path = tmp_path / "runs.duckdb"
    with Store(path).connect():
        pass
    return path


# --------------------------------------------------------------------------------------------- schema


def test_a_new_store_has_the_current_schema_version(store):
    with Store(store).connect() as con:
        assert store_mod.schema_version(con) == len(store_mod.MIGRATIONS) == store_mod.SCHEMA_VERSION
        versions = [v for (v,) in con.execute("SELECT version FROM schema_version ORDER BY version").fetchall()]
    assert versions == list(range(1, len(store_mod.MIGRATIONS) + 1))
    with Store(store).connect() as con:  # opening again applies nothing twice
        assert con.execute("SELECT count(*) FROM schema_version").fetchone()[0] == len(store_mod.MIGRATIONS)


def test_an_old_v1_store_is_migrated_to_the_current_version_keeping_its_runs(tmp_path, monkeypatch):
    # The run is written by today's code into a current store, then copied over in v1's columns only: later
    # migrations add columns that a v1 store does not have.
    src = tmp_path / "src.duckdb"
    assert Store(src).finish_run(make_run("oldrun000001")) is None
    path = old_store(tmp_path / "old.duckdb", 1, src)
    # read before any writer migrates it (run and ab ask it how long a run takes first): no method, no compile_s
    sha = Store(src).get_run("oldrun000001")["variant_sha256"]
    assert len(Store(path).passed_run_seconds(sha, "smoke", "benchmark", "tracker", [0, 1])) == 1
    with Store(path).connect() as con:
        assert store_mod.schema_version(con) == len(store_mod.MIGRATIONS)
        indexes = {r[0] for r in con.execute("SELECT index_name FROM duckdb_indexes()").fetchall()}
    assert {"samples_run", "case_results_run"} <= indexes
    assert run_ids(path) == {"oldrun000001"}
    assert counts(path)["samples"] == 10


def test_a_store_newer_than_the_tracker_is_refused(store):
    con = duckdb.connect(str(store))
    con.execute("INSERT INTO schema_version VALUES (?, now())", [store_mod.SCHEMA_VERSION + 1])
    con.close()
    with pytest.raises(RuntimeError, match="newer than this tracker"), Store(store).connect():
        pass


def test_a_file_that_is_not_a_store_raises_not_a_store_error(tmp_path):
    path = tmp_path / "notes.duckdb"
    path.write_text("just some notes, not a database\n" * 100)
    for read_only in (False, True):
        t0 = time.monotonic()
        with (
            pytest.raises(store_mod.NotAStoreError, match="is not a DuckDB store"),
            Store(path).connect(read_only=read_only, retry_seconds=5),
        ):
            pass
        assert time.monotonic() - t0 < 2  # no lock retries for a file that is simply not a store
    with pytest.raises(store_mod.NotAStoreError):
        Store(path).list_runs()
    with pytest.raises(FileNotFoundError, match="no store at"):
        Store(tmp_path / "missing.duckdb").list_runs()


def test_a_non_store_whose_path_contains_lock_is_still_not_a_store(tmp_path):
    path = tmp_path / "clock.duckdb"
    path.write_text("just some notes, not a database\n" * 100)
    with pytest.raises(store_mod.NotAStoreError), Store(path).connect(retry_seconds=0.5):
        pass


# ------------------------------------------------------------------------------------------- run rows


def test_a_running_row_whose_process_is_gone_becomes_crashed_on_the_next_writer_open(store):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead, alive, elsewhere = (make_run(i, pid=p) for i, p in (("dead", gone.pid), ("alive", os.getpid()), ("far", 1)))
    elsewhere.run.host = "another-host"
    for record in (alive, elsewhere, dead):  # each start is a writer open: the dead one goes last
        Store(store).start_run(record)
    # a reader shows the truth (crashed) without writing: the stored row stays `running` until a writer opens
    assert Store(store).get_run("dead")["status"] == "crashed"
    assert Store(store).list_runs().set_index("run_id")["status"].to_dict()["dead"] == "crashed"
    with Store(store).connect(read_only=True) as con:
        assert con.execute("SELECT status FROM runs WHERE run_id = 'dead'").fetchone()[0] == "running"
    with Store(store).connect():
        pass
    row = Store(store).get_run("dead")
    assert row["status"] == "crashed"
    assert row["error"] == "the recording process ended before the run was completed"
    assert row["finished_at"] is not None
    assert Store(store).get_run("alive")["status"] == "running"  # this process still records it
    assert Store(store).get_run("far")["status"] == "running"  # another host's pid means nothing here
    # the live run completes normally, replacing its running row
    assert Store(store).finish_run(alive) is None
    assert Store(store).get_run("alive")["status"] == "passed"
    assert len(Store(store).case_results("alive")) == 2


def test_a_run_is_never_half_written(store):
    record = make_run("halfrun00001")
    record.cases[1]["passed"] = None  # violates NOT NULL: the second case row cannot be written
    with Store(store).connect() as con, pytest.raises(duckdb.ConstraintException):
        store_mod.write_run(con, record)
    assert counts(store) == dict.fromkeys(TABLES, 0)
    pending = Store(store).finish_run(record, retry_seconds=0.2)
    side = pending.path
    assert side == Store(store).pending_dir / "halfrun00001.json"
    assert pending.reason.startswith("writing failed:") and "NOT NULL" in pending.reason
    kept = store_mod.read_side_file(side)
    assert kept.run.run_id == "halfrun00001" and len(kept.samples) == 10
    assert counts(store) == dict.fromkeys(TABLES, 0)
    # a started run keeps its `running` row and nothing else
    Store(store).start_run(record)
    assert Store(store).finish_run(record, retry_seconds=0.2) is not None
    assert Store(store).get_run("halfrun00001")["status"] == "pending"  # shown as waiting in its side file
    with Store(store).connect(read_only=True) as con:
        assert con.execute("SELECT status FROM runs WHERE run_id = 'halfrun00001'").fetchone()[0] == "running"
    assert counts(store)["case_results"] == counts(store)["samples"] == 0


def test_write_run_replaces_an_earlier_write_of_the_same_run(store):
    record = make_run("again0000001", profile=True)
    record.ncu_cases = [{"case_idx": 0, "report": "ncu-case0.ncu-rep", "kernels": 1, "error": None}]
    record.ncu_kernels = [{"case_idx": 0, "kernel_idx": 0, "kernel": "k", "duration_us": 3.0, "stalls": "{}"}]
    assert Store(store).finish_run(record) is None
    assert Store(store).finish_run(record) is None
    assert counts(store) == {
        "runs": 1, "variants": 1, "variant_names": 1, "case_results": 2, "samples": 10, "profile_cases": 2,
        "profile_kernels": 2, "verdicts": 0, "evidence": 0, "ncu_cases": 1, "ncu_kernels": 1,
    }  # fmt: skip
    samples = Store(store).run_samples("again0000001")
    assert samples["time_us"].tolist() == [t for _, _, t in record.samples]


def test_verdicts_are_validated(store):
    Store(store).finish_run(make_run("verdict00001"))
    Store(store).add_verdict("verdict00001", "promoted", "faster")
    assert counts(store)["verdicts"] == 1
    with pytest.raises(ValueError, match="verdict must be one of"):
        Store(store).add_verdict("verdict00001", "great")
    with pytest.raises(ValueError, match="no run 'nope'"):  # bad input (InputError), not a bug
        Store(store).add_verdict("nope", "rejected")


# -------------------------------------------------------------------------------------------- locking


def test_finish_run_saves_to_a_side_file_while_locked_and_the_next_write_brings_it_in(store):
    first, second = make_run("lockedrun001"), make_run("nextrun00001")
    with held(store):
        t0 = time.monotonic()
        pending = Store(store).finish_run(first, retry_seconds=0.5)
        assert 0.4 < time.monotonic() - t0 < 10  # it retried for the window, then gave up
    side = pending.path
    assert side == Store(store).pending_dir / "lockedrun001.json" and side.is_file()
    assert pending.reason == "the store stayed locked"
    assert run_ids(store) == set()
    assert Store(store).finish_run(second) is None  # the next writer flushes the pending run
    assert run_ids(store) == {"lockedrun001", "nextrun00001"}
    assert not side.exists()
    assert len(Store(store).case_results("lockedrun001")) == 2
    assert len(Store(store).run_samples("lockedrun001")) == 10


def test_flush_pending_skips_a_broken_side_file_and_writes_the_others(store):
    folder = Store(store).pending_dir
    folder.mkdir()
    (folder / "broken.json").write_text("{not json")
    (folder / "unsigned0001.json").write_text(make_run("unsigned0001").to_json())  # as a kernel would plant it
    (folder / "good00000001.json").write_text(store_mod.side_text(make_run("good00000001")))
    flushed = Store(store).flush_pending()
    assert flushed.written == ["good00000001"]
    assert {p.name: "not signed" in why for p, why in flushed.unreadable} == {
        "broken.json": True,
        "unsigned0001.json": True,
    }
    assert run_ids(store) == {"good00000001"}
    assert (folder / "broken.json").exists()


def test_a_run_while_another_process_holds_the_store_is_not_lost(store):
    """The CLI records a run while a second process holds the write lock: the run lands in the side file, the
    message says where, and flushing later puts it in the store."""
    env = dict(os.environ, KERNELBEAM_LOCK_RETRY_SECONDS="1")
    cmd = [sys.executable, "-m", "tracker", "run", str(REFERENCE), "--suite", "smoke", "--mode", "test"]
    cmd += ["--cases", "0", "--store", str(store), "--json", "--quiet"]
    with held(store):
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    side = Path(summary["side_file"])
    assert side == Store(store).pending_dir / f"{summary['run_id']}.json" and side.is_file()
    assert "stayed locked" in proc.stderr and str(side) in proc.stderr
    assert "Traceback" not in proc.stderr
    assert run_ids(store) == set()
    assert Store(store).flush_pending().written == [summary["run_id"]]
    row = Store(store).get_run(summary["run_id"])
    assert row["status"] == "passed" and row["gpu"] == "CPU"
    assert Store(store).case_results(summary["run_id"])["passed"].tolist() == [True]
    assert not side.exists()


def test_the_import_command_named_in_the_side_file_message_flushes_pending_runs(store):
    with held(store):
        assert Store(store).finish_run(make_run("pending00001"), retry_seconds=0.2) is not None
    proc = subprocess.run(
        [sys.executable, "-m", "tracker", "import", "--store", str(store)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert run_ids(store) == {"pending00001"}


def test_readers_retry_until_the_writer_is_gone(store):
    Store(store).finish_run(make_run("read00000001"))
    with held(store) as holder:
        with (
            pytest.raises(store_mod.StoreLockedError, match="locked by another process"),
            Store(store).connect(read_only=True, retry_seconds=0.3),
        ):
            pass
        assert holder.poll() is None
    with held(store, seconds=1.5):
        t0 = time.monotonic()
        with Store(store).connect(read_only=True, retry_seconds=30) as con:
            waited = time.monotonic() - t0
            assert con.execute("SELECT run_id FROM runs").fetchall() == [("read00000001",)]
    assert 0.5 < waited < 20


def test_a_conflict_inside_one_process_is_reported_as_locked_not_as_not_a_store(store):
    reader = duckdb.connect(str(store), read_only=True)
    try:
        with pytest.raises(store_mod.StoreLockedError), Store(store).connect(retry_seconds=0.3):
            pass
    finally:
        reader.close()


def test_writers_retry_until_a_reader_in_another_process_is_gone(store):
    with held(store, read_only=True, seconds=1.5):
        t0 = time.monotonic()
        assert Store(store).finish_run(make_run("write0000001"), retry_seconds=30) is None
        assert time.monotonic() - t0 > 0.5
    assert run_ids(store) == {"write0000001"}


# --------------------------------------------------------------------------------------- export/import


def _filled_store(path: Path) -> list[str]:
    ids = ["xa00000000001", "xb00000000002", "xc00000000003"]
    Store(path).finish_run(make_run(ids[0], profile=True))
    Store(path).finish_run(make_run(ids[1], source="# another variant\n" + REFERENCE.read_text()))
    Store(path).finish_run(make_run(ids[2], status="failed", reps=3))
    Store(path).add_verdict(ids[0], "promoted", "faster")
    Store(path).start_run(make_run("xrunning00004", pid=os.getpid()))  # unfinished: not exported by default
    return ids


def test_export_import_round_trip_through_parquet(tmp_path):
    a, b, folder = tmp_path / "a.duckdb", tmp_path / "b.duckdb", tmp_path / "export"
    ids = _filled_store(a)
    assert export_runs(a, folder) == 3
    assert {p.name for p in folder.glob("*.parquet")} == {f"{t}.parquet" for t in TABLES}
    assert import_runs(b, folder) == 3
    assert run_ids(b) == set(ids)
    expected = counts(a)
    expected["runs"] -= 1  # the running one stayed home
    assert counts(b) == expected == {
        "runs": 3, "variants": 2, "variant_names": 1, "case_results": 6, "samples": 26, "profile_cases": 2,
        "profile_kernels": 2, "verdicts": 1, "evidence": 0, "ncu_cases": 0, "ncu_kernels": 0,
    }  # fmt: skip
    assert import_runs(b, folder) == 0  # importing twice adds nothing
    assert counts(b) == expected
    for run_id in ids:
        ra, rb = Store(a).get_run(run_id), Store(b).get_run(run_id)
        assert {k: str(v) for k, v in ra.items()} == {k: str(v) for k, v in rb.items()}
        assert Store(a).run_samples(run_id).equals(Store(b).run_samples(run_id))
    # a chosen subset
    assert export_runs(a, tmp_path / "one", [ids[1]]) == 1
    c = tmp_path / "c.duckdb"
    assert import_runs(c, tmp_path / "one") == 1
    assert counts(c)["runs"] == 1 and counts(c)["samples"] == 10
    assert import_runs(c, folder) == 2  # only the runs it lacks
    with pytest.raises(FileNotFoundError, match="no runs.parquet"):
        import_runs(c, tmp_path)


def test_every_status_and_every_table_survive_export_and_import(tmp_path):
    """One finished run of each status the store has (FINISHED_STATUSES), rows in every exported table."""
    import numpy as np

    from tracker.capture.evidence import pack
    from tracker.common.vocabulary import FINISHED_STATUSES
    from tracker.store.transfer import EXPORT_TABLES

    a, b, folder = tmp_path / "a.duckdb", tmp_path / "b.duckdb", tmp_path / "export"
    ids = []
    for k, status in enumerate(FINISHED_STATUSES):
        record = make_run(f"status{k:06d}", status=status, profile=k == 0)
        if k == 1:
            blob = pack({"a": np.eye(2, dtype=np.float32)})
            record.evidence.append(
                {"case_idx": 0, "repetition": -1, "input_idx": 0, "matrix_idx": 0, "n": 2, "message": "wrong",
                 "factor_res": 30.0, "tril_res": 0.0, "recon_res": 0.1, "orth_res": 0.2, "arrays": blob,
                 "arrays_bytes": len(blob)}
            )  # fmt: skip
        if k == 2:  # a Nsight Compute profile of case 0 (its report stays behind: only the rows travel here)
            record.ncu_cases.append({"case_idx": 0, "report": None, "kernels": 1, "error": None})
            record.ncu_kernels.append(
                {"case_idx": 0, "kernel_idx": 0, "kernel": "qr_leaf", "duration_us": 12.5, "occupancy_pct": 40.0,
                 "sm_pct": 30.0, "memory_pct": 20.0, "registers": 96, "static_smem_bytes": 0,
                 "dynamic_smem_bytes": 256, "block_size": 128, "grid_size": 640, "stalls": '{"long_scoreboard": 2.5}'}
            )  # fmt: skip
        assert Store(a).finish_run(record) is None
        ids.append(record.run.run_id)
    Store(a).add_verdict(ids[0], "rejected", "slower")
    sha = Store(a).get_run(ids[0])["variant_sha256"]  # a second name for the runs' content (`add` of a copy)
    twin = {"name": "twin", "sha256": sha, "path": "kernels/twin.py", "family": "beam", "added_at": store_mod.now()}
    assert Store(a).register_variants([], [twin]) == []
    assert export_runs(a, folder) == len(FINISHED_STATUSES)
    assert {p.name for p in folder.glob("*.parquet")} == {f"{t}.parquet" for t in EXPORT_TABLES}
    assert import_runs(b, folder) == len(FINISHED_STATUSES)
    assert all(n > 0 for n in counts(b).values()), counts(b)  # every table carried rows across
    assert counts(b) == counts(a)
    assert {Store(b).get_run(r)["status"] for r in ids} == set(FINISHED_STATUSES)
    assert Store(b).variant_names() == Store(a).variant_names() and counts(b)["variant_names"] == 2


def test_seed_from_samples_only_fills_an_empty_store(tmp_path):
    source, samples = tmp_path / "src.duckdb", tmp_path / "samples"
    _filled_store(source)
    export_runs(source, samples / "h200_reference")
    fresh = tmp_path / "fresh.duckdb"
    assert seed_from_samples(fresh, samples) == 3
    assert seed_from_samples(fresh, samples) == 0
    empty = tmp_path / "empty.duckdb"
    with Store(empty).connect():
        pass
    assert seed_from_samples(empty, samples) == 3
    used = tmp_path / "used.duckdb"
    Store(used).finish_run(make_run("mine00000001"))
    assert seed_from_samples(used, samples) == 0
    assert run_ids(used) == {"mine00000001"}
    assert seed_from_samples(tmp_path / "other.duckdb", tmp_path / "no_samples_here") == 0


def test_passed_run_seconds_counts_only_passed_runs_of_the_same_source_cases_and_method(store):
    """What `ab`, `fidelity` and `run` say a run will take (tracker.capture.outlook) comes from runs like it only:
    a run of other cases, a failed run, a contest-method run or another source would mislead the estimate."""
    import datetime as dt

    def write(run_id, seconds, *, status="passed", method=None, source=None, cases=2):
        record = make_run(run_id, source=source, status=status)
        record.cases, record.samples = record.cases[:cases], [s for s in record.samples if s[0] < cases]
        start = record.run.started_at
        record.run.update(finished_at=start + dt.timedelta(seconds=seconds), method=method, compile_s=2.0)
        assert Store(store).finish_run(record) is None
        return record.variant["sha256"]

    sha = write("dur000000001", 30)
    write("dur000000002", 50)
    write("dur000000003", 900, status="failed")
    write("dur000000004", 700, method="contest")
    write("dur000000005", 5, cases=1)
    other = write("dur000000006", 400, source=REFERENCE.read_text() + "\n# another source\n")

    def walls(sha256, method, cases, mode="benchmark"):
        return sorted(round(wall) for wall, _ in Store(store).passed_run_seconds(sha256, "smoke", mode, method, cases))

    assert walls(sha, "tracker", [1, 0]) == [30, 50]
    timed = [round(t) for _, t in Store(store).passed_run_seconds(sha, "smoke", "benchmark", "tracker", [0, 1])]
    assert timed == [48, 28]  # newest first, less the compile time (--timeout starts after it)
    assert walls(sha, "tracker", [0]) == [5]
    assert walls(sha, "contest", [0, 1]) == [700]
    assert walls(sha, "tracker", [0, 1], mode="test") == []
    assert walls(other, "tracker", [0, 1]) == [400]
    assert Store(store.parent / "none.duckdb").passed_run_seconds(sha, "smoke", "benchmark", "tracker", [0]) == []


def test_a_later_run_under_another_family_leaves_the_variant_in_its_first(tmp_path):
    """Found in a fresh-clone walk: a run of the samples' householder_torch with `--family walk` moved it out of
    `scaleout-sequential` (its lineage lost a variant, silently). A variant keeps the family of its first run; a
    family's list and tree also hold every variant run in it."""
    from tests.conftest import H200, T0, make_record

    path = tmp_path / "runs.duckdb"
    common = {"variant": "hh", "source": "def custom_kernel(data):\n    return 1\n", "path": "hh.py", "means": None}
    other = {"variant": "gq", "source": "def custom_kernel(data):\n    return 2\n", "path": "gq.py", "means": None}
    for rec in (
        make_record("r1", family="scaleout-sequential", started=T0, **common),
        make_record("r2", family="scaleout-sequential", started=T0 + timedelta(minutes=1), **other),
        make_record("r3", family="walk", started=T0 + timedelta(minutes=2), **common),
    ):
        Store(path).finish_run(rec)
    for read in (Store(path).variant_list, Store(path).lineage_nodes):
        first = read(family="scaleout-sequential")
        assert sorted(first["variant"]) == ["gq", "hh"], first
        assert set(first["family"]) == {"scaleout-sequential"}
        assert list(read(family="walk")["variant"]) == ["hh"]
    # The variant table and the leaderboard name the same family, whichever family's runs they were asked for.
    for family in (None, "walk"):
        table = Store(path).variant_table(family=family)
        board = Store(path).leaderboard_cells(suite="qr_v2", gpu=H200, family=family)["variants"]
        for rows in (table, board):
            assert dict(zip(rows["variant"], rows["family"], strict=True))["hh"] == "scaleout-sequential", rows


def test_lineage_nodes_and_variant_list_keep_problems_apart(tmp_path, capsys):
    """After a vectoradd submission's run, the qr_v2 tree listed it as a root "not run" beside the QR variants, and
    the other way round. A variant belongs to the problems it was run on (a run of no recorded problem is qr_v2's);
    one registered with `add` and never run belongs to none yet, so each problem lists it. Without a problem: all."""
    from test_views_cli import _two_problems_store

    from tracker.cli.main import main

    path = tmp_path / "two.duckdb"
    _two_problems_store(path)
    kernel = tmp_path / "fresh.py"
    kernel.write_text("def custom_kernel(data):\n    return data\n")
    assert main(["add", str(kernel), "--store", str(path)]) == 0
    capsys.readouterr()
    for read in (Store(path).lineage_nodes, Store(path).variant_list):
        assert sorted(read(problem="qr_v2")["variant"]) == ["fresh", "qr_k"], read
        assert sorted(read(problem="vectoradd", suite="smoke", gpu="CPU")["variant"]) == ["fresh", "vec_k"], read
        assert sorted(read()["variant"]) == ["fresh", "qr_k", "vec_k"], read


def test_samples_of_numpy_scalars_are_written_as_numbers(tmp_path):
    """Samples go in as one statement with list parameters, which DuckDB binds only from plain Python numbers: a
    record built by code of one's own (NumPy indices and times) is written all the same, every repetition kept."""
    import numpy as np
    from conftest import BASE_US, T0, kernel_source, make_record

    record = make_record("npsamples0001", variant="np", source=kernel_source("np", 1), path="k/np.py", family=None,
                         started=T0, means=BASE_US)  # fmt: skip
    plain = list(record.samples)
    assert plain, "make_record gives samples"
    record.samples = [(np.int64(c), np.int32(r), np.float64(t)) for c, r, t in plain]
    path = tmp_path / "s.duckdb"
    assert Store(path).finish_run(record) is None
    got = Store(path).run_samples("npsamples0001")
    assert sorted(zip(got["case_idx"], got["rep"], got["time_us"], strict=True)) == sorted(plain)
