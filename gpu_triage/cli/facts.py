"""`gpu-triage facts ...`: the fact catalogue."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpu_triage.cli.common import emit, subparser
from gpu_triage.engine.findings import ExitCode


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `gpu-triage facts` on the top-level subparsers."""
    facts = sub.add_parser("facts", help="the fact catalogue")
    fsub = facts.add_subparsers(dest="facts_command", metavar="SUBCOMMAND")
    fdocs = fsub.add_parser("docs", help="the fact catalogue as Markdown")
    fdocs.add_argument("--out", type=Path)


def cmd_facts(args: argparse.Namespace, ap: argparse.ArgumentParser) -> int:
    if args.facts_command == "docs":
        from gpu_triage.model.catalog import catalog_markdown

        emit(catalog_markdown() + "\n", args.out)
        return 0
    subparser(ap, "facts").print_help(sys.stderr)
    return ExitCode.USAGE
