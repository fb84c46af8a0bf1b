"""The dashboard's views from the command line (issue 21), through real `python -m tracker` processes on the demo
store: the same default context as the pages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, old_store

from tracker.cli.main import main
from tracker.store import SCHEMA_VERSION, Store, schema_version


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracker", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def test_leaderboard_defaults_to_the_context_that_passed_last(demo_store):
    """No --suite or --gpu on a store with H200 and CPU runs: the CPU smoke runs (the newest), as on the page; a
    given --gpu keeps its own suite; runs and passed runs are counted apart; a GPU without runs is an error naming
    the GPUs there are."""
    path, ids = demo_store
    doc = json.loads(cli("leaderboard", "--json", "--store", str(path)).stdout)
    assert (doc["gpu"], doc["suite"]) == ("CPU", "smoke") and [v["best_run"] for v in doc["variants"]] == [ids["cpu"]]
    doc = json.loads(cli("leaderboard", "--gpu", "NVIDIA H200", "--json", "--store", str(path)).stdout)
    assert doc["suite"] == "qr_v2" and len(doc["variants"]) >= 2
    counts = {v["variant"]: (v["runs"], v["passed"]) for v in doc["variants"]}
    assert counts["wy_v0"] == (1, 1) and counts["wy_v2"] == (1, 0)  # a failed run counts as a run, not as passed
    bad = cli("leaderboard", "--gpu", "NVIDIA B200", "--store", str(path))
    assert bad.returncode == 2 and "NVIDIA H200" in bad.stderr and "Traceback" not in bad.stderr


def test_newer_runs_of_chosen_cases_on_another_gpu_do_not_move_the_default_off_whole_runs(demo_store):
    """A GPU whose only passed runs are of chosen cases (no geomean: nothing to rank or chart) does not become the
    default over a context with whole runs, however new, nor head the Experiments table sorted by best geomean; its
    first whole run makes it the default."""
    from datetime import timedelta

    from conftest import BASE_US, T0, kernel_source, make_record

    from tracker.analysis.context import default_context

    path, _ = demo_store
    h100 = "NVIDIA H100 80GB HBM3"
    part = make_record("h100part000a", variant="p", source=kernel_source("p", 1), path="k/p.py", family="wy",
                       started=T0 + timedelta(hours=30), gpu=h100, means=None)  # fmt: skip
    assert part.run.status == "passed" and part.run.geomean_us is None
    assert Store(path).finish_run(part) is None
    assert default_context(Store(path).run_contexts())["gpu"] == "CPU"  # the newest whole run's
    table = Store(path).variant_table()  # sorted by best geomean: the GPU with none comes last, not first by name
    assert table["best_geomean_us"].iloc[0] > 0 and table["gpu"].iloc[-1] == h100
    whole = make_record("h100whole00a", variant="p", source=kernel_source("p", 1), path="k/p.py", family="wy",
                        started=T0 + timedelta(hours=31), gpu=h100, means=BASE_US)  # fmt: skip
    assert Store(path).finish_run(whole) is None
    assert default_context(Store(path).run_contexts())["gpu"] == h100


def test_store_before_the_command_version_and_list_filters(demo_store):
    """`--store` before the command, `--version`, and `list --family/--status/--variant/--since` (newest first)."""
    path, ids = demo_store

    def listed(*args: str) -> list[str]:
        proc = cli(*args, "--json")
        assert proc.returncode == 0, proc.stderr
        return [r["run_id"] for r in json.loads(proc.stdout)]

    assert listed("--store", str(path), "list", "--family", "wy") == ids["wy"][::-1]
    assert listed("list", "--since", "2026-03-01T21:30:00+00:00", "--status", "passed", "--store", str(path)) == [
        ids["cpu"], ids["wy"][1]]  # fmt: skip
    assert listed("list", "--variant", "wy_v1", "--store", str(path)) == [ids["wy"][1]]
    typo = cli("list", "--family", "wx", "--store", str(path))  # a misspelt family is bad input, as in regressions
    assert typo.returncode == 2 and "no family 'wx'" in typo.stderr and "wy" in typo.stderr, typo.stderr
    variants = {v["variant"]: v for v in json.loads(cli("variants", "--store", str(path), "--json").stdout)}
    assert variants["householder_v1"]["parent_variant"] == "householder_v0"  # from its run's parent, as on Lineage
    shown = cli("show", ids["profiled"], "--store", str(path)).stdout
    top = shown[shown.index("profile: top kernels") :].splitlines()
    assert top[1].split()[:5] == ["kernel", "calls", "device", "(ms)", "self"]
    assert top[2].split()[:2] == ["householder_panel_kernel", "96"]  # 8 calls x 12 cases, the most device time
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.split()[-1][0].isdigit()


def test_an_empty_list_tells_filters_that_match_nothing_from_an_empty_store(demo_store, tmp_path):
    from tracker.store import Store

    path, _ = demo_store
    total = Store(path).count_runs()
    for filters in (["--variant", "nope"], ["--family", "wy", "--status", "timeout"]):
        proc = cli("list", *filters, "--store", str(path))
        assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == (
            f"no runs match these filters ({total} runs in {path})"
        )
    empty = tmp_path / "empty.duckdb"
    with Store(empty).connect():
        pass
    assert cli("list", "--store", str(empty)).stdout.splitlines()[-1] == f"no runs in {empty}"


def test_the_shipped_problem_folder_runs_as_the_readme_says(tmp_path):
    """problems/vectoradd (ours, GPU Mode's layout): its submission passes all four tests on the CPU."""
    store = tmp_path / "va.duckdb"
    proc = cli("run", "problems/vectoradd/submission.py", "--problem", "problems/vectoradd", "--suite", "vectoradd",
               "--mode", "test", "--device", "cpu", "--store", str(store), "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["status"] == "passed" and len(doc["cases"]) == 4 and all(c["passed"] for c in doc["cases"])
    assert json.loads(cli("list", "--store", str(store), "--json").stdout)[0]["problem"] == "vectoradd"
    header = next(line for line in cli("show", doc["run_id"], "--store", str(store)).stdout.splitlines()
                  if line.startswith("#  case"))  # fmt: skip
    assert header.split() == ["#", "case", "ok", "message"]  # a test run: no timing columns


def test_since_lists_the_change_points_that_regressions_finds(demo_store, tmp_path):
    """Since's regressions are Regressions' change points at the new runs, not a fixed step between two runs: an
    outlier run (one case 30% slower once) is none, the demo store's lasting 1.5x step is one."""
    from datetime import timedelta

    from conftest import BASE_US, T0, kernel_source, make_record

    from tracker.store import Store

    path, ids = demo_store
    out = json.loads(cli("since", (T0 + timedelta(hours=4, minutes=30)).isoformat(), "--store", str(path),
                         "--json").stdout)  # fmt: skip
    regs = json.loads(cli("regressions", "--path", "kernels/householder_torch.py", "--store", str(path),
                          "--json").stdout)  # fmt: skip
    assert [(r["run_id"], r["case"]) for r in out["regressions"]] == [(c["run_id"], c["case"]) for c in regs]
    assert [(r["run_id"], r["baseline_run"]) for r in out["regressions"]] == [
        (ids["regressed"], ids["before_regression"])
    ]
    assert abs(out["regressions"][0]["factor"] - 1.5) < 0.05

    store = tmp_path / "outlier.duckdb"
    for k in range(6):
        means = [m * (1.3 if (k == 3 and i == 0) else 1.0) for i, m in enumerate(BASE_US)]
        record = make_record(f"out{k:02d}aaaaaaa", variant=f"o{k}", source=kernel_source("o", k), path="k/o.py",
                             family="o", started=T0 + timedelta(hours=k), means=means, seed=k)  # fmt: skip
        assert Store(store).finish_run(record) is None
    out = json.loads(cli("since", T0.isoformat(), "--store", str(store), "--json").stdout)
    assert len(out["runs"]) == 6 and out["regressions"] == []


def test_a_cancelled_runs_faster_case_is_no_best(tmp_path):
    """The shipped fused_wy_tagged row showed 640x512 and 2x4096 from a run stopped by SIGTERM beside the geomean of
    its passed run, and Since listed those cases as new bests: a row's cells and a new best come from runs that
    passed."""
    from datetime import timedelta

    from conftest import BASE_US, T0, kernel_source, make_record

    from tracker.store import Store

    store = tmp_path / "cancelled.duckdb"
    source = kernel_source("v", 1)
    done = make_record("pass0000000a", variant="v", source=source, path="k/v.py", family="f", started=T0,
                       means=list(BASE_US))  # fmt: skip
    half = [m / 2 for m in BASE_US]
    stopped = make_record("stop0000000a", variant="v", source=source, path="k/v.py", family="f",
                          started=T0 + timedelta(hours=1), means=half, status="cancelled")  # fmt: skip
    for record in (done, stopped):
        assert Store(store).finish_run(record) is None
    (row,) = json.loads(cli("leaderboard", "--json", "--store", str(store)).stdout)["variants"]
    assert row["best_run"] == "pass0000000a" and (row["runs"], row["passed"]) == (2, 1)
    # the passed run's means (the cancelled run's are half of them)
    assert all(v > 0.75 * b for v, b in zip(row["cases_us"].values(), BASE_US, strict=True)), row["cases_us"]
    since = json.loads(cli("since", (T0 + timedelta(minutes=30)).isoformat(), "--store", str(store), "--json").stdout)
    assert [r["run_id"] for r in since["runs"]] == ["stop0000000a"] and since["new_bests"] == []


def test_lineage_and_variants_show_the_geomeans_of_one_context_as_the_lineage_page(demo_store):
    """A CPU smoke run beside H200 runs: `lineage` and `variants` take their geomeans in one suite and GPU, the
    one the Lineage page opens on (asked of the page itself), say which in a header line and in --json, and take
    another with --gpu/--suite; a CPU geomean never sits beside H200 ones, and the tree is the same in each."""
    from conftest import H200, open_page

    path, ids = demo_store
    for family in (None, "householder"):
        at = open_page("pages/lineage.py", **({"family": family} if family else {}))
        page = (at.selectbox(key="suite").value, at.selectbox(key="gpu").value)
        doc = json.loads(cli("lineage", *(["--family", family] if family else []), "--json", "--store",
                             str(path)).stdout)  # fmt: skip
        assert (doc["suite"], doc["gpu"]) == page, family
    assert page == ("qr_v2", H200)  # the householder family has no CPU runs
    doc = json.loads(cli("lineage", "--json", "--store", str(path)).stdout)
    assert (doc["suite"], doc["gpu"]) == ("smoke", "CPU")  # the CPU run passed last
    timed = {v["variant"]: v["best_run"] for v in doc["variants"] if v["best_geomean_us"] is not None}
    assert timed == {"geqrf_reference": ids["cpu"]}
    on_h200 = json.loads(cli("lineage", "--gpu", H200, "--json", "--store", str(path)).stdout)
    assert (on_h200["suite"], on_h200["gpu"]) == ("qr_v2", H200)
    timed = {v["variant"]: v["best_run"] for v in on_h200["variants"] if v["best_geomean_us"] is not None}
    assert ids["cpu"] not in timed.values() and timed["householder_v0"] == ids["householder"][0]
    assert [(v["variant"], v["depth"]) for v in doc["variants"]] == [
        (v["variant"], v["depth"]) for v in on_h200["variants"]]  # fmt: skip
    assert cli("lineage", "--store", str(path)).stdout.splitlines()[0].endswith("on smoke · CPU")

    rows = json.loads(cli("variants", "--json", "--store", str(path)).stdout)
    assert {(r["suite"], r["gpu"]) for r in rows} == {("smoke", "CPU")}
    assert {r["variant"] for r in rows if r["best_geomean_us"] is not None} == {"geqrf_reference"}
    rows = json.loads(cli("variants", "--gpu", H200, "--json", "--store", str(path)).stdout)
    best = {r["variant"]: r["best_geomean_us"] for r in rows}
    assert best["geqrf_reference"] is None and best["wy_v0"] is not None
    assert cli("variants", "--gpu", H200, "--store", str(path)).stdout.startswith("best geomean on qr_v2 · NVIDIA H200")


def _family_with_a_sibling(path) -> dict[str, list[str]]:
    """v0 -> v1 (case 0 20% faster), then two children of v1: `sib`, its case 3 1.5x slower (a dead end), and
    `kept`, run last, as fast as v1. Three runs each."""
    from datetime import timedelta

    from conftest import BASE_US, T0, kernel_source, make_record

    from tracker.store import Store

    steps = {"v0": (None, {}), "v1": ("v0", {0: 0.8}), "sib": ("v1", {0: 0.8, 3: 1.5}), "kept": ("v1", {0: 0.8})}
    ids: dict[str, list[str]] = {}
    for k, (name, (parent, factors)) in enumerate(steps.items()):
        for rep in range(3):
            run_id = f"{name}{rep}".ljust(12, "x")
            means = [b * factors.get(i, 1.0) for i, b in enumerate(BASE_US)]
            record = make_record(run_id, variant=name, source=kernel_source(name, k), path=f"k/{name}.py",
                                 family="fam", started=T0 + timedelta(hours=3 * k + rep), means=means, seed=3 * k + rep,
                                 parent=ids[parent][0] if parent else None)  # fmt: skip
            assert Store(path).finish_run(record) is None
            ids.setdefault(name, []).append(run_id)
    return ids


def test_regressions_follow_one_line_of_descent_as_the_regressions_page(tmp_path, monkeypatch):
    """A sibling's runs are no baseline: along v0 -> v1 -> kept (the variant run last, the page's default) there is
    v1's improvement and no regression, where the whole family's runs in time order showed sib's step up and kept's
    step down; --to sib follows that line instead. The page, asked itself, counts the same."""
    from conftest import open_url

    path = tmp_path / "fam.duckdb"
    ids = _family_with_a_sibling(path)

    def found(*args: str) -> list[tuple[str, str, str]]:
        proc = cli("regressions", "--family", "fam", *args, "--json", "--store", str(path))
        assert proc.returncode == 0, proc.stderr
        return [(c["kind"], c["case"], c["run_id"]) for c in json.loads(proc.stdout)]

    assert found() == []
    assert found("--all") == [("improvement", "20x32 c1 dense", ids["v1"][0])]
    assert found("--to", "sib") == [("regression", "640x512 c2 dense", ids["sib"][0])]
    text = cli("regressions", "--family", "fam", "--all", "--store", str(path)).stdout
    assert text.splitlines()[0] == "qr_v2 · NVIDIA H200: along v0 → v1 → kept"
    bad = cli("regressions", "--family", "fam", "--to", "nope", "--store", str(path))
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "nope" in bad.stderr

    monkeypatch.setenv("KERNELBEAM_STORE", str(path))
    at = open_url("pages/regressions.py", family="fam")
    counts = {m.label: m.value for m in at.metric}
    assert (counts["Regressions"], counts["Improvements"]) == ("0", "1"), counts


def test_since_and_show_read_as_text_not_as_python(demo_store):
    """`since` titles its sections and names its columns in words (no new_bests:, baseline_run), and a run's
    geomean is never listed under a case's mean; `show` says yes/no for a flag and starts every value in one
    column, compile_cache and shared_device included."""
    from datetime import timedelta

    from conftest import T0, kernel_source, make_record

    from tracker.store import Store

    path, _ = demo_store
    text = cli("since", (T0 + timedelta(hours=4, minutes=30)).isoformat(), "--store", str(path)).stdout
    lines = text.splitlines()
    titles = [lines[i + 1] for i, line in enumerate(lines[:-1]) if not line]
    assert [t.split(" (")[0].rstrip(":") for t in titles] == ["Runs", "New best means", "New best geomeans",
                                                             "Regressions", "Failures", "Verdicts"], titles  # fmt: skip
    for raw in ("new_bests", "baseline_run", "run_id", "_us", "overall"):
        assert raw not in text, raw
    means = lines[lines.index(titles[1]) + 1]
    geomeans = lines[lines.index(titles[2]) + 1]
    assert (
        means.split()[:4] == ["case", "suite", "gpu", "run"]
        and "geomean (" in geomeans
        and "mean (" not in (geomeans.replace("geomean (", ""))
    )
    regressions = lines[lines.index(titles[3]) + 1]
    assert "baseline run" in regressions and "before (" in regressions and "after (" in regressions

    record = make_record("cold0000000a", variant="cold", source=kernel_source("cold", 1), path="k/cold.py",
                         family=None, started=T0, means=None, mode="test", commit="abc1234")  # fmt: skip
    record.run.compile_cache, record.run.shared_device = "cold", False
    assert Store(path).finish_run(record) is None
    shown = cli("show", "cold0000000a", "--store", str(path)).stdout.splitlines()
    head = shown[: next(i for i, line in enumerate(shown) if line.startswith("#"))]
    assert [line.split() for line in head if " no" in line] == [["git_dirty", "no"], ["shared_device", "no"]]
    assert not any(w in line.split() for line in head for w in ("True", "False"))
    starts = {len(line) - len(line.split(maxsplit=1)[1]) for line in head}
    assert len(starts) == 1, head  # every value in one column


def test_the_cli_takes_kernelbeam_store_as_its_default_store_as_the_dashboard_does(demo_store, tmp_path):
    """$KERNELBEAM_STORE (the demo_store fixture sets it) is the store of a command without --store; --store, before
    or after the command, still wins."""
    import os

    from tracker.store import Store

    path, ids = demo_store
    other = tmp_path / "other.duckdb"
    with Store(other).connect():
        pass

    def listed(*args: str) -> list[str]:
        proc = subprocess.run([sys.executable, "-m", "tracker", *args, "--json"], cwd=ROOT, capture_output=True,
                              text=True, timeout=120, env=dict(os.environ, KERNELBEAM_STORE=str(path)))  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return [r["run_id"] for r in json.loads(proc.stdout)]

    assert ids["cpu"] in listed("list") and len(listed("list")) == Store(path).count_runs()
    assert listed("list", "--store", str(other)) == [] and listed("--store", str(other), "list") == []


def test_compare_says_what_it_compares_as_the_compare_page(demo_store):
    """`compare` of a partial run against a full one said only "geomean ratio B/A: 1.1" (over 2 of 12 cases), and of
    a test run against a benchmark run "no case comparable on both sides": like the Compare page, one line says how
    many cases are timed in both and why, and the ratio names the cases it covers (--json: coverage); a side that ran
    on a shared device is named (--json: shared_device)."""
    from datetime import timedelta

    from conftest import BASE_US, T0, make_record

    from tracker.store import Store

    path, ids = demo_store
    part = make_record("part0aaaaaaa", variant="part", source="# part\n", path="kernels/part.py", family=None,
                       started=T0 + timedelta(days=3), means=[b * 1.1 for b in BASE_US])  # fmt: skip
    part.cases[:] = [c for c in part.cases if c["case_idx"] in (0, 3)]
    part.samples[:] = [s for s in part.samples if s[0] in (0, 3)]
    test_run = make_record("test0aaaaaaa", variant="t", source="# t\n", path="kernels/t.py", family=None,
                           started=T0 + timedelta(days=3, hours=1), means=None, mode="test")  # fmt: skip
    for record in (part, test_run):
        assert Store(path).finish_run(record) is None
    text = cli("compare", ids["before_regression"], "part0aaaaaaa", "--store", str(path))
    assert text.returncode == 0, text.stderr
    assert "2 of 12 cases are timed in both runs" in text.stdout and "10 only in A, 0 only in B" in text.stdout
    assert "over 20x32 c1 dense, 640x512 c2 dense" in text.stdout.split("geomean ratio B/A")[1].splitlines()[0]
    doc = json.loads(cli("compare", "test0aaaaaaa", ids["before_regression"], "--json", "--store", str(path)).stdout)
    assert "A is a test run" in doc["coverage"]["line"] and doc["coverage"]["both"] == []
    assert doc["shared_device"] == []
    # A run beside other work: said as on the page (the CLI's compare had printed its ratio without a word).
    busy = make_record("busy0aaaaaaa", variant="busy", source="# busy\n", path="kernels/busy.py", family=None,
                       started=T0 + timedelta(days=4), means=BASE_US)  # fmt: skip
    busy.run.shared_device = True
    assert Store(path).finish_run(busy) is None
    text = cli("compare", ids["before_regression"], "busy0aaaaaaa", "--store", str(path))
    assert "warning: B ran on a shared device" in text.stderr, text.stderr
    doc = json.loads(cli("compare", "busy0aaaaaaa", ids["before_regression"], "--json", "--store", str(path)).stdout)
    assert doc["shared_device"] == ["A"]
    text = cli("compare", "test0aaaaaaa", ids["before_regression"], "--store", str(path))
    assert "A is a test run (correctness cases, untimed)" in text.stdout


def _two_problems_store(path) -> None:
    """A qr_v2 smoke run on the CPU (its problem unrecorded, as in older stores: qr_v2), then a vectoradd one."""
    from datetime import timedelta

    from conftest import BASE_US, T0, make_record

    from tracker.store import Store

    qr = make_record("qrsmoke0000a", variant="qr_k", source="# qr\n", path="kernels/qr_k.py", family=None,
                     started=T0, means=BASE_US[:4], suite="smoke", gpu="CPU")  # fmt: skip
    add = make_record("vecadd00000a", variant="vec_k", source="# vec\n", path="problems/v/submission.py",
                      family=None, started=T0 + timedelta(hours=1), means=[1.0] * 4, suite="smoke",
                      gpu="CPU")  # fmt: skip
    add.run.problem = "vectoradd"
    for record in (qr, add):
        assert Store(path).finish_run(record) is None


def _one_problem_a_view(command: str, path: Path) -> None:
    """`command --json` on _two_problems_store: the newest problem by default, --problem for the other, never both."""
    for args, problem, variant in (((), "vectoradd", "vec_k"), (("--problem", "qr_v2"), "qr_v2", "qr_k")):
        doc = json.loads(cli(command, *args, "--json", "--store", str(path)).stdout)
        assert doc["problem"] == problem and [v["variant"] for v in doc["variants"]] == [variant]


def test_leaderboard_keeps_problems_apart(tmp_path):
    """A vectoradd run beside a qr_v2 one, both smoke on the CPU: the board ranked vector sums of 1 µs against QR
    factorisations, on each other's cases. One problem a board: the newest by default, --problem for another."""
    path = tmp_path / "two.duckdb"
    _two_problems_store(path)
    _one_problem_a_view("leaderboard", path)
    text = cli("leaderboard", "--problem", "qr_v2", "--store", str(path)).stdout
    assert text.splitlines()[0] == "qr_v2 · smoke · benchmark · CPU" and "vec_k" not in text
    bad = cli("leaderboard", "--problem", "nope", "--store", str(path))
    assert bad.returncode == 2 and "vectoradd" in bad.stderr and "Traceback" not in bad.stderr


def test_lineage_and_variants_keep_problems_apart(tmp_path):
    """After a vectoradd submission's run, `lineage` and `variants` of qr_v2 listed it as a root never run beside the
    QR variants, and the other way round. One problem a tree, as the leaderboard picks it: the newest by default,
    --problem for another (in --json, and in the header where the store holds several); an unknown one says so."""
    path = tmp_path / "two.duckdb"
    _two_problems_store(path)
    _one_problem_a_view("lineage", path)
    text = cli("lineage", "--problem", "qr_v2", "--store", str(path)).stdout
    assert text.splitlines()[0].endswith("on qr_v2 · smoke · CPU") and "vec_k" not in text
    rows = json.loads(cli("variants", "--problem", "qr_v2", "--json", "--store", str(path)).stdout)
    assert [(r["variant"], r["problem"]) for r in rows] == [("qr_k", "qr_v2")]
    text = cli("variants", "--store", str(path)).stdout
    assert text.startswith("best geomean on vectoradd · smoke · CPU;") and "qr_k" not in text
    for command in ("lineage", "variants"):
        bad = cli(command, "--problem", "nope", "--store", str(path))
        assert bad.returncode == 2 and bad.stderr.startswith("error: no runs of problem 'nope'"), bad.stderr
        assert len(bad.stderr.splitlines()) == 1 and "vectoradd" in bad.stderr


def test_since_bests_keep_problems_apart(tmp_path, monkeypatch):
    """`since` judged a vectoradd run's geomean against the qr_v2 runs of the same suite and GPU: a new best of 1 µs,
    "below" the QR factorisations, and the qr_v2 run's own new best went unsaid. Each problem's bests its own."""
    from datetime import timedelta

    from conftest import T0, open_url

    path = tmp_path / "two.duckdb"
    _two_problems_store(path)

    def overall(when) -> dict[str, float | None]:
        doc = json.loads(cli("since", when.isoformat(), "--json", "--store", str(path)).stdout)
        return {b["run_id"]: b["previous_best_us"] for b in doc["new_bests"] if b["case"] == "overall"}

    assert overall(T0 - timedelta(hours=1)) == {"qrsmoke0000a": None, "vecadd00000a": None}
    assert overall(T0 + timedelta(minutes=30)) == {"vecadd00000a": None}  # the qr_v2 run before is no baseline
    monkeypatch.setenv("KERNELBEAM_STORE", str(path))  # the Since page names the problem of each
    at = open_url("pages/since.py", since=(T0 - timedelta(hours=1)).isoformat())
    geomeans = next(df.value for df in at.dataframe if "previous geomean (µs)" in df.value.columns)
    assert sorted(geomeans["problem"]) == ["qr_v2", "vectoradd"]  # two rows of smoke · CPU: which is which


def test_regressions_says_improvements_were_found_but_not_listed(tmp_path):
    """A history whose one step is an improvement printed "no change points found" (the page: "No regression
    detected (1 improvement(s); tick “Also improvements”…)"). It says what --all would list."""
    from datetime import timedelta

    from conftest import BASE_US, T0, make_record

    from tracker.store import Store

    path = tmp_path / "faster.duckdb"
    for k in range(10):
        means = [m / 1.5 if (i == 3 and k >= 5) else m for i, m in enumerate(BASE_US)]
        rec = make_record(f"fast{k:02d}aaaaaa", variant="v", source="# v\n", path="kernels/v.py", family="f",
                          started=T0 + timedelta(hours=k), means=means, seed=k)  # fmt: skip
        assert Store(path).finish_run(rec) is None
    text = cli("regressions", "--path", "kernels/v.py", "--store", str(path))
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[-1] == "no regression found (1 improvement: --all lists it)"
    listed = cli("regressions", "--path", "kernels/v.py", "--all", "--store", str(path)).stdout
    assert "improvement" in listed and "640x512 c2 dense" in listed


@pytest.mark.parametrize("version", [1, 5])  # the first schema; the last before runs.problem (v6)
def test_a_store_of_an_older_schema_is_upgraded_by_the_first_read_keeping_its_runs(demo_store, tmp_path, capsys,
                                                                                  version):  # fmt: skip
    """`list` (with a family too), `leaderboard`, `lineage`, `variants` and `since` on a store an older tracker
    wrote: each upgrades it first, with one line on stderr, then shows what it shows on the same runs in a current
    store; the next read upgrades nothing and says nothing."""
    path, _ = demo_store
    for command in (
        ["list"],
        ["list", "--family", "wy"],
        ["leaderboard"],
        ["lineage"],
        ["variants"],
        ["since", "2026-03-01T00:00:00+00:00"],
    ):
        old = old_store(tmp_path / f"v{version}-{'-'.join(command[:3])}.duckdb", version, path)
        assert main([*command, "--json", "--store", str(old)]) == 0
        upgraded = capsys.readouterr()
        assert upgraded.err == f"upgraded store {old} from schema v{version} to v{SCHEMA_VERSION}\n", command
        with Store(old).connect(read_only=True) as con:
            assert schema_version(con) == SCHEMA_VERSION
        assert main([*command, "--json", "--store", str(path)]) == 0
        assert json.loads(upgraded.out) == json.loads(capsys.readouterr().out), command
        assert main([*command, "--json", "--store", str(old)]) == 0
        again = capsys.readouterr()
        assert again.err == "" and json.loads(again.out) == json.loads(upgraded.out), command
        assert Store(old).count_runs() == Store(path).count_runs()  # every run kept
