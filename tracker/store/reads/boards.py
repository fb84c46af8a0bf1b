"""The leaderboard: best passed means per variant and case in one aggregate pass."""

from __future__ import annotations

import os
from typing import Any

from tracker.common.lazy import pd
from tracker.common.vocabulary import DEFAULT_WORKLOAD
from tracker.store.connection import connect
from tracker.store.reads._sql import (
    _has_column,
    case_label_sql,
    tracker_method_sql,
    variant_family_sql,
)


class BoardReads:
    """Reads of the store at `self.path` (a mixin of tracker.store.Store)."""

    path: str | os.PathLike

    def leaderboard_cells(
        self,
        *,
        suite: str,
        mode: str = "benchmark",
        gpu: str | None = None,
        family: str | None = None,
        problem: str | None = None,
    ) -> dict[str, pd.DataFrame]:
        """The leaderboard in one aggregate pass: per (variant, case) the best mean of its passed runs and that run
        (not a case that passed in a run cancelled or failed elsewhere: a row's cells and geomean come from runs
        that finished), and per variant its name, path, family, runs (every finished one), how many passed and the
        best passed geomean. GPU None means every run without a GPU; problem None, every problem's (another
        problem's cases are not the same cases: callers name one). Runs of the tracker's own method only: a
        contest-method run is the harness's report, which the kernel shares a process with and can write itself."""
        gpu_clause = "gpu = ?" if gpu is not None else "gpu IS NULL"
        params: list[Any] = [suite, mode] + ([gpu] if gpu is not None else [])
        with connect(self.path, read_only=True) as con:
            vfam = "v.family" if _has_column(con, "variants", "family") else "NULL"
            fam = f" AND coalesce(r.family, {vfam}) = ?" if family else ""
            prob = " AND coalesce(r.problem, ?) = ?" if problem else ""
            ours = f" AND {tracker_method_sql(con, 'r')}"
            con.execute(
                "CREATE TEMP TABLE lb_runs AS SELECT r.run_id, r.variant_sha256, r.status, r.geomean_us, r.started_at, "
                f"r.variant, r.path, coalesce(r.family, {vfam}) AS family FROM runs r "
                "LEFT JOIN variants v ON v.sha256 = r.variant_sha256 WHERE r.status NOT IN ('skipped', 'running') "
                f"AND r.suite = ? AND r.mode = ? AND r.{gpu_clause}"
                f"{fam}{prob}{ours}",
                params + ([family] if family else []) + ([DEFAULT_WORKLOAD, problem] if problem else []),
            )
            variants = con.execute(
                "SELECT g.*, f.family FROM ("
                "SELECT variant_sha256, arg_max(variant, started_at) AS variant, arg_max(path, started_at) AS path, "
                "count(*) AS runs, "
                "count(*) FILTER (WHERE status = 'passed') AS passed, "
                "min(geomean_us) FILTER (WHERE status = 'passed') AS best_geomean_us, "
                "arg_min(run_id, geomean_us) FILTER (WHERE status = 'passed' AND geomean_us IS NOT NULL) AS best_run, "
                "arg_max(run_id, started_at) AS latest_run, max(started_at) AS latest_at FROM lb_runs "
                f"GROUP BY variant_sha256) g LEFT JOIN {variant_family_sql(con)} f USING (variant_sha256)"
            ).df()
            cells = con.execute(
                # Grouped on the raw shape columns; the label is formatted once per group, not once per case row.
                f"SELECT variant_sha256, case_idx, {case_label_sql('g')} AS label, best_us, run_id FROM ("
                # In one suite a case index is one shape (a hidden seed changes the seed only), so group on the integer.
                "SELECT r.variant_sha256, c.case_idx, any_value(c.batch) AS batch, any_value(c.n) AS n, "
                "any_value(c.cond) AS cond, any_value(c.case_name) AS case_name, any_value(c.label) AS label, "
                "min(c.mean_us) AS best_us, arg_min(c.run_id, c.mean_us) AS run_id "
                "FROM case_results c JOIN lb_runs r USING (run_id) "
                "WHERE r.status = 'passed' AND c.passed AND c.mean_us IS NOT NULL "
                "GROUP BY r.variant_sha256, c.case_idx) g"
            ).df()
        # Labels are seed-free, so a problem folder's cases that differ only in their seed share one: the boards
        # pivot on the label, so such cases are told apart by their index.
        twice = cells.groupby("label")["case_idx"].transform("nunique") > 1
        cells.loc[twice, "label"] = cells.loc[twice, "label"] + " #" + cells.loc[twice, "case_idx"].astype(str)
        # the recorded names (what each name stands for now) are read only where a name is shared
        shared = variants["variant"].duplicated(keep=False)
        named = {n["name"]: n["sha256"] for n in self.variant_names()} if shared.any() else {}
        return {"variants": distinct_names(variants, named).drop(columns="latest_at"), "cells": cells}


def distinct_names(variants: pd.DataFrame, named: dict[str, str]) -> pd.DataFrame:
    """One name per row: where several sources ran under one name (a file edited in place, a repeat written with
    another docstring), the source the name stands for now (`named`, else the one run last: `latest_at`) keeps it
    and each other one reads `name@sha8`, so a board never lists one name twice and every row can be asked for by
    its name."""
    shared = variants["variant"].duplicated(keep=False)
    if not shared.any():
        return variants
    out = variants.copy()
    for name, group in out[shared].groupby("variant", sort=False):  # only the shared names: boards of 10^5 runs
        keep = named.get(str(name))
        if keep not in set(group["variant_sha256"]):
            keep = group.loc[group["latest_at"].idxmax(), "variant_sha256"]
        others = group.index[group["variant_sha256"] != keep]
        out.loc[others, "variant"] = [f"{name}@{sha[:8]}" for sha in group.loc[others, "variant_sha256"]]
    return out
