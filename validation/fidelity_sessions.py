"""Tables of `tracker fidelity` sessions from the JSON documents `tracker fidelity --json` wrote
(validation/h200_fidelity.sh): per session and case, the contest method's round means (min..max), the tracker's
round means and their median, whether the median lies inside, and the paired ratio tracker / contest; then,
per case over every session given, the paired test on all their rounds pooled (is the tracker off at all, where
one session's five rounds of a launch-bound case are too few to say).

    python validation/fidelity_sessions.py DIR [DIR ...]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from tracker.analysis.series import FIDELITY_TOLERANCE, READS
from tracker.analysis.stats import paired_case
from tracker.cli.ab import fidelity_doc
from tracker.cli.common import interval_text
from tracker.store.transfer import import_runs


def _sessions(dirs: list[Path]) -> list[tuple[str, dict]]:
    docs = []
    for d in dirs:
        for path in sorted(d.glob("*.json")):
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                print(f"{path}: no JSON (the session did not finish)", file=sys.stderr)
                continue
            if isinstance(doc, dict) and "contest_runs" in doc:
                docs.append((path.stem, _current(d, doc)))
    return docs


def _current(folder: Path, doc: dict) -> dict:
    """A document written before `fidelity --json` carried the per-round ratios, made again by the tracker from
    the runs exported next to it (the rounds of a resumed session cannot be paired from the JSON's lists)."""
    if all("ratios" in c for c in doc["cases"]):
        return doc
    export = next((e for e in (folder, folder / "export") if (e / "runs.parquet").is_file()), None)
    if export is None:
        return doc
    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "runs.duckdb")
        import_runs(store, export)
        return {**doc, **fidelity_doc(store, doc["pair_id"]), "stopped": doc.get("stopped", False)}


def _us(values: list[float]) -> str:
    return " / ".join(f"{v:.1f}" for v in values) or "-"


def round_ratios(case: dict) -> list[float]:
    """tracker / contest per round; none for a document older than the ratios with no export beside it."""
    return case.get("ratios", [])


def _paired(label: str, ratios: list[float]) -> str:
    p = paired_case(label, ratios, min_effect=FIDELITY_TOLERANCE)
    if p.ratio is None:
        return "- | -"
    return f"{p.ratio:.3f} ({interval_text(p.ci_low, p.ci_high)}) | {READS[p.verdict]}"


def table(name: str, doc: dict) -> list[str]:
    lines = [
        f"{name}: session {doc['pair_id']}, {doc['rounds']} rounds, statuses {', '.join(doc['statuses'])}",
        "",
        "| case | contest min..max (us) | tracker median (us) | inside | tracker/contest (95% CI) | reads "
        "| contest rounds | tracker rounds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in doc["cases"]:
        span = "-" if c["contest_min_us"] is None else f"{c['contest_min_us']:.1f}..{c['contest_max_us']:.1f}"
        median = "-" if c["tracker_median_us"] is None else f"{c['tracker_median_us']:.1f}"
        inside = {True: "yes", False: "**no**", None: "-"}[c["inside"]]
        lines.append(
            f"| {c['case']} | {span} | {median} | {inside} | {_paired(c['case'], round_ratios(c))} | "
            f"{_us(c['contest_means_us'])} | "
            f"{_us(c['tracker_means_us'])} |"
        )
    return lines + [""]


def pooled(docs: list[tuple[str, dict]]) -> list[str]:
    """Per kernel and case, every session's rounds together: a bias of the tracker's loop shows here."""
    rounds: dict[tuple[str, str], list[float]] = {}
    sessions: dict[tuple[str, str], int] = {}
    newest = {doc["pair_id"]: (name, doc) for name, doc in sorted(docs, key=lambda d: d[1]["rounds"])}
    for name, doc in newest.values():  # a resumed session once, with all its rounds
        kernel = name.split("_c")[0]
        for c in doc["cases"]:
            key = (kernel, c["case"])
            rounds.setdefault(key, []).extend(round_ratios(c))
            sessions[key] = sessions.get(key, 0) + 1
    lines = ["Pooled over the sessions above", "", "| kernel | case | sessions | rounds | tracker/contest (95% CI) "
             "| reads |", "|---|---|---|---|---|---|"]  # fmt: skip
    for (kernel, case), ratios in rounds.items():
        lines.append(f"| {kernel} | {case} | {sessions[(kernel, case)]} | {len(ratios)} | {_paired(case, ratios)} |")
    return lines + [""]


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    docs = _sessions([Path(a) for a in argv])
    for name, doc in docs:
        print("\n".join(table(name, doc)))
    if docs:
        print("\n".join(pooled(docs)))
    return 0 if docs else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
