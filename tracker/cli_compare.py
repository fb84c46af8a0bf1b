"""CLI commands over the statistics: `compare A B` and `regressions`."""

from __future__ import annotations

import argparse


def add_compare_commands(sub, common: argparse.ArgumentParser) -> None:
    return None
