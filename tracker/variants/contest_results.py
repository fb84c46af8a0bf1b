"""Import the contest harness's result stream (`key: value` lines) as a run of a variant on a given GPU.

Keys: `benchmark-count`, `benchmark.N.spec|runs|mean|std|err|best|worst` (times in nanoseconds), `check`,
`test.N.spec|status|error`. A spec is `batch: 20; n: 32; cond: 1; seed: 43214; case: dense`.
"""

from __future__ import annotations

import math
import os
import re
import socket
import uuid
from pathlib import Path
from typing import Any

from tracker import store as store_mod
from tracker.common.errors import InputError
from tracker.common.gitinfo import head_commit, source_hash
from tracker.common.vocabulary import DEFAULT_WORKLOAD
from tracker.variants.naming import variant_name
from tracker.variants.register import recorded_path
from tracker.workloads.qr_v2.suites import cases_for, get_suite

_LINE = re.compile(r"^\s*([\w.-]+)\s*:\s*(.*?)\s*$")
NS_PER_US = 1000.0


def parse_stream(text: str) -> dict[str, str]:
    """The `key: value` lines of a result stream (other lines ignored; a later key wins)."""
    out = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def parse_spec(spec: str) -> dict[str, Any]:
    fields = dict(part.split(":", 1) for part in spec.split(";") if ":" in part)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    try:
        return {
            "batch": int(fields["batch"]),
            "n": int(fields["n"]),
            "cond": float(fields.get("cond", 1)),
            "seed": int(fields["seed"]) if "seed" in fields else None,
            "case": fields.get("case", "dense"),
        }
    except (KeyError, ValueError) as exc:  # the stream is the user's file: a bad one is bad input
        raise InputError(f"the case spec {spec!r} is malformed ({type(exc).__name__}: {exc})") from None


def _number(kv: dict[str, str], key: str, default: str | None = None) -> float | None:
    """The stream's value of `key` as a number (None when absent); InputError when it is not one."""
    value = kv.get(key, default)
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        raise InputError(f"{key} is not a number: {value!r}") from None
    if not math.isfinite(number) or number < 0:  # counts and times: NaN, inf or a negative one is no result
        raise InputError(f"{key} is not a finite number of at least 0: {value!r}")
    return number


def _shape(case: Any) -> tuple:
    """A suite case's shape, seed aside: what a stream's case is matched by."""
    return case.batch, case.n, case.cond, case.case


def _row_shape(row: dict[str, Any]) -> tuple:
    return row["batch"], row["n"], row["cond"], row["case_name"]


def _plausible(row: dict[str, Any], suite_cases) -> None:
    """InputError for a time no device reaches for this case's work (the workload's floor): a stream is data, and
    a 1 ns mean would top the board."""
    from tracker.workloads import get_workload
    from tracker.workloads.base import floor_us

    case = next((c for c in suite_cases if _shape(c) == _row_shape(row)), None)
    if case is None:
        return  # a case the suite does not have: recorded, never part of a geomean
    floor = floor_us(*get_workload(DEFAULT_WORKLOAD).work(case), "cuda")
    for key in ("mean_us", "best_us"):
        if row.get(key) is not None and row[key] < floor:
            raise InputError(f"{row['spec']}: a {key[:-3]} of {row[key]:.3g} us is less than its work takes on any "
                             f"device ({floor:.3g} us)")  # fmt: skip


def _case_row(kind: str, idx: int, spec: dict[str, Any], suite_cases) -> dict[str, Any]:
    """A case_results row; case_idx is the suite's index of the same shape (seed aside), else the stream's."""
    same = [i for i, c in enumerate(suite_cases) if _shape(c) == (spec["batch"], spec["n"], spec["cond"], spec["case"])]
    seed = spec["seed"] if spec["seed"] is not None else 0
    return {
        "case_idx": same[0] if len(same) == 1 else idx, "kind": kind, "batch": spec["batch"], "n": spec["n"],
        "cond": spec["cond"], "seed": seed, "case_name": spec["case"],
        "spec": f"{spec['batch']}x{spec['n']} c{spec['cond']:g} s{seed} {spec['case']}",
    }  # fmt: skip


def build_import(
    text: str,
    variant_path: str,
    *,
    gpu: str,
    mode: str = "leaderboard",
    suite: str = DEFAULT_WORKLOAD,
    note: str | None = None,
) -> store_mod.RunRecord:
    """A complete run record from a result stream; raises ValueError for a stream without results."""
    kv = parse_stream(text)
    file = Path(variant_path)
    source = file.read_text()
    path, root = recorded_path(file)
    commit = head_commit(root) if root is not None else None
    timed_mode = mode != "test"
    suite_cases = cases_for(get_suite(suite), "benchmark" if timed_mode else "test")
    cases: list[dict[str, Any]] = []
    if timed_mode:
        count = int(_number(kv, "benchmark-count", "0") or 0)
        for i in range(count):
            spec = kv.get(f"benchmark.{i}.spec")
            if spec is None:
                raise InputError(f"benchmark.{i}.spec is missing")
            row = _case_row("benchmark", i, parse_spec(spec), suite_cases)
            if any(c["case_idx"] == row["case_idx"] for c in cases):
                raise InputError(f"benchmark.{i}.spec ({row['spec']}) falls on the case of an earlier one")
            mean = kv.get(f"benchmark.{i}.mean")
            row["passed"] = mean is not None
            row["message"] = "" if mean is not None else kv.get(f"benchmark.{i}.error", "no timing")
            if mean is not None:
                row["runs"] = int(_number(kv, f"benchmark.{i}.runs", "0"))
                for key in ("mean", "std", "err", "best", "worst"):
                    value = _number(kv, f"benchmark.{i}.{key}")
                    row[f"{key}_us"] = value / NS_PER_US if value is not None else None
                _plausible(row, suite_cases)
            cases.append(row)
    tests = sorted({int(k.split(".")[1]) for k in kv if re.match(r"test\.\d+\.", k)})
    if not timed_mode:
        for i in tests:
            row = _case_row("test", i, parse_spec(kv[f"test.{i}.spec"]), suite_cases)
            row["passed"] = kv.get(f"test.{i}.status", "").lower() == "pass"
            row["message"] = kv.get(f"test.{i}.error", "")
            cases.append(row)
    if not cases:
        raise InputError("the result stream has no benchmark or test results")
    check = kv.get("check", "").lower()
    failed = [c["spec"] for c in cases if not c["passed"]]
    status = "passed" if not failed and check in ("pass", "") else "failed"
    means = [c.get("mean_us") for c in cases]
    # every case of the suite, each once: as many made-up shapes would have made a geomean that topped the board
    suite_shapes = sorted(_shape(c) for c in suite_cases)
    stream_shapes = sorted(_row_shape(c) for c in cases)
    whole = stream_shapes == suite_shapes and all(means) and timed_mode and status == "passed"
    now = store_mod.now()
    sha = source_hash(source)
    name = variant_name(path)
    run = {
        "run_id": uuid.uuid4().hex[:12], "variant_sha256": sha, "variant": name, "path": path, "note": note,
        "status": status, "suite": suite, "mode": mode, "started_at": now, "finished_at": now,
        "host": socket.gethostname(), "pid": os.getpid(), "device": "cuda", "gpu": gpu, "git_commit": commit,
        "trigger": "import", "geomean_us": math.exp(sum(map(math.log, means)) / len(means)) if whole else None,
        "error": (f"{len(failed)} case(s) failed: {', '.join(failed)}" if failed else None)
        or (None if check in ("pass", "") else f"check: {kv.get('check')}"),
        "warnings": "imported from the contest's result stream: no samples",
    }  # fmt: skip
    variant = {"sha256": sha, "name": name, "path": path, "source": source, "first_seen": now}
    return store_mod.RunRecord(run=store_mod.RunRow(**run), variant=variant, cases=cases)
