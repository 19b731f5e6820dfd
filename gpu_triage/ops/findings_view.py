"""What a responder narrows the findings to: a text filter, a severity floor, a sort.

No Textual here: the TUI's findings list is this applied to each section of a findings
document, and tests check it alone. Costs are linear in the findings (one pass to filter,
one sort)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from gpu_triage.engine.findings import Finding
from gpu_triage.engine.model import Severity

# Sort orders, in the order a key cycles through them. "rank" keeps the engine's order
# (severity, then the fast-diagnosis stage, then the symptom's differential first).
SORTS: dict[str, str] = {
    "rank": "most urgent first",
    "severity": "severity, then subject",
    "stage": "fast-diagnosis stage",
    "subject": "subject (GPU 0, 1, 2 …)",
    "rule": "rule id",
}
# Severity floors, in the order a key cycles through them.
FLOORS: dict[str, tuple[Severity, ...]] = {
    "all": (Severity.CRITICAL, Severity.WARNING, Severity.INFO),
    "warning": (Severity.CRITICAL, Severity.WARNING),
    "critical": (Severity.CRITICAL,),
}

_NUMBER = re.compile(r"(\d+)")


@dataclass(frozen=True)
class View:
    query: str = ""
    floor: str = "all"  # a key of FLOORS
    sort: str = "rank"  # a key of SORTS

    @property
    def narrowed(self) -> bool:
        return bool(self.query.strip()) or self.floor != "all"

    def describe(self) -> str:
        """One line for the list's title: what is shown, so nobody mistakes it for all."""
        parts = []
        if self.query.strip():
            parts.append(f"filter “{self.query.strip()}”")
        if self.floor != "all":
            parts.append(f"{self.floor} and above")
        if self.sort != "rank":
            parts.append(f"sorted by {self.sort}")
        return ", ".join(parts)


def next_key(keys: Iterable[str], current: str) -> str:
    order = list(keys)
    return order[(order.index(current) + 1) % len(order)] if current in order else order[0]


def haystack(f: Finding) -> str:
    """Everything a person may type to find a finding, lower-cased."""
    return " ".join(
        [
            f.title,
            f.subject,
            *f.also_seen_on,
            f.rule_id,
            f.severity.value,
            f.status.value.replace("_", " "),
            f.stage.value,
        ]
    ).lower()


def matches(f: Finding, query: str) -> bool:
    """Every word of ``query`` appears in the finding (title, subjects, rule id, severity,
    status, stage). A bare number must be a whole number there: ``gpu 2`` is not GPU 12."""
    words = query.lower().split()
    if not words:
        return True
    hay = haystack(f)
    numbers: set[str] | None = None
    for w in words:
        if w.isdigit():
            if numbers is None:
                numbers = set(_NUMBER.findall(hay))
            if w not in numbers:
                return False
        elif w not in hay:
            return False
    return True


def _natural(text: str) -> tuple[object, ...]:
    """ "GPU 10" after "GPU 2": numbers compare as numbers."""
    return tuple(int(p) if p.isdigit() else p for p in _NUMBER.split(text.lower()))


def apply(findings: Iterable[Finding], view: View) -> list[Finding]:
    """The findings the view shows, in its order (stable: ties keep the engine's rank)."""
    allowed = FLOORS.get(view.floor, FLOORS["all"])
    shown = [f for f in findings if f.severity in allowed and matches(f, view.query)]
    if view.sort == "severity":
        shown.sort(key=lambda f: (f.severity.rank, _natural(f.subject)))
    elif view.sort == "stage":
        shown.sort(key=lambda f: f.stage.rank)
    elif view.sort == "subject":
        shown.sort(key=lambda f: _natural(f.subject))
    elif view.sort == "rule":
        shown.sort(key=lambda f: f.rule_id)
    return shown
