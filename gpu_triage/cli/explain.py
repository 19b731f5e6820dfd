"""`gpu-triage explain RULE`: why a rule fired on a snapshot, or why not."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gpu_triage.cli.common import add_rules_args, err, load_book, load_snapshot, say
from gpu_triage.engine.findings import ExitCode


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `gpu-triage explain` on the top-level subparsers."""
    ex = sub.add_parser("explain", help="why a rule fired, or why not")
    ex.add_argument("rule")
    src = ex.add_mutually_exclusive_group(required=True)
    src.add_argument("--snapshot", type=Path)
    src.add_argument("--demo", metavar="NAME", help="a bundled demo (gpu-triage run --demo list)")
    ex.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="json: the same explanation with the evaluated condition tree",
    )
    add_rules_args(ex)


def cmd_explain(args: argparse.Namespace) -> int:
    from gpu_triage.engine.explain import explain, explanation_json, render_explanation
    from gpu_triage.engine.inputs import EvalInput
    from gpu_triage.engine.loader import RulebookError
    from gpu_triage.model.demos import demo_snapshot_path
    from gpu_triage.model.snapshot import SnapshotError

    try:
        path = args.snapshot or demo_snapshot_path(args.demo)
    except ValueError as exc:
        err(str(exc))
        return ExitCode.USAGE
    try:
        book = load_book(args)
        snap = load_snapshot(path)
    except (RulebookError, SnapshotError) as exc:
        err(str(exc))
        return ExitCode.UNKNOWN
    try:
        x = explain(EvalInput.from_snapshot(snap), book, args.rule)
    except KeyError as exc:
        err(str(exc.args[0]))
        return ExitCode.USAGE
    if args.format == "json":
        print(json.dumps(explanation_json(x), indent=2, ensure_ascii=False))
    else:
        say(render_explanation(x))
    return 0
