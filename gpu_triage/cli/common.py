"""What every command module shares: argument groups, messages, output, loading."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

SEVERITIES = ("info", "warning", "critical")


def add_rules_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rules",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="extra rulebook directory or file (overlays, site rules); repeatable",
    )
    p.add_argument("--no-builtin", action="store_true", help="do not load the packaged rulebook")
    p.add_argument(
        "--allow-untrusted-rules",
        action="store_true",
        help="when root, accept rule files writable by other users",
    )


def add_check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--severity",
        choices=("warning", "critical"),
        default="critical",
        help="findings at or above this make the check fail",
    )
    p.add_argument(
        "--findings",
        type=Path,
        help="use the findings file an unattended run wrote instead of collecting",
    )
    p.add_argument(
        "--max-age",
        type=float,
        default=900.0,
        help="seconds after which --findings is too old to trust",
    )
    p.add_argument("--snapshot", type=Path, help="evaluate this snapshot")
    p.add_argument("--window", type=float, default=1.0)
    add_rules_args(p)


def say(text: object, *, file: Any = None) -> None:
    """Print text for a person: node strings in it (hostnames, GPU and process names,
    log lines) are shown inertly, never interpreted by the terminal (escape.visible)."""
    from gpu_triage.io.escape import visible

    print(visible(text, multiline=True), file=file)


def err(msg: str) -> None:
    say(f"gpu-triage: {msg}", file=sys.stderr)


def emit(text: str, out: Path | None) -> None:
    if out is None:
        sys.stdout.write(text)
        return
    from gpu_triage.io.files import write_atomic

    write_atomic(out, text)


def load_book(args: argparse.Namespace) -> Any:
    from gpu_triage.engine.compiler import load_rulebook

    return load_rulebook(
        list(args.rules),
        include_builtin=not args.no_builtin,
        allow_untrusted=args.allow_untrusted_rules,
    )


def load_snapshot(path: Path) -> Any:
    from gpu_triage.model.snapshot import load_snapshot

    return load_snapshot(path)


def subparser(ap: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    action = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    sub: argparse.ArgumentParser = action.choices[name]
    return sub
