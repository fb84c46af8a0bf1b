"""`python -m tracker mcp` driven by the MCP SDK's own client over stdio, against a real store (the shipped H200
search runs, imported) and a real CPU run started and followed through the server."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tracker.cli.main import main

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples" / "h200-2026-11-30-search"
TOOLS = {
    "list_runs", "list_variants", "show_run", "compare_runs", "since_summary", "leaderboard", "leaderboard_gaps",
    "lineage", "dead_ends", "record_verdict", "start_run", "run_source", "run_diff", "run_evidence", "run_profile",
    "gate_margins",
}  # fmt: skip


def _cli_error(capsys, store: Path, *argv: str) -> str:
    """The CLI's one `error: ...` line for the same bad input (exit 2)."""
    try:
        code = main([*argv, "--store", str(store)])
    except SystemExit as exc:  # argparse's own errors end the parse
        code = exc.code
    assert code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def _doc(result) -> dict:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def _error(result) -> str:
    assert result.is_error
    return result.content[0].text


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("mcp") / "experiments.duckdb"
    assert main(["import", str(SAMPLES), "--store", str(path)]) == 0
    return path


def test_every_tool_over_stdio_and_a_cpu_run_followed_to_the_end(store: Path, tmp_path: Path, capsys) -> None:
    kernel = tmp_path / "geqrf_mcp.py"  # its own name: a new variant whose parent is `graphed`
    shutil.copy(ROOT / "kernels" / "geqrf_reference.py", kernel)
    own = tmp_path / "own_problem"  # a problem folder an agent wrote (a copy of the shipped one: a real folder)
    shutil.copytree(ROOT / "problems" / "vectoradd", own)
    bad = {
        "show": _cli_error(capsys, store, "show", "zzzz"),
        "limit": _cli_error(capsys, store, "list", "--limit", "0"),
        "verdict": _cli_error(capsys, store, "verdict", "d074402d5f51", "meh"),
        "suite": _cli_error(capsys, store, "leaderboard", "--suite", "nope"),
        "variants_problem": _cli_error(capsys, store, "variants", "--problem", "nope"),
    }
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def session_checks() -> dict:
        # The stdio client passes on only a few safe variables: the test's own lock and state folders go explicitly,
        # or the server's runs would wait behind any other run on this machine.
        own = {k: os.environ[k] for k in ("KERNELBEAM_LOCK_DIR", "XDG_STATE_HOME") if k in os.environ}
        params = StdioServerParameters(command=sys.executable, args=["-m", "tracker", "mcp", "--store", str(store)],
                                       cwd=str(ROOT), env=own)  # fmt: skip
        out: dict = {}
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            out["tools"] = {t.name for t in (await s.list_tools()).tools}
            out["runs"] = _doc(await s.call_tool("list_runs", {"search": "coop_hybrid", "limit": 3}))["runs"]
            out["variants"] = _doc(await s.call_tool("list_variants", {}))["variants"]
            out["qr_variants"] = _doc(await s.call_tool("list_variants", {"problem": "qr_v2"}))["variants"]
            out["show"] = _doc(await s.call_tool("show_run", {"run": "d074402d"}))
            out["compare"] = _doc(await s.call_tool("compare_runs", {"a": "d074402d5f51", "b": "142c5eab88ed"}))
            out["since"] = _doc(await s.call_tool("since_summary", {"when": "2026-11-30T00:00:00+00:00"}))
            out["board"] = _doc(await s.call_tool("leaderboard", {"gpu": "NVIDIA H200"}))
            out["gaps"] = _doc(await s.call_tool("leaderboard_gaps", {"gpu": "NVIDIA H200", "variant": "graphed"}))
            out["lineage"] = _doc(await s.call_tool("lineage", {}))
            out["source"] = _doc(await s.call_tool("run_source", {"run": "d8fee25c2df2"}))
            out["diff"] = _doc(await s.call_tool("run_diff", {"run": "d8fee25c2df2"}))
            out["errors"] = {
                "show": _error(await s.call_tool("show_run", {"run": "zzzz"})),
                "limit": _error(await s.call_tool("list_runs", {"limit": 0})),
                "verdict": _error(await s.call_tool("record_verdict", {"run": "d074402d5f51", "verdict": "meh"})),
                "suite": _error(await s.call_tool("leaderboard", {"suite": "nope"})),
                "variants_problem": _error(await s.call_tool("list_variants", {"problem": "nope"})),
                "path": _error(await s.call_tool("start_run", {"paths": [str(tmp_path / "missing.py")]})),
                # a problem folder of the agent's own: its reference.py would run outside the sandbox
                "problem": _error(await s.call_tool("start_run", {"paths": [str(kernel)], "problem": str(own)})),
            }
            args = {"paths": [str(kernel)], "suite": "smoke", "device": "cpu", "profile": True, "parent": "graphed",
                    "note": "mcp smoke"}  # fmt: skip
            started = await s.call_tool("start_run", args, progress_callback=on_progress)
            out["started"] = _doc(started)["runs"]
            run_id = out["started"][0]["run_id"]
            out["profile"] = _doc(await s.call_tool("run_profile", {"run": run_id}))
            out["evidence"] = _doc(await s.call_tool("run_evidence", {"run": run_id}))
            out["margins"] = _doc(await s.call_tool("gate_margins", {"run": run_id}))
            verdict = {"run": run_id, "verdict": "rejected", "reason": "torch.geqrf again",
                       "assumption": "the reference is the floor"}  # fmt: skip
            out["verdict"] = _doc(await s.call_tool("record_verdict", verdict))
            out["dead"] = _doc(await s.call_tool("dead_ends", {}))["dead_ends"]
            out["dead_family"] = _error(await s.call_tool("dead_ends", {"family": "nope"}))
            out["after"] = _doc(await s.call_tool("list_runs", {"search": "mcp smoke"}))["runs"]
        return out

    out = anyio.run(session_checks)
    assert out["tools"] == TOOLS
    assert len(out["runs"]) == 3 and all("coop_hybrid" in r["variant"] for r in out["runs"])
    assert {"graphed", "coop_hybrid_e64n256"} <= {v["variant"] for v in out["variants"]}
    assert out["qr_variants"] == out["variants"] and {v["problem"] for v in out["variants"]} == {"qr_v2"}
    assert out["show"]["run_id"] == "d074402d5f51" and len(out["show"]["cases"]) == 12
    assert out["compare"]["geomean_ratio"] < 1 and len(out["compare"]["cases"]) == 12
    assert {"runs", "new_bests", "verdicts"} <= set(out["since"]) and out["since"]["runs"]
    assert out["board"]["variants"][0]["variant"] in ("coop_hybrid_e64n256", "coop_hybrid_ept64")
    gaps = out["gaps"]
    assert gaps["variant"] == "graphed" and len(gaps["cases"]) == 12
    assert abs(sum(c["log_share"] for c in gaps["cases"]) - 1) < 1e-9
    assert gaps["best_per_case_geomean_us"] < gaps["cells_geomean_us"]
    assert all(c["ratio_to_best"] >= 1 for c in gaps["cases"])
    assert any(v["depth"] > 0 for v in out["lineage"]["variants"])
    assert "def custom_kernel" in out["source"]["source"]
    assert out["diff"]["parent_run"] == "d074402d5f51" and out["diff"]["diff"].startswith("--- graphed")
    # Bad input: a tool error carrying the CLI's own line, never a traceback.
    for key, text in out["errors"].items():
        assert "Traceback" not in text, text
        if key in bad:
            assert text.endswith(bad[key]), (text, bad[key])
    assert "missing.py" in out["errors"]["path"]
    assert "an agent runs only the problem folders under" in out["errors"]["problem"], out["errors"]["problem"]
    assert "vectoradd" in out["errors"]["problem"]
    # The run: started through the server, followed to the end, recorded in the store.
    (ran,) = out["started"]
    assert ran["status"] == "passed" and ran["suite"] == "smoke" and ran["gpu"] == "CPU"
    assert len(progress) >= 3 and progress[-1][0] == progress[-1][1] == 1
    assert any("smoke" not in (m or "") and "/4" in (m or "") for _, _, m in progress)
    assert [p[0] for p in progress] == sorted(p[0] for p in progress)
    assert out["profile"]["profiled"] and out["profile"]["kernels"]
    assert out["evidence"]["evidence"] == []
    assert out["margins"]["near"] is False and {c["gate"] for c in out["margins"]["cases"]} == {
        "factor_res",
        "orth_res",
    }
    assert out["verdict"] == {"run_id": ran["run_id"], "verdict": "rejected"}
    mine = [d for d in out["dead"] if d["run_id"] == ran["run_id"]]
    assert [d["assumption"] for d in mine] == ["the reference is the floor"]  # (same code as geqrf_reference)
    assert {"leaf1r", "triton_panel_wy"} <= {d["variant"] for d in out["dead"]}  # the shipped rejections
    assert "no family 'nope'" in out["dead_family"]
    assert [r["run_id"] for r in out["after"]] == [ran["run_id"]]
