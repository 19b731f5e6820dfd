"""`gpu-triage readiness`: the node's acceptance checks as one pass/fail report."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpu_triage.cli.collect import collect_live
from gpu_triage.cli.common import add_rules_args, emit, err, load_book, load_snapshot
from gpu_triage.engine.findings import ExitCode
from gpu_triage.io import jsonio


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "readiness",
        help="acceptance checks for putting a node into service: pass/fail report",
        description=(
            "Evaluate the node's readiness: the rulebook's hardware and readiness rules, the "
            "diagnostics the profile names (default: dcgmi diag -r LEVEL -j where DCGM is "
            "installed) and the Xid/AER/ECC errors logged while they ran. Only the profile's "
            "commands are run, and the report lists them."
        ),
        epilog="Exit codes: 0 pass, 2 fail, 3 could not check, 64 usage.",
    )
    p.add_argument("--snapshot", type=Path, help="judge this snapshot; nothing is run")
    p.add_argument("--profile", type=Path, help="readiness profile (YAML): commands, fail_on")
    p.add_argument(
        "--level", type=int, default=1, choices=(1, 2, 3, 4), help="dcgmi diag level (default 1)"
    )
    p.add_argument("--out", type=Path, help="write the report here (atomically); default stdout")
    p.add_argument("--format", choices=("json", "markdown"), default="json")
    p.add_argument("--engine", choices=("auto", "durable", "reference"), default="auto")
    p.add_argument("--window", type=float, default=1.0, help="sampling window when collecting")
    add_rules_args(p)


def cmd_readiness(args: argparse.Namespace) -> int:
    from gpu_triage.engine.loader import RulebookError
    from gpu_triage.model.snapshot import SnapshotError
    from gpu_triage.ops.readiness import (
        check_live,
        check_snapshot,
        default_profile,
        load_profile,
        report_markdown,
    )

    try:
        profile = load_profile(args.profile) if args.profile else default_profile(args.level)
    except ValueError as exc:
        err(str(exc))
        return ExitCode.USAGE
    try:
        book = load_book(args)
    except RulebookError as exc:
        err(f"the rulebook could not be loaded:\n{exc}")
        return ExitCode.UNKNOWN
    try:
        if args.snapshot:
            snap = load_snapshot(args.snapshot)
            rep = check_snapshot(snap, str(args.snapshot), book, profile, args.engine)
        else:
            rep = check_live(lambda: collect_live(window=args.window), book, profile, args.engine)
    except SnapshotError as exc:
        err(str(exc))
        return ExitCode.UNKNOWN
    text = (
        report_markdown(rep)
        if args.format == "markdown"
        else jsonio.dump_model(rep, indent=2) + "\n"
    )
    try:
        emit(text, args.out)
    except OSError as exc:
        err(f"cannot write {args.out}: {exc}")
        return ExitCode.UNKNOWN
    return rep.exit_code
