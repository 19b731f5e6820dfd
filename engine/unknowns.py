""" "Cannot evaluate", grouped by what stopped the rules: one line per cause, not per rule.

On a node without an NVIDIA driver every GPU rule misses its facts for the same reason;
listing each rule (and each GPU) repeats that reason dozens of times and hides the one
line that matters. A finding's cause is what its missing collected facts say (reason and
detail); answers still to give and conclusions of other rules are not causes of their
own (they are unknown because something else is), unless they are all that is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpu_triage.engine.findings import Finding, MissingFact

_DERIVED = ("answer.", "concl.")


@dataclass
class UnknownCause:
    cause: str  # in words: "nvml unavailable: NVML library not found"
    rules: list[str] = field(default_factory=list)  # rule ids, first seen first
    facts: list[str] = field(default_factory=list)  # the missing facts it stands for
    subjects: int = 0  # findings (rule x subject) it stands for


def counted(n: int, word: str) -> str:
    """``counted(1, "rule")`` -> "1 rule", ``counted(3, "cause")`` -> "3 causes"."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def _cause(m: MissingFact) -> str:
    if m.detail:
        return m.detail
    if m.reason == "not_collected" and "." in m.path:
        # A field nothing filled in (a paste without it, an older snapshot): one cause per
        # kind, the fields listed beside it, not one line per field.
        return f"{m.path.partition('.')[0]} facts not collected"
    return f"{m.path}: {m.reason.replace('_', ' ')}"


def _direct(f: Finding) -> list[MissingFact]:
    direct = [m for m in f.missing if not m.path.startswith(_DERIVED)]
    return direct or f.missing


def finding_causes(f: Finding) -> tuple[str, ...]:
    """The distinct causes of one finding's missing facts, in the order they appear."""
    return tuple(dict.fromkeys(_cause(m) for m in _direct(f))) or ("no reason recorded",)


def group_unknowns(findings: list[Finding]) -> list[UnknownCause]:
    """Findings that could not be evaluated, grouped by their causes (most rules first)."""
    groups: dict[tuple[str, ...], UnknownCause] = {}
    for f in findings:
        key = finding_causes(f)
        g = groups.get(key)
        if g is None:
            g = groups[key] = UnknownCause("; ".join(key))
        if f.rule_id not in g.rules:
            g.rules.append(f.rule_id)
        for m in _direct(f):
            if not m.detail and m.path not in g.facts:
                g.facts.append(m.path)
        g.subjects += max(f.occurrences, 1)
    return sorted(groups.values(), key=lambda g: -len(g.rules))
