"""The store's schema: ordered migrations and the column whitelist every generated statement uses."""

from __future__ import annotations

from tracker.common.vocabulary import CASE_STATS, RUN_METHODS, RUN_STATUSES  # noqa: F401 - re-exported
from tracker.store.records import RUN_FIELDS


def newest_names_sql(variants: str, at: str = "coalesce(committed_at, first_seen)", family: str = "family") -> str:
    """Each name of the variants in `variants` (a table or subquery) for its newest content, as variant_names rows
    (name, sha256, path, family, added_at): what a name meant before names had a table of their own (`ab NAME`
    took the newest snapshot of that name). `at` and `family` stand in for columns a store before v7 lacks."""
    return (
        f"SELECT name, sha256, path, {family} AS family, {at} AS added_at FROM {variants} "
        f"QUALIFY row_number() OVER (PARTITION BY name ORDER BY {at} DESC, sha256 DESC) = 1"
    )


# Ordered migrations: index i brings the schema from version i to version i + 1. Never edit a shipped one.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE variants (
        sha256 VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, path VARCHAR, source VARCHAR NOT NULL,
        first_seen TIMESTAMPTZ NOT NULL
    );
    CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY, variant_sha256 VARCHAR NOT NULL, variant VARCHAR NOT NULL, path VARCHAR,
        family VARCHAR, parent_run VARCHAR, note VARCHAR,
        status VARCHAR NOT NULL, suite VARCHAR NOT NULL, mode VARCHAR NOT NULL, seed BIGINT,
        started_at TIMESTAMPTZ NOT NULL, finished_at TIMESTAMPTZ,
        host VARCHAR, pid INTEGER, device VARCHAR, gpu VARCHAR, sm_count INTEGER, driver VARCHAR,
        cuda VARCHAR, torch VARCHAR, triton VARCHAR, python VARCHAR,
        git_repo VARCHAR, git_commit VARCHAR, git_branch VARCHAR, git_dirty BOOLEAN, git_diff VARCHAR,
        trigger VARCHAR, error VARCHAR, log_tail VARCHAR, warnings VARCHAR, geomean_us DOUBLE
    );
    CREATE TABLE case_results (
        run_id VARCHAR NOT NULL, case_idx INTEGER NOT NULL, spec VARCHAR NOT NULL, kind VARCHAR NOT NULL,
        batch INTEGER, n INTEGER, cond DOUBLE, seed BIGINT, case_name VARCHAR, inputs INTEGER,
        passed BOOLEAN NOT NULL, message VARCHAR,
        factor_res DOUBLE, tril_res DOUBLE, recon_res DOUBLE, orth_res DOUBLE,
        runs INTEGER, mean_us DOUBLE, std_us DOUBLE, err_us DOUBLE, best_us DOUBLE, worst_us DOUBLE,
        PRIMARY KEY (run_id, case_idx)
    );
    CREATE TABLE samples (run_id VARCHAR NOT NULL, case_idx INTEGER NOT NULL, rep INTEGER NOT NULL, time_us DOUBLE);
    CREATE TABLE profile_cases (
        run_id VARCHAR NOT NULL, case_idx INTEGER NOT NULL, launches INTEGER, host_us DOUBLE, device_us DOUBLE,
        trace_path VARCHAR
    );
    CREATE TABLE profile_kernels (
        run_id VARCHAR NOT NULL, case_idx INTEGER NOT NULL, kernel VARCHAR, calls INTEGER,
        device_us DOUBLE, self_us DOUBLE
    );
    CREATE TABLE verdicts (
        run_id VARCHAR NOT NULL, variant_sha256 VARCHAR, verdict VARCHAR NOT NULL, reason VARCHAR,
        created_at TIMESTAMPTZ NOT NULL
    );
    """,
    # v2: samples are read per run, by far the largest table.
    "CREATE INDEX samples_run ON samples (run_id); CREATE INDEX case_results_run ON case_results (run_id);",
    # v3: the median of a case's samples, beside mean and std (older runs: computed from their samples).
    "ALTER TABLE case_results ADD COLUMN median_us DOUBLE; "
    "UPDATE case_results SET median_us = m.median_us FROM "
    "(SELECT run_id, case_idx, median(time_us) AS median_us FROM samples GROUP BY run_id, case_idx) m "
    "WHERE case_results.run_id = m.run_id AND case_results.case_idx = m.case_idx;",
    # v4: the evidence of a failed check: the worst matrix's input, H and tau (a compressed .npz) and residuals.
    """
    CREATE TABLE evidence (
        run_id VARCHAR NOT NULL, case_idx INTEGER NOT NULL, repetition INTEGER, input_idx INTEGER,
        matrix_idx INTEGER, n INTEGER, message VARCHAR,
        factor_res DOUBLE, tril_res DOUBLE, recon_res DOUBLE, orth_res DOUBLE,
        arrays BLOB, arrays_bytes BIGINT
    );
    """,
    # v5 (trust): compile time apart from kernel time, what shared the device, static-scan flags (JSON lists).
    "ALTER TABLE runs ADD COLUMN compile_s DOUBLE; ALTER TABLE runs ADD COLUMN device_load_start VARCHAR; "
    "ALTER TABLE runs ADD COLUMN device_load_end VARCHAR; ALTER TABLE runs ADD COLUMN shared_device BOOLEAN; "
    "ALTER TABLE runs ADD COLUMN flags VARCHAR;",
    # v6 (workloads): the problem a run was judged by (and a hash of its definition); generic cases as JSON arguments,
    # their seed-free label, and the work per call for rate columns. Runs from before were all qr_v2.
    """
    ALTER TABLE runs ADD COLUMN problem VARCHAR DEFAULT 'qr_v2';
    ALTER TABLE runs ADD COLUMN problem_sha256 VARCHAR;
    ALTER TABLE case_results ADD COLUMN args VARCHAR;
    ALTER TABLE case_results ADD COLUMN label VARCHAR;
    ALTER TABLE case_results ADD COLUMN flops DOUBLE;
    ALTER TABLE case_results ADD COLUMN bytes DOUBLE;
    """,
    # v7 (workspace): variants registered without a run (`tracker add`): the commit of the content, lineage.
    """
    ALTER TABLE variants ADD COLUMN commit VARCHAR; ALTER TABLE variants ADD COLUMN committed_at TIMESTAMPTZ;
    ALTER TABLE variants ADD COLUMN message VARCHAR; ALTER TABLE variants ADD COLUMN family VARCHAR;
    ALTER TABLE variants ADD COLUMN parent VARCHAR; ALTER TABLE variants ADD COLUMN registered_at TIMESTAMPTZ;
    """,
    # v8 (containment): how the worker was contained, the helper modules the kernel imported (JSON path ->
    # source), the supervisor's wall clock per call beside the kernel's own timing, and one call on fresh copies of
    # the inputs after the loop (a cache keyed by the input objects misses there).
    "ALTER TABLE runs ADD COLUMN sandbox VARCHAR; ALTER TABLE runs ADD COLUMN helper_sources VARCHAR; "
    "ALTER TABLE case_results ADD COLUMN wall_us DOUBLE; ALTER TABLE case_results ADD COLUMN fresh_us DOUBLE;",
    # v9 (dead ends): the assumption a verdict rests on (`verdict RUN rejected --reason ... --assumption ...`).
    "ALTER TABLE verdicts ADD COLUMN assumption VARCHAR;",
    # v10 (GPU state; run methods): the device's clocks, power and temperature over each case's timed loop (NVML,
    # sampled by the runner outside the sandbox), min/median/max, and the throttle reasons seen; empty without NVML.
    # How a run was timed (NULL: the tracker's own method; `contest`: the problem folder's own eval.py) and the
    # sha256 of every harness file it used (JSON name -> sha256). The runs of one interleaved A/B session (`ab`):
    # its id, the side (A or B) and the round of each.
    """
    ALTER TABLE runs ADD COLUMN method VARCHAR; ALTER TABLE runs ADD COLUMN harness_files VARCHAR;
    ALTER TABLE runs ADD COLUMN pair_id VARCHAR; ALTER TABLE runs ADD COLUMN pair_side VARCHAR;
    ALTER TABLE runs ADD COLUMN pair_round INTEGER;
    ALTER TABLE case_results ADD COLUMN gpu_samples INTEGER;
    ALTER TABLE case_results ADD COLUMN sm_mhz_min DOUBLE; ALTER TABLE case_results ADD COLUMN sm_mhz_median DOUBLE;
    ALTER TABLE case_results ADD COLUMN sm_mhz_max DOUBLE; ALTER TABLE case_results ADD COLUMN mem_mhz_min DOUBLE;
    ALTER TABLE case_results ADD COLUMN mem_mhz_median DOUBLE; ALTER TABLE case_results ADD COLUMN mem_mhz_max DOUBLE;
    ALTER TABLE case_results ADD COLUMN power_w_min DOUBLE; ALTER TABLE case_results ADD COLUMN power_w_median DOUBLE;
    ALTER TABLE case_results ADD COLUMN power_w_max DOUBLE; ALTER TABLE case_results ADD COLUMN temp_c_min DOUBLE;
    ALTER TABLE case_results ADD COLUMN temp_c_median DOUBLE; ALTER TABLE case_results ADD COLUMN temp_c_max DOUBLE;
    ALTER TABLE case_results ADD COLUMN throttle VARCHAR;
    """,
    # v11 (hardware profiles): Nsight Compute over one call per case (`run --ncu`): per case the report file kept
    # in <store>.traces/RUN/ (a name, not a path, so the store can move) or why there is none; per profiled kernel
    # in launch order its duration, achieved occupancy, SM and memory throughput (% of peak), registers per
    # thread, shared memory per block (static, dynamic; bytes), block and grid size, and the top stall reasons
    # (JSON object: reason -> warp cycles per issued instruction).
    """
    CREATE TABLE ncu_cases (
        run_id VARCHAR NOT NULL, case_idx INTEGER NOT NULL, report VARCHAR, kernels INTEGER, error VARCHAR
    );
    CREATE TABLE ncu_kernels (
        run_id VARCHAR NOT NULL, case_idx INTEGER NOT NULL, kernel_idx INTEGER NOT NULL, kernel VARCHAR,
        duration_us DOUBLE, occupancy_pct DOUBLE, sm_pct DOUBLE, memory_pct DOUBLE, registers INTEGER,
        static_smem_bytes BIGINT, dynamic_smem_bytes BIGINT, block_size INTEGER, grid_size BIGINT, stalls VARCHAR
    );
    """,
    # v12 (names): every name a variant is known by, one content per name; a content may have several (`add` of an
    # unchanged copy records its file's name). `path`: the file the name came from, so that a changed file keeps its
    # name (the name moves to the new content) while another file's content cannot take it. Backfilled with each
    # variant's name as it resolved before. Built from newest_names_sql: change that only with a new migration.
    "CREATE TABLE variant_names (name VARCHAR PRIMARY KEY, sha256 VARCHAR NOT NULL, path VARCHAR, family VARCHAR, "
    "added_at TIMESTAMPTZ NOT NULL); "
    f"INSERT INTO variant_names (name, sha256, path, family, added_at) {newest_names_sql('variants')};",
    # v13 (compile caches): whether the run compiled into its source's cache with entries of an earlier run of the
    # same source (`warm`), into an empty one (`cold`), or without one (`off: why`); NULL: before caches existed.
    "ALTER TABLE runs ADD COLUMN compile_cache VARCHAR;",
]
SCHEMA_VERSION = len(MIGRATIONS)

# What NVML reads per sample (case_results holds each one's min, median and max over a case's timed loop).
GPU_QUANTITIES = ("sm_mhz", "mem_mhz", "power_w", "temp_c")
GPU_STATE_COLUMNS = (
    "gpu_samples",
    *(f"{q}_{stat}" for q in GPU_QUANTITIES for stat in ("min", "median", "max")),
    "throttle",
)
# Columns of each table in insertion order; also the whitelist for identifiers used in generated SQL.
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "variants": (
        "sha256",
        "name",
        "path",
        "source",
        "first_seen",
        "commit",
        "committed_at",
        "message",
        "family",
        "parent",
        "registered_at",
    ),
    "variant_names": ("name", "sha256", "path", "family", "added_at"),
    "runs": RUN_FIELDS,  # the fields of tracker.store.records.RunRow, in order
    "case_results": [
        "run_id",
        "case_idx",
        "spec",
        "kind",
        "batch",
        "n",
        "cond",
        "seed",
        "case_name",
        "inputs",
        "passed",
        "message",
        "factor_res",
        "tril_res",
        "recon_res",
        "orth_res",
        *CASE_STATS,
        "args",
        "label",
        "flops",
        "bytes",
        "wall_us",
        "fresh_us",
        *GPU_STATE_COLUMNS,
    ],
    "samples": ("run_id", "case_idx", "rep", "time_us"),
    "profile_cases": (
        "run_id",
        "case_idx",
        "launches",
        "host_us",
        "device_us",
        "trace_path",
    ),
    "profile_kernels": (
        "run_id",
        "case_idx",
        "kernel",
        "calls",
        "device_us",
        "self_us",
    ),
    "verdicts": ("run_id", "variant_sha256", "verdict", "reason", "created_at", "assumption"),
    "ncu_cases": ("run_id", "case_idx", "report", "kernels", "error"),
    "ncu_kernels": (
        "run_id",
        "case_idx",
        "kernel_idx",
        "kernel",
        "duration_us",
        "occupancy_pct",
        "sm_pct",
        "memory_pct",
        "registers",
        "static_smem_bytes",
        "dynamic_smem_bytes",
        "block_size",
        "grid_size",
        "stalls",
    ),
    "evidence": (
        "run_id",
        "case_idx",
        "repetition",
        "input_idx",
        "matrix_idx",
        "n",
        "message",
        "factor_res",
        "tril_res",
        "recon_res",
        "orth_res",
        "arrays",
        "arrays_bytes",
    ),
}
# NVML's clock event (throttle) reasons by bit, as stored in case_results.throttle (comma-separated names). The
# slowdowns are the ones that lower the clock under load; idle and application clocks are states, not slowdowns.
THROTTLE_REASONS = {
    0x1: "idle", 0x2: "app-clocks", 0x4: "sw-power-cap", 0x8: "hw-slowdown", 0x10: "sync-boost",
    0x20: "sw-thermal", 0x40: "hw-thermal", 0x80: "hw-power-brake", 0x100: "display-clocks",
}  # fmt: skip
SLOWDOWNS = frozenset({"sw-power-cap", "hw-slowdown", "sw-thermal", "hw-thermal", "hw-power-brake"})
RUN_TABLES = ("case_results", "samples", "profile_cases", "profile_kernels", "evidence", "ncu_cases", "ncu_kernels")
VERDICTS = ("promoted", "rejected", "inconclusive")
