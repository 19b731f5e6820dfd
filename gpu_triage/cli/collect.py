"""`gpu-triage collect`: read this node (or saved command output) into a snapshot."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gpu_triage.cli.common import emit, err, say
from gpu_triage.engine.findings import ExitCode


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `gpu-triage collect` on the top-level subparsers."""
    col = sub.add_parser("collect", help="collect facts from this node into a snapshot")
    col.add_argument("--out", type=Path, help="snapshot file (default stdout)")
    col.add_argument("--window", type=float, default=1.0, help="sampling window in seconds")
    col.add_argument(
        "--redact",
        action="store_true",
        help="remove hostnames, serials, UUIDs, users and command lines",
    )
    col.add_argument("--only", help="comma-separated collector names")
    col.add_argument(
        "--kernel-log",
        type=Path,
        action="append",
        help="read this file as the kernel log (its newest 32 MiB at most); repeatable: "
        "several files merge by time",
    )
    add_from_text_arg(col)
    add_collector_args(col)


FROM_TEXT_HELP = (
    "build the snapshot from saved or pasted command output ('-' reads stdin): "
    "each file's kind is recognised from its content, and a pasted terminal session "
    "is split at its prompts; KIND:FILE forces a parser (gpu-triage facts parsers "
    "lists them); repeatable"
)


def add_from_text_arg(p: argparse.ArgumentParser, help_text: str = FROM_TEXT_HELP) -> None:
    """``--from-text [KIND:]FILE ...``: the same intake for ``collect`` and ``run``."""
    p.add_argument(
        "--from-text",
        nargs="+",
        action="append",
        metavar="[KIND:]FILE",
        default=[],
        help=help_text,
    )


def read_from_text(groups: list[list[str]]) -> Any:
    """The ``--from-text`` values read and recognised (an Intake), or the usage exit code
    after saying why (an unknown kind, stdin named twice, a file that cannot be read)."""
    from gpu_triage.collectors.from_text import from_text_arguments, intake_texts, read_text_file

    try:
        specs, notes = from_text_arguments(groups)
    except KeyError as exc:
        err(str(exc.args[0]))
        return ExitCode.USAGE
    for note in notes:
        err(note)
    reads_stdin = [s for s in specs if s == "-" or s.endswith(":-")]
    if len(reads_stdin) > 1:
        err("--from-text: stdin ('-') can be read only once")
        return ExitCode.USAGE
    try:
        stdin = sys.stdin.buffer.read() if reads_stdin else None
        return intake_texts([read_text_file(s, stdin) for s in specs])
    except KeyError as exc:
        err(str(exc.args[0]))
        return ExitCode.USAGE
    except (OSError, ValueError) as exc:
        err(str(exc))
        return ExitCode.USAGE


def report_intake(intake: Any) -> None:
    """What was read, and above all what was not: never dropped without a word (every
    piece on a terminal, the problems only otherwise)."""
    for piece in intake.pieces if sys.stderr.isatty() else intake.problems:
        say(f"  {piece.describe()}", file=sys.stderr)


def add_collector_args(p: argparse.ArgumentParser) -> None:
    """Bounds of a live collection, settable short (fault soaks, slow sites)."""
    p.add_argument(
        "--collector-timeout",
        type=float,
        metavar="SECONDS",
        help="each collector's budget beyond the window (default: its own, about 15 s)",
    )
    p.add_argument(
        "--command-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="each command a collector runs (default 10)",
    )
    p.add_argument(
        "--command-path",
        metavar="DIRS",
        help="colon-separated directories searched for collector commands before the "
        "fixed PATH (sites with tools elsewhere; test fakes)",
    )


def collector_options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "collector_timeout": getattr(args, "collector_timeout", None),
        "command_timeout": getattr(args, "command_timeout", 10.0),
        "command_path": getattr(args, "command_path", None),
    }


def collect_live(
    window: float,
    only: set[str] | None = None,
    kernel_log: Path | list[Path] | None = None,
    progress: bool = True,
    *,
    cancel: Any = None,
    collector_timeout: float | None = None,
    command_timeout: float = 10.0,
    command_path: str | None = None,
) -> Any:
    from gpu_triage.collectors.base import CollectContext
    from gpu_triage.collectors.runner import collect_snapshot, default_collectors

    collectors = [c for c in default_collectors() if not only or c.name in only]
    ctx = CollectContext(
        window_s=window,
        kernel_log_file=kernel_log,
        command_timeout_s=command_timeout,
        search_path=command_path,
    )
    show = progress and sys.stderr.isatty()

    def report(name: str, state: Any) -> None:
        if show:
            msg = "running" if state is None else state.value
            print(f"  {name:<20} {msg}", file=sys.stderr)

    return collect_snapshot(
        collectors, ctx, progress=report, cancel=cancel, timeout_s=collector_timeout
    )


def cmd_collect(args: argparse.Namespace) -> int:
    from gpu_triage.model.snapshot import dump_snapshot

    intake = None
    if args.from_text:
        from gpu_triage.collectors.from_text import snapshot_from_intake

        intake = read_from_text(args.from_text)
        if isinstance(intake, int):
            return intake
        snap = snapshot_from_intake(intake)
    else:
        only = set(args.only.split(",")) if args.only else None
        snap = collect_live(args.window, only, args.kernel_log, **collector_options(args))
    if args.redact:
        from gpu_triage.collectors.redact import redact_snapshot

        snap = redact_snapshot(snap)
    try:
        emit(dump_snapshot(snap), args.out)
    except OSError as exc:
        err(f"cannot write {args.out}: {exc}")
        return ExitCode.UNKNOWN
    if intake is not None:
        report_intake(intake)
        return 0 if intake.anything_read else ExitCode.UNKNOWN
    if sys.stderr.isatty():
        for c in snap.collectors:
            say(
                f"  {c.name:<20} {c.state.value:<12} {c.duration_s:6.2f}s {c.error}",
                file=sys.stderr,
            )
    return 0
