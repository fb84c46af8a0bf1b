"""Profiles: torch.profiler kernels of a run, and its Nsight Compute profile."""

from __future__ import annotations

import os

from tracker.common.lazy import pd
from tracker.store.connection import connect
from tracker.store.reads._sql import (
    _has_table,
)
from tracker.store.schema import TABLE_COLUMNS


def _ncu_frames(con, run_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    if not _has_table(con, "ncu_cases"):  # a store of an older schema, opened read-only (not migrated)
        kernels = [c for c in TABLE_COLUMNS["ncu_kernels"] if c != "run_id"]
        return pd.DataFrame(columns=["case_idx", "report", "kernels", "error"]), pd.DataFrame(columns=kernels)
    cases = con.execute(
        "SELECT case_idx, report, kernels, error FROM ncu_cases WHERE run_id = ? ORDER BY case_idx", [run_id]
    ).df()
    kernels = con.execute(
        "SELECT * EXCLUDE (run_id) FROM ncu_kernels WHERE run_id = ? ORDER BY case_idx, kernel_idx", [run_id]
    ).df()
    return cases, kernels


class ProfileReads:
    """Reads of the store at `self.path` (a mixin of tracker.store.Store)."""

    path: str | os.PathLike

    def profile_top_kernels(self, run_id: str, *, limit: int = 10) -> pd.DataFrame:
        """A profiled run's kernels summed over its cases, the most device time first: kernel, calls, device_us,
        self_us, cases (how many cases launched it)."""
        with connect(self.path, read_only=True) as con:
            if not _has_table(con, "profile_kernels"):
                return pd.DataFrame(columns=["kernel", "calls", "device_us", "self_us", "cases"])
            return con.execute(
                "SELECT kernel, CAST(sum(calls) AS BIGINT) AS calls, sum(device_us) AS device_us, "
                "sum(self_us) AS self_us, "
                "count(DISTINCT case_idx) AS cases FROM profile_kernels WHERE run_id = ? GROUP BY kernel "
                "ORDER BY device_us DESC NULLS LAST, kernel LIMIT ?",
                [run_id, int(limit)],
            ).df()

    def ncu_profile(self, run_id: str) -> dict[str, pd.DataFrame]:
        """A run's Nsight Compute profile: `cases` (case_idx, report file name, kernels, error) and `kernels` (one row
        per profiled kernel in launch order; stalls as stored JSON). Both empty for a run made without --ncu."""
        with connect(self.path, read_only=True) as con:
            cases, kernels = _ncu_frames(con, run_id)
        return {"cases": cases, "kernels": kernels}
