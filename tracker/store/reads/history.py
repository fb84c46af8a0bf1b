"""Runs over time: history scopes and contexts, case histories, the progress chart, what happened since."""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

from tracker.common.lazy import pd
from tracker.common.vocabulary import DEFAULT_WORKLOAD, TIMED_MODES
from tracker.store.connection import connect
from tracker.store.reads._sql import (
    IN_LIST_MAX,
    RUNS_IN_CONTEXT_SQL,
    _run_filters,
    case_label_sql,
    names_sql,
    ranked_sql,
)


def _scope_filter(family: str | None, path: str | None) -> tuple[str, list[Any]]:
    if family is not None:
        return "family = ?", [family]
    if path is not None:
        return "path = ?", [path]
    raise ValueError("a history needs a family or a kernel path")


class HistoryReads:
    """Reads of the store at `self.path` (a mixin of tracker.store.Store)."""

    path: str | os.PathLike

    def history_scopes(self) -> dict[str, pd.DataFrame]:
        """What a history can be taken along: families and kernel files, with their run counts."""
        with connect(self.path, read_only=True) as con:
            families = con.execute(
                "SELECT family, count(*) AS runs, max(started_at) AS last_run_at FROM runs "
                "WHERE family IS NOT NULL GROUP BY family ORDER BY last_run_at DESC"
            ).df()
            paths = con.execute(
                "SELECT path, count(*) AS runs, max(started_at) AS last_run_at FROM runs "
                "WHERE path IS NOT NULL GROUP BY path ORDER BY last_run_at DESC"
            ).df()
        return {"family": families, "path": paths}

    def history_contexts(self, *, family: str | None = None, path: str | None = None) -> pd.DataFrame:
        """The (problem, suite, GPU) contexts with timed runs along a family or kernel file, most runs first."""
        scope, params = _scope_filter(family, path)
        modes = ", ".join("?" * len(TIMED_MODES))
        sql = (
            f"SELECT problem, suite, gpu, count(*) AS runs FROM {RUNS_IN_CONTEXT_SQL} "
            f"WHERE {scope} AND mode IN ({modes}) "
            "GROUP BY problem, suite, gpu ORDER BY runs DESC, problem, suite, gpu"
        )
        with connect(self.path, read_only=True) as con:
            return con.execute(sql, [*params, *TIMED_MODES]).df()

    def case_history(
        self,
        *,
        family: str | None = None,
        path: str | None = None,
        suite: str,
        gpu: str | None,
        last: int | None = 300,
        problem: str | None = None,
        variants: tuple[str, ...] | None = None,
    ) -> dict[str, pd.DataFrame]:
        """The timed runs along a family or kernel file in one (suite, GPU) context, oldest first (the last `last`);
        with `variants` (source hashes: a lineage path), only the runs of those.

        Returns runs (run_id, variant, started_at, status, ...), cases (run_id, case_idx, label, passed, mean_us,
        err_us) and samples (run_id, case_idx, samples: a list of every repetition).
        """
        scope, params = _scope_filter(family, path)
        modes = ", ".join("?" * len(TIMED_MODES))
        gpu_clause = "gpu = ?" if gpu is not None else "gpu IS NULL"
        params = [*params, suite, *TIMED_MODES] + ([gpu] if gpu is not None else [])
        if problem is not None:  # one problem's runs only: another problem's cases are not the same cases
            gpu_clause += " AND problem = ?"
            params.append(problem)
        if variants is not None:
            gpu_clause += f" AND variant_sha256 IN ({', '.join('?' * len(variants)) or 'NULL'})"
            params.extend(variants)
        limit = " LIMIT ?" if last else ""
        if last:
            params.append(int(last))
        with connect(self.path, read_only=True) as con:
            con.execute(
                "CREATE TEMP TABLE hist AS SELECT * FROM ("
                "SELECT run_id, variant, variant_sha256, path, family, status, started_at, geomean_us, git_commit, "
                "note "
                f"FROM {RUNS_IN_CONTEXT_SQL} "
                f"WHERE {scope} AND suite = ? AND mode IN ({modes}) AND {gpu_clause} AND status <> 'skipped' "
                f"ORDER BY started_at DESC{limit}) ORDER BY started_at",
                params,
            )
            runs = con.execute("SELECT * FROM hist ORDER BY started_at").df()
            ids = runs["run_id"].tolist()
            # A list of run ids is looked up through the run_id indexes; a join with the temp table scans the whole
            # samples table (tens of millions of rows in a large store: 6x slower for the default window).
            if len(ids) <= IN_LIST_MAX:
                scope_sql, scope_params = f"WHERE run_id IN ({', '.join('?' * len(ids))})", ids
            else:
                scope_sql, scope_params = "WHERE run_id IN (SELECT run_id FROM hist)", []
            cases = con.execute(
                f"SELECT c.run_id, c.case_idx, {case_label_sql('c')} AS label, c.passed, "
                f"c.mean_us, c.err_us FROM (SELECT * FROM case_results {scope_sql}) c JOIN hist h USING (run_id) "
                "ORDER BY h.started_at, c.case_idx",
                scope_params,
            ).df()
            samples = con.execute(
                "SELECT run_id, case_idx, list(time_us ORDER BY rep) AS samples "
                f"FROM samples {scope_sql} GROUP BY run_id, case_idx",
                scope_params,
            ).df()
        return {"runs": runs, "cases": cases, "samples": samples}

    def progress_points(
        self,
        *,
        gpu: str | None = None,
        suite: str | None = None,
        mode: str | None = None,
        status: str | None = None,
        family: str | None = None,
        since: dt.date | None = None,
        until: dt.date | None = None,
        search: str | None = None,
        problem: str | None = None,
        max_points: int | None = None,
    ) -> pd.DataFrame:
        """The passed runs with a geomean, oldest first: the points of the progress chart (per-run geomeans only).

        Columns: run_id, started_at, variant, family, problem, suite, gpu, geomean_us, run_order (1 for the first
        passed run of the row's problem, suite and GPU, counted before any thinning) and context_runs (the passed
        runs of that context). A status filter other than `passed` leaves no point. With `max_points` and more runs
        than that, a selection that draws the same chart: every run that set a new best of its context (the step
        line), the last run of each context, and each family's fastest and slowest run in each of 300 slices of its
        context's run order (the cloud of points)."""
        if status not in (None, "passed"):
            status = "\x00none"  # no run has this status: no point
        names = None
        if search:  # a search finds runs by their content's recorded names too, as on the table beside the chart
            with connect(self.path, read_only=True) as con:
                names = names_sql(con)
        where, params = _run_filters(
            gpu=gpu,
            suite=suite,
            mode=mode,
            status=status or "passed",
            family=family,
            since=since,
            until=until,
            search=search,
            problem=problem,
            names=names,
        )
        same_ctx = " AND ".join(f"p.{c} IS NOT DISTINCT FROM c.{c}" for c in ("problem", "suite", "gpu"))
        # One window (the best before each run) and one aggregate per family and time slice: ~2x faster than a
        # row_number per slice on 100,000 runs.
        sql = f"""
            WITH p AS (
            SELECT run_id, started_at, variant, coalesce(family, '(none)') AS family, problem, suite, gpu, geomean_us
                FROM runs{where}{" AND" if where else " WHERE"} geomean_us IS NOT NULL
            ),
            c AS (
                SELECT problem, suite, gpu, count(*) AS context_runs, max(started_at) AS last_at
                FROM p GROUP BY problem, suite, gpu
            ),
            o AS (
                SELECT p.*, c.context_runs, c.last_at,
                row_number() OVER (PARTITION BY p.problem, p.suite, p.gpu ORDER BY p.started_at, p.run_id) AS run_order,
                    min(p.geomean_us) OVER (PARTITION BY p.problem, p.suite, p.gpu ORDER BY p.started_at, p.run_id
                                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS best_before
                FROM p JOIN c ON {same_ctx}
            ),
            w AS (
                SELECT *, CAST(floor(299.999 * (run_order - 1) / greatest(context_runs - 1, 1)) AS INTEGER) AS slice
                FROM o
            ),
            x AS (
            SELECT arg_min(run_id, (geomean_us, run_id)) AS fastest, arg_max(run_id, (geomean_us, run_id)) AS slowest
                FROM w GROUP BY problem, suite, gpu, family, slice
            )
            SELECT run_id, started_at, variant, family, problem, suite, gpu, geomean_us, run_order, context_runs FROM w
            WHERE ? IS NULL OR (SELECT count(*) FROM p) <= ? OR best_before IS NULL OR geomean_us < best_before
                OR started_at = last_at OR run_id IN (SELECT fastest FROM x UNION ALL SELECT slowest FROM x)
            ORDER BY started_at, run_id
        """
        limit = int(max_points) if max_points is not None else None
        with connect(self.path, read_only=True) as con:
            return con.execute(sql, [*params, limit, limit]).df()

    def since_activity(self, since: dt.datetime) -> dict[str, pd.DataFrame]:
        """What happened from `since` on: runs (newest first), their cases (with the best mean of the case before, in
        the same suite, mode and GPU; `ranked` and the bests count only runs that passed by the tracker's own method,
        as the leaderboard does), the best geomean before per context, verdicts (newest first), and `histories`: per
        (kernel file, problem, suite, GPU) of a new timed run, that file's case_history, as Regressions reads it."""
        with connect(self.path, read_only=True) as con:
            con.execute(
                "CREATE TEMP TABLE new_runs AS SELECT run_id, variant_sha256, variant, path, family, status, suite, "
                f"mode, gpu, problem, geomean_us, started_at, error, {ranked_sql(con)} AS ranked FROM runs "
                "WHERE started_at >= CAST(? AS TIMESTAMPTZ)",
                [since],
            )
            runs = con.execute(
                "SELECT * FROM new_runs ORDER BY started_at DESC, run_id"
            ).df()  # newest first, as `list`
            cases = con.execute(
                f"""
                WITH nc AS (
                    SELECT c.run_id, coalesce(n.problem, $wl) AS problem, n.suite, n.mode, n.gpu, n.path,
                        n.started_at, c.case_idx,
                        {case_label_sql("c")} AS label, c.passed AND n.ranked AS ranked, c.mean_us
                    FROM case_results c JOIN new_runs n USING (run_id)
                ),
                before AS (
                    SELECT problem, suite, mode, gpu, {case_label_sql("g")} AS label, best_before_us FROM (
                        SELECT coalesce(r.problem, $wl) AS problem, r.suite, r.mode, r.gpu, c.case_idx,
                            any_value(c.batch) AS batch, any_value(c.n) AS n,
                            any_value(c.cond) AS cond, any_value(c.case_name) AS case_name, any_value(c.label) AS label,
                            min(c.mean_us) AS best_before_us
                        FROM case_results c JOIN runs r USING (run_id)
                        WHERE r.started_at < CAST($since AS TIMESTAMPTZ) AND {ranked_sql(con, "r")} AND c.passed
                            AND c.mean_us IS NOT NULL
                        GROUP BY ALL) g
                )
                SELECT nc.*, b.best_before_us FROM nc LEFT JOIN before b
                ON b.problem = nc.problem AND b.suite = nc.suite AND b.mode = nc.mode
                    AND b.gpu IS NOT DISTINCT FROM nc.gpu AND b.label = nc.label
                ORDER BY nc.started_at, nc.case_idx
                """,
                {"since": since, "wl": DEFAULT_WORKLOAD},
            ).df()
            best_geo = con.execute(  # per problem too: another problem's geomean is no baseline
                "SELECT coalesce(problem, ?) AS problem, suite, mode, gpu, min(geomean_us) AS best_before_us FROM runs "
                f"WHERE {ranked_sql(con)} AND started_at < CAST(? AS TIMESTAMPTZ) GROUP BY ALL",
                [DEFAULT_WORKLOAD, since],
            ).df()
            modes = ", ".join("?" * len(TIMED_MODES))
            contexts = con.execute(
                f"SELECT DISTINCT path, problem, suite, gpu FROM new_runs WHERE path IS NOT NULL AND mode IN ({modes}) "
                "AND status = 'passed' ORDER BY ALL",
                list(TIMED_MODES),
            ).fetchall()
            verdicts = con.execute(
                "SELECT v.run_id, r.variant, v.verdict, v.reason, v.created_at FROM verdicts v "
                "LEFT JOIN runs r USING (run_id) WHERE v.created_at >= CAST(? AS TIMESTAMPTZ) "
                "ORDER BY v.created_at DESC",
                [since],
            ).df()
        histories = [
            (path, self.case_history(path=path, suite=suite, gpu=gpu, problem=problem))
            for path, problem, suite, gpu in contexts
        ]
        return {"runs": runs, "cases": cases, "best_geomean": best_geo, "verdicts": verdicts, "histories": histories}
