"""What a folded finding stands for, in a few words: "GPUs 0-7", "XID 94 on … (14 lines)".

A finding folds every binding that shares its rule and grouping values; ``subject`` is the
first, ``also_seen_on`` the others (capped), ``occurrences`` counts them all. Reports and the
TUI name them with :func:`folded_subjects` so that no reader sees "GPU 0" alone when eight
GPUs are affected, and nobody reads a bare "x8" as a PCIe link width.
"""

from __future__ import annotations

import re

from gpu_triage.engine.findings import Finding

_GPU = re.compile(r"GPU (\d+)(?: \([^()]*\))?")
_LINE = re.compile(r"(.*) \(line (\d+)\)")
_LISTED = 6  # lines or subjects named before "…"


def index_ranges(indexes: list[int]) -> str:
    """``[0, 1, 2, 3, 5, 7]`` -> ``"0-3, 5, 7"`` (sorted, duplicates dropped)."""
    out: list[str] = []
    values = sorted(set(indexes))
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(out)


def folded_subjects(f: Finding, *, brief: bool = False) -> str:
    """The finding's subjects as one phrase; the subject itself when it stands alone.
    ``brief``: short enough for a list row ("GPUs 0-7", "14 lines")."""
    subjects = [f.subject, *f.also_seen_on]
    if len(subjects) == 1 and f.occurrences <= 1:
        return f.subject
    unlisted = max(0, f.occurrences - len(subjects))
    more = f", +{unlisted} not listed" if unlisted else ""
    gpus = [_GPU.fullmatch(s) for s in subjects]
    if all(gpus):
        indexes = [int(m.group(1)) for m in gpus if m]
        if len(set(indexes)) == 1 and not unlisted:
            return f.subject
        return f"GPUs {index_ranges(indexes)}{more}"
    lines = [_LINE.fullmatch(s) for s in subjects]
    if all(lines) and len({m.group(1) for m in lines if m}) == 1:
        if brief:
            return f"{f.occurrences} lines"
        head = lines[0].group(1) if lines[0] else f.subject
        numbers = [m.group(2) for m in lines if m]
        shown = ", ".join(numbers[:_LISTED]) + (", …" if len(numbers) > _LISTED else "")
        return f"{head} ({f.occurrences} lines: {shown})"
    if brief:
        return f"{f.occurrences} subjects"
    shown = "; ".join(subjects[:_LISTED]) + ("; …" if len(subjects) > _LISTED else "")
    return f"{shown} ({f.occurrences} in all)"
