"""Reading an Nsight Compute report (.ncu-rep): per kernel its duration, occupancy, throughputs, launch resources
and top stall reasons, as plain rows.

Two steps kept apart: `action_data` asks NVIDIA's report interface (ncu_report, shipped in ncu's
extras/python) for the metrics named here, and `kernel_rows` builds the table from that plain data, so the
table is testable without ncu. `python -m tracker.capture.ncu MODULE_DIR REPORT` prints the rows as JSON: the
runner reads reports in a child process, because the report interface is a native library reading a file the
kernel's process could have written. Running ncu is tracker.capture.ncu_pass's job.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

from tracker.common.jsonfields import NOT_STALLS

# The sections ncu collects (`--section NAME`), and the metrics of theirs we keep.
SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats")
DURATION = "gpu__time_duration.sum"  # ns
METRICS = {
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",  # achieved occupancy
    "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "registers": "launch__registers_per_thread",
    "static_smem_bytes": "launch__shared_mem_per_block_static",
    "dynamic_smem_bytes": "launch__shared_mem_per_block_dynamic",
    "block_size": "launch__block_size",
    "grid_size": "launch__grid_size",
}
INTEGER_COLUMNS = ("registers", "static_smem_bytes", "dynamic_smem_bytes", "block_size", "grid_size")
# Stall reasons, by the first of these metric families the report holds: WarpStateStats' warp cycles per issued
# instruction stalled on each reason (what ncu's Warp State table shows; the names changed between versions),
# else the sampled warps per reason. The `_not_issued` variants (stalls without an issue that cycle) and the states
# that are no stall (NOT_STALLS) are left out.
STALL_FAMILIES = (
    re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$"),
    re.compile(r"^smsp__average_warp_latency_issue_stalled_(\w+?)(\.ratio|\.pct|\.sum)?$"),
    re.compile(r"^smsp__pcsamp_warps_issue_stalled_(\w+?)$"),
)
TOP_STALLS = 3


def _stall(name: str) -> tuple[int, str] | None:
    """(family, reason) of a stall metric's name, or None."""
    for family, pattern in enumerate(STALL_FAMILIES):
        match = pattern.match(name)
        if match and not match.group(1).endswith("_not_issued") and match.group(1) not in NOT_STALLS:
            return family, match.group(1)
    return None


def _wanted(name: str) -> bool:
    return name == DURATION or name in METRICS.values() or _stall(name) is not None


def action_data(action: Any) -> dict[str, Any]:
    """One profiled kernel (an ncu_report IAction) as {"name", "metrics": {metric name: number}}: the metrics
    named in this module that the report holds, the stall reasons among them."""
    metrics: dict[str, float] = {}
    names = action.metric_names() if hasattr(action, "metric_names") else list(action)
    for name in names:
        if not _wanted(name):
            continue
        metric = action.metric_by_name(name)
        if metric is None:
            continue
        try:
            metrics[name] = float(metric.as_double())
        except (TypeError, ValueError, RuntimeError):
            try:  # an integer metric (registers, sizes)
                metrics[name] = float(metric.as_uint64())
            except (TypeError, ValueError, RuntimeError):
                continue
    return {"name": str(action.name()), "metrics": metrics}


def read_report(path: str) -> list[dict[str, Any]]:
    """action_data of every kernel in the report, in launch order (ncu_report must be importable)."""
    import ncu_report  # noqa: PLC0415 - only where ncu is installed

    context = ncu_report.load_report(path)
    return [
        action_data(context.range_by_idx(r).action_by_idx(a))
        for r in range(context.num_ranges())
        for a in range(context.range_by_idx(r).num_actions())
    ]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def kernel_rows(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ncu_kernels rows (without run and case) of one case's kernels, in launch order. A metric the report
    lacks is None; stalls is a JSON object of the top reasons, the most cycles first."""
    rows = []
    for i, action in enumerate(actions):
        metrics = action.get("metrics") or {}
        ns = _number(metrics.get(DURATION))
        row: dict[str, Any] = {
            "kernel_idx": i,
            "kernel": str(action.get("name") or "?"),
            "duration_us": ns / 1000 if ns is not None else None,
        }
        for column, metric in METRICS.items():
            value = _number(metrics.get(metric))
            row[column] = round(value) if value is not None and column in INTEGER_COLUMNS else value
        found = [(_stall(name), _number(value)) for name, value in metrics.items()]
        found = [(key, value) for key, value in found if key is not None and value is not None and value > 0]
        family = min((key[0] for key, _ in found), default=None)
        stalls = sorted(((key[1], value) for key, value in found if key[0] == family), key=lambda s: (-s[1], s[0]))
        row["stalls"] = json.dumps(dict(stalls[:TOP_STALLS]))
        rows.append(row)
    return rows


def main(argv: list[str]) -> int:
    module_dir, report = argv
    sys.path.insert(0, module_dir)
    print(json.dumps(kernel_rows(read_report(report))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
