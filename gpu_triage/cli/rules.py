"""`gpu-triage rules ...`: the auditor's commands (lint, test, list, docs, schema, coverage)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gpu_triage.cli.common import add_rules_args, emit, err, load_book, say, subparser
from gpu_triage.engine.findings import ExitCode


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `gpu-triage rules` on the top-level subparsers."""
    rules = sub.add_parser("rules", help="auditor commands for the rulebook")
    rsub = rules.add_subparsers(dest="rules_command", metavar="SUBCOMMAND")
    lint = rsub.add_parser(
        "lint",
        help="check rule files (overlays and site rules against the packaged rulebook); "
        "FILE:LINE:COL messages, exit 1 on error",
    )
    lint.add_argument("paths", nargs="*", type=Path)
    lint.add_argument(
        "--no-builtin",
        action="store_true",
        help="lint PATHS alone, without the packaged rulebook they may refer to",
    )
    test = rsub.add_parser(
        "test",
        help="run the embedded test cases (of PATHS' rules and of the packaged rules their "
        "overlays change; every packaged rule when no PATHS)",
    )
    test.add_argument("paths", nargs="*", type=Path)
    test.add_argument(
        "--no-builtin", action="store_true", help="load PATHS alone, without the packaged rulebook"
    )
    test.add_argument("--engine", choices=("both", "durable", "reference"), default="both")
    test.add_argument("--rule", action="append", default=[], help="only this rule id")
    show = rsub.add_parser("show", help="one rule: its condition and every fact it reads")
    show.add_argument("rule", metavar="RULE")
    add_rules_args(show)
    lst = rsub.add_parser("list", help="list the rules")
    add_rules_args(lst)
    docs = rsub.add_parser("docs", help="the rulebook as a Markdown catalogue")
    docs.add_argument("--out", type=Path)
    add_rules_args(docs)
    schema = rsub.add_parser("schema", help="JSON Schema of rule files (or findings documents)")
    schema.add_argument("--kind", choices=("rule", "findings"), default="rule")
    schema.add_argument("--out", type=Path)

    cov = rsub.add_parser("coverage", help="knowledge-map items and the rules that cite them")
    cov.add_argument("--format", choices=("text", "json"), default="text")
    add_rules_args(cov)


def _rule_paths(args: argparse.Namespace) -> tuple[list[Path], bool]:
    """No paths: the packaged rulebook. Paths: those on top of the packaged rulebook (an
    overlay names its rules; a site rule may read their conclusions), unless
    ``--no-builtin``."""
    paths: list[Path] = list(args.paths)
    return paths, not (paths and args.no_builtin)


def cmd_rules(args: argparse.Namespace, ap: argparse.ArgumentParser) -> int:
    sub = args.rules_command
    if sub == "lint":
        from gpu_triage.collectors.parsers.registry import PARSERS
        from gpu_triage.engine.lint import lint

        paths, builtin = _rule_paths(args)
        diags = lint(PARSERS, paths, include_builtin=builtin, only_paths=bool(paths))
        for d in diags:
            say(d)
        errors = sum(d.level == "error" for d in diags)
        print(f"{errors} error(s), {len(diags) - errors} warning(s)", file=sys.stderr)
        return 1 if errors else 0
    if sub == "test":
        return _rules_test(args)
    if sub == "show":
        return _show(args)
    if sub == "list":
        return _list(load_book(args))
    if sub == "coverage":
        from gpu_triage.engine.coverage import coverage_command

        return coverage_command(load_book(args), args.format)
    if sub == "docs":
        from gpu_triage.engine.docs import rules_markdown

        emit(rules_markdown(load_book(args)), args.out)
        return 0
    if sub == "schema":
        from gpu_triage.engine.schema import findings_schema_text, rule_schema_text

        emit(rule_schema_text() if args.kind == "rule" else findings_schema_text(), args.out)
        return 0
    subparser(ap, "rules").print_help(sys.stderr)
    return ExitCode.USAGE


def _rules_test(args: argparse.Namespace) -> int:
    from gpu_triage.engine.backend import Backend, BackendFailure, ReferenceBackend
    from gpu_triage.engine.compiler import load_rulebook
    from gpu_triage.engine.loader import RulebookError
    from gpu_triage.engine.ruletest import run_rule_tests

    paths, builtin = _rule_paths(args)
    try:
        book = load_rulebook(paths, include_builtin=builtin, allow_untrusted=True)
    except RulebookError as exc:
        err(f"the rulebook could not be loaded:\n{exc}")
        return 1
    backends: list[Backend] = []
    if args.engine in ("both", "reference"):
        backends.append(ReferenceBackend())
    if args.engine in ("both", "durable"):
        from gpu_triage.engine.durable_backend import shared_backend

        try:
            backends.append(shared_backend(book))
        except BackendFailure as exc:
            if args.engine == "durable":
                err(f"durable_rules backend unavailable: {exc}")
                return 1
            err(f"note: durable_rules backend unavailable ({exc}); testing the reference only")
    only = set(args.rule) or (_tested_by_paths(book) if paths and builtin else None)
    results = run_rule_tests(book, backends, only)
    # A packaged rule's own case that an overlay changes is what the overlay is for:
    # shown so the site sees what it changed, not a failure of the site's rules.
    changed = [r for r in results if not r.passed and _packaged(book, r.rule_id)]
    failed = [r for r in results if not r.passed and r not in changed]
    for label, cases in (("FAIL", failed), ("CHANGED BY OVERLAY", changed)):
        for r in cases:
            rule = book.by_id(r.rule_id)
            overlays = f" [overlay {', '.join(rule.overridden_by)}]" if rule else ""
            print(f"{label} {r.rule_id}: {r.name} ({r.file}){overlays if changed else ''}")
            for p in r.problems:
                print(f"     {p}")
    engines = "+".join(b.name for b in backends)
    print(
        f"{len(results) - len(failed) - len(changed)} passed, {len(failed)} failed"
        + (f", {len(changed)} packaged case(s) changed by overlays" if changed else "")
    )
    print(f"({len(results)} cases of {len(book.rules)} rules, engines: {engines})", file=sys.stderr)
    return 1 if failed else 0


def _packaged(book: Any, rule_id: str) -> bool:
    from gpu_triage.engine.loader import BUILTIN

    rule = book.by_id(rule_id)
    return rule is not None and rule.rulebook == BUILTIN and bool(rule.overridden_by)


def _tested_by_paths(book: Any) -> set[str]:
    """The rules a `rules test PATHS` run checks: those PATHS define, and the packaged
    rules their overlays change."""
    from gpu_triage.engine.loader import BUILTIN

    return {r.id for r in book.rules if r.rulebook != BUILTIN or r.overridden_by}


def _list(book: Any) -> int:
    """Every rule, with what overlays changed; disabled rules listed as disabled."""
    for r in book.rules:
        subject = ",".join(r.iter_kinds) or "node"
        over = f"  [overlay {', '.join(r.overridden_by)}]" if r.overridden_by else ""
        print(
            f"{r.id:<40} {r.severity.value:<8} {r.rule.stage.value:<9} {subject:<10} "
            f"{r.rulebook}{over}"
        )
    for rid, reason in sorted(book.disabled.items()):
        print(f"{rid:<40} {'disabled':<8} {reason}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from gpu_triage.engine.docs import rule_markdown

    book = load_book(args)
    r = book.by_id(args.rule)
    if r is None:
        reason = book.disabled.get(args.rule)
        err(f"rule '{args.rule}' is disabled: {reason}" if reason else f"no rule '{args.rule}'")
        return ExitCode.USAGE
    print(rule_markdown(r).rstrip())
    print(f"- **Defined in:** {r.file}:{r.line} (rulebook {r.rulebook})")
    return 0
