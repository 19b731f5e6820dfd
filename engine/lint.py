"""`gpu-triage rules lint`: every problem of a rulebook as FILE:LINE:COL: level: message."""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

from gpu_triage.engine.compiler import compile_rulebook
from gpu_triage.engine.coverage import load_knowledge_map
from gpu_triage.engine.loader import BUILTIN, Diagnostic, load_paths
from gpu_triage.engine.placeholders import bare_placeholders, unknown_placeholders
from gpu_triage.engine.templates import problems as text_problems
from gpu_triage.io.yamlio import Located

_REFERENCE = re.compile(r"^((guide|fleet|xid|hw)/[A-Za-z0-9_-]+|https?://\S+)$")


def knowledge_map_ids() -> set[str]:
    return load_knowledge_map().ids


def lint(
    known_parsers: Collection[str],
    paths: list[Path],
    *,
    include_builtin: bool = False,
    allow_untrusted: bool = True,
    only_paths: bool = False,
) -> list[Diagnostic]:
    """Lint rule files. ``known_parsers``: the runbook parser names that exist (the caller
    knows them: the engine does not import the collectors). ``only_paths``: the packaged
    rulebook is loaded for reference (an overlay names its rules, a site rule may read its
    conclusions) but only problems in ``paths`` are reported."""
    raw = load_paths(paths, include_builtin=include_builtin, allow_untrusted=allow_untrusted)
    book, diags = compile_rulebook(raw)
    out = list(raw.diagnostics) + diags
    if only_paths:
        out = [d for d in out if _within(d.file, paths)]
    parsers = set(known_parsers)
    known_ids = knowledge_map_ids()
    compiled = {r.id for r in book.rules}
    exprs = {r.id: r.expr for r in book.rules}
    for lr in raw.rules:
        rule, loc = lr.rule, lr.loc
        if only_paths and lr.rulebook == BUILTIN:
            continue
        if rule.id not in compiled and rule.id not in book.disabled:
            continue  # already reported
        if not rule.tests:
            line, col = loc.where(("id",))
            out.append(Diagnostic(loc.file, line, col, f"rule '{rule.id}' has no tests"))
        else:
            fires = [t for t in rule.tests if t.expect.fires or t.expect.status == "fired"]
            quiet = [
                t for t in rule.tests if t.expect.fires is False or t.expect.status == "not_fired"
            ]
            if not fires or not quiet:
                line, col = loc.where(("tests",))
                missing = "a firing" if not fires else "a non-firing"
                out.append(
                    Diagnostic(loc.file, line, col, f"rule '{rule.id}' has no {missing} test case")
                )
        if rule.id in exprs:
            texts = {"symptom": rule.symptom, "cause": rule.cause, "fix": rule.fix}
            for key, message in text_problems(rule.title, texts, exprs[rule.id]):
                line, col = loc.where((key,))
                out.append(Diagnostic(loc.file, line, col, f"rule '{rule.id}': {message}", "error"))
        for i, ref in enumerate(rule.references):
            if (
                _REFERENCE.match(ref)
                and not ref.startswith(("http://", "https://"))
                and ref not in known_ids
            ):
                line, col = loc.where(("references", i))
                out.append(
                    Diagnostic(loc.file, line, col, f"reference '{ref}' is not a knowledge-map ID")
                )
            if not _REFERENCE.match(ref):
                line, col = loc.where(("references", i))
                out.append(
                    Diagnostic(
                        loc.file,
                        line,
                        col,
                        f"reference '{ref}' is neither a knowledge-map ID "
                        "(guide/.., fleet/.., xid/.., hw/..) nor a URL",
                    )
                )
        for i, step in enumerate(rule.runbook):
            if step.parser and step.parser not in parsers:
                line, col = loc.where(("runbook", i, "parser"))
                out.append(
                    Diagnostic(
                        loc.file,
                        line,
                        col,
                        f"unknown parser '{step.parser}' (known: {', '.join(sorted(parsers))})",
                    )
                )
            if step.command:
                out.extend(_parameter_problems(loc, i, step.command))
            if step.command and (
                step.changes_system is False
                and step.command[0] in ("reboot", "shutdown", "rmmod", "modprobe")
            ):
                line, col = loc.where(("runbook", i, "command"))
                out.append(
                    Diagnostic(
                        loc.file,
                        line,
                        col,
                        f"'{step.command[0]}' changes the system: set changes_system: true",
                        "error",
                    )
                )
    return sorted(set(out))


def _within(file: str, paths: list[Path]) -> bool:
    """Whether a diagnostic's file is one of ``paths`` or below one of them."""
    try:
        f = Path(file).resolve()
    except (OSError, RuntimeError):
        return True  # cannot tell: show it rather than hide it
    for p in paths:
        base = p.resolve()
        if f == base or base in f.parents:
            return True
    return False


def _parameter_problems(loc: Located, i: int, command: list[str]) -> list[Diagnostic]:
    """A command that would run with a placeholder as written, or names no fact."""
    line, col = loc.where(("runbook", i, "command"))
    out = [
        Diagnostic(
            loc.file,
            line,
            col,
            f"'{word}' is a bare placeholder that would run as written: use a parameter "
            "such as {gpu.index}, {gpu.pci_bus_id}, {job.command}, {node.hostname} or "
            "{input.NAME} (asked of the responder)",
            "error",
        )
        for word in bare_placeholders(command)
    ]
    out.extend(
        Diagnostic(
            loc.file,
            line,
            col,
            f"parameter {{{name}}} names no fact (a kind.field of docs/facts.md, "
            "node.hostname or input.NAME)",
            "error",
        )
        for name in unknown_placeholders(command)
    )
    return out
