"""What the store's reads share: SQL fragments, the filters over runs, the live status of `running` rows."""

from __future__ import annotations

import datetime as dt
import os
import socket
from typing import Any

from tracker.common.lazy import pd
from tracker.common.processes import process_alive
from tracker.store.schema import newest_names_sql
from tracker.store.sidefiles import pending_dir, pending_run_ids

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


# The runs table with every run in a GPU context. A run that never reached a GPU (cancelled while it waited for the
# device) records none, and grouped as it was it made a context of its own ("qr_v2 · None" beside the H200 runs of
# its variant). It takes the GPU its variant last ran on in the same problem and suite, else its family's; only a run
# with neither keeps none. Reads that group or pick by GPU read runs through this.
RUNS_IN_CONTEXT_SQL = """(
    SELECT t.* REPLACE (coalesce(t.gpu, v.gpu, f.gpu) AS gpu) FROM runs t
    LEFT JOIN (SELECT variant_sha256, problem, suite, arg_max(gpu, started_at) AS gpu FROM runs
               WHERE gpu IS NOT NULL GROUP BY ALL) v
        ON t.gpu IS NULL AND v.variant_sha256 = t.variant_sha256 AND v.problem IS NOT DISTINCT FROM t.problem
            AND v.suite = t.suite
    LEFT JOIN (SELECT family, problem, suite, arg_max(gpu, started_at) AS gpu FROM runs
               WHERE gpu IS NOT NULL AND family IS NOT NULL GROUP BY ALL) f
        ON t.gpu IS NULL AND f.family = t.family AND f.problem IS NOT DISTINCT FROM t.problem AND f.suite = t.suite
) runs"""


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


def _has_runs_table(con) -> bool:
    return bool(
        con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'runs' AND table_schema = 'main'"
        ).fetchone()[0]
    )


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
    names: str | None = None,
) -> tuple[str, list[Any]]:
    """A WHERE clause over the runs table (alias `prefix`) and its parameters. `names` (names_sql): the search
    also finds the runs of a content by any name recorded for it."""
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
        if names:
            ors.append(f"{p}variant_sha256 IN (SELECT sha256 FROM {names} WHERE contains(lower(name), ?))")
        clauses.append("(" + " OR ".join(ors) + ")")
        params += [needle] * len(ors)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _has_table(con, name: str) -> bool:
    return bool(
        con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]).fetchone()[0]
    )


def _has_column(con, table: str, column: str) -> bool:
    """Whether an older store (opened read-only, so not migrated) already has a column."""
    return bool(
        con.execute(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = ? AND column_name = ?", [table, column]
        ).fetchone()[0]
    )


# A variant's family and parent run come from its first run that names one (per variant_sha256, over `runs`): a
# later run under another family must not move the variant out of the first one's tree.
FIRST_FAMILY_AND_PARENT_SQL = """
    arg_min(family, started_at) FILTER (WHERE family IS NOT NULL) AS family,
    arg_min(parent_run, started_at) FILTER (WHERE parent_run IS NOT NULL) AS parent_run"""


def variant_family_sql(con) -> str:
    """A relation (variant_sha256, family) over the variants with runs: the family a variant was registered with
    (`add --family`), else its first run's. The tables and boards that show a variant's family read it here, as
    the variant list and lineage do, so a later run under another family moves the variant in none of them."""
    registered = "v.family" if _has_column(con, "variants", "family") else "NULL"
    return (
        f"(SELECT a.variant_sha256, coalesce({registered}, a.family) AS family "
        f"FROM (SELECT variant_sha256,{FIRST_FAMILY_AND_PARENT_SQL} FROM runs GROUP BY variant_sha256) a "
        "LEFT JOIN variants v ON v.sha256 = a.variant_sha256)"
    )


def tracker_method_sql(con, alias: str = "") -> str:
    """Runs of the tracker's own method. The others (contest) are the harness's report, which a kernel in that
    process can write: they are shown, never ranked (leaderboard, new bests, a variant's best geomean)."""
    p = f"{alias}." if alias else ""
    return f"coalesce({p}method, 'tracker') = 'tracker'" if _has_column(con, "runs", "method") else "TRUE"


def ranked_sql(con, alias: str = "") -> str:
    """The runs that may be a best: passed, by the tracker's own method."""
    return f"{alias + '.' if alias else ''}status = 'passed' AND {tracker_method_sql(con, alias)}"


_NO_NAMES = (
    "(SELECT NULL::VARCHAR AS name, NULL::VARCHAR AS sha256, NULL::VARCHAR AS path, NULL::VARCHAR AS family, "
    "NULL::TIMESTAMPTZ AS added_at WHERE false)"
)


def names_sql(con) -> str:
    """The store's variant names as a relation (name, sha256, path, family, added_at): the variant_names table, or
    in a store from before v12 (a read never migrates) each name for its newest content, as v12 fills the table."""
    if _has_table(con, "variant_names"):
        return "variant_names"
    if not _has_table(con, "variants"):
        return _NO_NAMES
    if _has_column(con, "variants", "committed_at"):  # the columns of `add` came in one migration (v7)
        return f"({newest_names_sql('variants')})"
    return f"({newest_names_sql('variants', at='first_seen', family='NULL::VARCHAR')})"


def variant_clause(names: str, name: str, prefix: str = "") -> tuple[str, list[Any]]:
    """Runs (alias `prefix`) of the variant called `name`: those recorded under the name, and every run of the
    content the name stands for now (any name it was run under)."""
    p = prefix
    return f"({p}variant = ? OR {p}variant_sha256 IN (SELECT sha256 FROM {names} WHERE name = ?))", [name, name]
