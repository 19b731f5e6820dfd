"""Parameters of runbook commands: ``{kind.field}`` filled from a finding's bindings.

A step's command may name facts, ``[nvidia-smi, -r, -i, "{gpu.index}"]`` or
``[compute-sanitizer, --tool, memcheck, "{job.command}"]``. When a finding is built, every
placeholder whose value is known (and safe as an argument) is replaced; what stays is a
parameter a person must supply before the step can run (the TUI asks for it). A token that is
exactly one placeholder of a list-valued fact (``job.command``) becomes several arguments.

Values come from the node and are attacker-controlled: a value that could be read as an
option (leading ``-``) or holds control characters is never filled in, it is asked for.
Commands never go through a shell, so a filled value stays one argument.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable
from typing import Any

from gpu_triage.model.catalog import kinds

PLACEHOLDER = re.compile(r"\{([a-z_]+)\.([a-z0-9_]+)\}")
# Beyond the fact kinds: ``{node.hostname}`` (the incident's node) and ``{input.NAME}``,
# a value only a person can give (the peer host of a bandwidth test, say): always asked.
PLACEHOLDER_NODE = "node"
PLACEHOLDER_INPUT = "input"

# An upper-case word that stands for something to fill in (GPU_INDEX, JOB_COMMAND, <gpu>):
# refused by lint, since it would run as written. Words like ROW_REMAPPER or PERFORMANCE
# are real arguments (nvidia-smi -d) and do not match.
_PLACEHOLDER_WORDS = (
    "INDEX|ID|UUID|COMMAND|CMD|NAME|PATH|FILE|DIR|ADDR|ADDRESS|BUS|PID|HOST|HOSTNAME|NODE"
    "|DEVICE|DEV|PORT|NIC|HCA|RANK|JOB|GPU|IP|NUM|NUMBER|SERIAL|USER"
)
_BARE = re.compile(
    rf"^(?:[A-Z0-9]+_)*(?:{_PLACEHOLDER_WORDS})(?:_[A-Z0-9]+)*$|^<[^<>\s]+>$|^\$\{{?[A-Z_]+\}}?$"
)
_MAX_VALUE_CHARS = 256

Lookup = Callable[[str, str], Any]  # (kind, field) -> value, or None when unknown


def placeholders(argv: Iterable[str]) -> list[str]:
    """The ``kind.field`` parameters still to fill in ``argv``, in order, once each."""
    seen: dict[str, None] = {}
    for token in argv:
        for m in PLACEHOLDER.finditer(token):
            seen.setdefault(f"{m.group(1)}.{m.group(2)}")
    return list(seen)


def bare_placeholders(argv: Iterable[str]) -> list[str]:
    """Tokens that look like an upper-case placeholder (``GPU_INDEX``), for lint."""
    out = []
    for token in argv:
        for part in re.split(r"[=:,]", token):
            if _BARE.match(part) and (part.isupper() or part.startswith(("<", "$"))):
                out.append(part)
    return out


def _safe_scalar(value: Any, *, first: bool = True) -> str | None:
    if value is None or isinstance(value, (dict, list, tuple)):
        return None
    if isinstance(value, bool):
        return None  # no command takes a Python truth value
    text = f"{value:g}" if isinstance(value, float) else str(value)
    if not text or len(text) > _MAX_VALUE_CHARS or (first and text.startswith("-")):
        return None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        return None
    return text


def _safe_list(value: Any) -> list[str] | None:
    if not isinstance(value, (list, tuple)) or not value:
        return None
    items = [_safe_scalar(v, first=i == 0) for i, v in enumerate(value)]
    if any(item is None for item in items):
        return None
    return [item for item in items if item is not None]


def fill(argv: list[str], lookup: Lookup) -> list[str]:
    """``argv`` with every placeholder whose value is known and safe filled in."""
    out: list[str] = []
    for token in argv:
        whole = PLACEHOLDER.fullmatch(token)
        if whole:
            value = lookup(whole.group(1), whole.group(2))
            expanded = _safe_list(value)
            if expanded is not None:
                out.extend(expanded)
                continue

        def sub(m: re.Match[str]) -> str:
            text = _safe_scalar(lookup(m.group(1), m.group(2)))
            return m.group(0) if text is None else text

        out.append(PLACEHOLDER.sub(sub, token))
    return out


def supply(argv: list[str], values: dict[str, str]) -> list[str]:
    """Fill the remaining parameters with what a person typed. A token that is exactly one
    placeholder takes the typed text split like a shell would (``python train.py``);
    inside a longer token the text is taken as it is. Raises ValueError for what cannot
    be used (empty, unsplittable, control characters)."""
    out: list[str] = []
    for token in argv:
        whole = PLACEHOLDER.fullmatch(token)
        if whole and f"{whole.group(1)}.{whole.group(2)}" in values:
            name = f"{whole.group(1)}.{whole.group(2)}"
            try:
                parts = shlex.split(values[name])
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
            if not parts:
                raise ValueError(f"{name}: a value is needed")
            for part in parts:
                if any(ord(c) < 0x20 or ord(c) == 0x7F for c in part):
                    raise ValueError(f"{name}: control characters are not allowed")
            out.extend(parts)
            continue

        def sub(m: re.Match[str]) -> str:
            name = f"{m.group(1)}.{m.group(2)}"
            if name not in values:
                return m.group(0)
            text = values[name].strip()
            if not text or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
                raise ValueError(f"{name}: a plain value is needed")
            return text

        out.append(PLACEHOLDER.sub(sub, token))
    return out


def unknown_placeholders(argv: Iterable[str]) -> list[str]:
    """Parameters that name no fact (``{gpu.indx}``), for lint."""
    out = []
    for name in placeholders(argv):
        kind, _, field = name.partition(".")
        if kind == PLACEHOLDER_INPUT:
            continue
        if kind == PLACEHOLDER_NODE:
            if field != "hostname":
                out.append(name)
            continue
        if kind not in kinds() or field not in kinds()[kind].fields:
            out.append(name)
    return out
