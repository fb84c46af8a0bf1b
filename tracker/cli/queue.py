"""`queue`: which run holds each device and which runs wait for it (one run per device at a time)."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from tracker.capture.devicelock import queue


def queue_lines(entries: list[dict[str, Any]]) -> list[str]:
    """One line per device: `device cpu: run R (pid P, 12 s), waiting: R2 (pid P2)`."""
    out = []
    for e in entries:
        h = e["holder"]
        held = f"run {h['run_id']} (pid {h['pid']}, {time.time() - h['since']:.0f} s)" if h else "free"
        waits = ", ".join(f"{w['run_id']} (pid {w['pid']})" for w in e["waiting"]) or "none"
        out.append(f"device {e['device']}: {held}; waiting: {waits}")
    return out


def cmd_queue(args: argparse.Namespace) -> int:
    entries = queue()
    if args.json:
        print(json.dumps(entries))
    else:
        print("\n".join(queue_lines(entries)) or "no device is in use")
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("queue", parents=[common], help="which run holds each device, and which runs wait")
    p.set_defaults(func=cmd_queue)
