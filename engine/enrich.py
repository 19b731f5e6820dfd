"""Facts the rulebook itself knows: the Xid/SXid catalogue and a site's Xid policy.

Before evaluation, each Xid and SXid event is annotated with what the catalogue says of
its code (meaning, NVIDIA's immediate and investigatory actions, severity, whether the
code is retired) and what the site overlay says, so rules can reason over
``xid.severity`` or ``xid.retired`` and findings show NVIDIA's action beside the site's.
"""

from __future__ import annotations

from dataclasses import replace

from gpu_triage.engine.compiler import Rulebook
from gpu_triage.engine.inputs import EvalInput
from gpu_triage.engine.xid_decode import assign_incidents, bucket_meaning, message_update
from gpu_triage.model.facts import Facts, SxidEvent, XidEvent

CATALOG_SOURCE = "xid catalogue"


def enrich(inp: EvalInput, book: Rulebook) -> EvalInput:
    """A copy of ``inp`` whose events carry the catalogue's annotations (input untouched)."""
    if not (book.xid_codes or book.sxid_codes) or not (inp.facts.xids or inp.facts.sxids):
        return inp
    facts = inp.facts.model_copy()  # shallow: only the event lists are replaced
    incidents = assign_incidents(inp.facts.xids)
    facts.xids = [
        annotate_xid(x, book, driver=_driver_of(x, inp.facts), incident=incident)
        for x, incident in zip(inp.facts.xids, incidents, strict=True)
    ]
    facts.sxids = [annotate_sxid(x, book) for x in inp.facts.sxids]
    return replace(inp, facts=facts, _gpu_by_bus=None, aggregate_cache={})


def _driver_of(event: XidEvent, facts: Facts) -> str | None:
    """The driver version that logged the event: its GPU's, else the node's."""
    for g in facts.gpus:
        if event.pci_bus_id and g.pci_bus_id == event.pci_bus_id and g.driver_version:
            return g.driver_version
    return facts.host.driver_version if facts.host else None


# Said of an investigatory text that names no bucket (Xid 45's "Solo: RESTART_FM / ...").
NO_BUCKET = "as written (no bucket of that name in the catalogue)"


def annotate_xid(
    event: XidEvent, book: Rulebook, driver: str | None = None, incident: str | None = None
) -> XidEvent:
    if event.code is None:
        return event
    entry = book.xid_codes.get(event.code)
    site = book.xid_site.get(event.code)
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
    if incident is not None and event.incident is None:
        update["incident"] = incident
    decoded = message_update(event, book, driver)
    update.update({k: v for k, v in decoded.items() if getattr(event, k) is None})
    return event.model_copy(update=update)


def annotate_sxid(event: SxidEvent, book: Rulebook) -> SxidEvent:
    if event.code is None:
        return event
    entry = book.sxid_codes.get(event.code)
    if entry is None:
        return event.model_copy(update={"known": False})
    return event.model_copy(
        update={"known": True, "sxid_class": entry.sxid_class, "meaning": entry.meaning}
    )
