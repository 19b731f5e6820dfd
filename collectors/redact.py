"""Remove what identifies a site or a person from a snapshot, keeping it evaluable.

Removed: hostnames, GPU serials and UUIDs, usernames, process names and command lines,
wherever they occur (facts, event raw lines, raw command outputs, sources). Identifiers
become stable placeholders (``GPU-REDACTED-0``, ``proc-REDACTED-1`` ...), the same one
for every occurrence, so facts stay joinable. Kept: numbers, codes, PCI addresses,
versions, times: everything a rule reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from gpu_triage.model.catalog import kinds
from gpu_triage.model.snapshot import Snapshot

HOST_PLACEHOLDER = "REDACTED-HOST"
COMMAND_LINE_PLACEHOLDER = "<command line redacted>"

_UUID = re.compile(
    r"\b(?:GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_SERIAL_LINE = re.compile(r"(Serial Number\s*:\s*)(\S+)")
_HOME = re.compile(r"/home/([^/\s\"'`:;,)]+)")
_USER_KV = re.compile(r"\b(?:user|username|USER|User|LOGNAME)[=:]\s*\"?([A-Za-z_][\w.-]*)")
# Process names in kernel lines: Xid "pid=123, name=python3,", OOM "Killed process 1 (x)",
# oom-kill "task=x,", and "comm: x" / "comm=x".
_PROC_PATTERNS = [
    re.compile(r"\bname=([^,\s][^,]*?)(?=,|\s*$)", re.MULTILINE),
    re.compile(r"\b[Kk]illed process \d+ \(([^)]+)\)"),
    re.compile(r"\btask=([^,\s]+)"),
    re.compile(r"\bcomm[:=]\s*([^\s,]+)"),
]
# "cmd=..." / "cmdline=..." (audit, ps-like lines): the rest of the line is a command line.
_CMD_KV = re.compile(r"\b((?:cmd|cmdline|command|args)=)(?!<)[^\n]*")
# Values that are never identifying, whatever pattern matched them.
_NOT_NAMES = {"", "<unknown>", "unknown", "N/A", "none", "None", "root", "nobody"}
# Keys whose values rules compare exactly and that cannot hold an identifier.
_PROTECTED_KEYS = {
    "schema_version",
    "tool_version",
    "taken_at",
    "time",
    "reason",
    "pci_bus_id",
    "gpu_pci_bus_id",
    "a_pci_bus_id",
    "b_pci_bus_id",
    "driver_version",
    "cuda_version",
    "vbios_version",
    "compute_mode",
    "recovery_action",
    "severity",
    "error_type",
    "connection",
    "state",
    "phys_state",
    "link_layer",
    "operstate",
    "device_class",
    "constraint",
    "kernel",
    "type",
}


def redact_snapshot(snapshot: Snapshot) -> Snapshot:
    """A redacted copy of ``snapshot`` (``redacted=True``); the original is left as is."""
    data = snapshot.model_dump(mode="json", exclude_computed_fields=True)
    facts = data.get("facts", {})
    mapping = _Mapping()

    # Hostnames: the snapshot's, the host facts', the node a described pod landed on.
    hosts = [
        data.get("hostname"),
        (facts.get("host") or {}).get("hostname"),
        (facts.get("scheduler") or {}).get("k8s_pod_node"),
    ]
    for host in hosts:
        if host:
            mapping.add_host(host)

    # GPU identifiers in GPU order so placeholders follow NVML indexes.
    for i, gpu in enumerate(facts.get("gpus", [])):
        if gpu.get("uuid"):
            mapping.add(gpu["uuid"], f"GPU-REDACTED-{i}")
        if gpu.get("serial"):
            mapping.add(gpu["serial"], f"SERIAL-REDACTED-{i}")

    for k in kinds().values():  # the catalogue says which fields name a process
        items = facts.get(k.attr) or []
        for item in [items] if isinstance(items, dict) else items:
            for name in k.process_fields:
                mapping.add_process(item.get(name))

    # Drop command lines outright: arguments carry paths, tokens, user data.
    for raw in data.get("raw", []):
        if "cmdline" in raw.get("source", ""):
            raw["text"] = COMMAND_LINE_PLACEHOLDER

    # Identifiers found by pattern anywhere (raw outputs, kernel lines, cgroup paths).
    for text in _strings(data):
        for m in _UUID.finditer(text):
            mapping.add(m.group(0), f"GPU-REDACTED-{mapping.next_uuid()}")
        for m in _SERIAL_LINE.finditer(text):
            mapping.add(m.group(2), f"SERIAL-REDACTED-{mapping.next_serial()}")
        for pattern in (_HOME, _USER_KV):
            for m in pattern.finditer(text):
                mapping.add_user(m.group(1))
        for pattern in _PROC_PATTERNS:
            for m in pattern.finditer(text):
                mapping.add_process(m.group(1).strip())

    data = _walk(data, mapping.scrub)
    data["redacted"] = True
    # A stable machine id would tie redacted snapshots together; a redacted copy leaves the
    # node, and steps never run from it.
    data["node_id"] = data["boot_id"] = ""
    return Snapshot.model_validate(data)


class _Mapping:
    """Identifier -> stable placeholder, applied in one pass so placeholders are not re-hit."""

    def __init__(self) -> None:
        self.literal: dict[str, str] = {}
        self.hosts: dict[str, str] = {}  # lower-cased: hostnames match case-insensitively
        self._uuids = 0
        self._serials = 0
        self._users = 0
        self._procs = 0
        self._regex: re.Pattern[str] | None = None

    def add(self, value: str, placeholder: str) -> None:
        if value and "REDACTED" not in value and value not in self.literal:
            self.literal[value] = placeholder
            self._regex = None
            if placeholder.startswith("GPU-REDACTED-"):
                self._uuids += 1
            elif placeholder.startswith("SERIAL-REDACTED-"):
                self._serials += 1

    def next_uuid(self) -> int:
        return self._uuids

    def next_serial(self) -> int:
        return self._serials

    def add_host(self, host: str) -> None:
        for name in {host, host.split(".", 1)[0]}:
            if len(name) >= 2 and "REDACTED" not in name.upper():
                self.hosts[name.lower()] = HOST_PLACEHOLDER
                self._regex = None

    def add_user(self, user: str) -> None:
        if user in _NOT_NAMES or user in self.literal or "REDACTED" in user:
            return
        self.add(user, f"user-REDACTED-{self._users}")
        self._users += 1

    def add_process(self, name: str | None) -> None:
        if not name or name in _NOT_NAMES or name.isdigit() or name in self.literal:
            return
        if "REDACTED" in name:
            return
        self.add(name, f"proc-REDACTED-{self._procs}")
        self._procs += 1

    def _pattern(self) -> re.Pattern[str]:
        if self._regex is None:
            words = sorted({*self.literal, *self.hosts}, key=len, reverse=True)
            if not words:
                self._regex = re.compile(r"(?!x)x")  # matches nothing
            else:
                alternation = "|".join(re.escape(w) for w in words)
                # Whole tokens only: a host "gpu1" must not eat "gpu12".
                self._regex = re.compile(
                    rf"(?<![A-Za-z0-9_])(?:{alternation})(?![A-Za-z0-9_])", re.IGNORECASE
                )
        return self._regex

    def _replace(self, m: re.Match[str]) -> str:
        text = m.group(0)
        if text in self.literal:
            return self.literal[text]
        if text.lower() in self.hosts:
            return self.hosts[text.lower()]
        # Case-insensitive hit on a case-sensitive identifier: leave it (another word).
        return text

    def scrub(self, text: str) -> str:
        text = _CMD_KV.sub(lambda m: m.group(1) + COMMAND_LINE_PLACEHOLDER, text)
        return self._pattern().sub(self._replace, text)


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def _walk(node: Any, scrub: Any, key: str | None = None) -> Any:
    if isinstance(node, str):
        return node if key in _PROTECTED_KEYS else scrub(node)
    if isinstance(node, dict):
        return {k: _walk(v, scrub, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_walk(v, scrub, key) for v in node]
    return node


def identifiers(snapshot: Snapshot) -> Iterable[str]:
    """The identifying strings of ``snapshot`` that redaction removes (for tests and audits)."""
    out: set[str] = set()
    facts = snapshot.facts
    out.update(x for x in (snapshot.hostname, facts.host.hostname if facts.host else None) if x)
    for gpu in facts.gpus:
        out.update(x for x in (gpu.uuid, gpu.serial) if x)
    for k in kinds().values():
        value = getattr(facts, k.attr)
        for item in value if isinstance(value, list) else [value] if value else []:
            out.update(v for v in (getattr(item, n, None) for n in k.process_fields) if v)
    return sorted(out)
