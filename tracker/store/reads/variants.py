"""Variants and lineage: the variant table, index and list, pending variants, parents, sources, gate residuals."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

from tracker.common.lazy import pd
from tracker.common.vocabulary import DEFAULT_WORKLOAD
from tracker.store.connection import connect
from tracker.store.reads._sql import (
    FIRST_FAMILY_AND_PARENT_SQL,
    RUNS_IN_CONTEXT_SQL,
    _apply_live,
    _has_column,
    _has_runs_table,
    _live_status,
    _run_filters,
    case_label_sql,
    names_sql,
    ranked_sql,
    variant_family_sql,
)

VARIANT_SORTS = {
    # Geomeans of different contexts (suite, GPU or CPU) are not comparable: ranked within each context.
    # Contexts without a geomean (runs of chosen cases only) after those with one, not first by the GPU's name.
    "best geomean": "count(best_geomean_us) OVER (PARTITION BY suite, gpu) = 0, suite, gpu, "
    "best_geomean_us ASC NULLS LAST, last_run_at DESC",
    "latest run": "last_run_at DESC",
    "most runs": "runs DESC, last_run_at DESC",
    "name": "variant ASC, last_run_at DESC",
}


def _run_in_family(sha256: str) -> str:
    """A SQL condition (one parameter: the family) on the variant whose source hash is the column `sha256`: it has
    a run in that family (a variant run in two lines of work is in both trees)."""
    return f"{sha256} IN (SELECT variant_sha256 FROM runs WHERE family = ?)"


def _of_problem(problem: str | None, sha256: str) -> tuple[str, list[Any]]:
    """A SQL condition on the variant whose source hash is the column `sha256`: it has a run of `problem` (any
    suite and GPU), or none at all: one registered with `add` and never run belongs to no problem yet, so it is
    listed under each. TRUE without a problem."""
    if problem is None:
        return "TRUE", []
    return (
        f"(EXISTS (SELECT 1 FROM runs o WHERE o.variant_sha256 = {sha256} AND coalesce(o.problem, ?) = ?) "
        f"OR NOT EXISTS (SELECT 1 FROM runs o WHERE o.variant_sha256 = {sha256}))",
        [DEFAULT_WORKLOAD, problem],
    )


class VariantReads:
    """Reads of the store at `self.path` (a mixin of tracker.store.Store)."""

    path: str | os.PathLike

    def variant_table(
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
        sort: str = "best geomean",
        limit: int | None = None,
        problem: str | None = None,
    ) -> pd.DataFrame:
        """One row per variant (source hash) and benchmark context (problem, suite, GPU): its best and latest run.

        Geomeans of different problems, suites or GPUs are not comparable, hence the context in the key. Aggregated
        in SQL, so the cost does not grow with the number of samples.
        """
        with connect(self.path, read_only=True) as con:  # the names relation depends on the store's schema
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
                names=names_sql(con),
            )
            order = VARIANT_SORTS.get(sort, VARIANT_SORTS["best geomean"])
            ranked = ranked_sql(con)  # passed, by the tracker's own method: what may be a best
            sql = f"""
                WITH r AS (SELECT * FROM {RUNS_IN_CONTEXT_SQL}{where}),
                agg AS (
                    SELECT variant_sha256, problem, suite, gpu,
                        arg_max(variant, started_at) AS variant,
                        arg_max(path, started_at) AS path,
                        arg_max(note, started_at) FILTER (WHERE note IS NOT NULL) AS note,
                        count(*) AS runs,
                        count(*) FILTER (WHERE status = 'passed') AS passed,
                        min(geomean_us) FILTER (WHERE {ranked}) AS best_geomean_us,
                        arg_min(run_id, geomean_us) FILTER (WHERE {ranked} AND geomean_us IS NOT NULL) AS best_run,
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
                    SELECT variant_sha256, arg_max(verdict, created_at) AS verdict,
                        arg_max(reason, created_at) AS reason
                    FROM verdicts GROUP BY variant_sha256
                )
                SELECT agg.*, f.family, v.verdict, v.reason AS verdict_reason
                FROM agg LEFT JOIN {variant_family_sql(con)} f USING (variant_sha256)
                LEFT JOIN v USING (variant_sha256)
                ORDER BY {order}
            """
            if limit is not None:
                sql += " LIMIT ?"
                params.append(int(limit))
            df = con.execute(sql, params).df()
            _apply_live(df, _live_status(self.path, con), "latest_run", "latest_status")
            return df

    def variant_index(self) -> list[dict[str, Any]]:
        """Every variant's sha256, name, path, family (registered) and when it appeared (commit time, else first
        seen): for naming and resolving parents."""
        with connect(self.path, read_only=True) as con:
            if not _has_runs_table(con):
                return []
            registered = _has_column(con, "variants", "committed_at")  # the columns of `add` came in one migration
            at = "coalesce(committed_at, first_seen)" if registered else "first_seen"
            family = "family" if registered else "NULL"
            rows = con.execute(f"SELECT sha256, name, path, {at} AS seen_at, {family} FROM variants").fetchall()
        return [{"sha256": r[0], "name": r[1], "path": r[2], "at": r[3], "family": r[4]} for r in rows]

    def variant_names(self) -> list[dict[str, Any]]:
        """Every recorded name: name, sha256 (the content it stands for), path (the file it came from), family,
        added_at; [] for a store without variants yet."""
        if not Path(self.path).exists():
            return []
        with connect(self.path, read_only=True) as con:
            rows = con.execute(f"SELECT name, sha256, path, family, added_at FROM {names_sql(con)} ORDER BY name")
            return [
                dict(zip(("name", "sha256", "path", "family", "added_at"), r, strict=True)) for r in rows.fetchall()
            ]

    def name_paths(self) -> dict[str, str | None]:
        """Each name in use and the file it came from: what a new file's name must be told apart from (naming)."""
        found: dict[str, str | None] = {}
        for v in self.variant_index():  # a variant's own name first (an older version keeps it there)
            found.setdefault(v["name"], v["path"])
        for n in self.variant_names():
            found.setdefault(n["name"], n["path"])
        return found

    def resolve_variant_name(self, name: str) -> str | None:
        """The sha256 of the content that this recorded name stands for (a variant's name or one `add` recorded for
        its content), or None."""
        return next((n["sha256"] for n in self.variant_names() if n["name"] == name), None)

    def variant_list(
        self,
        *,
        family: str | None = None,
        suite: str | None = None,
        gpu: str | None = None,
        problem: str | None = None,
    ) -> pd.DataFrame:
        """Registered and run variants: variant, path, sha256, commit, committed_at, message, parent (a source hash)
        and parent_variant (its name), family, runs (in every context), best_geomean_us (best passed geomean in the
        suite, GPU and problem given: those of different contexts are not comparable), aliases (the other names
        recorded for its content: name, path, family), oldest first. A variant's family is its registered one, else
        that of its first run with one. `family`: variants whose own family it is, or that of any name recorded for
        it or of any of its runs. `problem`: only variants run on it, and those never run (as lineage_nodes)."""
        context, context_params = "", []
        for column, value in (("suite", suite), ("gpu", gpu)):
            if value is not None:
                context += f" AND {column} = ?"
                context_params.append(value)
        if problem is not None:
            context += " AND coalesce(problem, ?) = ?"
            context_params += [DEFAULT_WORKLOAD, problem]
        of_problem, problem_params = _of_problem(problem, "v.sha256")
        where = f" WHERE {of_problem}" + (
            " AND (coalesce(v.family, r.family) = ? OR v.sha256 IN (SELECT sha256 FROM names WHERE family = ?)"
            f" OR {_run_in_family('v.sha256')})"
            if family
            else ""
        )
        with connect(self.path, read_only=True) as con:
            names = names_sql(con)
            ranked = ranked_sql(con)  # passed, by the tracker's own method: what may be a best
            sql = f"""
                WITH names AS (SELECT * FROM {names}),
                r AS (
                    SELECT variant_sha256, count(*) AS runs,
                        min(geomean_us) FILTER (WHERE {ranked}{context}) AS best,{FIRST_FAMILY_AND_PARENT_SQL}
                    FROM runs GROUP BY variant_sha256
                ),
                -- The parent as lineage_nodes has it: from registration, else from the first run's parent run.
                p AS (SELECT v.sha256, coalesce(v.parent, pr.variant_sha256) AS parent FROM variants v
                      LEFT JOIN r ON r.variant_sha256 = v.sha256 LEFT JOIN runs pr ON pr.run_id = r.parent_run)
                SELECT v.name AS variant, v.path, v.sha256, v.commit, v.committed_at, v.message, p.parent,
                    pv.name AS parent_variant, coalesce(v.family, r.family) AS family, coalesce(r.runs, 0) AS runs,
                    r.best AS best_geomean_us,
                    -- the other names recorded for this content (`add` of an unchanged copy), oldest first
                    (SELECT list({{'name': n.name, 'path': n.path, 'family': n.family}} ORDER BY n.added_at, n.name)
                     FROM names n WHERE n.sha256 = v.sha256 AND n.name <> v.name) AS aliases
                FROM variants v LEFT JOIN r ON r.variant_sha256 = v.sha256 JOIN p ON p.sha256 = v.sha256
                LEFT JOIN variants pv ON pv.sha256 = p.parent{where}
                ORDER BY coalesce(v.committed_at, v.first_seen), v.name
            """
            df = con.execute(sql, context_params + problem_params + ([family] * 3 if family else [])).df()
        # a list of structs comes as an array of dicts, none as NULL: plain lists of dicts, [] for none
        df["aliases"] = [[dict(x) for x in a] if hasattr(a, "__iter__") else [] for a in df["aliases"]]
        return df

    def pending_variants(self, *, suite: str, mode: str, gpu: str | None, family: str | None = None) -> pd.DataFrame:
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
        with connect(self.path, read_only=True) as con:
            return con.execute(sql, params).df()

    def lineage_nodes(
        self,
        *,
        family: str | None = None,
        suite: str | None = None,
        gpu: str | None = None,
        problem: str | None = None,
    ) -> pd.DataFrame:
        """Every variant (of a family; with `problem`, of those run on it and those never run) with its parent
        variant: from registration, else from its first run's parent run (of any suite and GPU). With its runs,
        best passed run and geomean, latest run (in the suite, GPU and problem if given: another problem's runs of a
        suite are other cases) and verdict."""
        clauses, params = ["status <> 'running'"], []
        if problem:
            clauses.append("coalesce(problem, ?) = ?")
            params += [DEFAULT_WORKLOAD, problem]
        if suite:
            clauses.append("suite = ?")
            params.append(suite)
        if gpu:
            clauses.append("gpu = ?")
            params.append(gpu)
        where = " AND ".join(clauses)
        of_problem, problem_params = _of_problem(problem or None, "v.sha256")  # another problem's variants apart
        with connect(self.path, read_only=True) as con:
            registered = _has_column(con, "variants", "parent")
            vparent = "v.parent" if registered else "NULL"
            vfam = "v.family" if registered else "NULL"
            vcommit = "v.commit, v.message" if registered else "NULL AS commit, NULL AS message"
            ranked = ranked_sql(con)  # passed, by the tracker's own method: what may be a best
            sql = f"""
                WITH r AS (
                    SELECT variant_sha256, count(*) AS runs,
                        min(geomean_us) FILTER (WHERE {ranked}) AS best_geomean_us,
                        arg_min(run_id, geomean_us) FILTER (WHERE {ranked} AND geomean_us IS NOT NULL) AS best_run,
                        arg_max(run_id, started_at) AS latest_run, arg_max(status, started_at) AS latest_status,
                        max(started_at) FILTER (WHERE status = 'passed' AND geomean_us IS NOT NULL) AS last_timed_at
                    FROM runs WHERE {where} GROUP BY variant_sha256
                ),
                -- parent and family from every run: the tree is the same in every suite and GPU
                a AS (
                    SELECT variant_sha256,{FIRST_FAMILY_AND_PARENT_SQL}
                    FROM runs WHERE status <> 'running' GROUP BY variant_sha256
                ),
                vd AS (SELECT variant_sha256, arg_max(verdict, created_at) AS verdict FROM verdicts GROUP BY 1)
                SELECT v.sha256, v.name AS variant, v.path, {vcommit},
                    coalesce({vparent}, pr.variant_sha256) AS parent, coalesce({vfam}, a.family) AS family,
                    coalesce(r.runs, 0) AS runs, r.best_geomean_us, r.best_run, r.latest_run, r.latest_status,
                    r.last_timed_at,
                    vd.verdict, coalesce({"v.committed_at, " if registered else ""}v.first_seen) AS seen_at
                FROM variants v LEFT JOIN r ON r.variant_sha256 = v.sha256
                LEFT JOIN a ON a.variant_sha256 = v.sha256
                LEFT JOIN runs pr ON pr.run_id = a.parent_run
                LEFT JOIN vd ON vd.variant_sha256 = v.sha256
                WHERE {of_problem}
            """
            member = f" WHERE family = ? OR {_run_in_family('sha256')}"  # of a family: its own, or a run of it
            df = con.execute(f"SELECT * FROM ({sql}){member if family else ''} ORDER BY seen_at, variant",
                             params + problem_params + ([family, family] if family else [])).df()  # fmt: skip
        return df

    def variant_families(self, *, names: bool = False) -> list[str]:
        """Families of registered variants and of runs; with `names`, also those recorded on their other names
        (`add --family` of a copy: what variant_list's family takes)."""
        with connect(self.path, read_only=True) as con:
            vfam = "SELECT family FROM variants UNION " if _has_column(con, "variants", "family") else ""
            nfam = f"SELECT family FROM {names_sql(con)} UNION " if names else ""
            rows = con.execute(f"SELECT DISTINCT family FROM ({vfam}{nfam}SELECT family FROM runs) "
                               "WHERE family IS NOT NULL ORDER BY family").fetchall()  # fmt: skip
        return [r[0] for r in rows]

    def parent_source(self, run_id: str) -> dict[str, Any] | None:
        """What a run was derived from, with its source: the run's parent run, else its variant's registered parent
        variant. None when it has neither."""
        with connect(self.path, read_only=True) as con:
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

    def variant_source(self, sha256: str) -> str | None:
        with connect(self.path, read_only=True) as con:
            row = con.execute("SELECT source FROM variants WHERE sha256 = ?", [sha256]).fetchone()
        return row[0] if row else None

    def run_parents(self, run_ids: list[str]) -> pd.DataFrame:
        """run_id, variant, variant_sha256 and the parent run's variant and variant_sha256, for runs with a parent."""
        with connect(self.path, read_only=True) as con:
            return con.execute(
                "SELECT r.run_id, r.variant, r.variant_sha256, p.variant AS parent_variant, "
                "p.variant_sha256 AS parent_sha256 FROM runs r JOIN runs p ON p.run_id = r.parent_run "
                "WHERE r.run_id IN (SELECT unnest(?)) ORDER BY r.started_at",
                [list(run_ids)],
            ).df()

    def gate_residuals(self, sha256s: list[str] | None = None) -> pd.DataFrame:
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
        with connect(self.path, read_only=True) as con:
            return con.execute(sql, [list(sha256s)] if sha256s is not None else []).df()
