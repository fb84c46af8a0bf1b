"""The contest's own method as a run method: `run FILE --problem DIR --method contest`.

The run folder is laid out as the contest's runner lays it out, from task.yml's `files:` list (each `{name,
source}`, a source relative to the problem folder, `@SUBMISSION@` for the kernel under its expected name); the
cases go in a file of `key: value; key: value` lines; the folder's own `eval.py MODE FILE` runs in the same
sandbox as the tracker's worker, with its result channel on an inherited fd (`POPCORN_FD`) and the hidden seed
in `POPCORN_SEED`. What it reports on that channel (per case spec, runs, mean, std, err, best, worst in ns,
status, error; the overall `check`) becomes the run's cases. The harness is the problem folder's code, not the
tracker's: its verdicts stand as it reports them, which is what this method is for (what the contest would say).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tracker import store as store_mod
from tracker.capture import compile_cache, sandbox, stopping
from tracker.common.errors import InputError
from tracker.common.files import read_log
from tracker.common.processes import child_env, descendants, end_processes
from tracker.variants.contest_results import NS_PER_US, parse_stream

HARNESS = "eval.py"
SUBMISSION = "@SUBMISSION@"
CASES_FILE = "kernelbeam-cases.txt"  # beside the harness; a task.yml naming the same file is refused
STAT_FIELDS = ("runs", "mean", "std", "err", "best", "worst")
MAX_CHANNEL_BYTES = 16 << 20  # a harness that floods its channel is cut off there
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def layout(problem: Path, submission: Path, dest: Path) -> dict[str, str]:
    """Copy task.yml's `files:` into `dest`; returns {name: sha256} of every harness file (all but the kernel)."""
    spec = yaml.safe_load((problem / "task.yml").read_text()) or {}
    files = spec.get("files") if isinstance(spec, dict) else None
    if not isinstance(files, list) or not files:
        raise InputError(f"{problem / 'task.yml'} has no `files:` list: the contest's runner lays out its run from it")
    hashes: dict[str, str] = {}
    names = []
    for entry in files:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry.get("source"):
            raise InputError(f"{problem / 'task.yml'}: each of `files:` is {{name: ..., source: ...}}, not {entry!r}")
        name, source = entry["name"], str(entry["source"])
        rel = Path(name)
        if rel.is_absolute() or ".." in rel.parts or name in (CASES_FILE, ""):
            raise InputError(f"{problem / 'task.yml'}: a run folder file may not be named {name!r}")
        if source != SUBMISSION and (
            Path(source).is_absolute()
            or store_mod.is_side_key(problem / source)
            or (problem / source).resolve().parts[1:2] in (("proc",), ("sys",), ("dev",))
        ):
            # a source is the problem folder's (or beside it, as the contest's ../../utils.py): never the key the
            # sandbox hides or a kernel-interface file (/proc/self/environ: the runner's token), copied into the run
            # folder where the kernel reads it
            raise InputError(f"{problem / 'task.yml'}: {name} comes from {source}, which is not a file of the problem")
        src = submission if source == SUBMISSION else (problem / source)
        if not src.is_file():
            raise InputError(f"{problem / 'task.yml'}: {name} comes from {source}, which is not a file")
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest / rel)
        names.append(name)
        if source != SUBMISSION:
            hashes[name] = sha256_file(src)
    if HARNESS not in names:
        raise InputError(f"{problem / 'task.yml'}: `files:` has no {HARNESS}, the harness this method runs")
    if SUBMISSION not in {str(e["source"]) for e in files}:
        raise InputError(f"{problem / 'task.yml'}: `files:` does not say where the submission goes ({SUBMISSION})")
    return hashes


def case_lines(cases) -> str:
    """The runner's tests/benchmarks file: one `key: value; key: value` line per case."""
    return "".join("; ".join(f"{k}: {v}" for k, v in case.args.items()) + "\n" for case in cases)


def _command(
    req, workdir: Path, private: Path, channel_fd: int, token: str, cache: compile_cache.Binding
) -> tuple[list[str], dict, str]:
    argv = [sys.executable, HARNESS, "leaderboard" if req.mode == "leaderboard" else req.mode, CASES_FILE]
    inner = {"POPCORN_FD": str(channel_fd), "PYTHONUNBUFFERED": "1", **cache.env}
    if req.seed is not None:
        inner["POPCORN_SEED"] = str(req.seed)
    name, value = token.split("=", 1)
    inner[name] = value  # how the harness's own children are found and ended without a sandbox
    hidden = sandbox.hidden_from_kernel(private, req.store)
    return sandbox.wrap(argv, workdir, inner, hidden, list(cache.writable), sandboxed=req.sandbox)


def drive(req, record, events: list[dict[str, Any]], should_cancel, device: str):
    """Lay out the run folder, run the harness under the compile budget and then the timeout, end every process
    it started, and turn its report into case events. Returns (status, error, returncode, log_tail, compile_s,
    forged): the tuple of runner._drive_worker. `compile_s` is the time to the first case's result (import,
    compile and that case), the best the harness's channel lets us see."""
    problem = req.workload().folder
    workdir = sandbox.run_folder("kernelbeam-")
    private = sandbox.run_folder("kernelbeam-private-")
    (workdir / "tmp").mkdir()
    cases = req.suite_cases()
    indices = req.cases or list(range(len(cases)))
    workload = req.workload()
    log_path = private / "harness.log"
    token = f"KERNELBEAM_RUN_TOKEN={secrets.token_hex(8)}"
    proc = cache = None
    status = error = compile_s = None
    text = b""
    try:
        record.run.harness_files = json.dumps(layout(problem, Path(req.path), workdir))
        (workdir / CASES_FILE).write_text(case_lines(cases[i] for i in indices))
        store_mod.side_key()  # exists before the sandbox masks it
        read_fd, write_fd = os.pipe()
        cache = compile_cache.bind(record.run.variant_sha256, req.compile_cache)
        record.run.compile_cache = cache.state
        command = functools.partial(_command, req, workdir, private, write_fd, token, cache)
        how = sandbox.how_it_runs(req.sandbox)
        record.run.sandbox = how
        in_sandbox = sandbox.contained(how)
        seen: set[int] = set()
        with open(log_path, "wb") as log:
            proc, _ = sandbox.start(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=workdir, pass_fds=(write_fd,), start_new_session=True)  # fmt: skip
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        start = time.monotonic()
        deadline, last_scan = start + req.compile_timeout, 0.0
        folder = sandbox.FolderWatch(workdir)
        old_term = stopping.catch()
        try:
            while True:
                finished = proc.poll() is not None
                try:
                    while chunk := os.read(read_fd, 1 << 16):
                        text = (text + chunk)[:MAX_CHANNEL_BYTES]
                except BlockingIOError:
                    pass
                if compile_s is None and _first_result(text):
                    compile_s = time.monotonic() - start
                    deadline = time.monotonic() + req.timeout
                if finished:
                    break
                now = time.monotonic()
                if not in_sandbox and now - last_scan > 0.5:  # remember the harness's children before they detach
                    seen |= descendants(proc.pid)
                    last_scan = now
                if (excess := folder.excess()) is not None:
                    status, error = "failed", excess
                    break
                if now > deadline:
                    if compile_s is None:
                        status, error = (
                            "failed",
                            f"compiling took longer than {req.compile_timeout:g} s (--compile-timeout)",
                        )
                    else:
                        status, error = "timeout", f"the run exceeded its timeout of {req.timeout:g} s"
                    break
                if should_cancel is not None and should_cancel():
                    status, error = "cancelled", "the run was cancelled"
                    break
                time.sleep(0.1)
        except KeyboardInterrupt:
            status, error = "cancelled", "the run was cancelled"
        except stopping.Stopped:
            status, error = "cancelled", "the tracker was stopped by SIGTERM"
        finally:
            stopping.release(old_term)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
            if not in_sandbox:
                end_processes(proc.pid, seen, token)
            os.close(read_fd)
        returncode = proc.returncode
        if in_sandbox and returncode is not None and 128 < returncode < 160:
            returncode = 128 - returncode
    except ValueError as exc:
        return "failed", str(exc), None, "", None, 0
    finally:
        log_tail = read_log(log_path)
        if cache is not None:
            record.run.warn(compile_cache.trim(cache))
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)
    report = parse_stream(text.decode(errors="replace"))
    status, error = _cases(report, req, workload, cases, indices, events, status, error, returncode)
    events.append({"event": "env", **_environment(device)})
    return status, error, returncode, log_tail, compile_s, 0


def _first_result(text: bytes) -> bool:
    report = parse_stream(text.decode(errors="replace"))
    return any(f"{kind}.0.{field}" in report for kind in ("test", "benchmark") for field in ("status", "runs"))


def _number(value: str | None) -> float | None:
    try:
        x = float(value) if value is not None else None
    except ValueError:
        return None
    return x if x is not None and x == x and abs(x) != float("inf") else None


def _cases(report, req, workload, cases, indices, events, status, error, returncode):
    """Case events from the harness's report; the run's (status, error) where the report settles them."""
    kind = "test" if req.mode == "test" else "benchmark"
    lines = case_lines(cases[i] for i in indices).splitlines()
    reported = 0
    for n, idx in enumerate(indices):
        key = f"{kind}.{n}"
        case = cases[idx] if req.seed is None else workload.hidden_seed(cases[idx], req.seed)
        if f"{key}.spec" in report:
            reported += 1
            message = report.get(f"{key}.error") or report.get(f"{key}.message") or ""
        else:  # a harness stops at the first failure, or hung or died before this case: recorded, not passed
            message = "the harness did not report this case"
        event: dict[str, Any] = {
            "event": "case_done", "case_idx": idx, "spec": case.spec, "samples": [],
            "case": {**case.to_dict(), "inputs": 1 if req.mode == "test" else case.input_count()},
            "columns": workload.case_columns(case),
        }  # fmt: skip
        event["flops"], event["bytes"] = workload.work(cases[idx])
        if f"{key}.spec" not in report:
            passed = False
        elif report[f"{key}.spec"] != lines[n]:
            message = f"the harness reported case {n} as {report[f'{key}.spec']!r}; it was given {lines[n]!r}"
            passed = False
        elif kind == "test":
            passed = report.get(f"{key}.status") == "pass"
        else:
            stats = {f: _number(report.get(f"{key}.{f}")) for f in STAT_FIELDS}
            passed = report.get(f"{key}.status") != "fail" and all(v is not None for v in stats.values())
            if passed and not (stats["runs"] >= 1 and stats["mean"] > 0 and stats["best"] > 0):
                passed, message = False, "the harness reported timings that are not positive"
            if passed:
                event.update(runs=int(stats["runs"]), **{f"{f}_us": stats[f] / NS_PER_US for f in STAT_FIELDS[1:]})
            elif not message:
                message = "the harness reported no timings for this case"
        event.update(passed=passed, message=message)
        events.append(event)
    if status is not None:
        return status, error
    check = report.get("check")
    if check is None:
        why = f"exit {returncode}" if returncode is not None else "no exit"
        return "crashed" if returncode and returncode < 0 else "failed", f"the harness reported no check ({why})"
    # complete_record: the cases decide, as for the tracker's method; and there is no profile stage to finish
    # (without "done" every contest run was marked "profile unfinished")
    events.extend([{"event": "timing_done"}, {"event": "done"}])
    if reported < len(indices) and check == "pass":
        return "failed", f"the harness reported {reported} of {len(indices)} cases and check: pass"
    if check != "pass" and all(e.get("passed") for e in events if e.get("event") == "case_done"):
        return "failed", f"the harness reported check: {check} (exit {returncode})"
    return None, None


def _environment(device: str) -> dict[str, Any]:
    """The machine as the worker would describe it, read in a short process of its own (the runner itself
    never makes a CUDA context, which would share the device)."""
    code = (
        "import json, torch; from tracker.capture.envinfo import capture_environment; "
        f"print(json.dumps(capture_environment(torch.device({device!r}))))"
    )
    env = child_env(_PACKAGE_ROOT)
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return {"device": device, "gpu": "CPU" if device == "cpu" else None}
