"""Verdicts: the latest on a variant, and the dead ends (variants whose latest verdict is rejected)."""

from __future__ import annotations

import os
from typing import Any

from tracker.common.vocabulary import DEFAULT_WORKLOAD
from tracker.store.connection import connect
from tracker.store.reads._sql import (
    _has_column,
    _has_runs_table,
)


class VerdictReads:
    """Reads of the store at `self.path` (a mixin of tracker.store.Store)."""

    path: str | os.PathLike

    def dead_ends(
        self, *, families: list[str] | None = None, with_source: bool = False, problem: str | None = None
    ) -> list[dict[str, Any]]:
        """Variants whose latest verdict is `rejected` (of these families and of this problem, if given: the judged
        run's), oldest verdict first: variant, sha256, family, the judged run_id and its note, reason, assumption,
        created_at (and source)."""
        with connect(self.path, read_only=True) as con:
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
                        r.note, l.reason, l.assumption, l.created_at{", v.source" if with_source else ""},
                        coalesce({"r.problem" if _has_column(con, "runs", "problem") else "NULL"}, ?) AS problem
                    FROM latest l JOIN variants v ON v.sha256 = l.variant_sha256 LEFT JOIN runs r ON r.run_id = l.run_id
                    WHERE l.verdict = 'rejected'
                ) WHERE {"family IN (SELECT unnest(?))" if families is not None else "true"}
                    AND {"problem = ?" if problem is not None else "true"}
                ORDER BY created_at
            """
            params = [DEFAULT_WORKLOAD, *([list(families)] if families is not None else [])]
            # rows as dicts without pandas: `run` reads this before every run, and its front never imports pandas
            cur = con.execute(sql, params + ([problem] if problem is not None else []))
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def latest_verdict(self, sha256: str) -> str | None:
        """The latest verdict on a variant, or None."""
        with connect(self.path, read_only=True) as con:
            if not _has_runs_table(con):
                return None
            row = con.execute(
                "SELECT verdict FROM verdicts WHERE variant_sha256 = ? ORDER BY created_at DESC LIMIT 1", [sha256]
            ).fetchone()
        return row[0] if row else None
