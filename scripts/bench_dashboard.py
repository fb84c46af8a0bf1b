"""Time every dashboard page's server-side render on a large synthetic store.

    python scripts/bench_dashboard.py [--store /tmp/kernelbeam-bench.duckdb] [--runs 20000] [--repeat 3]
    python scripts/bench_dashboard.py --bulk --runs 100000 --variants 2000 --store /tmp/kb-100k.duckdb

Builds (once; reused while it has the asked-for number of runs) a store of 20,000 runs with 12 cases and 50
samples each through the tracker's write path (store.write_run, one transaction per run, in one connection),
then renders each page with streamlit.testing.v1.AppTest: `cold` clears every st.cache_data cache before the
render (what the first visitor after a write sees), `warm` renders again with the caches filled. Prints the
median of --repeat renders per page. Pages must render in under 1 s.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tracker import store as store_mod  # noqa: E402
from tracker.common.gitinfo import source_hash  # noqa: E402
from tracker.store import Store  # noqa: E402
from tracker.workloads.qr_v2.suites import QR_V2  # noqa: E402

FAMILIES = ["householder", "blocked_wy", "triton_panel", "triton_small", "graphed", "cholqr", "tsqr", "recursive"]
GPU = "NVIDIA H200"
BASE_US = np.array([18.0, 95.0, 240.0, 2100.0, 3900.0, 1600.0, 5200.0, 2300.0, 4100.0, 2050.0, 1990.0, 3800.0])


def _source(family: str, version: int) -> str:
    return (
        "from task import input_t, output_t\n"
        f'"""{family} v{version}: synthetic variant for the dashboard benchmark."""\n'
        f"import torch\n\nBLOCK = {16 * (1 + version % 8)}\n\n\ndef custom_kernel(data: input_t) -> output_t:\n"
        f"    # tuned {version}\n    return torch.geqrf(data)\n"
    )


def records(n_runs: int, n_cases: int, n_samples: int, seed: int = 0):
    """Synthetic RunRecords: 8 families drifting faster with occasional regressions, ~10 runs per variant."""
    rng = np.random.default_rng(seed)
    cases = QR_V2.benchmarks[:n_cases]
    base = BASE_US[:n_cases] if n_cases <= len(BASE_US) else rng.uniform(10, 5000, n_cases)
    level = {f: np.ones(n_cases) * rng.uniform(0.8, 1.6) for f in FAMILIES}
    version = dict.fromkeys(FAMILIES, 0)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(n_runs):
        family = FAMILIES[i % len(FAMILIES)]
        if rng.random() < 0.1:  # a new variant of this family
            version[family] += 1
            level[family] = level[family] * rng.uniform(0.93, 1.02, n_cases)
            if rng.random() < 0.15:
                level[family][rng.integers(n_cases)] *= 1.3  # a regression on one shape
        v = version[family]
        source = _source(family, v)
        sha = source_hash(source)
        started = t0 + timedelta(seconds=i * 240)
        status = "passed" if rng.random() > 0.05 else str(rng.choice(["failed", "timeout", "crashed"]))
        times = base * level[family] * (1 + 0.02 * rng.standard_normal((n_samples, n_cases)))
        rec_cases, samples = [], []
        for k, case in enumerate(cases):
            x = times[:, k]
            passed = status == "passed"
            row = {
                "case_idx": k, "spec": case.spec, "kind": "benchmark", "batch": case.batch, "n": case.n,
                "cond": case.cond, "seed": case.seed, "case_name": case.case, "inputs": case.input_count(),
                "passed": passed, "message": "" if passed else "synthetic failure",
                "factor_res": 0.2, "tril_res": 0.1, "recon_res": 0.1, "orth_res": 0.7,
            }  # fmt: skip
            if passed:
                row.update(
                    runs=n_samples, mean_us=float(x.mean()), std_us=float(x.std(ddof=1)),
                    err_us=float(x.std(ddof=1) / math.sqrt(n_samples)), best_us=float(x.min()),
                    worst_us=float(x.max()),
                )  # fmt: skip
                samples += [(k, rep, float(t)) for rep, t in enumerate(x)]
            rec_cases.append(row)
        geomean = float(np.exp(np.log(times.mean(axis=0)).mean())) if status == "passed" else None
        run = {
            "run_id": f"{i:012x}", "variant_sha256": sha, "variant": f"{family}_v{v}",
            "path": f"kernels/{family}.py", "family": family, "note": f"hypothesis {v} for {family}",
            "status": status, "suite": "qr_v2", "mode": "benchmark", "started_at": started,
            "finished_at": started + timedelta(seconds=200), "host": "bench", "pid": 1, "device": "cuda",
            "gpu": GPU, "sm_count": 132, "torch": "2.11.0", "triton": "3.6.0", "python": "3.12",
            "trigger": "cli", "geomean_us": geomean, "error": None if passed else "synthetic failure",
        }  # fmt: skip
        variant = {"sha256": sha, "name": f"{family}_v{v}", "path": run["path"], "source": source,
                   "first_seen": started}  # fmt: skip
        yield store_mod.RunRecord(store_mod.RunRow(**run), variant, rec_cases, samples)


def build(path: Path, n_runs: int, n_cases: int, n_samples: int) -> None:
    """Write the runs through store.write_run, one transaction per run, in one connection."""
    for p in (path, Path(f"{path}.wal")):
        p.unlink(missing_ok=True)
    start = time.perf_counter()
    with Store(path).connect() as con:
        for i, rec in enumerate(records(n_runs, n_cases, n_samples), 1):
            store_mod.write_run(con, rec)
            if i % 1000 == 0:
                rate = i / (time.perf_counter() - start)
                print(f"  {i:,} runs written ({rate:,.0f} runs/s)", file=sys.stderr, flush=True)
        con.execute("CHECKPOINT")
    print(f"built {path} in {time.perf_counter() - start:.0f} s", file=sys.stderr)


def build_bulk(path: Path, n_runs: int, n_variants: int, n_cases: int, n_samples: int) -> None:
    """The same shape of store generated in bulk with DuckDB SQL (minutes for 100,000 runs, where a write per run
    would take hours): registered variants in 8 families with parent links, runs spread over the variants, cases,
    samples, verdicts. Schema and indexes come from the tracker's migrations."""
    for p in (path, Path(f"{path}.wal")):
        p.unlink(missing_ok=True)
    start = time.perf_counter()
    cases = QR_V2.benchmarks[:n_cases]
    base = BASE_US[:n_cases]
    with Store(path).connect() as con:
        con.execute("SET preserve_insertion_order = false")
        con.execute("CREATE TEMP TABLE fam AS SELECT unnest(?) AS family, generate_subscripts(?, 1) - 1 AS f",
                    [FAMILIES, FAMILIES])  # fmt: skip
        con.execute(
            "CREATE TEMP TABLE cs (case_idx INTEGER, spec VARCHAR, batch INTEGER, n INTEGER, cond DOUBLE, "
            "seed BIGINT, case_name VARCHAR, inputs INTEGER, base DOUBLE)"
        )
        con.executemany(
            "INSERT INTO cs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [[k, c.spec, c.batch, c.n, c.cond, c.seed, c.case, c.input_count(), float(base[k])]
             for k, c in enumerate(cases)],
        )  # fmt: skip
        t0 = "TIMESTAMPTZ '2026-01-01 00:00:00+00'"
        # Variant v belongs to family v % 8; its parent is the family's previous variant (v - 8).
        con.execute(f"""
            CREATE TEMP TABLE vv AS SELECT v, fam.family, fam.family || '_v' || (v // 8) AS name,
                sha256('bench variant ' || v) AS sha, CASE WHEN v >= 8 THEN sha256('bench variant ' || (v - 8)) END
                AS parent, 0.5 + (hash(v) % 1000) / 1000.0 AS lvl, {t0} + to_seconds(v * 400) AS seen_at
            FROM range({n_variants}) t(v) JOIN fam ON fam.f = v % 8
        """)  # fmt: skip
        con.execute("""
            INSERT INTO variants (sha256, name, path, source, first_seen, commit, committed_at, message, family,
                                  parent, registered_at)
            SELECT sha, name, 'solutions/' || name || '/submission.py',
                'import torch\n\n\ndef custom_kernel(data):\n    # variant ' || v || '\n    return torch.geqrf(data)\n',
                seen_at, substr(sha256('commit ' || v), 1, 40), seen_at, 'variant ' || name, family, parent, seen_at
            FROM vv
        """)  # fmt: skip
        con.execute(f"""
            CREATE TEMP TABLE rr AS SELECT i, printf('%012x', i) AS run_id, vv.*, {t0} + to_seconds(i * 60) AS started,
                CASE WHEN hash(i, 'status') % 100 < 95 THEN 'passed'
                     WHEN hash(i, 'status') % 3 = 0 THEN 'timeout' ELSE 'failed' END AS status
            FROM range({n_runs}) t(i) JOIN vv ON vv.v = i % {n_variants}
        """)  # fmt: skip
        con.execute(f"""
            INSERT INTO case_results (run_id, case_idx, spec, kind, batch, n, cond, seed, case_name, inputs, passed,
                message, factor_res, tril_res, recon_res, orth_res, runs, mean_us, std_us, err_us, best_us, worst_us)
            SELECT run_id, case_idx, spec, 'benchmark', batch, n, cond, seed, case_name, inputs, status = 'passed',
                CASE WHEN status = 'passed' THEN '' ELSE 'synthetic failure' END, 0.2, 0.1, 0.1, 0.7,
                CASE WHEN status = 'passed' THEN {n_samples} END, m, m * 0.02, m * 0.02 / sqrt({n_samples}),
                m * 0.97, m * 1.05
            FROM (SELECT rr.run_id, rr.status, cs.*, CASE WHEN rr.status = 'passed' THEN
                      cs.base * rr.lvl * (1 + ((hash(rr.i, cs.case_idx) % 1000) / 1000.0 - 0.5) * 0.04) END AS m
                  FROM rr CROSS JOIN cs)
        """)  # fmt: skip
        con.execute(f"""
            INSERT INTO runs (run_id, variant_sha256, variant, path, family, note, status, suite, mode, started_at,
                finished_at, host, pid, device, gpu, sm_count, torch, triton, python, trigger, error, geomean_us)
            SELECT rr.run_id, sha, name, 'solutions/' || name || '/submission.py', family, 'hypothesis ' || name,
                status, 'qr_v2', 'benchmark', started, started + INTERVAL 200 SECOND, 'bench', 1, 'cuda', '{GPU}', 132,
                '2.11.0', '3.6.0', '3.12', 'cli', CASE WHEN status <> 'passed' THEN 'synthetic ' || status END, g.geo
            FROM rr LEFT JOIN (SELECT run_id, exp(avg(ln(mean_us))) AS geo FROM case_results
                               WHERE mean_us IS NOT NULL GROUP BY run_id) g USING (run_id)
        """)  # fmt: skip
        print(f"  runs and cases in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        con.execute(f"""
            INSERT INTO samples SELECT run_id, case_idx, rep,
                mean_us * (1 + ((hash(run_id, case_idx, rep) % 1000) / 1000.0 - 0.5) * 0.06)
            FROM case_results CROSS JOIN range({n_samples}) t(rep) WHERE mean_us IS NOT NULL
        """)  # fmt: skip
        con.execute(
            "INSERT INTO verdicts (run_id, variant_sha256, verdict, reason, created_at) "
            "SELECT run_id, variant_sha256, 'promoted', 'best of its family so far', "
            "started_at + INTERVAL 1 HOUR FROM runs WHERE hash(run_id) % 50 = 0 AND status = 'passed'"
        )
        con.execute("CHECKPOINT")
    print(f"built {path} in {time.perf_counter() - start:.0f} s", file=sys.stderr)


PAGES = [
    ("experiments", None, {}),
    ("run", "pages/run.py", {"id": "RUN"}),
    ("compare", "pages/compare.py", {"a": "A", "b": "B"}),
    ("regressions", "pages/regressions.py", {"family": FAMILIES[0]}),
    ("benchmark", "pages/benchmark.py", {}),
    ("leaderboard", "pages/leaderboard.py", {"suite": "qr_v2", "gpu": GPU}),
    ("lineage", "pages/lineage.py", {"family": FAMILIES[0], "suite": "qr_v2", "gpu": GPU}),
    ("lineage (all)", "pages/lineage.py", {"suite": "qr_v2", "gpu": GPU}),
    ("since", "pages/since.py", {"since": "SINCE"}),
]


def render_times(store: Path, repeat: int) -> list[tuple[str, float, float]]:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    os.environ["KERNELBEAM_STORE"] = str(store)
    runs = Store(store).list_runs(limit=200)
    passed = runs[runs["status"] == "passed"]
    ids = {"RUN": passed.iloc[0]["run_id"], "A": passed.iloc[1]["run_id"], "B": passed.iloc[0]["run_id"]}
    last = runs.iloc[0]["started_at"]
    ids["SINCE"] = (last - timedelta(days=1)).isoformat()  # the last day of the store
    out = []
    for name, page, params in PAGES:
        cold, warm = [], []
        for _ in range(repeat):
            at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
            # An AppTest's first run scans installed packages for components (~0.3 s, once per server in
            # production): done untimed for every page, the first one included.
            at.run()
            if page is not None:
                at.switch_page(page)
            for k, v in params.items():
                at.query_params[k] = ids.get(v, v)
            st.cache_data.clear()
            t = time.perf_counter()
            at.run()
            cold.append(time.perf_counter() - t)
            problems = [e.value for e in at.exception] + [e.value for e in at.error]
            if problems:
                raise SystemExit(f"page {name} failed: {problems}")
            t = time.perf_counter()
            at.run()
            warm.append(time.perf_counter() - t)
        out.append((name, statistics.median(cold), statistics.median(warm)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default=str(Path(tempfile.gettempdir()) / "kernelbeam-bench.duckdb"))
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--cases", type=int, default=12)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rebuild", action="store_true", help="build the store even if it has the runs already")
    parser.add_argument("--bulk", action="store_true", help="generate the store with DuckDB SQL (for 100,000 runs)")
    parser.add_argument("--variants", type=int, default=2000, help="with --bulk: number of variants")
    args = parser.parse_args()
    path = Path(args.store)
    have = Store(path).count_runs() if path.exists() else 0
    if args.rebuild or have != args.runs:
        print(f"building a store of {args.runs:,} runs x {args.cases} cases x {args.samples} samples ...",
              file=sys.stderr)  # fmt: skip
        if args.bulk:
            build_bulk(path, args.runs, args.variants, args.cases, args.samples)
        else:
            build(path, args.runs, args.cases, args.samples)
    size = path.stat().st_size / 2**20
    print(f"store {path}: {Store(path).count_runs():,} runs, {size:,.0f} MiB")
    results = render_times(path, args.repeat)
    print(f"\n{'page':<13}{'cold (s)':>10}{'warm (s)':>10}   median of {args.repeat}, server-side (AppTest)")
    for name, cold, warm in results:
        flag = "" if cold < 1.0 else "   > 1 s!"
        print(f"{name:<13}{cold:>10.3f}{warm:>10.3f}{flag}")
    return 0 if all(cold < 1.0 for _, cold, _ in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
