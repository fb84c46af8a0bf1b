"""What one run produced, typed: its row of the runs table (RunRow) and the whole record (RunRecord).

RunRow's fields are the runs table's columns, in order: tracker.store.schema derives TABLE_COLUMNS["runs"] from
them, so the row a run builds and the columns the write path inserts cannot drift apart.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any


@dataclass
class RunRow:
    """One row of the runs table. A field left None is NULL in the store (a column the run did not reach)."""

    run_id: str | None = None
    variant_sha256: str | None = None
    variant: str | None = None
    path: str | None = None
    family: str | None = None
    parent_run: str | None = None
    note: str | None = None
    status: str | None = None
    suite: str | None = None
    mode: str | None = None
    seed: int | None = None
    started_at: datetime | str | None = None
    finished_at: datetime | str | None = None
    host: str | None = None
    pid: int | None = None
    device: str | None = None
    gpu: str | None = None
    sm_count: int | None = None
    driver: str | None = None
    cuda: str | None = None
    torch: str | None = None
    triton: str | None = None
    python: str | None = None
    git_repo: str | None = None
    git_commit: str | None = None
    git_branch: str | None = None
    git_dirty: bool | None = None
    git_diff: str | None = None
    trigger: str | None = None
    error: str | None = None
    log_tail: str | None = None
    warnings: str | None = None
    geomean_us: float | None = None
    compile_s: float | None = None
    device_load_start: Any = None  # JSON text as stored; the runner holds the probe's dict until the run ends
    device_load_end: Any = None
    shared_device: bool | None = None
    flags: str | None = None  # JSON list of the static scan's flags
    problem: str | None = None
    problem_sha256: str | None = None
    sandbox: str | None = None
    helper_sources: str | None = None  # JSON: path -> source
    method: str | None = None
    harness_files: str | None = None  # JSON: name -> sha256
    pair_id: str | None = None
    pair_side: str | None = None
    pair_round: int | None = None
    compile_cache: str | None = None  # warm, cold or `off: why` (tracker.capture.compile_cache)

    def update(self, values: dict[str, Any] | None = None, /, **more: Any) -> None:
        """Set these fields (a dict, keywords, or both); TypeError for a name that is no column of runs."""
        values = {**(values or {}), **more}
        unknown = sorted(set(values) - set(RUN_FIELDS))
        if unknown:
            raise TypeError(f"no such run field: {', '.join(unknown)}")
        for name, value in values.items():
            setattr(self, name, value)

    def warn(self, *notes: str | None) -> None:
        """Add notes to `warnings` (one text, "; " between notes); empty notes add nothing."""
        self.warnings = "; ".join(filter(None, [self.warnings, *notes])) or None

    def as_dict(self) -> dict[str, Any]:
        """{column: value} in the table's column order."""
        return {name: getattr(self, name) for name in RUN_FIELDS}

    @classmethod
    def from_dict(cls, data: Any) -> RunRow:
        """The row of a mapping of column names (a side file's `run`); TypeError for anything else or an
        unknown column."""
        if not isinstance(data, dict):
            raise TypeError(f"a run row is an object, not {type(data).__name__}")
        row = cls()
        row.update(data)
        return row


RUN_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(RunRow))


@dataclass
class RunRecord:
    """Everything one run produced, held in memory until it is written in one transaction."""

    run: RunRow
    variant: dict[str, Any]
    cases: list[dict[str, Any]] = field(default_factory=list)
    samples: list[tuple[int, int, float]] = field(default_factory=list)  # (case_idx, rep, time_us)
    profile_cases: list[dict[str, Any]] = field(default_factory=list)
    profile_kernels: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)  # failed checks: arrays as .npz bytes
    ncu_cases: list[dict[str, Any]] = field(default_factory=list)  # Nsight Compute: per case its report file
    ncu_kernels: list[dict[str, Any]] = field(default_factory=list)  # and per profiled kernel its metrics

    def to_json(self) -> str:
        data = {**self.__dict__, "run": self.run.as_dict(), "evidence": [_b64(e) for e in self.evidence]}
        return json.dumps(data, default=str)

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        data = json.loads(text)
        data["run"] = RunRow.from_dict(data.get("run"))
        data["samples"] = [tuple(s) for s in data["samples"]]
        data["evidence"] = [_unb64(e) for e in data.get("evidence", [])]
        return cls(**data)


def _b64(row: dict[str, Any]) -> dict[str, Any]:
    arrays = row.get("arrays")
    return {**row, "arrays": base64.b64encode(arrays).decode() if arrays is not None else None}


def _unb64(row: dict[str, Any]) -> dict[str, Any]:
    arrays = row.get("arrays")
    return {**row, "arrays": base64.b64decode(arrays) if arrays is not None else None}
