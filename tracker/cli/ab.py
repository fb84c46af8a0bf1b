"""`ab A B`: two variants timed interleaved in one session on one device, and judged by a paired test.

Per round one tracker run of each, A then B in even rounds and B then A in odd ones (so neither side always
runs second, on a device the other just warmed), on the same cases and inputs. The runs are stored as usual and
linked as a pair (runs.pair_id, pair_side, pair_round); each case is judged on its per-round ratios B/A
(tracker.analysis.stats.paired_case), so drift of the machine between rounds, which moves both sides, cancels.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tracker.capture.record import DEFAULT_ROUNDS
from tracker.cli.common import FRESH_COMPILE_HELP, UsageError, fraction, int64, parse_cases, positive_seconds
from tracker.store import Store


def _target(store: str, what: str, folder: Path) -> dict[str, Any]:
    """A file, or a stored variant's source (by any recorded name: the content it stands for, a file's newest
    snapshot) written to a temporary copy, recorded under that name and the name's file."""
    if Path(what).is_file():
        return {"path": what, "name": None, "recorded_path": None}
    named = {n["name"]: n for n in Store(store).variant_names()} if Path(store).exists() else {}
    if what not in named:
        raise UsageError(f"{what} is neither a kernel file nor a variant in {store}")
    row = named[what]
    source = Store(store).variant_source(row["sha256"])
    copy = folder / f"{len(list(folder.iterdir()))}_{Path(str(row['path'] or what)).name}"
    copy = copy if copy.suffix == ".py" else copy.with_suffix(".py")
    copy.write_text(source or "")
    return {"path": str(copy), "name": what, "recorded_path": row["path"] or what}


def _default_suite(args: argparse.Namespace) -> None:
    """As `run` chooses: the full suite with a GPU, smoke without one."""
    if args.suite is not None:
        return
    from tracker.capture.envinfo import gpu_available
    from tracker.workloads import get_workload

    try:
        args.suite = get_workload(args.problem).default_suite(args.device != "cpu" and gpu_available())
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _session(args: argparse.Namespace, sources: dict[str, str]) -> tuple[str, int]:
    """The session's pair id and first round: a new session, or with --resume the stored session PAIR_ID, which
    goes on after its last stored round. Its sides must have run the same sources, its runs the same cases."""
    from tracker.common.gitinfo import source_hash

    if args.resume is None:
        return uuid.uuid4().hex[:12], 0
    pair = Store(args.store).pair_runs(args.resume) if Path(args.store).exists() else None
    if pair is None or pair["runs"].empty:
        raise UsageError(f"--resume {args.resume}: no paired session of that id in {args.store}")
    runs = pair["runs"]
    for side, path in sources.items():
        if not Path(path).is_file():
            raise UsageError(f"{path}: no such kernel file")
        stored = set(runs.loc[runs["pair_side"] == side, "variant_sha256"])
        if stored != {source_hash(Path(path).read_text())}:
            raise UsageError(f"--resume {args.resume}: side {side} of that session ran another source than {path}")
    wanted = parse_cases(args.cases)
    ran = set(pair["cases"]["case_idx"])
    if wanted is not None and ran and ran != set(wanted):
        raise UsageError(f"--resume {args.resume}: that session ran cases {','.join(map(str, sorted(ran)))}")
    return args.resume, int(runs["pair_round"].max()) + 1


def cmd_fidelity(args: argparse.Namespace) -> int:
    """`fidelity FILE --problem DIR`: the contest's method (A) and the tracker's (B) alternated on one device."""
    from tracker.capture import sessions
    from tracker.capture.runner import RunRequest

    Store(args.store).check(write=True)
    if args.rounds < (1 if args.resume else 2):
        raise UsageError("--rounds must be at least 2 (1 with --resume)")
    _default_suite(args)
    pair_id, first_round = _session(args, {"A": args.file, "B": args.file})
    base = dict(
        path=args.file, suite=args.suite, mode="benchmark", cases=parse_cases(args.cases), seed=args.seed,
        timeout=args.timeout, store=args.store, device=args.device, problem=args.problem,
        sandbox=not args.no_sandbox, compile_cache=not args.fresh_compile, pair_id=pair_id,
    )  # fmt: skip
    requests = {"A": {**base, "method": "contest", "pair_side": "A"}, "B": {**base, "pair_side": "B"}}
    try:
        for req in requests.values():
            RunRequest(**req).validate()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    stopped = not sessions.run_session(requests, args.rounds, first_round)
    return report({**fidelity_doc(args.store, pair_id), "stopped": stopped}, args.json, print_fidelity)


def print_fidelity(doc: dict[str, Any]) -> None:
    from tracker.cli.common import interval_text, print_columns, ratio_text, time_columns

    cs = doc["cases"]
    print(
        f"fidelity session {doc['pair_id']}: {doc['rounds']} rounds; contest method runs "
        f"{', '.join(doc['contest_runs'])}"
    )
    print_columns(
        [
            ("case", [c["case"] for c in cs]),
            *time_columns(
                [
                    ("contest min", [c["contest_min_us"] for c in cs]),
                    ("contest max", [c["contest_max_us"] for c in cs]),
                    ("tracker median", [c["tracker_median_us"] for c in cs]),
                ]
            ),
            ("inside", [{True: "yes", False: "no", None: "-"}[c["inside"]] for c in cs]),
            ("tracker/contest", [ratio_text(c["ratio"]) for c in cs]),
            ("95% CI", [interval_text(c["ci_low"], c["ci_high"]) for c in cs]),
            ("reads", [c["reads"] for c in cs]),
        ]
    )


def report(doc: dict[str, Any], as_json: bool, print_table: Callable[[dict[str, Any]], None]) -> int:
    """A session's end, cut or not: its table (or JSON), then 143 if SIGTERM stopped it, else 0 when every run
    passed."""
    if as_json:
        print(json.dumps(doc, default=str))
    else:
        print_table(doc)
    if doc["stopped"]:
        print(
            f"stopped by SIGTERM in round {doc['rounds']}: the table is what the stored runs say (a cancelled run "
            "counts with the cases it finished)",
            file=sys.stderr,
        )
        return 128 + signal.SIGTERM
    return 0 if doc["statuses"] == ["passed"] else 1


def fidelity_doc(store: str, pair_id: str) -> dict[str, Any]:
    """What `fidelity --json` prints: per case the contest method's min..max of the round means, the tracker's
    median of its round means, and whether it lies inside."""
    from tracker.analysis.series import fidelity_cases

    pair = Store(store).pair_runs(pair_id)
    runs = pair["runs"].to_dict("records")
    return {
        "pair_id": pair_id,
        "contest_runs": [r["run_id"] for r in runs if r["pair_side"] == "A"],
        "tracker_runs": [r["run_id"] for r in runs if r["pair_side"] == "B"],
        "rounds": len({r["pair_round"] for r in runs}),
        "statuses": sorted({r["status"] for r in runs}),
        "cases": fidelity_cases(pair),
    }


def pair_doc(store: str, pair_id: str, min_effect: float = 0.02) -> dict[str, Any]:
    """What `ab --json` prints, and `compare --json` under `pair` for two runs of one session."""
    from tracker.analysis.series import paired_cases

    pair = Store(store).pair_runs(pair_id)
    runs = pair["runs"].to_dict("records")
    sides = {s: [r["run_id"] for r in runs if r["pair_side"] == s] for s in ("A", "B")}
    names = {s: next((r["variant"] for r in runs if r["pair_side"] == s), None) for s in ("A", "B")}
    cases = [asdict(c) for c in paired_cases(pair, min_effect=min_effect)]
    return {
        "pair_id": pair_id,
        "a": {"variant": names["A"], "runs": sides["A"]},
        "b": {"variant": names["B"], "runs": sides["B"]},
        "rounds": len({r["pair_round"] for r in runs}),
        "statuses": sorted({r["status"] for r in runs}),
        "cases": cases,
    }


def _ratio_cell(case: dict[str, Any]) -> str:
    """The judged ratio, or the one round's ratio marked as such (PairedCase.single_round_ratio)."""
    from tracker.analysis.stats import PairedCase
    from tracker.cli.common import ratio_text

    single = PairedCase(**case).single_round_ratio
    return ratio_text(case["ratio"]) if single is None else f"{ratio_text(single)} (1 round)"


def print_pair(doc: dict[str, Any]) -> None:
    from tracker.cli.common import interval_text, print_columns

    print(
        f"paired session {doc['pair_id']}: A {doc['a']['variant']} vs B {doc['b']['variant']}, {doc['rounds']} "
        + ("round" if doc["rounds"] == 1 else "rounds")
    )
    cs = doc["cases"]
    print_columns(
        [
            ("", [c["mark"] for c in cs]),
            ("case", [c["case"] for c in cs]),
            ("rounds", [str(c["rounds"]) for c in cs]),
            ("B/A", [_ratio_cell(c) for c in cs]),
            ("95% CI", [interval_text(c["ci_low"], c["ci_high"]) for c in cs]),
            ("why", [c["reason"] for c in cs]),
        ]
    )


def cmd_ab(args: argparse.Namespace) -> int:
    from tracker.capture import sessions
    from tracker.capture.runner import RunRequest

    Store(args.store).check(write=True)
    if args.rounds < (1 if args.resume else 2):
        raise UsageError("--rounds must be at least 2 (1 with --resume): a paired test needs two ratios")
    _default_suite(args)
    with tempfile.TemporaryDirectory(prefix="kb-ab-") as tmp:
        targets = {"A": _target(args.store, args.a, Path(tmp)), "B": _target(args.store, args.b, Path(tmp))}
        pair_id, first_round = _session(args, {side: t["path"] for side, t in targets.items()})
        requests = {}
        for side, t in targets.items():
            requests[side] = dict(
                path=t["path"], name=t["name"], recorded_path=t["recorded_path"], suite=args.suite, mode="benchmark",
                cases=parse_cases(args.cases), seed=args.seed, timeout=args.timeout, store=args.store,
                device=args.device, problem=args.problem, sandbox=not args.no_sandbox,
                compile_cache=not args.fresh_compile, pair_id=pair_id, pair_side=side,
            )  # fmt: skip
        try:
            for side in requests:
                RunRequest(**requests[side]).validate()
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        stopped = not sessions.run_session(requests, args.rounds, first_round)
    return report({**pair_doc(args.store, pair_id, args.min_effect), "stopped": stopped}, args.json, print_pair)


def session_options(problem_help: str, *, problem_required: bool) -> argparse.ArgumentParser:
    """The options `ab` and `fidelity` share: what each run of the session runs, where, and for how long."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="rounds (default %(default)s, at least 2)")
    p.add_argument("--cases", help="only these case numbers, e.g. 3,7")
    p.add_argument("--suite", help="the suite; default: the (problem's) full suite with a GPU, smoke without one")
    p.add_argument("--problem", metavar="DIR", required=problem_required, help=problem_help)
    p.add_argument("--seed", type=int64, help="hidden seed for every case")
    p.add_argument(
        "--device", default="auto", choices=("auto", "cpu", "cuda"), help="where both run (default %(default)s)"
    )
    p.add_argument("--timeout", type=positive_seconds, default=900.0, help="seconds per run (default %(default)s)")
    p.add_argument("--no-sandbox", action="store_true", help="run the workers without bubblewrap")
    p.add_argument("--fresh-compile", action="store_true", help=FRESH_COMPILE_HELP)
    p.add_argument(
        "--resume",
        metavar="PAIR_ID",
        help="add --rounds rounds to this stored session (one cut by a deadline, say): the same sources and cases",
    )
    return p


def register(sub, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "ab",
        parents=[common, session_options("a GPU Mode problem folder; default: qr_v2", problem_required=False)],
        help="time two variants interleaved in one session and judge each case by a paired test",
        description="Per round one run of each variant (A then B, then B then A), the same cases and inputs; each "
        "case is judged by a paired t-test on the per-round ratios B/A of the means: - faster, + slower, ~ within "
        "noise, x not comparable.",
    )
    p.add_argument("a", help="variant A: a kernel file or a stored variant name")
    p.add_argument("b", help="variant B: a kernel file or a stored variant name")
    p.add_argument("--min-effect", type=fraction, default=0.02, help="smallest ratio change that counts (0.02)")
    p.set_defaults(func=cmd_ab)

    p = sub.add_parser(
        "fidelity",
        parents=[
            common,
            session_options("a GPU Mode problem folder with eval.py and files:", problem_required=True),
        ],
        help="alternate the contest's method and the tracker's on one device: is the tracker inside the contest?",
        description="Per round one run of FILE by the problem folder's own harness (--method contest) and one by "
        "the tracker, alternating which goes first; per case the contest method's min..max of the means, the "
        "tracker's median, and whether it lies inside. The runs are stored as a pair: compare shows it.",
    )
    p.add_argument("file", help="the kernel file")
    p.set_defaults(func=cmd_fidelity)
