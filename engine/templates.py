"""Rule texts with placeholders, rendered so that a missing value is never shown as one.

A text (title, symptom, cause, fix) names facts as ``{kind.field}``. A part of the text
that only makes sense with its values is written as an optional segment, ``[[ ... ]]``:
it is shown when every value inside is known and left out otherwise, so a sentence is
phrased around a missing value instead of printing a stand-in for it::

    symptom: GPU {gpu.index} is throttled[[ at {gpu.temperature_gpu_c} °C]].

Titles also name rules that did not fire (cannot evaluate, needs confirmation, competing
causes): there every optional segment is left out, so a title of a rule that did not fire
names no measured value ("core 17 saturated" would claim what was not seen); outside
segments a title may only name what the finding is about (the GPU, the port).

:func:`guaranteed` is the proof the lint uses: the facts a condition cannot be true
without (Kleene logic: a comparison that reads a missing fact is unknown, never true), so
a bare placeholder on one of them always has a value when the rule fires.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from gpu_triage.engine import expr as E
from gpu_triage.model.catalog import kinds
from gpu_triage.model.facts import DERIVED_FROM

OPEN, CLOSE = "[[", "]]"
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\.([a-z0-9_]+)\}")
_SEGMENT = re.compile(r"\[\[(.*?)\]\]", re.DOTALL)


@dataclass(frozen=True)
class Segment:
    """An optional part of a text: shown only when every value in it is known."""

    parts: tuple[str | E.Ref, ...]


Part = str | E.Ref | Segment


def _known_kind(kind: str, name: str) -> bool:
    return kind in ("answer", "concl") or (kind in kinds() and name in kinds()[kind].fields)


def _split_refs(text: str) -> list[str | E.Ref]:
    out: list[str | E.Ref] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(text):
        kind, name = m.group(1), m.group(2)
        if not _known_kind(kind, name):
            continue
        out.append(text[pos : m.start()])
        out.append(E.Ref(kind, name))
        pos = m.end()
    out.append(text[pos:])
    return [p for p in out if p != ""]


_PARSED: dict[str, tuple[Part, ...]] = {}


def parse(text: str) -> tuple[Part, ...]:
    """A text split once into literals, fact references and optional segments (rule texts
    are few and rendered for every finding, so the split is kept)."""
    hit = _PARSED.get(text)
    if hit is not None:
        return hit
    stripped = text.strip()
    parts: list[Part] = []
    pos = 0
    for m in _SEGMENT.finditer(stripped):
        parts.extend(_split_refs(stripped[pos : m.start()]))
        parts.append(Segment(tuple(_split_refs(m.group(1)))))
        pos = m.end()
    parts.extend(_split_refs(stripped[pos:]))
    result = tuple(parts) or ("",)
    if len(_PARSED) < 10_000:
        _PARSED[text] = result
    return result


def bare_refs(text: str) -> list[E.Ref]:
    """References outside optional segments: they must have a value whenever shown."""
    return [p for p in parse(text) if isinstance(p, E.Ref)]


def segment_refs(text: str) -> list[E.Ref]:
    return [
        r for p in parse(text) if isinstance(p, Segment) for r in p.parts if isinstance(r, E.Ref)
    ]


def unbalanced(text: str) -> bool:
    """An opening or closing marker without its partner (or segments nested)."""
    rest = _SEGMENT.sub("", text)
    return OPEN in rest or CLOSE in rest or any(OPEN in m for m in _SEGMENT.findall(text))


Lookup = Callable[[E.Ref], tuple[bool, Any]]


def render(
    text: str,
    lookup: Lookup,
    fmt: Callable[[Any], str],
    *,
    with_segments: bool = True,
    on_missing: Callable[[list[E.Ref]], str] | None = None,
) -> str:
    """The text with its values filled. A segment whose values are not all known is left
    out (and every segment, when ``with_segments`` is false: a title of a rule that did
    not fire). A bare reference without a value (the lint refuses texts where that can
    happen on a fired rule; a rule that could not be evaluated may lack one) makes the
    whole text ``on_missing(those references)``, else it reads "unknown", in words."""
    parts = parse(text)
    if len(parts) == 1 and isinstance(parts[0], str):
        return parts[0]
    if on_missing is not None:
        absent = [p for p in parts if isinstance(p, E.Ref) and not lookup(p)[0]]
        if absent:
            return on_missing(absent)
    out: list[str] = []
    dropped = False
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, E.Ref):
            known, value = lookup(part)
            if known:
                out.append(fmt(value))
            elif with_segments:
                out.append("unknown")
            else:
                dropped = True  # a title of a rule that did not fire: name what is known
        else:
            shown = _segment(part, lookup, fmt) if with_segments else None
            if shown is None:
                dropped = True
            else:
                out.append(shown)
    text = "".join(out)
    return _tidy(text) if dropped else text


def not_seen(refs: list[E.Ref]) -> str:
    """What a rule that did not fire says instead of a text it has no values for."""
    names = ", ".join(dict.fromkeys(r.path for r in refs))
    return f"Not observed: {names} had no value, so this rule could not show it."


def _segment(seg: Segment, lookup: Lookup, fmt: Callable[[Any], str]) -> str | None:
    out: list[str] = []
    for p in seg.parts:
        if isinstance(p, str):
            out.append(p)
            continue
        known, value = lookup(p)
        if not known:
            return None
        out.append(fmt(value))
    return "".join(out)


_SPACES = re.compile(r"[ \t]{2,}")
_BEFORE_PUNCT = re.compile(r"[ \t]+([.,;:)])")


def _tidy(text: str) -> str:
    """Spaces left where a segment was taken out."""
    return _BEFORE_PUNCT.sub(r"\1", _SPACES.sub(" ", text)).strip()


# ---------------------------------------------------------------- the lint's proof


def guaranteed(expr: E.Expr) -> frozenset[str]:
    """Fact paths (``kind.field``) that have a value whenever ``expr`` is true."""
    return _when(expr, True)


def _when(e: E.Expr, truth: bool) -> frozenset[str]:
    if isinstance(e, E.BoolOp):
        sets = [_when(o, truth) for o in e.operands]
        # and-true / or-false: every operand decided that way; otherwise any one did.
        if (e.op == "and") == truth:
            return frozenset().union(*sets)
        return frozenset.intersection(*sets)
    if isinstance(e, E.Not):
        return _when(e.operand, not truth)
    if isinstance(e, E.Availability):
        # available(x) true, or unavailable(x) false: x has a value.
        return _with_sources(e.ref) if e.negate == truth else frozenset()
    if isinstance(e, E.Compare):
        # True or false, a comparison has read both of its sides.
        return _operand_refs(e.left) | _operand_refs(e.right)
    if isinstance(e, E.Ref) and not e.local:
        return _with_sources(e)
    return frozenset()


def _operand_refs(e: E.Expr) -> frozenset[str]:
    if isinstance(e, E.Ref):
        return frozenset() if e.local else _with_sources(e)
    if isinstance(e, E.Arith):
        return _operand_refs(e.left) | _operand_refs(e.right)
    if isinstance(e, E.Neg):
        return _operand_refs(e.operand)
    return frozenset()  # constants, lists, aggregates (their scope is not the binding)


def _with_sources(r: E.Ref) -> frozenset[str]:
    """A computed value that is known has known inputs (memory_used_pct: used and total)."""
    return frozenset({r.path, *(f"{r.kind}.{s}" for s in DERIVED_FROM.get(r.name, ()))})


# Fields that name an item rather than measure it: a title may show them outside a
# segment, since they say what a finding is about even when its rule did not fire.
_NAMING = frozenset(
    {
        "index",
        "port",
        "link",
        "gpu_index",
        "gpu_pci_bus_id",
        "code",
        "mnemonic",
        "meaning",
        "nvlink_link",
        "nvlink_unit",
        "name",
        "ca_name",
        "process_name",
        "pci_bus_id",
        "device",
    }
)


# The fields every item of a kind is collected with (they are how it was found): a text
# may show them without proof.
_ALWAYS = frozenset({"index", "name", "ca_name", "port", "link", "code", "gpu_index", "pid"})


def identity_fields() -> dict[str, frozenset[str]]:
    """Per kind, the fields that say which item a finding is about."""
    return {k: frozenset(info.identity) | _NAMING for k, info in kinds().items()}


def unproven(text: str, proven: Iterable[str]) -> list[str]:
    """Bare placeholders of ``text`` that may have no value when the rule fires."""
    have = set(proven)
    return [r.path for r in bare_refs(text) if r.path not in have]


def problems(title: str, texts: dict[str, str], expr: E.Expr) -> list[tuple[str, str]]:
    """(text key, message) for every way the rule's texts could show a missing value or
    name a value in the title of a rule that did not fire."""
    out: list[tuple[str, str]] = []
    ident = identity_fields()
    proven = guaranteed(expr)
    always = {k: v & _ALWAYS for k, v in ident.items()}
    for key, text in {"title": title, **texts}.items():
        if unbalanced(text):
            out.append(
                (key, f"unbalanced '{OPEN}' / '{CLOSE}' in the {key} (segments do not nest)")
            )
            continue
        for r in bare_refs(text):
            naming = r.name in ident.get(r.kind, frozenset())
            if key == "title" and not naming:
                out.append(
                    (
                        key,
                        f"the title names the value {{{r.path}}}: a title is shown for "
                        f"rules that did not fire too; put it in [[ ]]",
                    )
                )
            elif key != "title" and r.name not in always.get(r.kind, ()) and r.path not in proven:
                out.append(
                    (
                        key,
                        f"{{{r.path}}} may have no value when the rule fires (its "
                        f"condition does not read it on every path): phrase around it "
                        f"with an optional [[ ... ]] segment",
                    )
                )
    return out
