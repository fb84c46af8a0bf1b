"""Read-only queries over the store, shared by the CLI and the dashboard. The only place that reads SQL.

Each function opens the store read-only, reads, closes, and returns plain data (pandas DataFrames or dicts).
Values from users (run ids, search text, filters) are always bound parameters; the few identifiers that are
put into SQL text come from fixed whitelists in this module.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import socket
from pathlib import Path
from typing import Any

import pandas as pd

from tracker.common.processes import process_alive
from tracker.store import SCHEMA_VERSION, connect, pending_dir, pending_run_ids, read_side_file, schema_version
from tracker.store.db import SchemaTooNewError
from tracker.store.schema import GPU_STATE_COLUMNS, TABLE_COLUMNS

RUN_LIST_COLUMNS = (
    "run_id, variant, path, family, status, problem, suite, mode, device, gpu, geomean_us, started_at, finished_at, "
    "git_commit, git_branch, git_dirty, note, parent_run, trigger"
)


# A case's seed-free name, as its workload's Case.label spells it: what comparisons and histories key on. Runs
# recorded before workloads stored a label were qr_v2, whose label is built from its columns.
def case_label_sql(alias: str | None = None) -> str:
    """A case's seed-free label in SQL: the label the workload recorded, else qr_v2's shape format (runs from
    before labels were recorded). `alias` names the table or subquery holding the case_results columns."""
    a = f"{alias}." if alias else ""
    shape = f"format('{{}}x{{}} c{{:g}} {{}}', {a}batch, {a}n, CAST({a}cond AS DOUBLE), {a}case_name)"
    return f"coalesce({a}label, {shape})"


CASE_LABEL_SQL = case_label_sql()
TIMED_MODES = ("benchmark", "leaderboard")
IN_LIST_MAX = 1000  # run ids bound one by one up to this many (index lookups); a subquery beyond


def _live_status(store: str | os.PathLike, con) -> dict[str, tuple[str, str | None]]:
    """What `running` rows really are, without writing: {run_id: (status, side file)}. A run whose complete
    record waits in a side file is `pending` (with that file); one whose process on this host is gone is
    `crashed` (the next writer records it so)."""
    rows = con.execute("SELECT run_id, host, pid FROM runs WHERE status = 'running'").fetchall()
    if not rows:
        return {}
    folder = pending_dir(store)
    waiting = pending_run_ids(store)
    host = socket.gethostname()
    out: dict[str, tuple[str, str | None]] = {}
    for run_id, run_host, pid in rows:
        if run_id in waiting:
            out[run_id] = ("pending", str(folder / f"{run_id}.json"))
        elif run_host == host and not process_alive(pid):
            out[run_id] = ("crashed", None)
    return out


def _apply_live(df: pd.DataFrame, live: dict[str, tuple[str, str | None]], id_col: str, status_col: str) -> None:
    if live and not df.empty and id_col in df and status_col in df:
        found = df[id_col].map(lambda r: live.get(r, (None,))[0])
        df[status_col] = found.where(found.notna(), df[status_col])


def side_file_runs(store: str | os.PathLike) -> list[dict[str, Any]]:
    """Runs whose record waits in the store's side folder, as run rows with status `pending` and `side_file`."""
    folder = pending_dir(store)
    out = []
    for run_id in sorted(pending_run_ids(store)):
        side = folder / f"{run_id}.json"
        try:
            run = read_side_file(side).run
            run = {c: run.get(c) for c in RUN_LIST_COLUMNS.split(", ")}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # unreadable or not the tracker's own: `import` reports it
        run.update(status="pending", side_file=str(side))
        with contextlib.suppress(TypeError, ValueError):
            run["started_at"] = pd.Timestamp(run["started_at"])
        out.append(run)
    return out


def list_runs(
    store: str | os.PathLike,
    *,
    limit: int | None = None,
    search: str | None = None,
    family: str | None = None,
    status: str | None = None,
    variant: str | None = None,
    since: dt.datetime | None = None,
) -> pd.DataFrame:
    """All runs (those whose name, path, family, note, id or verdict reason contains `search`; of a family,
    status or variant name; started from `since` on), newest first."""
    where, params = _run_filters(search=search, family=family, status=status)
    if since is not None:  # to the second: _run_filters' since is a date
        where += (" AND " if where else " WHERE ") + "started_at >= CAST(? AS TIMESTAMPTZ)"
        params.append(since)
    if variant is not None:
        where += (" AND " if where else " WHERE ") + "variant = ?"
        params.append(variant)
    sql = f"SELECT {RUN_LIST_COLUMNS} FROM runs{where} ORDER BY started_at DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    with connect(store, read_only=True) as con:
        df = con.execute(sql, params).df()
        live = _live_status(store, con)
    _apply_live(df, live, "run_id", "status")
    extra = [r for r in side_file_runs(store) if r["run_id"] not in set(df["run_id"])] if not where else []
    if extra:  # runs that never reached the store (it was locked from their start)
        df = pd.concat([df, pd.DataFrame(extra)[[c for c in df.columns]]], ignore_index=True)
        df = df.sort_values("started_at", ascending=False, ignore_index=True)
        if limit is not None:
            df = df.head(int(limit))
    return df


def get_run(store: str | os.PathLike, run_id: str) -> dict[str, Any] | None:
    """One run's row as a dict (status as it really is, see _live_status; `side_file` where a pending run
    waits), or None if there is no such run."""
    with connect(store, read_only=True) as con:
        df = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]).df()
        live = _live_status(store, con)
    if df.empty:
        waiting = [r for r in side_file_runs(store) if r["run_id"] == run_id]
        return waiting[0] if waiting else None
    run = df.iloc[0].to_dict()
    run["status"], run["side_file"] = live.get(run_id, (run["status"], None))
    return run


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
    ids = match_run_ids(store, prefix, limit=2)
    return ids[0] if len(ids) == 1 else None


def latest_run_of_variant(store: str | os.PathLike, name: str) -> str | None:
    """The newest run of the variant with this name (any status), e.g. to name it as a parent."""
    if not Path(store).exists():
        return None
    with connect(store, read_only=True) as con:
        if not _has_runs_table(con):
            return None
        row = con.execute(
            "SELECT run_id FROM runs WHERE variant = ? ORDER BY started_at DESC, run_id LIMIT 1", [name]
        ).fetchone()
    return row[0] if row else None


def match_run_ids(store: str | os.PathLike, prefix: str, *, limit: int = 10) -> list[str]:
    """The run ids starting with `prefix` (at most `limit`, newest first): one for a unique prefix."""
    return run_candidates(store, prefix, limit=limit)["run_id"].tolist()


def run_candidates(store: str | os.PathLike, prefix: str, *, limit: int = 20) -> pd.DataFrame:
    """Runs whose id starts with `prefix` (to list when a prefix is ambiguous), newest first."""
    with connect(store, read_only=True) as con:
        return con.execute(
            "SELECT run_id, variant, path, status, suite, mode, gpu, started_at FROM runs "
            "WHERE starts_with(run_id, ?) ORDER BY started_at DESC LIMIT ?",
            [prefix, int(limit)],
        ).df()


# ------------------------------------------------------------------------------------------- dashboard


def store_version(store: str | os.PathLike) -> tuple[int, ...]:
    """A key that changes whenever the store is written: modification times and sizes of the file and its WAL.

    Dashboard caches are keyed on it, so a finished run shows up on the next render without a timer.
    """
    parts: list[int] = []
    for path in (Path(store), Path(f"{store}.wal"), pending_dir(store)):  # a side file arriving shows too
        try:
            st = path.stat()
        except OSError:
            parts += [0, 0]
        else:
            parts += [st.st_mtime_ns, st.st_size]
    return tuple(parts)


def store_problem(store: str | os.PathLike) -> str | None:
    """Why the dashboard must not use this path as a store, or None: it does not exist, is not a DuckDB file, is
    a DuckDB file without our tables, or has a newer schema than this tracker. Opens read-only; changes nothing."""
    path = Path(store)
    if not path.exists():
        return f"There is no store at **{path}**. Check the path (the dashboard creates no store there)."
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
                    f"**{path}** is a DuckDB file but not a KernelBeam store (it has no runs table); it is left as is."
                )
            version = schema_version(con)
    except SchemaTooNewError:  # reads refuse a newer schema on open
        return newer
    if version > SCHEMA_VERSION:
        return newer
    return None


def _has_runs_table(con) -> bool:
    return bool(
        con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'runs' AND table_schema = 'main'"
        ).fetchone()[0]
    )


def past_durations(store: str | os.PathLike, variants: list[tuple[str, str]], suite: str, mode: str) -> dict:
    """Median wall seconds of earlier finished runs, per (variant_sha256, variant name) asked for: runs of the
    same source first, else of the same name, in the same suite and mode. Variants with no such run are left
    out. For ordering a queue, so it does not matter that case selections differ."""
    if not variants or not Path(store).exists():
        return {}
    with connect(store, read_only=True) as con:
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


def run_contexts(store: str | os.PathLike) -> pd.DataFrame:
    """Per (problem, suite, mode, GPU, family): runs, passed runs and the start of the latest passed one; what
    tracker.analysis.context picks the pages' and commands' defaults from."""
    with connect(store, read_only=True) as con:
        if not _has_runs_table(con):
            return pd.DataFrame(columns=["problem", "suite", "mode", "gpu", "family", "runs", "passed", "last_passed"])
        return con.execute(
            "SELECT problem, suite, mode, gpu, family, count(*) AS runs, count(*) FILTER (WHERE status = 'passed') "
            "AS passed, max(started_at) FILTER (WHERE status = 'passed') AS last_passed FROM runs "
            "WHERE status <> 'running' GROUP BY ALL"
        ).df()


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
    # Geomeans of different contexts (suite, GPU or CPU) are not comparable: ranked within each context.
    "best geomean": "suite, gpu, best_geomean_us ASC NULLS LAST, last_run_at DESC",
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
                -- arg_max skips NULLs, which would show an older run's geomean as the latest one's
                arg_max_null(geomean_us, started_at) AS latest_geomean_us,
                min(started_at) AS first_run_at,
                max(started_at) AS last_run_at,
                arg_max(flags, started_at) AS latest_flags
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
        df = con.execute(sql, params).df()
        _apply_live(df, _live_status(store, con), "latest_run", "latest_status")
        return df


def progress_points(
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
    with connect(store, read_only=True) as con:
        return con.execute(sql, [*params, limit, limit]).df()


def run_choices(
    store: str | os.PathLike, *, gpu: str | None = None, limit: int = 300, search: str | None = None
) -> pd.DataFrame:
    """Recent runs for pickers: run_id, variant, path, status, suite, mode, gpu, geomean_us, started_at."""
    where, params = _run_filters(gpu=gpu, search=search)
    sql = (
        "SELECT run_id, variant, path, status, problem, suite, mode, gpu, geomean_us, started_at "
        f"FROM runs{where} ORDER BY started_at DESC LIMIT ?"
    )
    with connect(store, read_only=True) as con:
        df = con.execute(sql, [*params, int(limit)]).df()
        _apply_live(df, _live_status(store, con), "run_id", "status")
        return df


def profile_top_kernels(store: str | os.PathLike, run_id: str, *, limit: int = 10) -> pd.DataFrame:
    """A profiled run's kernels summed over its cases, the most device time first: kernel, calls, device_us,
    self_us, cases (how many cases launched it)."""
    with connect(store, read_only=True) as con:
        if not _has_table(con, "profile_kernels"):
            return pd.DataFrame(columns=["kernel", "calls", "device_us", "self_us", "cases"])
        return con.execute(
            "SELECT kernel, CAST(sum(calls) AS BIGINT) AS calls, sum(device_us) AS device_us, sum(self_us) AS self_us, "
            "count(DISTINCT case_idx) AS cases FROM profile_kernels WHERE run_id = ? GROUP BY kernel "
            "ORDER BY device_us DESC NULLS LAST, kernel LIMIT ?",
            [run_id, int(limit)],
        ).df()


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


def ncu_profile(store: str | os.PathLike, run_id: str) -> dict[str, pd.DataFrame]:
    """A run's Nsight Compute profile: `cases` (case_idx, report file name, kernels, error) and `kernels` (one row
    per profiled kernel in launch order; stalls as stored JSON). Both empty for a run made without --ncu."""
    with connect(store, read_only=True) as con:
        cases, kernels = _ncu_frames(con, run_id)
    return {"cases": cases, "kernels": kernels}


def run_bundle(store: str | os.PathLike, run_id: str, *, with_samples: bool = True) -> dict[str, Any] | None:
    """Everything recorded for one run, read in one connection; None if there is no such run.

    Keys: run (dict), cases, samples, profile_cases, profile_kernels, ncu_cases, ncu_kernels, verdicts
    (DataFrames), source (str).
    Cases carry a `label` column (the seed-free case name).
    """
    with connect(store, read_only=True) as con:
        runs = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]).df()
        if runs.empty:
            return None
        run = runs.iloc[0].to_dict()
        run["status"], run["side_file"] = _live_status(store, con).get(run_id, (run["status"], None))
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
    with connect(store, read_only=True) as con:
        con.execute(
            "CREATE TEMP TABLE hist AS SELECT * FROM ("
            "SELECT run_id, variant, variant_sha256, path, family, status, started_at, geomean_us, git_commit, note "
            f"FROM runs WHERE {scope} AND suite = ? AND mode IN ({modes}) AND {gpu_clause} AND status <> 'skipped' "
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


EVIDENCE_COLUMNS = (
    "case_idx, repetition, input_idx, matrix_idx, n, message, factor_res, tril_res, recon_res, orth_res, arrays_bytes"
)


def _has_table(con, name: str) -> bool:
    return bool(
        con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]).fetchone()[0]
    )


def run_evidence(store: str | os.PathLike, run_id: str, *, case_idx: int | None = None) -> pd.DataFrame:
    """The evidence kept for a run's failed checks, one row per case, without the arrays (a store written
    before evidence existed has none)."""
    with connect(store, read_only=True) as con:
        if not _has_table(con, "evidence"):
            return pd.DataFrame(columns=[c.strip() for c in EVIDENCE_COLUMNS.split(",")])
        sql = f"SELECT {EVIDENCE_COLUMNS} FROM evidence WHERE run_id = ?"
        params: list[Any] = [run_id]
        if case_idx is not None:
            sql += " AND case_idx = ?"
            params.append(int(case_idx))
        return con.execute(sql + " ORDER BY case_idx", params).df()


def evidence_arrays(store: str | os.PathLike, run_id: str, case_idx: int) -> bytes | None:
    """The .npz bytes (input `a`, `h`, `tau` of the failing matrix) kept for one case, or None."""
    with connect(store, read_only=True) as con:
        if not _has_table(con, "evidence"):
            return None
        row = con.execute(
            "SELECT arrays FROM evidence WHERE run_id = ? AND case_idx = ?", [run_id, int(case_idx)]
        ).fetchone()
    return bytes(row[0]) if row and row[0] is not None else None


def shared_device_runs(store: str | os.PathLike, run_ids: list[str] | tuple[str, ...]) -> list[str]:
    """Which of these runs did not have their device to themselves (other GPU processes, or a host load above
    its core count, at start or end): their timings may be contended."""
    if not run_ids:
        return []
    with connect(store, read_only=True) as con:
        rows = con.execute(
            "SELECT run_id FROM runs WHERE shared_device AND list_contains(?, run_id) ORDER BY started_at",
            [list(run_ids)],
        ).fetchall()
    return [r[0] for r in rows]


def gpu_states(store: str | os.PathLike, run_ids: list[str] | tuple[str, ...]) -> pd.DataFrame:
    """The GPU state per case of these runs (run_id, case_idx, spec, label and the GPU_STATE_COLUMNS); an older
    store without them gives no rows."""
    with connect(store, read_only=True) as con:
        if not run_ids or not _has_column(con, "case_results", "throttle"):
            return pd.DataFrame(columns=["run_id", "case_idx", "spec", "label", *GPU_STATE_COLUMNS])
        return con.execute(
            f"SELECT run_id, case_idx, spec, {CASE_LABEL_SQL} AS label, {', '.join(GPU_STATE_COLUMNS)} "
            "FROM case_results WHERE list_contains(?, run_id) ORDER BY run_id, case_idx",
            [list(run_ids)],
        ).df()


def pair_runs(store: str | os.PathLike, pair_id: str) -> dict[str, pd.DataFrame]:
    """The runs of one A/B session (runs: run_id, variant, pair_side, pair_round, status; cases: run_id, case_idx,
    label, passed, mean_us), by round; empty frames for an unknown pair or an older store."""
    with connect(store, read_only=True) as con:
        if not _has_column(con, "runs", "pair_id"):
            return {"runs": pd.DataFrame(columns=["run_id", "variant", "pair_side", "pair_round", "status"]),
                    "cases": pd.DataFrame(columns=["run_id", "case_idx", "label", "passed", "mean_us"])}  # fmt: skip
        runs = con.execute(
            "SELECT run_id, variant, pair_side, pair_round, status FROM runs WHERE pair_id = ? "
            "ORDER BY pair_round, started_at",
            [pair_id],
        ).df()
        cases = con.execute(
            f"SELECT run_id, case_idx, {CASE_LABEL_SQL} AS label, passed, mean_us FROM case_results "
            "WHERE list_contains(?, run_id) ORDER BY case_idx",
            [runs["run_id"].tolist()],
        ).df()
    return {"runs": runs, "cases": cases}


# ------------------------------------------------------------------------------------ workspace variants


def _has_column(con, table: str, column: str) -> bool:
    """Whether an older store (opened read-only, so not migrated) already has a column."""
    return bool(
        con.execute(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = ? AND column_name = ?", [table, column]
        ).fetchone()[0]
    )


def variant_index(store: str | os.PathLike) -> list[dict[str, Any]]:
    """Every variant's sha256, name, path, family (registered) and when it appeared (commit time, else first
    seen): for naming and resolving parents."""
    with connect(store, read_only=True) as con:
        if not _has_runs_table(con):
            return []
        registered = _has_column(con, "variants", "committed_at")  # the columns of `add` came in one migration
        at = "coalesce(committed_at, first_seen)" if registered else "first_seen"
        family = "family" if registered else "NULL"
        rows = con.execute(f"SELECT sha256, name, path, {at} AS seen_at, {family} FROM variants").fetchall()
    return [{"sha256": r[0], "name": r[1], "path": r[2], "at": r[3], "family": r[4]} for r in rows]


def variant_list(store: str | os.PathLike, *, family: str | None = None) -> pd.DataFrame:
    """Registered and run variants: variant, path, sha256, commit, committed_at, message, parent (a source hash)
    and parent_variant (its name), family, runs, best_geomean_us (best passed geomean of any context), oldest
    first."""
    where = " WHERE coalesce(v.family, r.family) = ?" if family else ""
    sql = f"""
        WITH r AS (
            SELECT variant_sha256, count(*) AS runs, min(geomean_us) FILTER (WHERE status = 'passed') AS best,
                arg_max(family, started_at) FILTER (WHERE family IS NOT NULL) AS family,
                arg_min(parent_run, started_at) FILTER (WHERE parent_run IS NOT NULL) AS parent_run
            FROM runs GROUP BY variant_sha256
        ),
        -- The parent as lineage_nodes has it: from registration, else from the first run's parent run.
        p AS (SELECT v.sha256, coalesce(v.parent, pr.variant_sha256) AS parent FROM variants v
              LEFT JOIN r ON r.variant_sha256 = v.sha256 LEFT JOIN runs pr ON pr.run_id = r.parent_run)
        SELECT v.name AS variant, v.path, v.sha256, v.commit, v.committed_at, v.message, p.parent,
            pv.name AS parent_variant, coalesce(v.family, r.family) AS family, coalesce(r.runs, 0) AS runs,
            r.best AS best_geomean_us
        FROM variants v LEFT JOIN r ON r.variant_sha256 = v.sha256 JOIN p ON p.sha256 = v.sha256
        LEFT JOIN variants pv ON pv.sha256 = p.parent{where}
        ORDER BY coalesce(v.committed_at, v.first_seen), v.name
    """
    with connect(store, read_only=True) as con:
        return con.execute(sql, [family] if family else []).df()


def pending_variants(
    store: str | os.PathLike, *, suite: str, mode: str, gpu: str | None, family: str | None = None
) -> pd.DataFrame:
    """Registered variants with no run in this suite, mode and GPU (None: no GPU): sha256, name, path, commit,
    family, source; oldest first."""
    gpu_clause = "r.gpu = ?" if gpu is not None else "r.gpu IS NULL"
    params: list[Any] = [suite, mode] + ([gpu] if gpu is not None else [])
    fam = ""
    if family:
        fam = " AND v.family = ?"
        params.append(family)
    sql = f"""
        SELECT v.sha256, v.name, v.path, v.commit, v.family, v.source FROM variants v
        WHERE v.registered_at IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM runs r WHERE r.variant_sha256 = v.sha256 AND r.suite = ? AND r.mode = ? AND {gpu_clause}
            AND r.status <> 'running'){fam}
        ORDER BY coalesce(v.committed_at, v.first_seen), v.name
    """
    with connect(store, read_only=True) as con:
        return con.execute(sql, params).df()


def leaderboard_cells(
    store: str | os.PathLike,
    *,
    suite: str,
    mode: str = "benchmark",
    gpu: str | None = None,
    family: str | None = None,
) -> dict[str, pd.DataFrame]:
    """The leaderboard in one aggregate pass: per (variant, case) the best passed mean and its run, and per
    variant its name, path, family, run count and best passed geomean. GPU None means every run without a GPU."""
    gpu_clause = "gpu = ?" if gpu is not None else "gpu IS NULL"
    params: list[Any] = [suite, mode] + ([gpu] if gpu is not None else [])
    with connect(store, read_only=True) as con:
        vfam = "v.family" if _has_column(con, "variants", "family") else "NULL"
        fam = f" AND coalesce(r.family, {vfam}) = ?" if family else ""
        con.execute(
            "CREATE TEMP TABLE lb_runs AS SELECT r.run_id, r.variant_sha256, r.status, r.geomean_us, r.started_at, "
            f"r.variant, r.path, coalesce(r.family, {vfam}) AS family FROM runs r "
            "LEFT JOIN variants v ON v.sha256 = r.variant_sha256 WHERE r.status NOT IN ('skipped', 'running') "
            f"AND r.suite = ? AND r.mode = ? AND r.{gpu_clause}"
            f"{fam}",
            params + ([family] if family else []),
        )
        variants = con.execute(
            "SELECT variant_sha256, arg_max(variant, started_at) AS variant, arg_max(path, started_at) AS path, "
            "arg_max(family, started_at) AS family, count(*) AS runs, "
            "min(geomean_us) FILTER (WHERE status = 'passed') AS best_geomean_us, "
            "arg_min(run_id, geomean_us) FILTER (WHERE status = 'passed' AND geomean_us IS NOT NULL) AS best_run, "
            "arg_max(run_id, started_at) AS latest_run FROM lb_runs GROUP BY variant_sha256"
        ).df()
        cells = con.execute(
            # Grouped on the raw shape columns; the label is formatted once per group, not once per case row.
            f"SELECT variant_sha256, case_idx, {case_label_sql('g')} AS label, best_us, run_id FROM ("
            # In one suite a case index is one shape (a hidden seed changes the seed only), so group on the integer.
            "SELECT r.variant_sha256, c.case_idx, any_value(c.batch) AS batch, any_value(c.n) AS n, "
            "any_value(c.cond) AS cond, any_value(c.case_name) AS case_name, any_value(c.label) AS label, "
            "min(c.mean_us) AS best_us, arg_min(c.run_id, c.mean_us) AS run_id "
            "FROM case_results c JOIN lb_runs r USING (run_id) WHERE c.passed AND c.mean_us IS NOT NULL "
            "GROUP BY r.variant_sha256, c.case_idx) g"
        ).df()
    return {"variants": variants, "cells": cells}


def lineage_nodes(
    store: str | os.PathLike, *, family: str | None = None, suite: str | None = None, gpu: str | None = None
) -> pd.DataFrame:
    """Every variant (of a family) with its parent variant: from registration, else from its first run's
    parent run. With its best passed run and geomean (in the suite and GPU if given), latest run and verdict."""
    clauses, params = ["status <> 'running'"], []
    if suite:
        clauses.append("suite = ?")
        params.append(suite)
    if gpu:
        clauses.append("gpu = ?")
        params.append(gpu)
    where = " AND ".join(clauses)
    with connect(store, read_only=True) as con:
        registered = _has_column(con, "variants", "parent")
        vparent = "v.parent" if registered else "NULL"
        vfam = "v.family" if registered else "NULL"
        vcommit = "v.commit, v.message" if registered else "NULL AS commit, NULL AS message"
        sql = f"""
            WITH r AS (
                SELECT variant_sha256, count(*) AS runs,
                    min(geomean_us) FILTER (WHERE status = 'passed') AS best_geomean_us,
                    arg_min(run_id, geomean_us) FILTER (WHERE status = 'passed' AND geomean_us IS NOT NULL) AS best_run,
                    arg_max(run_id, started_at) AS latest_run, arg_max(status, started_at) AS latest_status,
                    max(started_at) FILTER (WHERE status = 'passed' AND geomean_us IS NOT NULL) AS last_timed_at,
                    arg_min(parent_run, started_at) FILTER (WHERE parent_run IS NOT NULL) AS parent_run,
                    arg_max(family, started_at) FILTER (WHERE family IS NOT NULL) AS family
                FROM runs WHERE {where} GROUP BY variant_sha256
            ),
            vd AS (SELECT variant_sha256, arg_max(verdict, created_at) AS verdict FROM verdicts GROUP BY 1)
            SELECT v.sha256, v.name AS variant, v.path, {vcommit},
                coalesce({vparent}, pr.variant_sha256) AS parent, coalesce({vfam}, r.family) AS family,
                coalesce(r.runs, 0) AS runs, r.best_geomean_us, r.best_run, r.latest_run, r.latest_status,
                r.last_timed_at,
                vd.verdict, coalesce({"v.committed_at, " if registered else ""}v.first_seen) AS seen_at
            FROM variants v LEFT JOIN r ON r.variant_sha256 = v.sha256
            LEFT JOIN runs pr ON pr.run_id = r.parent_run
            LEFT JOIN vd ON vd.variant_sha256 = v.sha256
        """
        df = con.execute(f"SELECT * FROM ({sql}){' WHERE family = ?' if family else ''} ORDER BY seen_at, variant",
                         params + ([family] if family else [])).df()  # fmt: skip
    return df


def since_activity(store: str | os.PathLike, since: dt.datetime) -> dict[str, pd.DataFrame]:
    """What happened from `since` on: runs (newest first), their cases (with the best mean of the case before, in
    the same suite, mode and GPU), the best geomean before per context, verdicts (newest first), and `histories`:
    per (kernel file, problem, suite, GPU) of a new timed run, that file's case_history, as Regressions reads it."""
    with connect(store, read_only=True) as con:
        con.execute(
            "CREATE TEMP TABLE new_runs AS SELECT run_id, variant_sha256, variant, path, family, status, suite, "
            "mode, gpu, problem, geomean_us, started_at, error FROM runs WHERE started_at >= CAST(? AS TIMESTAMPTZ)",
            [since],
        )
        runs = con.execute("SELECT * FROM new_runs ORDER BY started_at DESC, run_id").df()  # newest first, as `list`
        cases = con.execute(
            f"""
            WITH nc AS (
                SELECT c.run_id, n.suite, n.mode, n.gpu, n.path, n.started_at, c.case_idx,
                    {case_label_sql("c")} AS label, c.passed, c.mean_us
                FROM case_results c JOIN new_runs n USING (run_id)
            ),
            before AS (
                SELECT suite, mode, gpu, {case_label_sql("g")} AS label, best_before_us FROM (
                    SELECT r.suite, r.mode, r.gpu, c.case_idx, any_value(c.batch) AS batch, any_value(c.n) AS n,
                        any_value(c.cond) AS cond, any_value(c.case_name) AS case_name, any_value(c.label) AS label,
                        min(c.mean_us) AS best_before_us
                    FROM case_results c JOIN runs r USING (run_id)
                    WHERE r.started_at < CAST(? AS TIMESTAMPTZ) AND c.passed AND c.mean_us IS NOT NULL
                    GROUP BY r.suite, r.mode, r.gpu, c.case_idx) g
            )
            SELECT nc.*, b.best_before_us FROM nc LEFT JOIN before b
                ON b.suite = nc.suite AND b.mode = nc.mode AND b.gpu IS NOT DISTINCT FROM nc.gpu AND b.label = nc.label
            ORDER BY nc.started_at, nc.case_idx
            """,
            [since],
        ).df()
        best_geo = con.execute(
            "SELECT suite, mode, gpu, min(geomean_us) AS best_before_us FROM runs WHERE status = 'passed' "
            "AND started_at < CAST(? AS TIMESTAMPTZ) "
            "GROUP BY ALL",
            [since],
        ).df()
        modes = ", ".join("?" * len(TIMED_MODES))
        contexts = con.execute(
            f"SELECT DISTINCT path, problem, suite, gpu FROM new_runs WHERE path IS NOT NULL AND mode IN ({modes}) "
            "AND status = 'passed' ORDER BY ALL",
            list(TIMED_MODES),
        ).fetchall()
        verdicts = con.execute(
            "SELECT v.run_id, r.variant, v.verdict, v.reason, v.created_at FROM verdicts v "
            "LEFT JOIN runs r USING (run_id) WHERE v.created_at >= CAST(? AS TIMESTAMPTZ) ORDER BY v.created_at DESC",
            [since],
        ).df()
    histories = [
        (path, case_history(store, path=path, suite=suite, gpu=gpu, problem=problem))
        for path, problem, suite, gpu in contexts
    ]
    return {"runs": runs, "cases": cases, "best_geomean": best_geo, "verdicts": verdicts, "histories": histories}


def variant_families(store: str | os.PathLike) -> list[str]:
    """Families of registered variants and of runs."""
    with connect(store, read_only=True) as con:
        vfam = "SELECT family FROM variants UNION " if _has_column(con, "variants", "family") else ""
        rows = con.execute(f"SELECT DISTINCT family FROM ({vfam}SELECT family FROM runs) WHERE family IS NOT NULL "
                           "ORDER BY family").fetchall()  # fmt: skip
    return [r[0] for r in rows]


def parent_source(store: str | os.PathLike, run_id: str) -> dict[str, Any] | None:
    """What a run was derived from, with its source: the run's parent run, else its variant's registered parent
    variant. None when it has neither."""
    with connect(store, read_only=True) as con:
        row = con.execute(
            "SELECT pr.run_id, pv.name, pv.source FROM runs r JOIN runs pr ON pr.run_id = r.parent_run "
            "JOIN variants pv ON pv.sha256 = pr.variant_sha256 WHERE r.run_id = ?",
            [run_id],
        ).fetchone()
        if row is None and _has_column(con, "variants", "parent"):
            row = con.execute(
                "SELECT NULL, pv.name, pv.source FROM runs r JOIN variants v ON v.sha256 = r.variant_sha256 "
                "JOIN variants pv ON pv.sha256 = v.parent WHERE r.run_id = ?",
                [run_id],
            ).fetchone()
    return None if row is None else {"parent_run": row[0], "parent_variant": row[1], "source": row[2]}


def dead_ends(
    store: str | os.PathLike, *, families: list[str] | None = None, with_source: bool = False
) -> list[dict[str, Any]]:
    """Variants whose latest verdict is `rejected` (of these families, if given), oldest verdict first: variant,
    sha256, family, the judged run_id and its note, reason, assumption, created_at (and source)."""
    with connect(store, read_only=True) as con:
        if not _has_runs_table(con):
            return []
        verdicts = (
            "verdicts"
            if _has_column(con, "verdicts", "assumption")
            else (
                "(SELECT *, NULL::VARCHAR AS assumption FROM verdicts)"  # a store from before v9
            )
        )
        vfam = "v.family" if _has_column(con, "variants", "family") else "NULL"
        sql = f"""
            WITH latest AS (
                SELECT variant_sha256, arg_max(verdict, created_at) AS verdict, arg_max(run_id, created_at) AS run_id,
                    arg_max(reason, created_at) AS reason, arg_max(assumption, created_at) AS assumption,
                    max(created_at) AS created_at
                FROM {verdicts} WHERE variant_sha256 IS NOT NULL GROUP BY 1
            )
            SELECT * FROM (
                SELECT v.name AS variant, l.variant_sha256 AS sha256, coalesce(r.family, {vfam}) AS family, l.run_id,
                    r.note, l.reason, l.assumption, l.created_at{", v.source" if with_source else ""}
                FROM latest l JOIN variants v ON v.sha256 = l.variant_sha256 LEFT JOIN runs r ON r.run_id = l.run_id
                WHERE l.verdict = 'rejected'
            ) {"WHERE family IN (SELECT unnest(?))" if families is not None else ""}
            ORDER BY created_at
        """
        rows = con.execute(sql, [list(families)] if families is not None else []).df()
    return rows.to_dict("records")


def latest_verdict(store: str | os.PathLike, sha256: str) -> str | None:
    """The latest verdict on a variant, or None."""
    with connect(store, read_only=True) as con:
        if not _has_runs_table(con):
            return None
        row = con.execute(
            "SELECT verdict FROM verdicts WHERE variant_sha256 = ? ORDER BY created_at DESC LIMIT 1", [sha256]
        ).fetchone()
    return row[0] if row else None


def variant_source(store: str | os.PathLike, sha256: str) -> str | None:
    with connect(store, read_only=True) as con:
        row = con.execute("SELECT source FROM variants WHERE sha256 = ?", [sha256]).fetchone()
    return row[0] if row else None


def gate_residuals(store: str | os.PathLike, sha256s: list[str] | None = None) -> pd.DataFrame:
    """Per variant, problem and case (seed-free label: every hidden seed counts as the case), the worst scaled
    residuals over every finished run: variant_sha256, problem, label, case_idx, factor_res, orth_res, runs."""
    where = "AND r.variant_sha256 IN (SELECT unnest(?))" if sha256s is not None else ""
    sql = f"""
        SELECT r.variant_sha256, r.problem, {case_label_sql("c")} AS label, min(c.case_idx) AS case_idx,
            max(c.factor_res) AS factor_res, max(c.orth_res) AS orth_res, count(DISTINCT r.run_id) AS runs
        FROM case_results c JOIN runs r USING (run_id)
        WHERE r.status NOT IN ('running', 'skipped') {where}
        GROUP BY ALL ORDER BY r.variant_sha256, case_idx
    """
    with connect(store, read_only=True) as con:
        return con.execute(sql, [list(sha256s)] if sha256s is not None else []).df()


def run_parents(store: str | os.PathLike, run_ids: list[str]) -> pd.DataFrame:
    """run_id, variant, variant_sha256 and the parent run's variant and variant_sha256, for runs with a parent."""
    with connect(store, read_only=True) as con:
        return con.execute(
            "SELECT r.run_id, r.variant, r.variant_sha256, p.variant AS parent_variant, "
            "p.variant_sha256 AS parent_sha256 FROM runs r JOIN runs p ON p.run_id = r.parent_run "
            "WHERE r.run_id IN (SELECT unnest(?)) ORDER BY r.started_at",
            [list(run_ids)],
        ).df()
