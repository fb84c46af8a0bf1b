"""`mcp`: the store and the runner as Model Context Protocol tools, over stdio (what coding agents start) or
streamable HTTP on 127.0.0.1.

Each tool that has a CLI command builds that command's arguments and parses them with the command's own parser,
so every input is checked exactly as the CLI checks it; it then calls the same function that makes the command's
`--json` document. Bad input comes back as a tool error carrying the CLI's `error: ...` text, never a traceback.
Nothing holds the store open between calls: every read and write opens and closes it, as everywhere else.
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations, and `Context` is imported where
# the tools are defined (so that `mcp` loads only for this command), not at module level.
import argparse
import difflib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from tracker.capture import jobs
from tracker.capture.job import BAD_INPUT
from tracker.cli import add, boards, compare, deadends, run, runs, since
from tracker.cli.common import (
    Parser,
    UsageError,
    common_options,
    error_message,
    internal_error_message,
    prog_name,
    resolve,
)
from tracker.common.errors import InputError
from tracker.common.jsonfields import clean
from tracker.store import Store

HOST = "127.0.0.1"  # streamable HTTP is for agents on this machine only: no token, no TLS
DEFAULT_PORT = 8765
# The command groups whose parsers check the tools' inputs.
TOOL_COMMANDS = (runs, add, compare, since, boards, run)
PROGRESS_EVENTS = {"started", "waiting", "import_start", "compiled", "case_start", "rep", "case_done"}


class _ToolParser(Parser):
    """The CLI's parser, raising its one-line message instead of printing it and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.usage_message(message))


def _parser() -> argparse.ArgumentParser:
    parser = _ToolParser(prog=prog_name())
    sub = parser.add_subparsers(dest="command", required=True)
    common = common_options()
    for group in TOOL_COMMANDS:
        group.register(sub, common)
    return parser


def _argv(command: str, positional: list[str], options: dict[str, Any]) -> list[str]:
    """Command-line words for `command`: `--name=value` (so a value may start with '-'), flags for True, nothing for
    None/False, then `--` and the positionals."""
    words = [command]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            words.append(flag)
        elif value is not None and value is not False:
            words.append(f"{flag}={value}")
    return [*words, "--json", *(["--", *positional] if positional else [])]


def served_problem(problem: str) -> Path:
    """The problem folder an agent may name: one directly under the problems folder ($KERNELBEAM_PROBLEMS_DIR, else
    problems/; the Benchmark page's list), by name or by path. A folder's reference.py runs in the checker, outside
    the kernel's sandbox: an agent gets the folders a person put there, never one of its own making."""
    root = jobs.default_problems_dir()
    named = (root / problem if Path(problem).name == problem else Path(problem)).resolve()
    if named.parent != root:
        known = ", ".join(jobs.list_problems(root)) or "none there"
        raise InputError(f"{problem!r}: an agent runs only the problem folders under {root} ({known})")
    return jobs.resolve_problem(named.name, root)


class Tools:
    """The tool functions over one store. Each returns a JSON-safe document or raises ToolError."""

    def __init__(self, store: str) -> None:
        self.store = store
        self.parser = _parser()

    def args(self, command: str, positional: list[str] | None = None, **options: Any) -> argparse.Namespace:
        return self.parser.parse_args(_argv(command, positional or [], {"store": self.store, **options}))

    def call(self, fn: Callable[..., Any], *a: Any, raw: bool = False) -> Any:
        """Run a document function; bad input and our bugs become tool errors with the CLI's one line."""
        from mcp.server.mcpserver.exceptions import ToolError

        try:
            out = fn(*a)
            return out if raw else json.loads(json.dumps(out, default=str))
        except BAD_INPUT as exc:
            raise ToolError(f"error: {error_message(exc)}") from None
        except Exception as exc:
            raise ToolError(f"error: {internal_error_message(exc)}") from None

    def command(self, fn: Callable[[argparse.Namespace], Any], command: str, positional=None, raw=False, **options):
        return self.call(lambda: fn(self.args(command, positional, **options)), raw=raw)

    # Reads that have no command of their own: their one input, a run, is resolved as every command resolves it.
    def source(self, run_id: str) -> dict[str, Any]:
        rid = resolve(self.store, run_id)
        bundle = Store(self.store).run_bundle(rid, with_samples=False)
        if bundle is None:
            raise UsageError(f"run {rid} vanished from the store while reading it")
        r = bundle["run"]
        return {"run_id": rid, "variant": r["variant"], "path": r.get("path"), "source": bundle["source"]}

    def diff(self, run_id: str) -> dict[str, Any]:
        own = self.source(run_id)
        parent = Store(self.store).parent_source(own["run_id"])
        if parent is None:
            return {"run_id": own["run_id"], "parent_run": None, "parent_variant": None, "diff": None}
        lines = difflib.unified_diff(
            (parent["source"] or "").splitlines(keepends=True),
            (own["source"] or "").splitlines(keepends=True),
            fromfile=str(parent["parent_variant"]),
            tofile=str(own["variant"]),
        )
        return {"run_id": own["run_id"], "parent_run": parent["parent_run"],
                "parent_variant": parent["parent_variant"], "diff": "".join(lines)}  # fmt: skip

    def evidence(self, run_id: str) -> dict[str, Any]:
        rid = resolve(self.store, run_id)
        rows = Store(self.store).run_evidence(rid).to_dict("records")
        return {"run_id": rid, "evidence": [{k: clean(v) for k, v in r.items()} for r in rows]}

    def profile(self, run_id: str) -> dict[str, Any]:
        rid = resolve(self.store, run_id)
        bundle = Store(self.store).run_bundle(rid, with_samples=False) or {}

        def records(key: str) -> list[dict[str, Any]]:
            df = bundle.get(key)
            return [] if df is None else [{k: clean(v) for k, v in r.items()} for r in df.to_dict("records")]

        cases, kernels = records("profile_cases"), records("profile_kernels")
        ncu = runs.ncu_doc(self.store, rid)
        return {"run_id": rid, "profiled": bool(cases), "cases": cases, "kernels": kernels, "ncu": ncu,
                "ncu_text": runs.ncu_text(ncu)}  # fmt: skip

    def margins(self, run_id: str) -> dict[str, Any]:
        from tracker.analysis.margins import NEAR, gate_margins

        rid = resolve(self.store, run_id)
        sha = (Store(self.store).get_run(rid) or {}).get("variant_sha256")
        found = gate_margins(Store(self.store).gate_residuals([sha])).get(sha) if sha else None
        return {"run_id": rid, "near_factor": NEAR, **(found or {"cases": [], "closest": None, "near": False})}


def build_server(store: str):
    """The MCP server with every tool registered."""
    import anyio
    import anyio.from_thread
    import anyio.to_thread
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from tracker.capture.progress import ProgressState, progress_line
    from tracker.capture.record import run_summary
    from tracker.capture.runner import run_variant

    tools = Tools(store)
    server = MCPServer(
        "kernelbeam",
        instructions="KernelBeam: recorded runs of GPU-kernel variants. Times are microseconds (*_us). Start a loop "
        "with `since`; `leaderboard_gaps` says which case costs the most; `start_run` runs a kernel file and "
        "reports progress.",
    )

    @server.tool()
    def list_runs(limit: int | None = None, search: str | None = None, variant: str | None = None) -> dict[str, Any]:
        """Runs, newest first (as `list --json`); `search` keeps those whose name, path, family, note, id or verdict
        reason contains it; `variant` those of the variant with this name (any name recorded for its content)."""
        return {"runs": tools.command(runs.list_doc, "list", limit=limit, search=search, variant=variant)}

    @server.tool()
    def list_variants(family: str | None = None, problem: str | None = None) -> dict[str, Any]:
        """Registered and run variants with their run count, best geomean and other recorded names (`aliases`), as
        `variants --json`: one problem's (default: the one whose runs passed most recently) and those never run."""
        return {"variants": tools.command(add.variants_doc, "variants", family=family, problem=problem)}

    @server.tool()
    def show_run(run: str) -> dict[str, Any]:
        """One run with its cases and kept evidence (as `show RUN --json`); a unique prefix of the id will do, or a
        variant name (its newest run)."""
        return tools.command(runs.show_doc, "show", [run])

    @server.tool()
    def compare_runs(a: str, b: str, min_effect: float | None = None) -> dict[str, Any]:
        """Case by case B against A (as `compare A B --json`): ratio B/A of means, its 95% CI, p-value, verdict."""
        return tools.command(compare.compare_doc, "compare", [a, b], min_effect=min_effect)

    @server.tool()
    def since_summary(when: str = "24h") -> dict[str, Any]:
        """What changed since a time, 30m / 2h / 1d or ISO (as `since --json`): runs, new bests, regressions,
        failures, verdicts."""
        return tools.command(since.since_doc, "since", [when])

    @server.tool()
    def leaderboard(
        suite: str | None = None,
        gpu: str | None = None,
        mode: str | None = None,
        family: str | None = None,
        problem: str | None = None,
    ) -> dict[str, Any]:
        """Variants by best passed geomean with their best mean per case (as `leaderboard --json`), one problem's."""
        opts = {"suite": suite, "gpu": gpu, "mode": mode, "family": family, "problem": problem}
        return tools.command(boards.leaderboard_doc, "leaderboard", **opts)

    @server.tool()
    def leaderboard_gaps(
        variant: str | None = None,
        suite: str | None = None,
        gpu: str | None = None,
        mode: str | None = None,
        family: str | None = None,
        problem: str | None = None,
    ) -> dict[str, Any]:
        """Where a variant's geomean goes (as `leaderboard --gaps --json`): per case its share of the log-geomean,
        the best mean any variant reached and which, the ratio to it, and the geomean best-per-case would give."""
        opts = {"suite": suite, "gpu": gpu, "mode": mode, "family": family, "variant": variant, "problem": problem}
        return tools.command(boards.leaderboard_doc, "leaderboard", gaps=True, **opts)

    @server.tool()
    def lineage(
        family: str | None = None, suite: str | None = None, gpu: str | None = None, problem: str | None = None
    ) -> dict[str, Any]:
        """The parent -> child tree of a family (as `lineage --json`), depth-first, with geomeans and verdicts; one
        problem's variants (and those never run)."""
        return tools.command(boards.lineage_doc, "lineage", family=family, suite=suite, gpu=gpu, problem=problem)

    @server.tool()
    def record_verdict(
        run: str, verdict: str, reason: str | None = None, assumption: str | None = None
    ) -> dict[str, Any]:
        """Record a verdict on a run (as `verdict RUN VERDICT --reason ... --assumption ...`): promoted, rejected or
        inconclusive; a rejected variant becomes a dead end that `start_run` warns about when it comes back."""
        return tools.command(runs.verdict_doc, "verdict", [run, verdict], reason=reason, assumption=assumption)

    @server.tool()
    def dead_ends(family: str | None = None) -> dict[str, Any]:
        """Rejected variants (of a family) with the reason and the assumption: what not to try again unchanged."""
        return {"dead_ends": tools.command(boards.lineage_doc, "lineage", family=family)["dead_ends"]}

    @server.tool()
    def run_source(run: str) -> dict[str, Any]:
        """The source of the variant a run ran."""
        return tools.call(tools.source, run)

    @server.tool()
    def run_diff(run: str) -> dict[str, Any]:
        """Unified diff of a run's source against its parent (its parent run, else its registered parent variant)."""
        return tools.call(tools.diff, run)

    @server.tool()
    def run_evidence(run: str) -> dict[str, Any]:
        """What a run's failed checks kept: per case the failing repetition, matrix and scaled residuals."""
        return tools.call(tools.evidence, run)

    @server.tool()
    def run_profile(run: str) -> dict[str, Any]:
        """A run's profiles: torch.profiler's tables (runs made with profile=true: per case launches and times, per
        kernel) and Nsight Compute's (ncu=true: per kernel duration, achieved occupancy, SM and memory throughput,
        registers, shared memory per block, top stall reasons; `ncu_text` says it in plain lines)."""
        return tools.call(tools.profile, run)

    @server.tool()
    def gate_margins(run: str) -> dict[str, Any]:
        """How close the run's variant comes to each correctness gate: per case the worst scaled residual over every
        run and seed against the tolerance; `near` when within a factor 2 (it may fail on a hidden seed)."""
        return tools.call(tools.margins, run)

    @server.tool()
    async def start_run(
        ctx: Context,
        paths: list[str],
        suite: str | None = None,
        mode: str | None = None,
        cases: str | None = None,
        seed: int | None = None,
        device: str | None = None,
        family: str | None = None,
        parent: str | None = None,
        note: str | None = None,
        profile: bool = False,
        ncu: bool = False,
        timeout: float | None = None,
        compile_timeout: float | None = None,
        problem: str | None = None,
    ) -> dict[str, Any]:
        """Run kernel files (one, or several one after the other) as `run PATH... --json` does and follow them to
        the end, reporting progress; returns each run's `run --json` document. Without a GPU: the CPU smoke suite."""
        opts = {"suite": suite, "mode": mode, "cases": cases, "seed": seed, "device": device, "family": family,
                "parent": parent, "note": note, "profile": profile, "ncu": ncu, "timeout": timeout,
                "compile_timeout": compile_timeout, "problem": problem, "quiet": True}  # fmt: skip

        def prepare():  # as `run` does: the requests, then the dead ends they repeat (unless acknowledged)
            if problem is not None:
                opts["problem"] = str(served_problem(problem))
            args = tools.args("run", paths, **opts)
            reqs = run.run_requests(args)
            return reqs, deadends.dead_end_warnings(args, [r.path for r in reqs])

        reqs, repeats = await anyio.to_thread.run_sync(lambda: tools.call(prepare, raw=True))
        if not reqs:
            raise ToolError("error: nothing to run: no kernel file among the paths")
        cancelled_exc = anyio.get_cancelled_exc_class()

        def should_cancel() -> bool:  # the client cancelled the call: the runner stops the worker
            try:
                anyio.from_thread.check_cancelled()
            except cancelled_exc:
                return True
            return False

        out = []
        for i, req in enumerate(reqs):
            state = ProgressState()
            name = req.name or req.path

            def on_event(event: dict[str, Any], i: int = i, state: ProgressState = state, name: str = name) -> None:
                state.update(event)
                if event["event"] not in PROGRESS_EVENTS:
                    return
                done = state.done / state.total if state.total else 0.0
                what = state.current or state.phase
                message = f"[{i + 1}/{len(reqs)}] {name}: " + progress_line(state, what)
                try:
                    anyio.from_thread.run(ctx.report_progress, i + done, len(reqs), message)
                except (Exception, cancelled_exc):  # a lost client must not stop the run's bookkeeping
                    pass

            def one(req=req, on_event=on_event):
                return run_variant(req, on_event, should_cancel)

            try:
                outcome = await anyio.to_thread.run_sync(one)
            except Exception as exc:
                raise ToolError(f"error: {internal_error_message(exc)}") from None
            summary = {"variant": name, "path": outcome.record.run.path, **run_summary(outcome),
                       "dead_ends": [d for d in repeats if d["path"] == req.path]}  # fmt: skip
            out.append(json.loads(json.dumps(summary, default=str)))
            await ctx.report_progress(i + 1, len(reqs), f"[{i + 1}/{len(reqs)}] {name}: {summary['status']}")
        return {"runs": out}

    return server


def cmd_mcp(args: argparse.Namespace) -> int:
    server = build_server(args.store)
    if args.http:
        import anyio

        anyio.run(lambda: server.run_streamable_http_async(host=HOST, port=args.port))
    else:
        server.run("stdio")
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from tracker.cli.common import positive_int

    p = sub.add_parser(
        "mcp",
        parents=[common],
        help="serve the store and the runner as Model Context Protocol tools (stdio; --http for HTTP)",
        description="Tools: list_runs, list_variants, show_run, compare_runs, since_summary, leaderboard, "
        "leaderboard_gaps, lineage, dead_ends, record_verdict, start_run (with progress), run_source, run_diff, "
        "run_evidence, run_profile, gate_margins. --json has no effect: the tools always answer JSON.",
    )
    p.add_argument("--http", action="store_true", help=f"streamable HTTP on {HOST} (path /mcp) instead of stdio")
    p.add_argument("--port", type=positive_int, default=DEFAULT_PORT, help="port for --http (default %(default)s)")
    p.set_defaults(func=cmd_mcp)
