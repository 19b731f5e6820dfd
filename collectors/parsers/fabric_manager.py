"""Fabric Manager outputs: its systemd unit state, its version, and its log.

Formats read (none recorded on a live HGX here: written from the documented formats and
the lines GPUd's log matcher tests carry; see tests/data/hand-written/fabric-manager):

- ``systemctl is-active nvidia-fabricmanager``: one word (active, inactive, failed,
  activating ...).
- ``systemctl show -p Id,LoadState,ActiveState,SubState,Result nvidia-fabricmanager``:
  ``Key=value`` lines.
- ``systemctl status nvidia-fabricmanager``: the ``● nvidia-fabricmanager.service - ...``
  header with its ``Loaded:`` and ``Active:`` lines, or "Unit ... could not be found.".
- ``nv-fabricmanager --version``: "Fabric Manager version is : 535.104.05".
- ``/var/log/fabricmanager.log``: ``[Jul 23 2024 07:53:55] [ERROR] [tid 841] text`` lines;
  the start-up line "Fabric Manager version 535.104.05 is running ...", the topology
  refusal "detected number of NVSwitches don't match with any supported system topology",
  "NV_WARN_NOTHING_TO_DO" and "detected NVSwitch fatal error 20034 on fid 0 on NVSwitch
  pci bus id 00000000:86:00.0 physical id 3 port 33" (an SXid reported by FM).

Every value is kept as a short, printable text: a log line is attacker-writable input.
"""

from __future__ import annotations

import re

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.nvidia_smi.values import (
    MAX_LINE_CHARS,
    as_text,
    normalize_pci_bus_id,
)
from gpu_triage.model.facts import FabricFacts, SxidEvent

__all__ = [
    "FM_UNIT",
    "parse_fm_log",
    "parse_fm_version",
    "parse_systemctl_unit",
]

FM_UNIT = "nvidia-fabricmanager"
MAX_TEXT = 300  # characters of a log line kept as a fact
# systemd's ActiveState values (systemd.unit(5)); anything else is not this format
ACTIVE_STATES = frozenset(
    {
        "active",
        "reloading",
        "inactive",
        "failed",
        "activating",
        "deactivating",
        "maintenance",
        "refreshing",
    }
)
_VERSION = r"(\d{3}\.\d{1,3}(?:\.\d{1,3})?)"
_VERSION_LINE = re.compile(
    r"(?i)\bfabric\s*manager\s+version(?:\s+is)?\s*[:=]?\s*" + _VERSION + r"(?![\d.])"
)
_SHOW = re.compile(r"^\s*(Id|Names|LoadState|ActiveState|SubState|Result)=(\S*)\s*$")
# status header: a state mark (dot, circle, cross, arrow) or none, the unit, " - ", text
_STATUS_HEAD = re.compile(
    r"^\s*(?:[\u25cf\u25cb\u00d7*\u21bb]\s*)?([\w@.\-]+?)(?:\.service)?\s+-\s+"
)
_LOADED = re.compile(r"^\s*Loaded:\s*([\w-]+)")
_ACTIVE = re.compile(r"^\s*Active:\s*([\w-]+)(?:\s*\(([^)]{0,60})\))?")
_NOT_FOUND = re.compile(r"Unit\s+" + FM_UNIT + r"(?:\.service)?\s+could not be found", re.I)
_LOG_LINE = re.compile(
    r"^(?:.*?\bnv-fabricmanager\[\d+\]:)?\s*"
    r"\[(?P<stamp>[A-Z][a-z]{2} \d{1,2} \d{4} \d{2}:\d{2}:\d{2})\]\s*"
    r"\[(?P<level>[A-Z]+)\]\s*(?:\[tid \d+\]\s*)?(?P<text>.*)$"
)
_MISMATCH = re.compile(r"detected number of NVSwitches don'?t match", re.I)
_NOTHING = re.compile(r"\bNV_WARN_NOTHING_TO_DO\b")
_FM_SXID = re.compile(
    r"detected NVSwitch (?P<kind>fatal|non-fatal) error (?P<code>\d{4,6})\b.*?"
    r"pci bus id (?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
    r"(?:.*?\bport (?P<port>\d{1,3}))?",
    re.I,
)
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]")


def _clean(text: str) -> str:
    return _UNPRINTABLE.sub(" ", text).strip()[:MAX_TEXT]


def parse_systemctl_unit(text: str | bytes, source: str = "systemctl") -> FabricFacts:
    """The Fabric Manager unit's state from ``systemctl is-active``, ``show`` or ``status``.

    ``status`` output of another unit (nvidia-persistenced ...) is refused: its state says
    nothing of the Fabric Manager. A unit systemd does not know is ``fm_installed`` false
    and inactive.
    """
    text = as_text(text)
    fabric = FabricFacts(source=source)
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip() and len(ln) <= MAX_LINE_CHARS]
    if not lines:
        raise ParseError("empty systemctl output", source=source)
    if _NOT_FOUND.search(text):
        fabric.fm_installed, fabric.fm_active_state = False, "inactive"
        return fabric
    # is-active: the state alone, one word
    if len(lines) == 1 and lines[0].strip() in ACTIVE_STATES | {"unknown"}:
        state = lines[0].strip()
        # "unknown": older systemd's answer for a unit it does not know
        fabric.fm_installed = None if state != "unknown" else False
        fabric.fm_active_state = "inactive" if state == "unknown" else state
        return fabric
    shown = {m.group(1): m.group(2) for ln in lines if (m := _SHOW.match(ln))}
    if shown:
        unit = shown.get("Id") or shown.get("Names") or ""
        if unit and FM_UNIT not in unit:
            raise ParseError(f"systemctl show of another unit ({_clean(unit)})", source=source)
        load = shown.get("LoadState")
        if load is not None:
            fabric.fm_installed = load not in ("not-found", "masked", "bad-setting", "error")
        state = shown.get("ActiveState", "")
        if state in ACTIVE_STATES:
            fabric.fm_active_state = state
        if shown.get("SubState"):
            fabric.fm_sub_state = _clean(shown["SubState"])
        if shown.get("Result"):
            fabric.fm_result = _clean(shown["Result"])
        if fabric.fm_active_state is None and fabric.fm_installed is None:
            raise ParseError("systemctl show without LoadState or ActiveState", source=source)
        return fabric
    return _status(lines, fabric, source)


def _status(lines: list[str], fabric: FabricFacts, source: str) -> FabricFacts:
    unit = None
    for ln in lines:
        hm = _STATUS_HEAD.match(ln)
        if hm and unit is None:
            unit = hm.group(1)
            continue
        lm = _LOADED.match(ln)
        if lm:
            fabric.fm_installed = lm.group(1) not in ("not-found", "masked", "error")
            continue
        am = _ACTIVE.match(ln)
        if am and fabric.fm_active_state is None:
            state, detail = am.group(1), am.group(2) or ""
            if state in ACTIVE_STATES:
                fabric.fm_active_state = state
                sub, _, result = detail.partition("Result:")
                if result:
                    fabric.fm_result = _clean(result)
                elif sub.strip():
                    fabric.fm_sub_state = _clean(sub.split(",")[0])
    if unit is not None and FM_UNIT not in unit:
        raise ParseError(f"systemctl status of another unit ({_clean(unit)})", source=source)
    if fabric.fm_active_state is None:
        raise ParseError("no 'Active:' line of the nvidia-fabricmanager unit", source=source)
    return fabric


def parse_fm_version(text: str | bytes, source: str = "nv-fabricmanager --version") -> str:
    """The version ``nv-fabricmanager --version`` (or an FM log's start-up line) prints."""
    text = as_text(text)
    for ln in text.splitlines():
        if len(ln) > MAX_LINE_CHARS:
            continue
        m = _VERSION_LINE.search(ln)
        if m:
            return m.group(1)
    raise ParseError("no 'Fabric Manager version' line", source=source)


def parse_fm_log(
    text: str | bytes, source: str = "/var/log/fabricmanager.log"
) -> tuple[FabricFacts, list[SxidEvent]]:
    """What the Fabric Manager log says: its version (the newest start-up line), its error
    lines (count, the last one), the topology refusal, "nothing to do", and the NVSwitch
    errors it reports (as SXid events with the switch address and port)."""
    text = as_text(text)
    fabric = FabricFacts(source=source)
    sxids: list[SxidEvent] = []
    seen_line = False
    errors = 0
    for no, ln in enumerate(text.splitlines(), 1):
        if len(ln) > MAX_LINE_CHARS:
            continue
        m = _LOG_LINE.match(ln)
        if not m:
            continue
        seen_line = True
        body, level = m.group("text"), m.group("level")
        vm = _VERSION_LINE.search(body)
        if vm:
            fabric.fm_version = vm.group(1)  # the newest start wins
            # a restart starts over: what the previous run logged is history
            fabric.fm_switches_mismatch = fabric.fm_nothing_to_do = None
        if _MISMATCH.search(body):
            fabric.fm_switches_mismatch = True
        if _NOTHING.search(body):
            fabric.fm_nothing_to_do = True
        sm = _FM_SXID.search(body)
        if sm:
            sxids.append(
                SxidEvent(
                    code=int(sm.group("code")),
                    pci_bus_id=normalize_pci_bus_id(sm.group("pci")),
                    link=int(sm.group("port")) if sm.group("port") else None,
                    fatal=sm.group("kind").lower() == "fatal",
                    message=_clean(body),
                    time_text=m.group("stamp"),
                    raw=_clean(ln),
                    line=no,
                    source=source,
                )
            )
        if level in ("ERROR", "FATAL", "CRITICAL"):
            errors += 1
            fabric.fm_log_error = _clean(body)
    if not seen_line:
        raise ParseError("no '[date] [LEVEL] ...' Fabric Manager log lines", source=source)
    fabric.fm_log_errors = errors
    # the log was read: what it does not say did not happen (since its newest start)
    fabric.fm_switches_mismatch = bool(fabric.fm_switches_mismatch)
    fabric.fm_nothing_to_do = bool(fabric.fm_nothing_to_do)
    return fabric, sxids
