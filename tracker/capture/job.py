"""A dashboard job's process: `python -m tracker.capture.job FOLDER/job.json` (tracker.capture.jobs starts it).

It reads the job's request from job.json (`request`: the RunRequest's fields, `gpus`: the scale-out queue's
choice or null), runs it through the library (run_variant, or the queue on a local Dask cluster) and writes, in
the job's folder, progress.json as cases finish; it stops when `cancel` appears there. Its stdout (result.json)
is the run's summary (tracker.capture.record.run_summary), its stderr (log) a line per finished case and any
error, as `error: ...` on the last line. Exit status: 0 passed, 1 any other run status or an internal error,
2 bad input (the run then never started).
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

from tracker import store as store_mod
from tracker.capture.progress import ProgressFile, QueueProgress, TerminalBar
from tracker.capture.record import RunRequest, queue_status, run_summary
from tracker.common.errors import InputError
from tracker.store import Store
from tracker.variants.register import resolve_parent, unique_name_in_store

# What counts as bad input (exit 2, one `error: ...` line), here and for the CLI (the MCP tools return the same
# text as tool errors): the one definition, in the lowest layer that sees the store's errors. Any other exception,
# a plain ValueError or KeyError included, is a bug of ours: an internal error, exit 1.
BAD_INPUT = (InputError, FileNotFoundError, NotADirectoryError, store_mod.StoreError)


def load_request(spec: dict[str, Any]) -> RunRequest:
    """The job's request, validated, named and with its parent resolved, as `run` builds it."""
    req = RunRequest(**spec["request"])
    req.validate()
    Store(req.store).check(write=True)
    if req.name is None:
        req.name = unique_name_in_store(req.path, req.store)
    if req.parent:
        req.parent = resolve_parent(req.store, req.parent, req.suite, req.mode)
    return req


def run_job(job_file: Path) -> int:
    spec = json.loads(job_file.read_text())
    req = load_request(spec)
    folder = job_file.parent
    cancel_file = folder / "cancel"
    pfile = ProgressFile(folder / "progress.json")
    bar = TerminalBar()
    dead_ends = _dead_ends(req)
    if spec.get("gpus") is not None:
        return _run_queue(req, spec["gpus"], bar, pfile, cancel_file)
    if spec.get("ab") is not None:
        return _run_pair(req, spec["ab"], bar, pfile, cancel_file)

    def on_event(event: dict[str, Any]) -> None:
        bar(event)
        pfile(event)

    from tracker.capture.runner import run_variant

    outcome = run_variant(req, on_event, cancel_file.exists)
    bar.close()
    summary = {**run_summary(outcome), "dead_ends": dead_ends}
    pfile.finish(outcome.status, outcome.run_id, summary["error"])
    print(json.dumps(summary, default=str))
    if outcome.pending:
        print(
            f"store {req.store}: {outcome.pending.reason}; the run was saved to {outcome.pending.path}", file=sys.stderr
        )
    return 0 if outcome.status == "passed" else 1


def _dead_ends(req: RunRequest) -> list[dict[str, Any]]:
    """The rejected variants the kernel repeats (its note acknowledges them), each said in the log, as `run`."""
    from tracker.variants.deadends import dead_end_line, dead_ends_of

    try:
        found = dead_ends_of(req.store, req.path, note=req.note)
    except (store_mod.StoreLockedError, store_mod.NotAStoreError) as exc:  # the run copes with a busy store
        print(f"warning: dead ends not checked: {exc}", file=sys.stderr)
        return []
    for d in found:
        print(dead_end_line(d["path"], d), file=sys.stderr)
    return found


def _run_queue(req: RunRequest, gpus: str, bar: TerminalBar, pfile: ProgressFile, cancel_file: Path) -> int:
    """The request on the scale-out queue of a local Dask cluster (`run --gpus`)."""
    from tracker.capture import scaleout

    scaleout.parse_gpus(gpus)
    progress = QueueProgress([bar, pfile], len(req.cases or req.suite_cases()))

    def on_result(outcome) -> None:
        run = outcome.record.run
        print(f"recorded {run.variant} run {run.run_id}: {run.status}", file=sys.stderr)

    lost = None
    try:
        outcomes = scaleout.run_queue(
            [req], gpus=gpus, on_event=progress, on_result=on_result, should_cancel=cancel_file.exists
        )
    except scaleout.SchedulerLost as exc:
        lost, outcomes = str(exc), exc.outcomes
    finally:
        bar.close()
    summaries = [run_summary(o) for o in outcomes]
    status = queue_status([s["status"] for s in summaries]) if not lost else "crashed"
    first = next((s for s in summaries if s["status"] == status), summaries[0] if summaries else None)
    pfile.finish(status, first["run_id"] if first else None, lost or (first or {}).get("error"))
    print(json.dumps(summaries[0] if len(summaries) == 1 else summaries, default=str))
    if lost:
        print(f"error: {lost} (the runs finished before were recorded; the others as crashed)", file=sys.stderr)
    return 0 if status == "passed" else 1


def _run_pair(req: RunRequest, ab: dict[str, Any], bar: TerminalBar, pfile: ProgressFile, cancel_file: Path) -> int:
    """An A/B session (`ab A B`): ab["a"] the baseline as A, the request's kernel (with its family, parent and
    note) the candidate as B, ab["rounds"] rounds on the same cases; the progress counts every case of every run,
    and the summary names the pair and its runs."""
    import dataclasses
    import uuid

    from tracker.capture import sessions

    pair_id = uuid.uuid4().hex[:12]
    candidate = {k: v for k, v in dataclasses.asdict(req).items() if k != "pair_round"}  # set per round
    requests = {
        "A": {**candidate, "path": ab["a"], "name": unique_name_in_store(ab["a"], req.store), "family": None,
              "parent": None, "note": None, "pair_id": pair_id, "pair_side": "A"},
        "B": {**candidate, "pair_id": pair_id, "pair_side": "B"},
    }  # fmt: skip
    rounds = int(ab["rounds"])
    progress = QueueProgress([bar, pfile], 2 * rounds * len(req.cases or req.suite_cases()))

    def on_event(side: str, k: int, event: dict[str, Any]) -> None:
        # each run's cases are counted apart: the worker's events name a case by its index alone, so without the
        # run the count stopped after the first run's cases ("case 5 of 16" for the rest of the session)
        progress({**event, "variant": f"round {k + 1}/{rounds} {side}", "run_id": f"{k}{side}"})

    try:
        outcomes = sessions.interleave(requests, rounds, on_event, cancel_file.exists)
    finally:
        bar.close()
    summaries = [run_summary(o) for o in outcomes]
    status = queue_status([s["status"] for s in summaries])
    sides = {s: [o.run_id for o in outcomes if o.record.run.pair_side == s] for s in ("A", "B")}
    first = next((x for x in summaries if x["status"] == status), summaries[0])
    pfile.finish(status, (sides["B"] or sides["A"])[0], first.get("error"))
    print(json.dumps({"pair_id": pair_id, "status": status, "a_runs": sides["A"], "b_runs": sides["B"],
                      "runs": summaries}, default=str))  # fmt: skip
    return 0 if status == "passed" else 1


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tracker.capture.job FOLDER/job.json", file=sys.stderr)
        return 2
    try:
        return run_job(Path(argv[0]))
    except BAD_INPUT as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug of ours: the traceback goes to the job's log, its last line says what
        traceback.print_exc()
        print(f"error: internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
