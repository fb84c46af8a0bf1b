"""Scale-out queue on a local Dask cluster of CPU worker processes: same records as the sequential path, a worker
that dies mid-run is recorded as crashed while the queue goes on, cancel stops queued and running runs, and
the store is written by the submitting process only (each run exactly once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytest.importorskip("distributed")

from datetime import UTC

from tests.conftest import HANG_SLEEP, free_port, wait_no_process, wait_process
from tracker.capture import scaleout  # noqa: E402
from tracker.capture.cores import core_shares, gpu_local_cores, parse_cpulist, split_cores  # noqa: E402
from tracker.capture.runner import RunRequest, run_variant  # noqa: E402
from tracker.store import Store  # noqa: E402

# One worker takes the whole module, so its Dask cluster (the `cluster` fixture) starts once, not once per worker.
pytestmark = [pytest.mark.timeout(180), pytest.mark.xdist_group("scaleout_cluster")]

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = Path(__file__).resolve().parent / "variants"
REFERENCE = ROOT / "kernels" / "geqrf_reference.py"
RESIDUALS = ("factor_res", "tril_res", "recon_res", "orth_res")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def _req(path: Path, store: Path, **kw) -> RunRequest:
    return RunRequest(path=str(path), suite="smoke", cases=[0, 1], device="cpu", store=str(store), **kw)


def _comparable(store: Path, run_id: str) -> dict:
    """What must match between the queue and the sequential path: everything but timings and ids."""
    run = Store(store).get_run(run_id)
    cases = Store(store).case_results(run_id).sort_values("case_idx").to_dict("records")
    return {
        "variant": run["variant"],
        "path": run["path"],
        "status": run["status"],
        "error": run["error"],
        "suite": run["suite"],
        "gpu": run["gpu"],
        "cases": [
            (c["case_idx"], c["spec"], bool(c["passed"]), c["message"] or "", c["runs"] is not None and c["runs"] > 0)
            for c in cases
        ],
        "residuals": [float("nan") if c[k] is None else c[k] for c in cases for k in RESIDUALS],
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One local cluster of 2 CPU workers (Nanny processes, nthreads=1) shared by the queue tests."""
    pids = tmp_path_factory.mktemp("pids") / "pids.txt"
    os.environ["KB_TEST_PIDS"] = str(pids)  # inherited by the workers: where kills_dask_worker.py says its pid
    try:
        with scaleout.local_cluster(scaleout.GpuChoice(cpu_workers=2)) as address:
            yield address, pids
    finally:
        del os.environ["KB_TEST_PIDS"]


def test_gpu_choice_and_core_split():
    assert scaleout.parse_gpus("all", ["0", "1", "2"]).gpus == ("0", "1", "2")
    assert scaleout.parse_gpus("2", ["0", "1", "2"]).gpus == ("0", "1")
    assert scaleout.parse_gpus("0,2", ["0", "1", "2"]).gpus == ("0", "2")
    assert scaleout.parse_gpus("2,", ["0", "1", "2"]).gpus == ("2",)
    assert scaleout.parse_gpus("3", []) == scaleout.GpuChoice(cpu_workers=3)
    for bad, available in (("all", []), ("4", ["0"]), ("0,5", ["0", "1"]), ("0,0", ["0"]), ("x", ["0"]), ("0", [])):
        with pytest.raises(ValueError):
            scaleout.parse_gpus(bad, available)
    assert split_cores(2, list(range(16))) == [list(range(8)), list(range(8, 16))]
    assert split_cores(3, [0, 1, 2, 3, 4]) == [[0, 1], [2, 3], [4]]
    assert split_cores(2, [5]) == [[5], [5]]


def test_each_gpu_gets_cores_of_its_own_numa_node_when_the_machine_says_which():
    allowed = list(range(32))
    # two nodes of 16 cores; GPU 0 on node 1 and GPU 1 on node 0 (the contiguous split would cross both)
    local = {"0": list(range(16, 32)), "1": list(range(16))}
    assert core_shares(["0", "1"], 2, allowed, local) == [list(range(16, 32)), list(range(16))]
    # four GPUs, two per node: each node's cores are split between its GPUs
    local4 = {"0": list(range(16)), "1": list(range(16)), "2": list(range(16, 32)), "3": list(range(16, 32))}
    assert core_shares(["0", "1", "2", "3"], 4, allowed, local4) == [
        list(range(8)), list(range(8, 16)), list(range(16, 24)), list(range(24, 32))
    ]  # fmt: skip
    # only the allowed cores count (a taskset'd tracker)
    assert core_shares(["0", "1"], 2, list(range(8, 24)), local) == [list(range(16, 24)), list(range(8, 16))]
    # a GPU that cannot be placed, or whose node has none of our cores: the contiguous split, as before
    assert core_shares(["0", "1"], 2, allowed, {"0": list(range(16))}) == split_cores(2, allowed)
    assert core_shares(["0", "1"], 2, list(range(4)), local) == split_cores(2, list(range(4)))
    assert core_shares([], 3, [0, 1, 2], {}) == [[0], [1], [2]]  # CPU workers


def test_cpulists_and_the_sysfs_lookup(tmp_path, monkeypatch):
    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpulist("") == [] and parse_cpulist("0-x") == []
    # a fake nvidia-smi on PATH and a sysfs tree in tmp_path: the real parsing and lookup, end to end
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '0, GPU-aaaa, 00000000:19:00.0'\necho '1, GPU-bbbb, 00000000:9A:00.0'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    for bus, cpus in (("0000:19:00.0", "0-15"), ("0000:9a:00.0", "16-31")):
        (tmp_path / "pci" / bus).mkdir(parents=True)
        (tmp_path / "pci" / bus / "local_cpulist").write_text(cpus + "\n")
    found = gpu_local_cores(["1", "GPU-aaaa"], sys_pci=tmp_path / "pci")
    assert found == {"1": list(range(16, 32)), "GPU-aaaa": list(range(16))}


def test_cli_queue_matches_the_sequential_path_record_for_record(tmp_path, monkeypatch):
    variants = [REFERENCE, VARIANTS / "raises.py", VARIANTS / "wrong_shape.py"]
    queued, sequential = tmp_path / "queued.duckdb", tmp_path / "sequential.duckdb"
    cmd = [sys.executable, "-m", "tracker", "run", *map(str, variants), "--gpus", "2", "--cases", "0,1"]
    cmd += ["--device", "cpu", "--store", str(queued), "--json", "--quiet"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 1, proc.stderr[-3000:]  # two of the three variants fail on purpose
    summaries = json.loads(proc.stdout)
    assert [s["status"] for s in summaries] == ["passed", "failed", "failed"]
    assert "3 run(s) queued on the Dask scheduler" in proc.stderr
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as each queue worker has (one of 2 cores): same LAPACK sums
    for path in variants:
        outcome = run_variant(_req(path, sequential))
        assert outcome.pending is None
    runs_q = Store(queued).list_runs().sort_values("variant")
    runs_s = Store(sequential).list_runs().sort_values("variant")
    assert len(runs_q) == len(runs_s) == 3
    assert sorted(runs_q["run_id"]) == sorted(s["run_id"] for s in summaries)
    for q, s in zip(runs_q["run_id"], runs_s["run_id"], strict=True):
        a, b = _comparable(queued, q), _comparable(sequential, s)
        assert {k: v for k, v in a.items() if k != "residuals"} == {k: v for k, v in b.items() if k != "residuals"}
        assert a["residuals"] == pytest.approx(b["residuals"], rel=1e-6, abs=1e-12, nan_ok=True)
    samples = Store(queued).run_samples(summaries[0]["run_id"])
    assert len(samples) == sum(c["runs"] for c in summaries[0]["cases"]) > 0


def test_a_worker_killed_mid_run_is_recorded_crashed_once_and_the_queue_goes_on(cluster, tmp_path):
    store = tmp_path / "runs.duckdb"
    # Unsandboxed: this kernel plays a machine that dies (it kills its Dask worker), not a hostile kernel.
    reqs = [
        _req(VARIANTS / "kills_dask_worker.py", store, sandbox=False),
        _req(REFERENCE, store),
        _req(REFERENCE, store),
    ]
    address, pids = cluster
    outcomes = scaleout.run_queue(reqs, cluster=address)
    assert [o.status for o in outcomes] == ["crashed", "passed", "passed"], [
        (o.status, Store(store).get_run(o.run_id)["error"]) for o in outcomes
    ]
    (orphan,) = map(int, pids.read_text().split())
    assert not _alive(orphan)  # the kernel of the dead worker was stopped, not left to load the machine
    crashed = Store(store).get_run(outcomes[0].run_id)
    assert crashed["status"] == "crashed"
    # Either the submitter saw the worker die, or the kernel's worker process, orphaned, saved what it had
    # finished under the same run id (the worker's own hygiene); both are one `crashed` row for this run.
    assert "Dask worker running it died" in crashed["error"] or "the tracker process went away" in crashed["error"]
    runs = Store(store).list_runs()
    assert sorted(runs["run_id"]) == sorted(o.run_id for o in outcomes)  # each run exactly once
    assert runs["status"].ne("running").all()
    for o in outcomes[1:]:
        assert len(Store(store).case_results(o.run_id)) == 2


def test_the_local_cluster_takes_no_connection_without_its_key(cluster):
    """On plain TCP any local process, another user's too, could submit code to the workers (which read the
    side-file key), forge records or cancel the queue. The local cluster is mutual TLS with a key held in this
    process: a client with other credentials, or none, gets no task run."""
    endpoint, _ = cluster
    assert endpoint.address.startswith("tls://127.0.0.1:")
    probe = (
        "import sys\n"
        "from distributed import Client\n"
        "from distributed.security import Security\n"
        "address, own = sys.argv[1], sys.argv[2] == 'own'\n"
        "try:\n"
        "    with Client(address, timeout=5, **({'security': Security.temporary()} if own else {})) as c:\n"
        "        print('RAN', c.submit(sum, [1, 2]).result(timeout=5))\n"
        "except Exception as exc:\n"
        "    print('REFUSED', type(exc).__name__)\n"
    )
    tcp = endpoint.address.replace("tls://", "tcp://")
    for address, credentials in ((endpoint.address, "own"), (endpoint.address, "none"), (tcp, "none")):
        proc = subprocess.run([sys.executable, "-c", probe, address, credentials], capture_output=True, text=True,
                              timeout=60)  # fmt: skip
        assert proc.stdout.startswith("REFUSED"), (address, credentials, proc.stdout, proc.stderr[-2000:])
    # the queue's own client, with the cluster's key, still runs tasks
    from distributed import Client

    with Client(endpoint.address, timeout=10, security=endpoint.security) as client:
        assert client.submit(sum, [1, 2]).result(timeout=10) == 3


def test_cancel_stops_queued_and_running_runs_and_kills_their_processes(cluster, tmp_path):
    store = tmp_path / "runs.duckdb"
    reqs = [_req(VARIANTS / "hangs_second.py", store) for _ in range(3)]
    seen: list[float] = []
    start = time.monotonic()

    def on_event(event: dict) -> None:
        if event["event"] == "env":  # the worker imported torch; its kernel hangs in the warm-up next
            seen.append(time.monotonic())

    def should_cancel() -> bool:  # as the dashboard's cancel file would, once a run is stuck in its kernel
        return bool(seen) and time.monotonic() - seen[0] > 3

    outcomes = scaleout.run_queue(reqs, cluster=cluster[0], on_event=on_event, should_cancel=should_cancel)
    assert time.monotonic() - start < 60  # the 300 s sleeps were stopped
    assert [o.status for o in outcomes] == ["cancelled"] * 3
    errors = {Store(store).get_run(o.run_id)["error"] for o in outcomes}
    # CPU workers share one device lock ("cpu"), so a started task may be cancelled while it waits for it
    allowed = {
        "the run was cancelled",
        "cancelled before it started",
        "the run was cancelled while waiting for the device",
    }
    assert errors <= allowed
    assert "cancelled before it started" in errors  # 3 runs on 2 workers: one never started
    runs = Store(store).list_runs()
    assert len(runs) == 3 and runs["status"].eq("cancelled").all()
    logs = [o.record.run.log_tail or "" for o in outcomes]
    assert any("KB-PIDS" in log for log in logs)  # at least one run was inside its hanging kernel
    assert wait_no_process("sleep", HANG_SLEEP) == []


def test_a_dashboard_job_with_gpus_runs_the_queue_and_its_cancel_stops_it(tmp_path):
    from tracker.capture import jobs

    store = tmp_path / "runs.duckdb"
    with pytest.raises(ValueError):
        jobs.start_job(store, "hangs_second.py", suite="smoke", kernels_dir=VARIANTS, gpus="0,x")
    job = jobs.start_job(
        store, "hangs_second.py", suite="smoke", kernels_dir=VARIANTS, cases=[0], device="cpu", gpus="1"
    )
    assert job.spec["gpus"] == "1"
    wait_process("sleep", HANG_SLEEP)  # now inside the hanging kernel's warm-up
    # the job's process is the capture layer's program, not the CLI
    cmdline = psutil.Process(job.spec["pid"]).cmdline()
    assert cmdline[1:] == ["-m", "tracker.capture.job", str(job.folder / "job.json")], cmdline
    assert jobs.cancel(store, job.job_id)
    final = jobs.wait(job, timeout=90)
    assert final["state"] == "finished" and final["status"] == "cancelled", final
    run = Store(store).get_run(final["run_id"])
    assert run["status"] == "cancelled" and run["trigger"] == "ui"
    assert len(Store(store).list_runs()) == 1


def test_a_lost_scheduler_is_a_clear_error_and_keeps_what_finished(tmp_path, monkeypatch):
    store, port = tmp_path / "runs.duckdb", free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="0")
    address = f"tcp://127.0.0.1:{port}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port)]
            + ["--no-dashboard"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
    ]  # fmt: skip
    try:
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1", "--no-dashboard"]
                + ["--resources", "GPU=1"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        )  # fmt: skip
        monkeypatch.setattr(scaleout, "CLIENT_TIMEOUT_S", 5.0)
        reqs = [_req(REFERENCE, store), _req(VARIANTS / "hangs_second.py", store)]
        results: list = []

        def on_result(outcome) -> None:
            results.append(outcome)
            if outcome.status == "passed":
                procs[0].kill()  # the scheduler goes away while the hanging run is still on its worker

        with pytest.raises(scaleout.SchedulerLost, match=f"lost the Dask scheduler at {address}") as lost:
            scaleout.run_queue(reqs, cluster=address, on_result=on_result)
        first, second = lost.value.outcomes
        assert first.status == "passed" and second.status == "crashed"
        assert Store(store).get_run(first.run_id)["status"] == "passed"
        assert Store(store).get_run(second.run_id)["error"] == f"lost the Dask scheduler at {address}"
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_a_cluster_of_ones_own_behind_tls_takes_the_queue_with_dasks_settings_and_says_what_is_missing(tmp_path):
    """What docs/scale-out.md tells users to do: a scheduler and worker started with certificates, the client given
    the same through Dask's configuration. Without them, a sentence that says which settings, not Dask's
    TypeError about an SSLContext."""
    from distributed.security import Security

    made = Security.temporary()
    pem = {"ca.pem": made.tls_ca_file, "cert.pem": made.tls_client_cert, "key.pem": made.tls_client_key}
    for name, text in pem.items():
        (tmp_path / name).write_text(text)
    tls = ["--tls-ca-file", str(tmp_path / "ca.pem"), "--tls-cert", str(tmp_path / "cert.pem")]
    tls += ["--tls-key", str(tmp_path / "key.pem")]
    store, port = tmp_path / "runs.duckdb", free_port()
    address = f"tls://127.0.0.1:{port}"
    env = dict(os.environ, PYTHONPATH=str(ROOT), DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="0")
    quiet = {"env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    run = [sys.executable, "-m", "tracker", "run", str(REFERENCE), "--suite", "smoke", "--cases", "0"]
    run += ["--device", "cpu", "--cluster", address, "--store", str(store), "--json", "--quiet"]
    refused = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "DASK_DISTRIBUTED__COMM__TLS__CA_FILE" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr and "SSLContext" not in refused.stderr
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", str(port), "--protocol", "tls", "--no-dashboard", *tls], **quiet)]  # fmt: skip
    try:
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads",
                                       "1", "--resources", "GPU=1", "--no-dashboard", *tls], **quiet))  # fmt: skip
        client = {"DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(tmp_path / "ca.pem"),
                  "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": str(tmp_path / "cert.pem"),
                  "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": str(tmp_path / "key.pem")}  # fmt: skip
        proc = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=150, env=dict(env, **client))
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json.loads(proc.stdout)  # one file: one summary, as a plain run prints
        assert summary["status"] == "passed" and f"queued on the Dask scheduler at {address}" in proc.stderr
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_only_the_scale_out_module_imports_the_engine():
    importers = [
        str(path.relative_to(ROOT))
        for folder in ("tracker", "pages")
        for path in (ROOT / folder).rglob("*.py")
        if any(
            line.lstrip().startswith(("import dask", "from dask", "import distributed", "from distributed"))
            for line in path.read_text().splitlines()
        )
    ]
    assert importers == ["tracker/capture/scaleout.py"]


def test_the_queue_starts_unknown_variants_then_the_longest_by_their_history(tmp_path):
    from datetime import datetime, timedelta

    from conftest import make_record

    store = tmp_path / "s.duckdb"
    files = {name: tmp_path / f"{name}.py" for name in ("quick", "slow", "edited", "fresh")}
    for name, path in files.items():
        path.write_text(REFERENCE.read_text() + f"\n# {name}\n")
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    history = [("quick", 5, "smoke"), ("quick", 7, "smoke"), ("slow", 60, "smoke"), ("slow", 300, "qr_v2")]
    history += [("edited", 90, "smoke")]
    for i, (name, seconds, suite) in enumerate(history):
        rec = make_record(
            f"past{i:08d}", variant=name, source=files[name].read_text(), path=str(files[name]), family=None,
            started=t0, means=None, suite=suite, mode="benchmark", status="passed",
        )  # fmt: skip
        rec.run.finished_at = t0 + timedelta(seconds=seconds)
        Store(store).finish_run(rec)
    files["edited"].write_text(files["edited"].read_text() + "# changed since its last run\n")
    requests = [
        RunRequest(path=str(files[n]), suite="smoke", store=str(store)) for n in ("quick", "slow", "edited", "fresh")
    ]
    records = [scaleout.new_record(r) for r in requests]
    names = {rec.run.run_id: rec.run.variant for rec in records}
    # never run first (it also compiles); then edited (90 s under its old source: the name is the fallback),
    # slow (60 s; its 300 s run was another suite), quick (6 s)
    assert [names[r] for r in scaleout.longest_first(requests, records)] == ["fresh", "edited", "slow", "quick"]
