"""`gpu-triage fleet PATH...`: what many nodes' history shows that one node cannot."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
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
    fleet.add_argument(
        "--since",
        help="only runs from this time on: ISO 8601 (UTC unless it says otherwise) or a "
        "duration back from now (7d, 36h)",
    )
    fleet.add_argument(
        "--util-target",
        type=float,
        default=85.0,
        help="utilisation target in percent busy (fleet/F9; default 85)",
    )


def parse_since(text: str, now: datetime | None = None) -> str:
    """``--since``: an ISO 8601 time (UTC when it names no offset) or ``N``d/``N``h back
    from now, as the UTC ISO text the history's timestamps are compared with."""
    text = text.strip()
    if text[:-1].isdigit() and text[-1:] in ("d", "h"):
        hours = int(text[:-1]) * (24 if text[-1] == "d" else 1)
        stamp = (now or datetime.now(UTC)) - timedelta(hours=hours)
    else:
        try:
            stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"{text!r} is neither an ISO 8601 time nor a duration like 7d"
            ) from None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=UTC)
    return stamp.astimezone(UTC).isoformat()


def cmd_fleet(args: argparse.Namespace) -> int:
    from gpu_triage.ops.fleet import Inventory, analyse, fleet_markdown, read_fleet

    missing = [p for p in args.paths if not p.exists()]
    if missing:
        err(f"no such file or directory: {missing[0]}")
        return ExitCode.USAGE
    if args.top < 1 or (args.workers is not None and args.workers < 1):
        err("--top and --workers take a positive number")
        return ExitCode.USAGE
    if not 0 < args.util_target <= 100:
        err("--util-target is a percentage above 0 and at most 100")
        return ExitCode.USAGE
    try:
        inventory = Inventory.load(args.inventory)
    except (OSError, KeyError, ValueError) as exc:
        err(f"{args.inventory}: cannot read the inventory: {exc}")
        return ExitCode.USAGE
    since = ""
    if args.since:
        try:
            since = parse_since(args.since)
        except ValueError as exc:
            err(f"--since: {exc}")
            return ExitCode.USAGE
    read = read_fleet(args.paths, args.workers, target=args.util_target, since=since)
    rep = analyse(read, inventory, top=args.top, util_target=args.util_target)
    text = fleet_markdown(rep) if args.format == "markdown" else jsonio.dump_model(rep, indent=2)
    emit(text if text.endswith("\n") else text + "\n", args.out)
    if not read.runs:
        # nothing could be read: no statement about the fleet was possible
        err(f"no run record could be read from {read.files} files ({read.error_count} errors)")
        return ExitCode.UNKNOWN
    return 0
