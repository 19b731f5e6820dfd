"""Facts the rulebook itself knows: the Xid/SXid catalogue and a site's Xid policy.

Before evaluation, each Xid and SXid event is annotated with what the catalogue says of
its code (meaning, NVIDIA's immediate and investigatory actions, severity, whether the
code is retired) and what the site overlay says, so rules can reason over
``xid.severity`` or ``xid.retired`` and findings show NVIDIA's action beside the site's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.model.facts import SxidEvent, XidEvent

CATALOG_SOURCE = "xid catalogue"
E = TypeVar("E", XidEvent, SxidEvent)


def enrich(inp: EvalInput, book: Rulebook) -> EvalInput:
    """A copy of ``inp`` whose events carry the catalogue's annotations (input untouched)."""
    if not (book.xid_codes or book.sxid_codes) or not (inp.facts.xids or inp.facts.sxids):
        return inp
    facts = inp.facts.model_copy()  # shallow: only the event lists are replaced
    # The annotations depend on the code only: worked out once per code, then each event
    # is copied with them (an Xid storm is 100,000 events of a handful of codes).
    xid_updates: dict[int, dict[str, object]] = {}
    sxid_updates: dict[int, dict[str, object]] = {}
    facts.xids = [
        _with(x, xid_updates, book, xid_update) if x.code is not None else x for x in inp.facts.xids
    ]
    facts.sxids = [
        _with(x, sxid_updates, book, sxid_update) if x.code is not None else x
        for x in inp.facts.sxids
    ]
    return replace(inp, facts=facts, _gpu_by_bus=None, aggregate_cache={})


def _with(
    event: E,
    cache: dict[int, dict[str, object]],
    book: Rulebook,
    make: Callable[[int, Rulebook], dict[str, object]],
) -> E:
    assert event.code is not None
    code: int = event.code
    update = cache.get(code)
    if update is None:
        update = cache[code] = make(code, book)
    return copy_with(event, update)


def copy_with(model: E, update: dict[str, object]) -> E:
    """``model.model_copy(update=update)`` without its generic copying machinery (the
    same shallow copy, several times faster: enrichment copies every event)."""
    cls = model.__class__
    new = cls.__new__(cls)
    _set(new, "__dict__", {**model.__dict__, **update})
    _set(new, "__pydantic_fields_set__", model.__pydantic_fields_set__ | update.keys())
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


_set = object.__setattr__


def annotate_xid(event: XidEvent, book: Rulebook) -> XidEvent:
    if event.code is None:
        return event
    return event.model_copy(update=xid_update(event.code, book))


def xid_update(code: int, book: Rulebook) -> dict[str, object]:
    entry = book.xid_codes.get(code)
    site = book.xid_site.get(code)
    update: dict[str, object] = {"known": entry is not None}
    if entry is not None:
        update.update(
            retired=entry.retired,
            mnemonic=entry.mnemonic or None,
            meaning=entry.meaning,
            cause_class=entry.cause or None,
            applies_to=", ".join(entry.applies_to) or None,
            nvidia_immediate=entry.immediate or None,
            nvidia_investigatory=entry.investigatory or None,
            catalog_severity=entry.severity.value,
            severity=entry.severity.value,
        )
    else:
        update["retired"] = False
    if site is not None:
        override, overlay = site
        if override.action:
            update["site_action"] = f"{override.action} (overlay '{overlay}')"
        if override.severity is not None:
            update["severity"] = override.severity.value
    return update


def annotate_sxid(event: SxidEvent, book: Rulebook) -> SxidEvent:
    if event.code is None:
        return event
    return event.model_copy(update=sxid_update(event.code, book))


def sxid_update(code: int, book: Rulebook) -> dict[str, object]:
    entry = book.sxid_codes.get(code)
    if entry is None:
        return {"known": False}
    return {"known": True, "sxid_class": entry.sxid_class, "meaning": entry.meaning}
