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
        "--level",
        type=int,
        choices=(1, 2, 3, 4),
        help="dcgmi diag level (default 1; 3 with --burn-in)",
    )
    p.add_argument(
        "--burn-in",
        action="store_true",
        help="the node is in burn-in before production: the diagnostics must cover compute, "
        "memory bandwidth, interconnect and thermal/power stress (dcgmi diag -r 3 by default, "
        "required to run); sets site.burn_in",
    )
    p.add_argument(
        "--site",
        type=Path,
        metavar="FILE",
        help="site inventory (YAML/JSON: pinned_driver_version, pinned_kernel, burn_in, ...; "
        "see docs/facts.md, kind site)",
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
        profile = (
            load_profile(args.profile)
            if args.profile
            else default_profile(args.level, burn_in=args.burn_in)
        )
        if args.burn_in:
            profile.burn_in = True
        site = None
        if args.site is not None:
            from gpu_triage.model.supplied import read_site

            site = read_site(args.site)
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
            rep = check_snapshot(snap, str(args.snapshot), book, profile, args.engine, site)
        else:
            rep = check_live(
                lambda: collect_live(window=args.window), book, profile, args.engine, site=site
            )
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
