"""Facts the rulebook itself knows: the Xid/SXid catalogue and a site's Xid policy.

Before evaluation, each Xid and SXid event is annotated with what the catalogue says of
its code (meaning, NVIDIA's immediate and investigatory actions, severity, whether the
code is retired) and what the site overlay says, so rules can reason over
``xid.severity`` or ``xid.retired`` and findings show NVIDIA's action beside the site's.

An Xid storm is 100,000 events of a handful of codes and messages: the catalogue's
annotations are worked out once per code, the decoded message once per (code, message,
driver), and each event is then copied with them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, TypeVar

from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.engine.sxid_gpus import SwitchMap
from gpu_triage.engine.xid_decode import assign_incidents, bucket_meaning, message_update
from gpu_triage.model.facts import Facts, SxidEvent, XidEvent

CATALOG_SOURCE = "xid catalogue"
E = TypeVar("E", XidEvent, SxidEvent)


def enrich(inp: EvalInput, book: Rulebook) -> EvalInput:
    """A copy of ``inp`` whose events carry the catalogue's annotations (input untouched)."""
    if not (book.xid_codes or book.sxid_codes) or not (inp.facts.xids or inp.facts.sxids):
        return inp
    facts = inp.facts.model_copy()  # shallow: only the event lists are replaced
    incidents = assign_incidents(inp.facts.xids)
    driver_of = _drivers(inp.facts)
    by_code: dict[int, dict[str, object]] = {}
    decoded: dict[tuple[Any, ...], dict[str, object]] = {}
    xids = []
    for x, incident in zip(inp.facts.xids, incidents, strict=True):
        if x.code is None:
            xids.append(x)
            continue
        base = by_code.get(x.code)
        if base is None:
            base = by_code[x.code] = xid_update(x.code, book)
        driver = driver_of(x)
        key = (x.code, x.message, driver)
        dec = decoded.get(key)
        if dec is None:
            dec = decoded[key] = message_update(x, book, driver)
        update = dict(base)
        if incident is not None and x.incident is None:
            update["incident"] = incident
        update.update({k: v for k, v in dec.items() if getattr(x, k) is None})
        xids.append(copy_with(x, update))
    facts.xids = xids
    sx: dict[int, dict[str, object]] = {}
    switches = SwitchMap(inp.facts) if inp.facts.sxids else None
    sxids = []
    for s in inp.facts.sxids:
        gpus = switches.update(s) if switches is not None else {}
        if s.code is None:
            sxids.append(copy_with(s, gpus) if gpus else s)
            continue
        upd = sx.get(s.code)
        if upd is None:
            upd = sx[s.code] = sxid_update(s.code, book)
        sxids.append(copy_with(s, {**upd, **gpus} if gpus else upd))
    facts.sxids = sxids
    return replace(inp, facts=facts, _gpu_by_bus=None, aggregate_cache={})


def _drivers(facts: Facts) -> Any:
    """The driver version that logged an event: its GPU's, else the node's (the GPUs
    looked up by bus id once, not per event)."""
    by_bus: dict[str, str] = {}
    for g in facts.gpus:
        if g.pci_bus_id and g.driver_version and g.pci_bus_id not in by_bus:
            by_bus[g.pci_bus_id] = g.driver_version
    node = facts.host.driver_version if facts.host else None

    def driver_of(event: XidEvent) -> str | None:
        return (by_bus.get(event.pci_bus_id) if event.pci_bus_id else None) or node

    return driver_of


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


# Said of an investigatory text that names no bucket (Xid 45's "Solo: RESTART_FM / ...").
NO_BUCKET = "as written (no bucket of that name in the catalogue)"


def annotate_xid(
    event: XidEvent, book: Rulebook, driver: str | None = None, incident: str | None = None
) -> XidEvent:
    if event.code is None:
        return event
    update = xid_update(event.code, book)
    if incident is not None and event.incident is None:
        update["incident"] = incident
    decoded = message_update(event, book, driver)
    update.update({k: v for k, v in decoded.items() if getattr(event, k) is None})
    return event.model_copy(update=update)


def xid_update(code: int, book: Rulebook) -> dict[str, object]:
    """What the catalogue and the site overlay say of a code."""
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
        if entry.immediate:
            update["nvidia_immediate_meaning"] = bucket_meaning(entry.immediate, book) or NO_BUCKET
        if entry.investigatory:
            update["nvidia_investigatory_meaning"] = (
                bucket_meaning(entry.investigatory, book) or NO_BUCKET
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
