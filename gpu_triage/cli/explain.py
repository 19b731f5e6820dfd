"""`gpu-triage explain RULE`: why a rule fired on a snapshot, or why not."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpu_triage.cli.common import add_rules_args, err, load_book, load_snapshot, say
from gpu_triage.engine.findings import ExitCode


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `gpu-triage explain` on the top-level subparsers."""
    ex = sub.add_parser("explain", help="why a rule fired, or why not")
    ex.add_argument("rule")
    ex.add_argument("--snapshot", type=Path, required=True)
    add_rules_args(ex)


def cmd_explain(args: argparse.Namespace) -> int:
    from gpu_triage.engine.explain import explain, render_explanation
    from gpu_triage.engine.inputs import EvalInput
    from gpu_triage.engine.loader import RulebookError
    from gpu_triage.model.snapshot import SnapshotError

    try:
        book = load_book(args)
        snap = load_snapshot(args.snapshot)
    except (RulebookError, SnapshotError) as exc:
        err(str(exc))
        return ExitCode.UNKNOWN
    try:
        x = explain(EvalInput.from_snapshot(snap), book, args.rule)
    except KeyError as exc:
        err(str(exc.args[0]))
        return ExitCode.USAGE
    say(render_explanation(x))
    return 0
