"""Facts the rulebook itself knows: the Xid/SXid catalogue and a site's Xid policy.

Before evaluation, each Xid and SXid event is annotated with what the catalogue says of
its code (meaning, NVIDIA's immediate and investigatory actions, severity, whether the
code is retired) and what the site overlay says, so rules can reason over
``xid.severity`` or ``xid.retired`` and findings show NVIDIA's action beside the site's.

An Xid storm is 100,000 events of a handful of codes and messages: the catalogue's
annotations are worked out once per code, the decoded message once per (code, message,
driver), merged into one update. ``enrich`` copies every event with it;
``enrich_collapsed`` (what ``evaluate`` uses) first collapses repeated events
(engine.repeats) and copies only the representatives, the others when a finding walks them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, TypeVar

from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.engine.repeats import (
    Repeats,
    collapsible,
    fields_set,
    group,
    varying_fields,
)
from gpu_triage.engine.sxid_gpus import SwitchMap
from gpu_triage.engine.xid_decode import assign_incidents, bucket_meaning, message_update
from gpu_triage.model.facts import Facts, SxidEvent, XidEvent

CATALOG_SOURCE = "xid catalogue"
E = TypeVar("E", XidEvent, SxidEvent)


def enrich(inp: EvalInput, book: Rulebook) -> EvalInput:
    """A copy of ``inp`` whose events carry the catalogue's annotations (input untouched)."""
    if not _annotates(inp, book):
        return inp
    facts = inp.facts.model_copy()  # shallow: only the event lists are replaced
    xid, sxid = XidAnnotator(inp.facts, book), SxidAnnotator(book, inp.facts)
    incidents = assign_incidents(inp.facts.xids)
    facts.xids = [xid(x, inc) for x, inc in zip(inp.facts.xids, incidents, strict=True)]
    facts.sxids = [sxid(s) for s in inp.facts.sxids]
    return replace(inp, facts=facts, _gpu_by_bus=None, aggregate_cache={})


def enrich_collapsed(inp: EvalInput, book: Rulebook) -> EvalInput:
    """``enrich``, with repeated events collapsed into representatives (engine.repeats):
    only those are annotated; the others are annotated when a finding walks them."""
    annotates = _annotates(inp, book)
    facts = inp.facts.model_copy()
    repeats: dict[str, Repeats] = {}
    xid: Any = XidAnnotator(inp.facts, book) if annotates else (lambda x, _inc: x)
    sxid: Any = SxidAnnotator(book, inp.facts) if annotates else (lambda s: s)
    events = inp.facts.xids
    # Incidents are worked out from the whole sequence of events: only when read.
    assign = annotates and "xid.incident" in book.read_paths
    incidents = assign_incidents(events) if assign else [None] * len(events)
    # Incidents already on the events (a paste), or none assigned: compared as they are.
    was_set = fields_set(events)
    given = not assign or ("incident" in was_set and any(x.incident is not None for x in events))
    rx = _collapse(events, book, "xid", {"incident"} if given else set(), was_set)
    if rx is not None:
        rx.reps = [xid(events[m[0]], incidents[m[0]]) for m in rx.members]
        if "incident" in rx.varying:
            rx.per_event["incident"] = incidents
        rx.annotate = lambda ev, _rep, i: xid(ev, incidents[i])
        repeats["xid"] = rx
        facts.xids = rx.reps
    elif annotates:
        facts.xids = [xid(x, inc) for x, inc in zip(events, incidents, strict=True)]
    sx_events = inp.facts.sxids
    rs = _collapse(sx_events, book, "sxid", set())
    if rs is not None:
        rs.reps = [sxid(sx_events[m[0]]) for m in rs.members]
        rs.annotate = lambda ev, _rep, _i: sxid(ev)
        repeats["sxid"] = rs
        facts.sxids = rs.reps
    elif annotates:
        facts.sxids = [sxid(s) for s in sx_events]
    if not repeats and not annotates:
        return inp
    return replace(inp, facts=facts, _gpu_by_bus=None, aggregate_cache={}, repeats=repeats)


def _annotates(inp: EvalInput, book: Rulebook) -> bool:
    return bool((book.xid_codes or book.sxid_codes) and (inp.facts.xids or inp.facts.sxids))


def _collapse(
    events: list[Any], book: Rulebook, kind: str, drop: set[str], was_set: set[str] | None = None
) -> Repeats | None:
    """The groups of repeated events of ``kind``; None when nothing repeats."""
    if len(events) < 2 or not collapsible(book, kind):
        return None
    varying = varying_fields(book, kind) - drop
    members = group(events, varying, was_set)
    if members is None or len(members) == len(events):
        return None
    return Repeats(events=events, members=members, varying=varying)


class XidAnnotator:
    """Annotates Xids: what the catalogue says of a (code, message, driver) is worked out
    once and merged into one update; per event only its incident is added."""

    def __init__(self, facts: Facts, book: Rulebook) -> None:
        self.book = book
        self.driver_of = _drivers(facts)
        self.by_code: dict[int, dict[str, object]] = {}
        # (code, message, driver) -> (update, its keys, the decoded fields an event may own)
        self.merged: dict[
            tuple[Any, ...], tuple[dict[str, object], frozenset[str], tuple[str, ...]]
        ] = {}

    def __call__(self, x: XidEvent, incident: str | None) -> XidEvent:
        d = x.__dict__
        code = d.get("code")
        if code is None:
            return x
        driver = self.driver_of(x)
        key = (code, d.get("message"), driver)
        hit = self.merged.get(key)
        if hit is None:
            base = self.by_code.get(code)
            if base is None:
                base = self.by_code[code] = xid_update(code, self.book)
            dec = message_update(x, self.book, driver)
            upd = {**base, **dec}
            hit = self.merged[key] = (upd, frozenset(upd), tuple(dec))
        update, keys, decoded = hit
        # A field the event already has (a paste that carried it) is kept as it is.
        if decoded and any(d.get(k) is not None for k in decoded):
            update = {k: v for k, v in update.items() if k not in decoded or d.get(k) is None}
            keys = frozenset(update)
        if incident is not None and d.get("incident") is None:
            update = {**update, "incident": incident}
            keys = keys | _INCIDENT
        return _copy(x, update, keys)


class SxidAnnotator:
    """The catalogue's class of each SXid code, and the GPUs behind its switch port (from
    the NVLink remote ends of ``facts``, engine.sxid_gpus)."""

    def __init__(self, book: Rulebook, facts: Facts | None = None) -> None:
        self.book = book
        self.by_code: dict[int, tuple[dict[str, object], frozenset[str]]] = {}
        self.switches = SwitchMap(facts) if facts is not None and facts.sxids else None

    def __call__(self, s: SxidEvent) -> SxidEvent:
        gpus = self.switches.update(s) if self.switches is not None else {}
        code = s.__dict__.get("code")
        if code is None:
            return _copy(s, gpus, frozenset(gpus)) if gpus else s
        hit = self.by_code.get(code)
        if hit is None:
            upd = sxid_update(code, self.book)
            hit = self.by_code[code] = (upd, frozenset(upd))
        if gpus:
            both = {**hit[0], **gpus}
            return _copy(s, both, frozenset(both))
        return _copy(s, hit[0], hit[1])


_INCIDENT = frozenset({"incident"})


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
    return _copy(model, update, update.keys())


def _copy(model: E, update: dict[str, object], keys: Any) -> E:
    cls = model.__class__
    new = cls.__new__(cls)
    _set(new, "__dict__", {**model.__dict__, **update})
    _set(new, "__pydantic_fields_set__", model.__pydantic_fields_set__ | keys)
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
