"""The `gpu-triage` command: the parser and the dispatch; one module per command group.

Nothing here imports Textual: the TUI is loaded only by `tui_launch.cmd_tui`."""

from __future__ import annotations

import argparse
import sys

if sys.argv[1:2] == ["run"] and not any("reference" in a for a in sys.argv):
    # An unattended run evaluates on the durable_rules worker: start its process first,
    # so it starts up beside the imports below rather than after them (cold start).
    from gpu_triage.engine.durable_worker import prespawn

    prespawn()

from gpu_triage import __version__
from gpu_triage.cli import (
    check,
    collect,
    diff,
    explain,
    facts,
    fleet,
    readiness,
    rules,
    run,
    tui_launch,
)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="gpu-triage",
        description="Rule-based incident triage for NVIDIA GPU nodes.",
        epilog="Exit codes of `run`: 0 healthy, 1 warning, 2 critical, 3 unknown "
        "(collection failed or the rulebook could not load), 64 usage.",
    )
    ap.add_argument("--version", action="version", version=f"gpu-triage {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    run.add_parser(sub)
    collect.add_parser(sub)
    explain.add_parser(sub)
    rules.add_parser(sub)
    tui_launch.add_parser(sub)
    fleet.add_parser(sub)
    check.add_parser(sub)
    facts.add_parser(sub)
    diff.add_parser(sub)
    readiness.add_parser(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        if args.command == "run":
            return run.cmd_run(args)
        if args.command == "collect":
            return collect.cmd_collect(args)
        if args.command == "explain":
            return explain.cmd_explain(args)
        if args.command == "rules":
            return rules.cmd_rules(args, ap)
        if args.command == "facts":
            return facts.cmd_facts(args, ap)
        if args.command == "diff":
            return diff.cmd_diff(args)
        if args.command == "fleet":
            return fleet.cmd_fleet(args)
        if args.command == "readiness":
            return readiness.cmd_readiness(args)
        if args.command in ("npd", "slurm-healthcheck"):
            return check.cmd_check(args)
        if args.command == "tui" or (args.command is None and argv is None and sys.stdin.isatty()):
            return tui_launch.cmd_tui(args if args.command == "tui" else ap.parse_args(["tui"]))
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    ap.print_help()
    return 0
