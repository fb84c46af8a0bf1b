"""Runs: listing, one run, id prefixes, counts, the filters' values and contexts, the store's own state."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from pathlib import Path
from typing import Any

from tracker.common.lazy import pd
from tracker.common.vocabulary import DEFAULT_WORKLOAD, TIMED_MODES
from tracker.store.connection import SchemaTooNewError, connect, schema_version
from tracker.store.reads._sql import (
    RUN_LIST_COLUMNS,
    RUNS_IN_CONTEXT_SQL,
    _apply_live,
    _has_column,
    _has_runs_table,
    _live_status,
    _run_filters,
    names_sql,
    variant_clause,
)
from tracker.store.schema import SCHEMA_VERSION
from tracker.store.sidefiles import pending_dir, pending_run_ids, read_side_file


class RunReads:
    """Reads of the store at `self.path` (a mixin of tracker.store.Store)."""

    path: str | os.PathLike

    def side_file_runs(self) -> list[dict[str, Any]]:
        """Runs whose record waits in the store's side folder, as run rows with status `pending` and `side_file`."""
        folder = pending_dir(self.path)
        out = []
        for run_id in sorted(pending_run_ids(self.path)):
            side = folder / f"{run_id}.json"
            try:
                run = read_side_file(side).run
                run = {c: getattr(run, c) for c in RUN_LIST_COLUMNS.split(", ")}
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue  # unreadable or not the tracker's own: `import` reports it
            run.update(status="pending", side_file=str(side))
            with contextlib.suppress(TypeError, ValueError):
                run["started_at"] = pd.Timestamp(run["started_at"])
            out.append(run)
        return out

    def list_runs(
        self,
        *,
        limit: int | None = None,
        search: str | None = None,
        family: str | None = None,
        status: str | None = None,
        variant: str | None = None,
        since: dt.datetime | None = None,
    ) -> pd.DataFrame:
        """All runs (those whose name, path, family, note, id, verdict reason or a recorded name of their content
        contains `search`; of a family, status or variant name (any name recorded for it: _sql.variant_clause);
        started from `since` on), newest first."""
        with connect(self.path, read_only=True) as con:
            names = names_sql(con)
            where, params = _run_filters(search=search, family=family, status=status, names=names)
            if since is not None:  # to the second: _run_filters' since is a date
                where += (" AND " if where else " WHERE ") + "started_at >= CAST(? AS TIMESTAMPTZ)"
                params.append(since)
            if variant is not None:
                clause, more = variant_clause(names, variant)
                where += (" AND " if where else " WHERE ") + clause
                params += more
            sql = f"SELECT {RUN_LIST_COLUMNS} FROM runs{where} ORDER BY started_at DESC"
            if limit is not None:
                sql += " LIMIT ?"
                params.append(int(limit))
            df = con.execute(sql, params).df()
            live = _live_status(self.path, con)
        _apply_live(df, live, "run_id", "status")
        extra = [r for r in self.side_file_runs() if r["run_id"] not in set(df["run_id"])] if not where else []
        if extra:  # runs that never reached the store (it was locked from their start)
            df = pd.concat([df, pd.DataFrame(extra)[[c for c in df.columns]]], ignore_index=True)
            df = df.sort_values("started_at", ascending=False, ignore_index=True)
            if limit is not None:
                df = df.head(int(limit))
        return df

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        """One run's row as a dict (status as it really is, see _live_status; `side_file` where a pending run
        waits), or None if there is no such run."""
        with connect(self.path, read_only=True) as con:
            df = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]).df()
            live = _live_status(self.path, con)
        if df.empty:
            waiting = [r for r in self.side_file_runs() if r["run_id"] == run_id]
            return waiting[0] if waiting else None
        run = df.iloc[0].to_dict()
        run["status"], run["side_file"] = live.get(run_id, (run["status"], None))
        return run

    def resolve_run_id(self, prefix: str) -> str | None:
        """Accept a unique prefix of a run id, as git does for commits."""
        ids = self.match_run_ids(prefix, limit=2)
        return ids[0] if len(ids) == 1 else None

    def latest_run_of_variant(self, name: str, suite: str | None = None, mode: str | None = None) -> str | None:
        """The newest run of the variant with this name (any recorded name, as list_runs' `variant`), e.g. to name
        it as a parent. Given a suite and mode, the newest passed run of those comes first, then any run of them,
        then any run: a benchmark's parent is then a benchmark it can be compared with, not the newest test run.
        (Without them the comparisons are NULL, which DuckDB sorts last even descending: hence the coalesce.)"""
        if not Path(self.path).exists():
            return None
        with connect(self.path, read_only=True) as con:
            if not _has_runs_table(con):
                return None
            clause, params = variant_clause(names_sql(con), name)
            same = "(suite = ? AND mode = ?)"
            row = con.execute(
                f"SELECT run_id FROM runs WHERE {clause} "
                f"ORDER BY coalesce({same} AND status = 'passed', false) DESC, coalesce({same}, false) DESC, "
                "started_at DESC, run_id LIMIT 1",
                [*params, suite, mode, suite, mode],
            ).fetchone()
        return row[0] if row else None

    def _runs_by_prefix(self, columns: str, prefix: str, limit: int, *, frame: bool):
        """`columns` of the runs whose id starts with `prefix`, newest first, as rows or a DataFrame: the one query
        behind resolving an id and listing an ambiguous prefix's candidates."""
        with connect(self.path, read_only=True) as con:
            cur = con.execute(
                f"SELECT {columns} FROM runs WHERE starts_with(run_id, ?) ORDER BY started_at DESC LIMIT ?",
                [prefix, int(limit)],
            )
            return cur.df() if frame else cur.fetchall()

    def match_run_ids(self, prefix: str, *, limit: int = 10) -> list[str]:
        """The run ids starting with `prefix` (at most `limit`, newest first): one for a unique prefix. Rows, not a
        DataFrame: every command that takes a run id resolves it here, most without needing pandas."""
        return [r[0] for r in self._runs_by_prefix("run_id", prefix, limit, frame=False)]

    def run_candidates(self, prefix: str, *, limit: int = 20) -> pd.DataFrame:
        """Runs whose id starts with `prefix` (to list when a prefix is ambiguous), newest first."""
        cols = "run_id, variant, path, status, suite, mode, gpu, started_at"
        return self._runs_by_prefix(cols, prefix, limit, frame=True)

    def store_version(self) -> tuple[int, ...]:
        """A key that changes whenever the store is written: modification times and sizes of the file and its WAL.

        Dashboard caches are keyed on it, so a finished run shows up on the next render without a timer.
        """
        parts: list[int] = []
        # A side file arriving shows too.
        for path in (Path(self.path), Path(f"{self.path}.wal"), pending_dir(self.path)):
            try:
                st = path.stat()
            except OSError:
                parts += [0, 0]
            else:
                parts += [st.st_mtime_ns, st.st_size]
        return tuple(parts)

    def store_problem(self) -> str | None:
        """Why the dashboard must not use this path as a store, or None: it does not exist, is not a DuckDB file, is
        a DuckDB file without our tables, or has a newer or an older schema than this tracker (today's reads need
        today's columns; the CLI upgrades an older one). Opens read-only; changes nothing."""
        path = Path(self.path)
        if not path.exists():
            return (
                f"There is no store at **{path}**. Check the path (the dashboard creates no store there), or make one: "
                f"`python -m tracker run FILE --store {path}` records a first run there, and `python -m tracker "
                f"import samples/* --store {path}` brings the shipped runs."
            )
        if not path.is_file():
            return f"**{path}** is not a file, so not a KernelBeam store."
        newer = f"**{path}** has a store schema newer than this dashboard (v{SCHEMA_VERSION}): upgrade KernelBeam."
        try:
            with connect(path, read_only=True) as con:
                names = {
                    r[0]
                    for r in con.execute(
                        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
                    ).fetchall()
                }
                if "schema_version" not in names or "runs" not in names:
                    return (
                        f"**{path}** is a DuckDB file but not a KernelBeam store (it has no runs table); "
                        "it is left as is."
                    )
                version = schema_version(con)
        except SchemaTooNewError:  # reads refuse a newer schema on open
            return newer
        if version > SCHEMA_VERSION:
            return newer
        if version < SCHEMA_VERSION:  # the dashboard migrates only its own store (app.py), before it asks this
            return (
                f"**{path}** was written by an older KernelBeam (store schema v{version}; this one reads "
                f"v{SCHEMA_VERSION}). `python -m tracker list --store {path}` upgrades it once; the dashboard "
                "changes no store but its own."
            )
        return None

    def past_durations(self, variants: list[tuple[str, str]], suite: str, mode: str) -> dict:
        """Median wall seconds of earlier finished runs, per (variant_sha256, variant name) asked for: runs of the
        same source first, else of the same name, in the same suite and mode. Variants with no such run are left
        out. For ordering a queue, so it does not matter that case selections differ."""
        if not variants or not Path(self.path).exists():
            return {}
        with connect(self.path, read_only=True) as con:
            if not _has_runs_table(con):
                return {}
            medians = {}
            for key in ("variant_sha256", "variant"):
                medians[key] = dict(
                    con.execute(
                        f"SELECT {key}, median(epoch(finished_at) - epoch(started_at)) FROM runs WHERE suite = ? "
                        "AND mode = ? AND finished_at IS NOT NULL AND status NOT IN ('running', 'pending') GROUP BY 1",
                        [suite, mode],
                    ).fetchall()
                )
        by_sha, by_name = medians["variant_sha256"], medians["variant"]
        found = {}
        for sha, name in variants:
            seconds = by_sha.get(sha, by_name.get(name))
            if seconds is not None:
                found[(sha, name)] = float(seconds)
        return found

    def passed_run_seconds(
        self, sha256: str, suite: str, mode: str, method: str, cases: list[int]
    ) -> list[tuple[float, float]]:
        """(wall seconds, seconds after compiling) of the earlier passed runs of this source, newest first, in this
        suite, mode and method (`tracker` is stored as NULL) that ran exactly these cases: what the next such run
        should take, in all and under its --timeout (which starts once the first call has compiled)."""
        if not Path(self.path).exists():
            return []
        with connect(self.path, read_only=True) as con:
            if not _has_runs_table(con):
                return []
            # An older store, read before any writer migrates it, may lack these: its runs are all the tracker's.
            run_method = "r.method" if _has_column(con, "runs", "method") else "NULL"
            compile_s = "r.compile_s" if _has_column(con, "runs", "compile_s") else "NULL"
            rows = con.execute(
                f"SELECT epoch(r.finished_at) - epoch(r.started_at) AS wall, wall - coalesce({compile_s}, 0) "
                "FROM runs r WHERE r.variant_sha256 = ? AND r.suite = ? AND r.mode = ? "
                f"AND coalesce({run_method}, 'tracker') = ? AND r.status = 'passed' AND r.finished_at IS NOT NULL "
                "AND r.run_id IN (SELECT run_id FROM case_results GROUP BY run_id "
                "HAVING list_sort(list(case_idx)) = ?::INTEGER[]) ORDER BY r.started_at DESC",
                [sha256, suite, mode, method, sorted(cases)],
            ).fetchall()
        return [(float(wall), float(timed)) for wall, timed in rows]

    def count_runs(self) -> int:
        """Number of runs in the store; 0 for a missing store or one without the schema yet."""
        if not Path(self.path).exists():
            return 0
        with connect(self.path, read_only=True) as con:
            if not _has_runs_table(con):
                return 0
            return int(con.execute("SELECT count(*) FROM runs").fetchone()[0])

    def facets(self) -> dict[str, Any]:
        """The values that filters offer: GPUs, suites, modes, statuses, families, and the date range."""
        with connect(self.path, read_only=True) as con:
            if not _has_runs_table(con):
                empty = {"gpu": [], "suite": [], "mode": [], "status": [], "family": [], "problem": []}
                return {**empty, "first": None, "last": None}
            cols = ("gpu", "suite", "mode", "status", "family", "problem")  # whitelist: fixed column names
            row = con.execute(
                "SELECT "
                + ", ".join(f"list(DISTINCT {c} ORDER BY {c}) FILTER (WHERE {c} IS NOT NULL)" for c in cols)
                + ", min(started_at), max(started_at) FROM runs"
            ).fetchone()
        out: dict[str, Any] = {c: list(v or []) for c, v in zip(cols, row[: len(cols)], strict=True)}
        out["first"], out["last"] = row[len(cols)], row[len(cols) + 1]
        return out

    def run_contexts(self) -> pd.DataFrame:
        """Per (problem, suite, mode, GPU, family): runs, passed runs, the start of the latest passed one and of the
        latest passed whole one (a timed run with a geomean: not a run of chosen cases); what
        tracker.analysis.context picks the pages' and commands' defaults from."""
        with connect(self.path, read_only=True) as con:
            if not _has_runs_table(con):
                return pd.DataFrame(
                    columns=["problem", "suite", "mode", "gpu", "family", "runs", "passed", "last_passed", "last_whole"]
                )
            timed = ", ".join("?" * len(TIMED_MODES))
            return con.execute(  # a run of a store from before problems were recorded is the built-in one's
                "SELECT coalesce(problem, ?) AS problem, suite, mode, gpu, family, count(*) AS runs, "
                "count(*) FILTER (WHERE status = 'passed') AS passed, max(started_at) FILTER (WHERE status = 'passed') "
                "AS last_passed, max(started_at) FILTER (WHERE status = 'passed' AND (geomean_us IS NOT NULL "
                f"OR mode NOT IN ({timed}))) AS last_whole "
                f"FROM {RUNS_IN_CONTEXT_SQL} WHERE status <> 'running' GROUP BY ALL",
                [DEFAULT_WORKLOAD, *TIMED_MODES],
            ).df()

    def run_choices(self, *, gpu: str | None = None, limit: int = 300, search: str | None = None) -> pd.DataFrame:
        """Recent runs for pickers: run_id, variant, path, status, suite, mode, gpu, geomean_us, started_at."""
        with connect(self.path, read_only=True) as con:
            where, params = _run_filters(gpu=gpu, search=search, names=names_sql(con))
            sql = (
                "SELECT run_id, variant, path, status, problem, suite, mode, gpu, geomean_us, started_at "
                f"FROM runs{where} ORDER BY started_at DESC LIMIT ?"
            )
            df = con.execute(sql, [*params, int(limit)]).df()
            _apply_live(df, _live_status(self.path, con), "run_id", "status")
            return df

    def shared_device_runs(self, run_ids: list[str] | tuple[str, ...]) -> list[str]:
        """Which of these runs did not have their device to themselves (other GPU processes, or a host load above
        its core count, at start or end): their timings may be contended."""
        if not run_ids:
            return []
        with connect(self.path, read_only=True) as con:
            rows = con.execute(
                "SELECT run_id FROM runs WHERE shared_device AND list_contains(?, run_id) ORDER BY started_at",
                [list(run_ids)],
            ).fetchall()
        return [r[0] for r in rows]
