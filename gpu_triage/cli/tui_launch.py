"""`gpu-triage tui`: start the responder's terminal UI.

The one place outside tui/ that reaches the TUI, lazily: nothing else in the CLI imports
Textual, so the unattended path never loads it."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpu_triage.cli.common import add_rules_args


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `gpu-triage tui` on the top-level subparsers."""
    tui = sub.add_parser("tui", help="the responder's terminal UI (default with no command)")
    tui.add_argument("--snapshot", type=Path, help="open this snapshot instead of collecting")
    tui.add_argument(
        "--demo",
        nargs="?",
        const="incident",
        metavar="NAME",
        help="open a bundled demo incident (default: incident)",
    )
    tui.add_argument("--window", type=float, default=1.0)
    tui.add_argument("--engine", choices=("auto", "durable", "reference"), default="auto")
    tui.add_argument("--record", type=Path, help="incident record file (default: a new one)")
    add_rules_args(tui)


def cmd_tui(args: argparse.Namespace) -> int:
    if args.engine in ("auto", "durable"):
        # the durable_rules worker's process starts up beside Textual's import, not after
        from gpu_triage.engine.durable_worker import prespawn

        prespawn()
    # Textual is imported here and only here: the unattended path never loads it.
    from gpu_triage.ops.session import TuiOptions
    from gpu_triage.tui.app import run_tui

    return run_tui(
        TuiOptions(
            rules=tuple(args.rules),
            include_builtin=not args.no_builtin,
            allow_untrusted_rules=args.allow_untrusted_rules,
            engine=args.engine,
            snapshot=args.snapshot,
            demo=args.demo,
            window_s=args.window,
            record=args.record,
        )
    )
