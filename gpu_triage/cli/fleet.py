"""`gpu-triage fleet PATH...`: what many nodes' history shows that one node cannot."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpu_triage.cli.common import emit, err
from gpu_triage.engine.verdict import ExitCode
from gpu_triage.io import jsonio


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `gpu-triage fleet` on the top-level subparsers."""
    fleet = sub.add_parser("fleet", help="what many nodes' history shows that one node cannot")
    fleet.add_argument(
        "paths",
        nargs="+",
        type=Path,
        help="JSONL histories, findings documents, snapshots, or folders of them",
    )
    fleet.add_argument("--format", choices=("markdown", "json"), default="markdown")
    fleet.add_argument("--out", type=Path)
    fleet.add_argument("--inventory", type=Path, help="CSV with host,rack,row columns")
    fleet.add_argument("--top", type=int, default=20)
    fleet.add_argument("--workers", type=int, help="processes reading files (default: CPUs)")


def cmd_fleet(args: argparse.Namespace) -> int:
    from gpu_triage.ops.fleet import Inventory, analyse, fleet_markdown, read_fleet

    missing = [p for p in args.paths if not p.exists()]
    if missing:
        err(f"no such file or directory: {missing[0]}")
        return ExitCode.USAGE
    nodes, runs, errors, files = read_fleet(args.paths, args.workers)
    rep = analyse(nodes, runs, errors, files, Inventory.load(args.inventory), top=args.top)
    text = fleet_markdown(rep) if args.format == "markdown" else jsonio.dump_model(rep, indent=2)
    emit(text if text.endswith("\n") else text + "\n", args.out)
    return 0
