"""`gpu-triage diff SLOW HEALTHY`: a slow node compared with a healthy twin."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpu_triage.cli.common import add_rules_args, emit, err, load_book, load_snapshot
from gpu_triage.engine.findings import ExitCode
from gpu_triage.io import jsonio

LIVE = "live"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `gpu-triage diff` on the top-level subparsers."""
    d = sub.add_parser(
        "diff",
        help="compare a slow node with a healthy one: findings and facts that differ",
        description="Evaluate both snapshots and list what differs, in fast-diagnosis "
        f"order. SLOW may be '{LIVE}' to collect this node now.",
    )
    d.add_argument("slow", metavar="SLOW", help=f"snapshot of the slow node, or '{LIVE}'")
    d.add_argument("healthy", metavar="HEALTHY", type=Path, help="snapshot of a healthy twin")
    d.add_argument("--format", choices=("markdown", "json"), default="markdown")
    d.add_argument("--out", type=Path)
    d.add_argument("--window", type=float, default=1.0, help="sampling window when live")
    d.add_argument("--engine", choices=("auto", "durable", "reference"), default="reference")
    add_rules_args(d)


def cmd_diff(args: argparse.Namespace) -> int:
    from gpu_triage.engine.evaluate import evaluate
    from gpu_triage.engine.loader import RulebookError
    from gpu_triage.model.snapshot import SnapshotError
    from gpu_triage.ops.diff import diff_documents, diff_markdown

    try:
        book = load_book(args)
        healthy = load_snapshot(args.healthy)
        if args.slow == LIVE:
            from gpu_triage.cli.collect import collect_live

            slow = collect_live(args.window)
            slow_label = f"{slow.hostname or 'this node'} (live)"
        else:
            slow, slow_label = load_snapshot(Path(args.slow)), str(args.slow)
    except (RulebookError, SnapshotError) as exc:
        err(str(exc))
        return ExitCode.UNKNOWN
    slow_doc = evaluate(slow, book, engine=args.engine)
    healthy_doc = evaluate(healthy, book, engine=args.engine)
    report = diff_documents(
        slow.facts,
        slow_doc,
        healthy.facts,
        healthy_doc,
        book,
        slow_label=slow_label,
        healthy_label=str(args.healthy),
    )
    if args.format == "json":
        emit(jsonio.dump_model(report, indent=2) + "\n", args.out)
    else:
        emit(diff_markdown(report), args.out)
    return 0
