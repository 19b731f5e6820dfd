"""`gpu-triage facts ...`: the fact catalogue, and which rules read a fact."""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from gpu_triage.cli.common import add_rules_args, emit, err, load_book, subparser
from gpu_triage.engine.verdict import ExitCode


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `gpu-triage facts` on the top-level subparsers."""
    facts = sub.add_parser("facts", help="the fact catalogue")
    fsub = facts.add_subparsers(dest="facts_command", metavar="SUBCOMMAND")
    fdocs = fsub.add_parser("docs", help="the fact catalogue as Markdown")
    fdocs.add_argument("--out", type=Path)
    add_rules_args(fdocs)
    who = fsub.add_parser("who", help="where a fact is made and which rules read it")
    who.add_argument("field", metavar="KIND.FIELD", help="e.g. gpu.pcie_link_width")
    add_rules_args(who)


def cmd_facts(args: argparse.Namespace, ap: argparse.ArgumentParser) -> int:
    if args.facts_command == "docs":
        from gpu_triage.model.catalog import catalog_markdown

        emit(catalog_markdown(load_book(args).readers()) + "\n", args.out)
        return 0
    if args.facts_command == "who":
        return _who(args)
    subparser(ap, "facts").print_help(sys.stderr)
    return ExitCode.USAGE


def _who(args: argparse.Namespace) -> int:
    from gpu_triage.model.catalog import field_info, kinds

    kind, _, name = args.field.partition(".")
    fi = field_info(kind, name)
    if fi is None:
        known = [f.path for k in kinds().values() for f in k.fields.values()]
        close = difflib.get_close_matches(args.field, known, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        err(f"no fact '{args.field}' in the catalogue{hint}; see `gpu-triage facts docs`")
        return ExitCode.USAGE
    k = kinds()[kind]
    unit = f", {fi.unit}" if fi.unit else ""
    print(f"{fi.path} ({fi.type}{unit}): {fi.meaning}")
    print(f"made by: {', '.join(k.collectors)} (kind '{k.name}', model {k.model.__name__})")
    book = load_book(args)
    readers = set(book.readers().get(fi.path, []))
    rules = [r for r in book.rules if r.id in readers]
    if not rules:
        print("read by no rule")
        return 0
    print(f"read by {len(rules)} rule{'s' if len(rules) != 1 else ''}:")
    for r in rules:
        print(f"  {r.id:<40} {r.severity.value:<8} {r.file}:{r.line}")
    return 0
