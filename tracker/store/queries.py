"""Read-only queries over the store, shared by the CLI and the dashboard. The only place that reads SQL.

Each function opens the store read-only, reads, closes, and returns plain data (pandas DataFrames or dicts).
Values from users (run ids, search text, filters) are always bound parameters; the few identifiers that are
put into SQL text come from fixed whitelists in this module.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pandas as pd

from tracker.store import connect

RUN_LIST_COLUMNS = (
    "run_id, variant, path, family, status, problem, suite, mode, device, gpu, geomean_us, started_at, finished_at, "
    "git_commit, git_branch, git_dirty, note, parent_run, trigger"
)
# A case's seed-free name, as its workload's Case.label spells it: what comparisons and histories key on. Runs
# recorded before workloads stored a label were qr_v2, whose label is built from its columns.
CASE_LABEL_SQL = "coalesce(label, format('{}x{} c{:g} {}', batch, n, CAST(cond AS DOUBLE), case_name))"
TIMED_MODES = ("benchmark", "leaderboard")


def list_runs(store: str | os.PathLike, *, limit: int | None = None) -> pd.DataFrame:
    """All runs, newest first."""
    sql = f"SELECT {RUN_LIST_COLUMNS} FROM runs ORDER BY started_at DESC"
    params: list[Any] = []
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    with connect(store, read_only=True) as con:
        return con.execute(sql, params).df()


def get_run(store: str | os.PathLike, run_id: str) -> dict[str, Any] | None:
    """One run's row as a dict, or None if there is no such run."""
    with connect(store, read_only=True) as con:
        df = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]).df()
    if df.empty:
        return None
    return df.iloc[0].to_dict()


def case_results(store: str | os.PathLike, run_id: str) -> pd.DataFrame:
    with connect(store, read_only=True) as con:
        return con.execute("SELECT * FROM case_results WHERE run_id = ? ORDER BY case_idx", [run_id]).df()


def run_samples(store: str | os.PathLike, run_id: str) -> pd.DataFrame:
    """Every timed repetition of a run: case_idx, rep, time_us."""
    with connect(store, read_only=True) as con:
        return con.execute(
            "SELECT case_idx, rep, time_us FROM samples WHERE run_id = ? ORDER BY case_idx, rep",
            [run_id],
        ).df()


def resolve_run_id(store: str | os.PathLike, prefix: str) -> str | None:
    """Accept a unique prefix of a run id, as git does for commits."""
    with connect(store, read_only=True) as con:
        rows = con.execute("SELECT run_id FROM runs WHERE starts_with(run_id, ?) LIMIT 2", [prefix]).fetchall()
    return rows[0][0] if len(rows) == 1 else None


# ------------------------------------------------------------------------------------------- dashboard


def store_version(store: str | os.PathLike) -> tuple[int, ...]:
    """A key that changes whenever the store is written: modification times and sizes of the file and its WAL.

    Dashboard caches are keyed on it, so a finished run shows up on the next render without a timer.
    """
    parts: list[int] = []
    for path in (Path(store), Path(f"{store}.wal")):
        try:
            st = path.stat()
        except OSError:
            parts += [0, 0]
        else:
            parts += [st.st_mtime_ns, st.st_size]
    return tuple(parts)


def _has_runs_table(con) -> bool:
    return bool(
        con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'runs' AND table_schema = 'main'"
        ).fetchone()[0]
    )


def count_runs(store: str | os.PathLike) -> int:
    """Number of runs in the store; 0 for a missing store or one without the schema yet."""
    if not Path(store).exists():
        return 0
    with connect(store, read_only=True) as con:
        if not _has_runs_table(con):
            return 0
        return int(con.execute("SELECT count(*) FROM runs").fetchone()[0])


def facets(store: str | os.PathLike) -> dict[str, Any]:
    """The values that filters offer: GPUs, suites, modes, statuses, families, and the date range."""
    with connect(store, read_only=True) as con:
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


def _run_filters(
    *,
    gpu: str | None = None,
    suite: str | None = None,
    mode: str | None = None,
    status: str | None = None,
    family: str | None = None,
    since: dt.date | None = None,
    until: dt.date | None = None,
    search: str | None = None,
    prefix: str = "",
    problem: str | None = None,
) -> tuple[str, list[Any]]:
    """A WHERE clause over the runs table (alias `prefix`) and its parameters."""
    p = prefix
    clauses: list[str] = []
    params: list[Any] = []
    filters = (("gpu", gpu), ("suite", suite), ("mode", mode), ("status", status), ("family", family))
    for col, value in (*filters, ("problem", problem)):
        if value:
            clauses.append(f"{p}{col} = ?")
            params.append(value)
    if since:
        clauses.append(f"{p}started_at >= CAST(? AS TIMESTAMPTZ)")
        params.append(dt.datetime.combine(since, dt.time(), dt.UTC))
    if until:
        clauses.append(f"{p}started_at < CAST(? AS TIMESTAMPTZ)")
        params.append(dt.datetime.combine(until + dt.timedelta(days=1), dt.time(), dt.UTC))
    if search and search.strip():
        needle = search.strip().lower()
        fields = [f"{p}variant", f"{p}path", f"{p}family", f"{p}note", f"{p}run_id"]
        ors = [f"contains(lower(coalesce({f}, '')), ?)" for f in fields]
        # verdict reasons are part of a variant's notes too
        ors.append(
            f"{p}variant_sha256 IN (SELECT variant_sha256 FROM verdicts WHERE contains(lower(coalesce(reason, '')), ?))"
        )
        clauses.append("(" + " OR ".join(ors) + ")")
        params += [needle] * len(ors)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


VARIANT_SORTS = {
    "best geomean": "best_geomean_us ASC NULLS LAST, last_run_at DESC",
    "latest run": "last_run_at DESC",
    "most runs": "runs DESC, last_run_at DESC",
    "name": "variant ASC, last_run_at DESC",
}


def variant_table(
    store: str | os.PathLike,
    *,
    gpu: str | None = None,
    suite: str | None = None,
    mode: str | None = None,
    status: str | None = None,
    family: str | None = None,
    since: dt.date | None = None,
    until: dt.date | None = None,
    search: str | None = None,
    sort: str = "best geomean",
    limit: int | None = None,
    problem: str | None = None,
) -> pd.DataFrame:
    """One row per variant (source hash) and benchmark context (problem, suite, GPU): its best and latest run.

    Geomeans of different problems, suites or GPUs are not comparable, hence the context in the key. Aggregated
    in SQL, so the cost does not grow with the number of samples.
    """
    where, params = _run_filters(
        gpu=gpu,
        suite=suite,
        mode=mode,
        status=status,
        family=family,
        since=since,
        until=until,
        search=search,
        problem=problem,
    )
    order = VARIANT_SORTS.get(sort, VARIANT_SORTS["best geomean"])
    sql = f"""
        WITH r AS (SELECT * FROM runs{where}),
        agg AS (
            SELECT variant_sha256, problem, suite, gpu,
                arg_max(variant, started_at) AS variant,
                arg_max(path, started_at) AS path,
                arg_max(family, started_at) FILTER (WHERE family IS NOT NULL) AS family,
                arg_max(note, started_at) FILTER (WHERE note IS NOT NULL) AS note,
                count(*) AS runs,
                count(*) FILTER (WHERE status = 'passed') AS passed,
                min(geomean_us) FILTER (WHERE status = 'passed') AS best_geomean_us,
                arg_min(run_id, geomean_us) FILTER (WHERE status = 'passed' AND geomean_us IS NOT NULL)
                    AS best_run,
                arg_max(run_id, started_at) AS latest_run,
                arg_max(status, started_at) AS latest_status,
                arg_max(geomean_us, started_at) AS latest_geomean_us,
                min(started_at) AS first_run_at,
                max(started_at) AS last_run_at
            FROM r GROUP BY variant_sha256, problem, suite, gpu
        ),
        v AS (
            SELECT variant_sha256, arg_max(verdict, created_at) AS verdict, arg_max(reason, created_at) AS reason
            FROM verdicts GROUP BY variant_sha256
        )
        SELECT agg.*, v.verdict, v.reason AS verdict_reason
        FROM agg LEFT JOIN v USING (variant_sha256)
        ORDER BY {order}
    """
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    with connect(store, read_only=True) as con:
        return con.execute(sql, params).df()


def progress_points(
    store: str | os.PathLike,
    *,
    gpu: str | None = None,
    suite: str | None = None,
    mode: str | None = None,
    family: str | None = None,
    since: dt.date | None = None,
    until: dt.date | None = None,
    search: str | None = None,
    problem: str | None = None,
) -> pd.DataFrame:
    """Every passed run with a geomean, oldest first: the points of the progress chart (per-run geomeans only)."""
    where, params = _run_filters(
        gpu=gpu,
        suite=suite,
        mode=mode,
        status="passed",
        family=family,
        since=since,
        until=until,
        search=search,
        problem=problem,
    )
    sql = (
        "SELECT run_id, started_at, variant, coalesce(family, '(none)') AS family, problem, suite, gpu, geomean_us "
        f"FROM runs{where}{' AND' if where else ' WHERE'} geomean_us IS NOT NULL ORDER BY started_at"
    )
    with connect(store, read_only=True) as con:
        return con.execute(sql, params).df()


def run_choices(store: str | os.PathLike, *, gpu: str | None = None, limit: int = 300) -> pd.DataFrame:
    """Recent runs for pickers: run_id, variant, status, suite, mode, gpu, geomean_us, started_at."""
    where, params = _run_filters(gpu=gpu)
    sql = (
        "SELECT run_id, variant, status, problem, suite, mode, gpu, geomean_us, started_at "
        f"FROM runs{where} ORDER BY started_at DESC LIMIT ?"
    )
    with connect(store, read_only=True) as con:
        return con.execute(sql, [*params, int(limit)]).df()


def run_bundle(store: str | os.PathLike, run_id: str, *, with_samples: bool = True) -> dict[str, Any] | None:
    """Everything recorded for one run, read in one connection; None if there is no such run.

    Keys: run (dict), cases, samples, profile_cases, profile_kernels, verdicts (DataFrames), source (str).
    Cases carry a `label` column (the seed-free case name).
    """
    with connect(store, read_only=True) as con:
        runs = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]).df()
        if runs.empty:
            return None
        run = runs.iloc[0].to_dict()
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
    return {
        "run": run,
        "cases": cases,
        "samples": samples,
        "profile_cases": profile_cases,
        "profile_kernels": profile_kernels,
        "verdicts": verdicts,
        "source": row[0] if row else None,
    }


def history_scopes(store: str | os.PathLike) -> dict[str, pd.DataFrame]:
    """What a history can be taken along: families and kernel files, with their run counts."""
    with connect(store, read_only=True) as con:
        families = con.execute(
            "SELECT family, count(*) AS runs, max(started_at) AS last_run_at FROM runs "
            "WHERE family IS NOT NULL GROUP BY family ORDER BY last_run_at DESC"
        ).df()
        paths = con.execute(
            "SELECT path, count(*) AS runs, max(started_at) AS last_run_at FROM runs "
            "WHERE path IS NOT NULL GROUP BY path ORDER BY last_run_at DESC"
        ).df()
    return {"family": families, "path": paths}


def _scope_filter(family: str | None, path: str | None) -> tuple[str, list[Any]]:
    if family is not None:
        return "family = ?", [family]
    if path is not None:
        return "path = ?", [path]
    raise ValueError("a history needs a family or a kernel path")


def history_contexts(store: str | os.PathLike, *, family: str | None = None, path: str | None = None) -> pd.DataFrame:
    """The (problem, suite, GPU) contexts with timed runs along a family or kernel file, most runs first."""
    scope, params = _scope_filter(family, path)
    modes = ", ".join("?" * len(TIMED_MODES))
    sql = (
        f"SELECT problem, suite, gpu, count(*) AS runs FROM runs WHERE {scope} AND mode IN ({modes}) "
        "GROUP BY problem, suite, gpu ORDER BY runs DESC, problem, suite, gpu"
    )
    with connect(store, read_only=True) as con:
        return con.execute(sql, [*params, *TIMED_MODES]).df()


def case_history(
    store: str | os.PathLike,
    *,
    family: str | None = None,
    path: str | None = None,
    suite: str,
    gpu: str | None,
    last: int | None = 300,
    problem: str | None = None,
) -> dict[str, pd.DataFrame]:
    """The timed runs along a family or kernel file in one (suite, GPU) context, oldest first (the last `last`).

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
    limit = " LIMIT ?" if last else ""
    if last:
        params.append(int(last))
    with connect(store, read_only=True) as con:
        con.execute(
            "CREATE TEMP TABLE hist AS SELECT * FROM ("
            "SELECT run_id, variant, variant_sha256, path, family, status, started_at, geomean_us, git_commit "
            f"FROM runs WHERE {scope} AND suite = ? AND mode IN ({modes}) AND {gpu_clause} "
            f"ORDER BY started_at DESC{limit}) ORDER BY started_at",
            params,
        )
        runs = con.execute("SELECT * FROM hist ORDER BY started_at").df()
        cases = con.execute(
            f"SELECT c.run_id, c.case_idx, {CASE_LABEL_SQL.replace('label', 'c.label', 1)} AS label, c.passed, "
            "c.mean_us, c.err_us "
            "FROM case_results c JOIN hist h USING (run_id) ORDER BY h.started_at, c.case_idx"
        ).df()
        samples = con.execute(
            "SELECT s.run_id, s.case_idx, list(s.time_us ORDER BY s.rep) AS samples "
            "FROM samples s JOIN hist h USING (run_id) GROUP BY s.run_id, s.case_idx"
        ).df()
    return {"runs": runs, "cases": cases, "samples": samples}
