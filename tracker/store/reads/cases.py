"""One run's cases and what was kept of them: results, samples, the whole bundle, evidence, GPU state, A/B pairs."""

from __future__ import annotations

import os
from typing import Any

from tracker.common.lazy import pd
from tracker.store.connection import connect
from tracker.store.reads._sql import (
    CASE_LABEL_SQL,
    _has_column,
    _has_table,
    _live_status,
)
from tracker.store.reads.profiles import _ncu_frames
from tracker.store.schema import GPU_STATE_COLUMNS

EVIDENCE_COLUMNS = (
    "case_idx, repetition, input_idx, matrix_idx, n, message, factor_res, tril_res, recon_res, orth_res, arrays_bytes"
)


class CaseReads:
    """Reads of the store at `self.path` (a mixin of tracker.store.Store)."""

    path: str | os.PathLike

    def case_results(self, run_id: str) -> pd.DataFrame:
        with connect(self.path, read_only=True) as con:
            return con.execute("SELECT * FROM case_results WHERE run_id = ? ORDER BY case_idx", [run_id]).df()

    def run_samples(self, run_id: str) -> pd.DataFrame:
        """Every timed repetition of a run: case_idx, rep, time_us."""
        with connect(self.path, read_only=True) as con:
            return con.execute(
                "SELECT case_idx, rep, time_us FROM samples WHERE run_id = ? ORDER BY case_idx, rep",
                [run_id],
            ).df()

    def run_bundle(self, run_id: str, *, with_samples: bool = True) -> dict[str, Any] | None:
        """Everything recorded for one run, read in one connection; None if there is no such run.

        Keys: run (dict), cases, samples, profile_cases, profile_kernels, ncu_cases, ncu_kernels, verdicts
        (DataFrames), source (str).
        Cases carry a `label` column (the seed-free case name).
        """
        with connect(self.path, read_only=True) as con:
            runs = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]).df()
            if runs.empty:
                return None
            run = runs.iloc[0].to_dict()
            run["status"], run["side_file"] = _live_status(self.path, con).get(run_id, (run["status"], None))
            cases = con.execute(
                f"SELECT * REPLACE ({CASE_LABEL_SQL} AS label) FROM case_results WHERE run_id = ? ORDER BY case_idx",
                [run_id],
            ).df()
            samples = (
                con.execute(
                    "SELECT case_idx, rep, time_us FROM samples WHERE run_id = ? ORDER BY case_idx, rep", [run_id]
                ).df()
                if with_samples
                else pd.DataFrame(columns=["case_idx", "rep", "time_us"])
            )
            profile_cases = con.execute(
                "SELECT case_idx, launches, host_us, device_us, trace_path FROM profile_cases WHERE run_id = ? "
                "ORDER BY case_idx",
                [run_id],
            ).df()
            profile_kernels = con.execute(
                "SELECT case_idx, kernel, calls, device_us, self_us FROM profile_kernels WHERE run_id = ? "
                "ORDER BY case_idx, coalesce(device_us, self_us) DESC",
                [run_id],
            ).df()
            verdicts = con.execute(
                "SELECT verdict, reason, created_at, run_id FROM verdicts WHERE run_id = ? OR variant_sha256 = ? "
                "ORDER BY created_at DESC",
                [run_id, run["variant_sha256"]],
            ).df()
            row = con.execute("SELECT source FROM variants WHERE sha256 = ?", [run["variant_sha256"]]).fetchone()
            ncu_cases, ncu_kernels = _ncu_frames(con, run_id)
        return {
            "run": run,
            "ncu_cases": ncu_cases,
            "ncu_kernels": ncu_kernels,
            "cases": cases,
            "samples": samples,
            "profile_cases": profile_cases,
            "profile_kernels": profile_kernels,
            "verdicts": verdicts,
            "source": row[0] if row else None,
        }

    def run_evidence(self, run_id: str, *, case_idx: int | None = None) -> pd.DataFrame:
        """The evidence kept for a run's failed checks, one row per case, without the arrays (a store written
        before evidence existed has none)."""
        with connect(self.path, read_only=True) as con:
            if not _has_table(con, "evidence"):
                return pd.DataFrame(columns=[c.strip() for c in EVIDENCE_COLUMNS.split(",")])
            sql = f"SELECT {EVIDENCE_COLUMNS} FROM evidence WHERE run_id = ?"
            params: list[Any] = [run_id]
            if case_idx is not None:
                sql += " AND case_idx = ?"
                params.append(int(case_idx))
            return con.execute(sql + " ORDER BY case_idx", params).df()

    def evidence_arrays(self, run_id: str, case_idx: int) -> bytes | None:
        """The .npz bytes (input `a`, `h`, `tau` of the failing matrix) kept for one case, or None."""
        with connect(self.path, read_only=True) as con:
            if not _has_table(con, "evidence"):
                return None
            row = con.execute(
                "SELECT arrays FROM evidence WHERE run_id = ? AND case_idx = ?", [run_id, int(case_idx)]
            ).fetchone()
        return bytes(row[0]) if row and row[0] is not None else None

    def gpu_states(self, run_ids: list[str] | tuple[str, ...]) -> pd.DataFrame:
        """The GPU state per case of these runs (run_id, case_idx, spec, label and the GPU_STATE_COLUMNS); an older
        store without them gives no rows."""
        with connect(self.path, read_only=True) as con:
            if not run_ids or not _has_column(con, "case_results", "throttle"):
                return pd.DataFrame(columns=["run_id", "case_idx", "spec", "label", *GPU_STATE_COLUMNS])
            return con.execute(
                f"SELECT run_id, case_idx, spec, {CASE_LABEL_SQL} AS label, {', '.join(GPU_STATE_COLUMNS)} "
                "FROM case_results WHERE list_contains(?, run_id) ORDER BY run_id, case_idx",
                [list(run_ids)],
            ).df()

    def pair_runs(self, pair_id: str) -> dict[str, pd.DataFrame]:
        """The runs of one A/B session (runs: run_id, variant, variant_sha256, pair_side, pair_round, status;
        cases: run_id, case_idx, label, passed, mean_us), by round; empty frames for an unknown pair or an older
        store."""
        with connect(self.path, read_only=True) as con:
            if not _has_column(con, "runs", "pair_id"):
                runs = pd.DataFrame(
                    columns=["run_id", "variant", "variant_sha256", "pair_side", "pair_round", "status"]
                )
                return {
                    "runs": runs,
                    "cases": pd.DataFrame(columns=["run_id", "case_idx", "label", "passed", "mean_us"]),
                }
            runs = con.execute(
                "SELECT run_id, variant, variant_sha256, pair_side, pair_round, status FROM runs WHERE pair_id = ? "
                "ORDER BY pair_round, started_at",
                [pair_id],
            ).df()
            cases = con.execute(
                f"SELECT run_id, case_idx, {CASE_LABEL_SQL} AS label, passed, mean_us FROM case_results "
                "WHERE list_contains(?, run_id) ORDER BY case_idx",
                [runs["run_id"].tolist()],
            ).df()
        return {"runs": runs, "cases": cases}
