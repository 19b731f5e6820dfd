"""Kernel log parser: NVRM Xid, NVSwitch SXid, PCIe AER, bus loss, OOM kills, NVLink errors.

Reads any of the forms a kernel log reaches us in: plain ``dmesg``, ``dmesg -T``,
``dmesg -H``, ``dmesg --time-format iso`` (with or without ``-x`` level
prefixes), ``/dev/kmsg`` records, journal ``short``/``short-iso``/
``short-precise``/``short-full``/``short-monotonic``, ``/var/log/syslog`` (with
localized month names), and ``talosctl dmesg``. Lines it does not recognise are
skipped; it never raises on garbage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gpu_triage.collectors.parsers.kernel_timestamps import _Line, _split_stamp
from gpu_triage.collectors.pci import normalize_pci
from gpu_triage.model.facts import (
    AerEvent,
    BusLossEvent,
    KernelEvent,
    NvlinkErrorEvent,
    OomKillEvent,
    SxidEvent,
    XidEvent,
)

# A pasted "line" longer than this is junk or a dump; parse only its head.
MAX_LINE_CHARS = 16_384


@dataclass
class KernelLog:
    """Everything :func:`parse_kernel_log` found, in log order."""

    xids: list[XidEvent] = field(default_factory=list)
    sxids: list[SxidEvent] = field(default_factory=list)
    aers: list[AerEvent] = field(default_factory=list)
    bus_losses: list[BusLossEvent] = field(default_factory=list)
    ooms: list[OomKillEvent] = field(default_factory=list)
    nvlink_errors: list[NvlinkErrorEvent] = field(default_factory=list)
    lines_read: int = 0
    # PCI id (normalised) -> GPU UUID, from "NVRM: GPU at PCI:...: GPU-..." lines
    gpu_uuids: dict[str, str] = field(default_factory=dict)

    def events(self) -> list[KernelEvent]:
        """All events of every kind, ordered by line."""
        out: list[KernelEvent] = [
            *self.xids,
            *self.sxids,
            *self.aers,
            *self.bus_losses,
            *self.ooms,
            *self.nvlink_errors,
        ]
        return sorted(out, key=lambda e: e.line or 0)


# --------------------------------------------------------------------------- PCI ids

_HEX = r"[0-9a-fA-F]"
# A full bus/device/function id in free text ("0000:03:00.0"); domain required.
_BDF = re.compile(rf"(?<![0-9a-fA-F:])({_HEX}{{4,8}}):({_HEX}{{2}}):({_HEX}{{2}})\.([0-7])\b")
# The Xid/"GPU at" form: optional "PCI:", optional domain, no function.


# --------------------------------------------------------------------------- patterns

_XID = re.compile(
    r"(?<![A-Za-z])Xid\s*\((?P<paren>[^()]{0,80})\)\s*:\s*(?P<code>\d{1,6})(?:,\s?|\s+|$)(?P<rest>.*)$"
)
_SXID = re.compile(
    r"(?<![A-Za-z])SXid\s*\((?P<paren>[^()]{0,80})\)\s*:\s*(?P<code>\d{1,6})(?:,\s?|\s+|$)(?P<rest>.*)$"
)
# The leading fields of an Xid message, in any order, each followed by ', ' (or a space).
_XID_FIELD = re.compile(
    r"""(?:
        pid=(?P<pid>'[^']*'|"[^"]*"|<[^>]*>|[^\s,]+)
      | name=(?P<name>.*?)(?=,\s|$)
      | (?:Channel\s+ID|channel|Channel|Ch|chid)\s+(?P<ch>(?:0x)?[0-9a-fA-F]+)\b
      | GPU-I:\s*(?P<gi>\d+)
      | GPU-CI:\s*(?P<ci>\d+)
    )(?P<sep>,\s*|\s+|$)""",
    re.X,
)
_PCI_NAMED = re.compile(rf"PCI:{_HEX}{{4,8}}:{_HEX}{{2}}:{_HEX}{{2}}(?:\.[0-7])?")
_GPU_I = re.compile(r"GPU-I:\s*(\d+)")
_GPU_AT = re.compile(
    r"NVRM: GPU at (?P<pci>(?:PCI:)?[0-9a-fA-F:.]+|PCI:\.\.\.):\s*(?P<uuid>GPU-\S+)"
)
_NVRM_GPU_PREFIX = re.compile(
    rf"NVRM: GPU (?:at )?(?:PCI:)?(?P<pci>{_HEX}{{4,8}}:{_HEX}{{2}}:{_HEX}{{2}}(?:\.[0-7])?):"
)
_FALLEN = re.compile(r"(?i)fallen\s+off\s+the\s+bus")
_BUS_MSG = re.compile(
    rf"^(?:NVRM:\s*)?(?:GPU\s+(?:at\s+)?(?:PCI:)?{_HEX}{{4,8}}:{_HEX}{{2}}:{_HEX}{{2}}(?:\.[0-7])?:?\s*)?"
)
_NVRM_INDENT = re.compile(r"^NVRM:\s{2,}\S")
_NVRM_HEXDUMP = re.compile(
    r"^NVRM:\s*(?:[\w ]{0,40}:\s*)?(?:0x)?[0-9a-fA-F]{4,}(?:[\s,]+(?:0x)?[0-9a-fA-F]{2,})+\s*$"
)
_NVLINK_LINE = re.compile(r"^(?P<pfx>NVRM:|nvidia-nvlink:|nvidia(?:-nvswitch\d*)?:)\s*(?P<msg>.*)$")
_NVLINK_ERR = re.compile(
    r"(?i)nvlink.*?\b(?:errors?|fail(?:ed|ure|s)?|fatal|fault|time(?:d)?\s?out|timeout|"
    r"not\s+trained|training\s+failed|link\s+down|is\s+down|went\s+down)\b"
)
_LINK_NO = re.compile(r"(?i)\blink\s*(?:#|id|number)?\s*[:=]?\s*(\d{1,3})\b")

# AER
_DEV_PREFIX = re.compile(
    rf"^(?P<drv>[\w.-]+)\s+(?P<pci>{_HEX}{{4,8}}:{_HEX}{{2}}:{_HEX}{{2}}\.[0-7]):\s?(?P<msg>.*)$"
)
_AER_TAG = re.compile(r"^AER:\s?")
_AER_HEADER = re.compile(
    r"(?i)^(?:Multiple\s+)?(?P<sev>Corrected|Correctable|Uncorrected|Uncorrectable)"
    r"(?:\s*\((?P<fat>[^)]*)\))?\s+error(?:\s+message)?\s+received(?:\s*:|\s+from)?\s*(?P<src>.*)$"
)
_AER_BUS_ERROR = re.compile(
    r"PCIe Bus Error:\s*severity=(?P<sev>[^,]+?)\s*,\s*type=(?P<type>[^,]+?)\s*"
    r"(?:,\s*(?:id=(?P<id>[0-9a-fA-F]{4}))?\s*(?:\((?P<agent>[^)]*)\))?)?\s*$"
)
_AER_DEVICE = re.compile(
    r"device\s*\[(?P<vid>[0-9a-fA-F]{4}):(?P<did>[0-9a-fA-F]{4})\]\s*error\s+status/mask="
)
_AER_BIT = re.compile(r"^\s*\[\s*(?P<bit>\d{1,2})\]\s*(?P<name>.*?)\s*(?:\(First\))?\s*$")
_AER_STATUS = re.compile(r"(?i)aer_status:\s*0x[0-9a-f]+")
_AER_LAYER = re.compile(r"(?i)aer_layer=(?P<type>[^,]+?)\s*(?:,|$)")
_AER_MISC = re.compile(
    r"(?i)TLP Header|aer_mask|aer_uncor_severity|Error of this Agent|device recovery|"
    r"link has been reset|Root Port link|downstream link|broadcast \w+ message|"
    r"device \[[0-9a-f]{4}:[0-9a-f]{4}\]"
)
_CANT_RECOVER = re.compile(r"(?i)can'?t recover|cannot recover|can not recover")
_GHES_SEV = re.compile(
    r"(?i)\[Hardware Error\]:\s*(?:event severity|Error \d+, type):\s*(?P<sev>\w+)"
)
_AER_LONG_NAMES: dict[str, str] = {
    "receiver error": "RxErr",
    "bad tlp": "BadTLP",
    "bad dllp": "BadDLLP",
    "relay_num rollover": "Rollover",
    "replay_num rollover": "Rollover",
    "replay timer timeout": "Timeout",
    "advisory non-fatal": "NonFatalErr",
    "corrected internal error": "CorrIntErr",
    "header log overflow": "HeaderOF",
    "data link protocol": "DLP",
    "surprise down error": "SDES",
    "poisoned tlp": "TLP",
    "flow control protocol": "FCP",
    "completion timeout": "CmpltTO",
    "completer abort": "CmpltAbrt",
    "unexpected completion": "UnxCmplt",
    "receiver overflow": "RxOF",
    "malformed tlp": "MalfTLP",
    "unsupported request": "UnsupReq",
    "acs violation": "ACSViol",
    "uncorrectable internal error": "UncorrIntErr",
    "uncorrected internal error": "UncorrIntErr",
    "mc blocked tlp": "BlockedTLP",
    "atomicop egress blocked": "AtomicOpBlocked",
    "tlp prefix blocked error": "TLPBlockedErr",
}

# OOM
_OOM_MEMCG = r"(?P<memcg>Memory cgroup out of memory:\s*)?"
_OOM_KILLED = re.compile(
    _OOM_MEMCG + r"Killed process (?P<pid>\d+) \((?P<name>.*?)\)(?=[\s,]|$)(?P<tail>.*)$"
)
_OOM_KILL_OLD = re.compile(_OOM_MEMCG + r"Kill process (?P<pid>\d+) \((?P<name>.*?)\)(?=[\s,]|$)")
_OOM_KV = re.compile(r"oom-kill:(?P<kv>\S.*?)\s*$")  # task= may hold spaces
_OOM_TASK_IN = re.compile(r"Task in (?P<task>\S+) killed as a result of limit of (?P<limit>\S+)")
_OOM_REAPED = re.compile(r"oom_reaper: reaped process (?P<pid>\d+) \(")
_OOM_INVOKED = re.compile(r"invoked oom-killer:")
_ANON_RSS = re.compile(r"anon-rss:\s*(\d+)\s*kB", re.I)

# Pre-filter: lines without any of these cannot be events (keeps big logs fast).
_INTERESTING = re.compile(
    r"Xid|fallen|AER|PCIe Bus Error|Hardware Error|\[\s*\d{1,2}\]|recover|oom|Out of memory|"
    r"Killed process|Kill process|Task in|[Nn][Vv][Ll][Ii][Nn][Kk]|NVRM: GPU at|"
    r"error status/mask|TLP Header|aer_|Root Port",
)


def _aer_severity(text: str | None) -> str | None:
    if not text:
        return None
    t = text.lower()
    if "uncorrect" in t or "recoverable" in t or "fatal" in t:
        if "non" in t or "recoverable" in t:
            return "uncorrected_nonfatal"
        return "uncorrected_fatal" if "fatal" in t else None
    if "correct" in t:
        return "corrected"
    return None


def _aer_bit_name(name: str) -> str:
    clean = re.sub(r"\s+", " ", name).strip()
    return _AER_LONG_NAMES.get(clean.lower(), clean)


def _decode_requester_id(rid: str, domain_of: str) -> str | None:
    """Old kernels name the device as ``id=00e0`` (bus<<8 | dev<<3 | fn)."""
    try:
        value = int(rid, 16)
    except ValueError:
        return None
    domain = domain_of.split(":")[0]
    return f"{domain}:{value >> 8:02x}:{(value >> 3) & 0x1F:02x}.{value & 7}"


def _age(now: datetime, t: datetime) -> float:
    if (now.tzinfo is None) != (t.tzinfo is None):
        # a naive stamp is local time
        now, t = now.astimezone(), t.astimezone()
    return (now - t).total_seconds()


# --------------------------------------------------------------------------- the parser


class _Parser:
    def __init__(self, source: str, boot_time: datetime | None) -> None:
        self.source = source
        self.boot_time = boot_time
        self.out = KernelLog()
        self.open_xid: XidEvent | None = None
        self.open_xid_line: _Line | None = None
        self.open_sxid: tuple[SxidEvent, str | None, int, int, set[str]] | None = None
        self.aer: AerEvent | None = None
        self.aer_devices: set[str] = set()  # prefixes whose detail lines belong to self.aer
        self.aer_line = 0
        self.aer_block_filled = False
        self.ghes_sev: str | None = None
        self.ghes_line = 0
        self.gpu_pcis: set[str] = set()  # devices the log ties to the nvidia driver
        self.non_gpu: dict[str, str] = {}  # pci -> another driver named for it
        self.last_identity: tuple[str | None, int] | None = None
        self.oom_by_pid: dict[int, tuple[OomKillEvent, set[str], int]] = {}
        self.oom_pending: dict[str, str] = {}  # "Task in ..." info waiting for its kill

    # ---------------------------------------------------------------- helpers

    def _stamp(self, ev: KernelEvent, ln: _Line) -> None:
        ev.line = ln.no
        ev.time_text = ln.time_text
        ev.monotonic_s = ln.monotonic_s
        t = ln.time
        if t is None and ln.monotonic_s is not None and self.boot_time is not None:
            t = self.boot_time + timedelta(seconds=ln.monotonic_s)
        ev.time = t
        ev.source = self.source

    @staticmethod
    def _append_raw(ev: KernelEvent, ln: _Line) -> None:
        ev.raw = f"{ev.raw}\n{ln.raw}" if ev.raw else ln.raw

    # ---------------------------------------------------------------- per line

    def feed(self, ln: _Line) -> None:
        text = ln.text
        if self.open_xid is not None and self._xid_continuation(ln):
            self._append_raw(self.open_xid, ln)
            if self.open_xid.code == 74:
                self._nvlink(ln)
            return
        self.open_xid = None
        if not _INTERESTING.search(text):
            return
        self._note_driver(text)
        if m := _XID.search(text):
            self._xid(ln, m)
            return
        if m := _SXID.search(text):
            self._sxid(ln, m)
            return
        self.open_sxid = None
        if m := _GPU_AT.search(text):
            pci = normalize_pci(m.group("pci"))
            self.last_identity = (pci, ln.no)
            if pci:
                self.out.gpu_uuids[pci] = m.group("uuid")
                self.gpu_pcis.add(pci)
            return
        if _FALLEN.search(text):
            self._bus_loss_line(ln)
            return
        if self._aer(ln):
            return
        if self._oom(ln):
            return
        self._nvlink(ln)

    def _note_driver(self, text: str) -> None:
        if m := _DEV_PREFIX.match(text):
            pci = normalize_pci(m.group("pci"))
            if pci and m.group("drv") == "nvidia":
                self.gpu_pcis.add(pci)
            elif pci:
                self.non_gpu.setdefault(pci, m.group("drv"))
        elif (m := _NVRM_GPU_PREFIX.search(text)) and (pci := normalize_pci(m.group("pci"))):
            self.gpu_pcis.add(pci)

    # ---------------------------------------------------------------- Xid

    def _xid(self, ln: _Line, m: re.Match[str]) -> None:
        paren, rest = m.group("paren"), m.group("rest").rstrip()
        ev = XidEvent(code=int(m.group("code")), raw=ln.raw)
        self._stamp(ev, ln)
        ev.pci_bus_id = normalize_pci(paren)
        if g := _GPU_I.search(paren):
            ev.gpu_instance = int(g.group(1))
        pos, seen = 0, set()
        while pos < len(rest) and (f := _XID_FIELD.match(rest, pos)):
            kind = next(k for k in ("pid", "name", "ch", "gi", "ci") if f.group(k) is not None)
            if kind in seen:
                break
            seen.add(kind)
            value = f.group(kind)
            if kind == "pid":
                ev.pid = int(value) if value.isdigit() else None
            elif kind == "name":
                ev.process_name = value
            elif kind == "ch":
                ev.channel = value
            elif kind == "gi":
                ev.gpu_instance = int(value)
            pos = f.end()
            if not f.group("sep"):
                break
        ev.message = rest[pos:]
        if ev.pci_bus_id:
            self.gpu_pcis.add(ev.pci_bus_id)
        self.out.xids.append(ev)
        self.open_xid, self.open_xid_line = ev, ln
        if ev.code == 79 or _FALLEN.search(ev.message):
            self._bus_loss(ln, ev.pci_bus_id, ev.message)

    def _xid_continuation(self, ln: _Line) -> bool:
        """Lines that carry on the open Xid report: indented NVRM lines (GSP CrashCat,
        register dumps), hex dumps, and wrapped paste fragments."""
        head = self.open_xid_line
        assert head is not None
        if ln.no != head.no + 1 + self.open_xid.raw.count("\n"):  # type: ignore[union-attr]
            return False
        if ln.time is not None and head.time is not None:
            try:
                if abs(_age(ln.time, head.time)) > 2.0:
                    return False
            except (TypeError, OverflowError, ValueError):
                return False
        elif (
            ln.monotonic_s is not None
            and head.monotonic_s is not None
            and abs(ln.monotonic_s - head.monotonic_s) > 2.0
        ):
            return False
        text = ln.text
        if _XID.search(text) or _SXID.search(text) or _GPU_AT.search(text):
            return False
        if _NVRM_INDENT.match(text) or _NVRM_HEXDUMP.match(text):
            return True
        if self.open_xid is not None and self.open_xid.code == 74 and text.startswith("NVRM:"):
            return bool(re.search(r"(?i)nvlink|\blink\s*\d+|0x[0-9a-f]{2,}", text))
        # a paste that wrapped the report: no stamp of its own, starts indented
        return head.stamped and not ln.stamped and ln.raw[:1] in (" ", "\t")

    # ---------------------------------------------------------------- SXid

    def _sxid(self, ln: _Line, m: re.Match[str]) -> None:
        pci = normalize_pci(m.group("paren"))
        code = int(m.group("code"))
        rest = m.group("rest").rstrip()
        part = "head"
        if rest.startswith(("Severity", "Data")):
            part = "severity" if rest.startswith("Severity") else "data"
        if self.open_sxid is not None:
            ev, opci, ocode, oline, parts = self.open_sxid
            if (
                opci == pci
                and ocode == code
                and part != "head"
                and part not in parts
                and ln.no - oline <= 4
            ):
                parts.add(part)
                self._append_raw(ev, ln)
                self.open_sxid = (ev, opci, ocode, ln.no, parts)
                return
        ev = SxidEvent(code=code, raw=ln.raw, message=rest)
        self._stamp(ev, ln)
        ev.pci_bus_id = pci
        if re.search(r"(?i)\bnon-?\s?fatal\b", rest):
            ev.fatal = False
        elif re.search(r"(?i)\bfatal\b", rest):
            ev.fatal = True
        if lk := _LINK_NO.search(rest):
            ev.link = int(lk.group(1))
        self.out.sxids.append(ev)
        self.open_sxid = (ev, pci, code, ln.no, {part})

    # ---------------------------------------------------------------- bus loss

    def _bus_loss_line(self, ln: _Line) -> None:
        text = ln.text
        pci = None
        if m := _BDF.search(text):
            pci = normalize_pci(m.group(0))
        elif m := _NVRM_GPU_PREFIX.search(text):
            pci = normalize_pci(m.group("pci"))
        elif m := _PCI_NAMED.search(text):
            pci = normalize_pci(m.group(0))
        elif self.last_identity and ln.no - self.last_identity[1] <= 5:
            pci = self.last_identity[0]
        msg = _BUS_MSG.sub("", text, count=1).strip()
        self._bus_loss(ln, pci, msg)

    def _bus_loss(self, ln: _Line, pci: str | None, message: str | None) -> None:
        if pci:
            self.gpu_pcis.add(pci)
        for ev in reversed(self.out.bus_losses[-4:]):
            gap = ln.no - (ev.line or 0) - ev.raw.count("\n")
            if ev.pci_bus_id and pci and ev.pci_bus_id != pci:
                continue
            # an unnamed GPU only merges with an adjacent report
            if gap > (20 if ev.pci_bus_id and pci else 3):
                continue
            if ev.time is not None and ln.time is not None:
                try:
                    if abs(_age(ln.time, ev.time)) > 60:
                        continue
                except (TypeError, OverflowError, ValueError):
                    continue
            # the same loss reported again (Xid 79 and the "GPU ...: fallen off" line)
            self._append_raw(ev, ln)
            if ev.pci_bus_id is None and pci:
                ev.pci_bus_id = pci
            return
        ev = BusLossEvent(raw=ln.raw, message=message)
        self._stamp(ev, ln)
        ev.pci_bus_id = pci
        self.out.bus_losses.append(ev)

    # ---------------------------------------------------------------- NVLink

    def _nvlink(self, ln: _Line) -> bool:
        m = _NVLINK_LINE.match(ln.text)
        if not m or not _NVLINK_ERR.search(ln.text):
            return False
        msg = m.group("msg").strip()
        ev = NvlinkErrorEvent(raw=ln.raw, message=msg)
        self._stamp(ev, ln)
        if lk := _LINK_NO.search(msg):
            ev.link = int(lk.group(1))
        if p := _BDF.search(msg):
            ev.pci_bus_id = normalize_pci(p.group(0))
        self.out.nvlink_errors.append(ev)
        return True

    # ---------------------------------------------------------------- AER

    def _aer(self, ln: _Line) -> bool:
        text = ln.text
        if m := _GHES_SEV.search(text):
            self.ghes_sev, self.ghes_line = _aer_severity(m.group("sev")), ln.no
            return True
        if "[Hardware Error]" in text:
            return True
        dm = _DEV_PREFIX.match(text)
        if not dm:
            return False
        drv, pci, msg = dm.group("drv"), normalize_pci(dm.group("pci")), dm.group("msg")
        msg = _AER_TAG.sub("", msg.strip(), count=1)
        assert pci is not None
        recent = self.aer is not None and ln.no - self.aer_line <= 60
        if m := _AER_HEADER.match(msg):
            src = m.group("src").strip()
            dev: str | None = None
            if b := _BDF.search(src):
                dev = normalize_pci(b.group(0))
            elif i := re.search(r"id=([0-9a-fA-F]{4})", src):
                dev = _decode_requester_id(i.group(1), pci)
            sev = f"{m.group('sev')} ({m.group('fat')})" if m.group("fat") else m.group("sev")
            ev = AerEvent(raw=ln.raw, reporter=f"{drv} {pci}", severity=_aer_severity(sev))
            self._stamp(ev, ln)
            ev.pci_bus_id = dev or pci
            self._open_aer(ev, ln, {pci, dev or pci})
            self.aer_block_filled = False
            return True
        if m := _AER_BUS_ERROR.search(msg):
            dev = _decode_requester_id(m.group("id"), pci) if m.group("id") else pci
            sev = _aer_severity(m.group("sev"))
            if recent and not self.aer_block_filled and pci in self.aer_devices:
                ev = self.aer  # type: ignore[assignment]
                self._append_raw(ev, ln)
                if m.group("id") or ev.pci_bus_id is None:
                    ev.pci_bus_id = dev
            else:
                ev = AerEvent(raw=ln.raw, reporter=f"{drv} {pci}")
                self._stamp(ev, ln)
                ev.pci_bus_id = dev
                self._open_aer(ev, ln, set())
            ev.severity = sev or ev.severity
            ev.error_type = m.group("type").strip()
            self.aer_devices = {pci, dev or pci}
            self.aer_block_filled = True
            self.aer_line = ln.no
            if drv == "nvidia" and dev == pci:
                ev.device_is_gpu = True
            return True
        if _AER_STATUS.search(msg):
            # firmware-first (APEI/GHES) report: status line opens the block
            ev = AerEvent(raw=ln.raw, reporter=f"{drv} {pci}")
            self._stamp(ev, ln)
            ev.pci_bus_id = pci
            if self.ghes_sev and ln.no - self.ghes_line <= 40:
                ev.severity = self.ghes_sev
            if drv == "nvidia":
                ev.device_is_gpu = True
            self._open_aer(ev, ln, {pci})
            self.aer_block_filled = True
            return True
        if _CANT_RECOVER.search(msg):
            ev = AerEvent(raw=ln.raw)
            self._stamp(ev, ln)
            ev.pci_bus_id = pci
            ev.device_is_gpu = drv == "nvidia" or pci in self.gpu_pcis
            if recent and self.aer is not None:
                ev.reporter = self.aer.reporter
                ev.severity = self.aer.severity
                ev.error_type = self.aer.error_type
            self.out.aers.append(ev)
            return True
        if not recent or self.aer is None:
            return False
        ev = self.aer
        if pci not in self.aer_devices and f"{drv} {pci}" != ev.reporter:
            return False
        if b := _AER_BIT.match(msg):
            name = _aer_bit_name(b.group("name"))
            if name and name not in ev.errors:
                ev.errors = [*ev.errors, name]
        elif lay := _AER_LAYER.search(msg):
            ev.error_type = lay.group("type").strip()
        elif not (_AER_DEVICE.search(msg) or _AER_MISC.search(msg)):
            return False
        self._append_raw(ev, ln)
        self.aer_line = ln.no
        return True

    def _open_aer(self, ev: AerEvent, ln: _Line, devices: set[str]) -> None:
        self.out.aers.append(ev)
        self.aer, self.aer_line = ev, ln.no
        self.aer_devices = devices

    # ---------------------------------------------------------------- OOM

    def _oom_event(self, pid: int, ln: _Line, part: str) -> tuple[OomKillEvent, set[str]]:
        """The event of the kill of ``pid`` this line adds to, or a new one."""
        if pid in self.oom_by_pid:
            ev, parts, last = self.oom_by_pid[pid]
            if part not in parts and ln.no - last <= 200:
                parts.add(part)
                self._append_raw(ev, ln)
                self.oom_by_pid[pid] = (ev, parts, ln.no)
                return ev, parts
        ev = OomKillEvent(raw=ln.raw, pid=pid)
        self._stamp(ev, ln)
        if cg := self.oom_pending.pop("cgroup", None):
            ev.cgroup = cg
        if tcg := self.oom_pending.pop("task_cgroup", None):
            ev.task_cgroup = tcg
        self.out.ooms.append(ev)
        parts = {part}
        self.oom_by_pid[pid] = (ev, parts, ln.no)
        return ev, parts

    def _oom(self, ln: _Line) -> bool:
        text = ln.text
        if _OOM_INVOKED.search(text):
            self.oom_pending.clear()  # a new episode
            return True
        if m := _OOM_TASK_IN.search(text):
            self.oom_pending = {"task_cgroup": m.group("task"), "cgroup": m.group("limit")}
            return True
        if m := _OOM_KV.search(text):
            kv = _parse_oom_kv(m.group("kv"))
            if not kv.get("pid", "").isdigit():
                return False
            ev, _ = self._oom_event(int(kv["pid"]), ln, "constraint")
            ev.constraint = kv.get("constraint") or ev.constraint
            ev.process_name = ev.process_name or kv.get("task")
            if kv.get("oom_memcg"):
                ev.cgroup = kv["oom_memcg"]
            if kv.get("task_memcg"):
                ev.task_cgroup = kv["task_memcg"]
            return True
        if m := _OOM_KILLED.search(text):
            ev, _ = self._oom_event(int(m.group("pid")), ln, "killed")
            self._stamp(ev, ln)  # the kill line itself dates the event
            ev.process_name = m.group("name")
            if rss := _ANON_RSS.search(m.group("tail")):
                ev.anon_rss_kib = int(rss.group(1))
            if m.group("memcg") and ev.constraint is None:
                ev.constraint = "CONSTRAINT_MEMCG"
            return True
        if m := _OOM_KILL_OLD.search(text):
            ev, _ = self._oom_event(int(m.group("pid")), ln, "kill")
            ev.process_name = ev.process_name or m.group("name")
            if m.group("memcg") and ev.constraint is None:
                ev.constraint = "CONSTRAINT_MEMCG"
            return True
        if m := _OOM_REAPED.search(text):
            pid = int(m.group("pid"))
            if pid in self.oom_by_pid:
                ev, parts, last = self.oom_by_pid[pid]
                if "reaped" not in parts and ln.no - last <= 2000:
                    parts.add("reaped")
                    self._append_raw(ev, ln)
            return True
        return False

    # ---------------------------------------------------------------- end

    def finish(self, now: datetime | None) -> KernelLog:
        for ev in self.out.aers:
            if ev.device_is_gpu is None and ev.pci_bus_id:
                if ev.pci_bus_id in self.gpu_pcis:
                    ev.device_is_gpu = True
                elif ev.pci_bus_id in self.non_gpu:
                    ev.device_is_gpu = False
            elif ev.device_is_gpu is False and ev.pci_bus_id in self.gpu_pcis:
                ev.device_is_gpu = True
        if now is not None:
            for event in self.out.events():
                if event.time is not None:
                    try:
                        event.age_s = round(_age(now, event.time), 6)
                    except (TypeError, OverflowError, ValueError):
                        event.age_s = None
        return self.out


def _parse_oom_kv(text: str) -> dict[str, str]:
    """``constraint=...,nodemask=(null),cpuset=/,mems_allowed=0,2,global_oom,...``."""
    out: dict[str, str] = {}
    last = None
    for tok in text.split(","):
        if "=" in tok:
            key, value = tok.split("=", 1)
            out[key.strip()] = value
            last = key.strip()
        elif last is not None and re.fullmatch(r"[\d-]+", tok):
            out[last] += "," + tok  # mems_allowed=0,2 continues
        elif tok:
            out[tok.strip()] = "true"
    return out


def parse_kernel_log(
    text: str,
    *,
    source: str = "<text>",
    boot_time: datetime | None = None,
    year: int | None = None,
    now: datetime | None = None,
) -> KernelLog:
    """Extract GPU-relevant kernel events from a kernel log in any common format.

    ``boot_time`` turns plain dmesg seconds-since-boot into absolute times; ``year``
    (or else ``now``) dates syslog stamps that print none; with ``now`` every event
    whose time is known gets ``age_s``. Never raises on junk input.
    """
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", errors="replace")
    parser = _Parser(source, boot_time)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    parser.out.lines_read = len(lines)
    for no, raw_line in enumerate(lines, start=1):
        raw = raw_line.rstrip("\r").replace("\x00", "")[:MAX_LINE_CHARS]
        if not raw.strip():
            parser.open_xid = None
            continue
        try:
            parser.feed(_split_stamp(no, raw, year, now))
        except (ValueError, TypeError, OverflowError, IndexError, KeyError, AssertionError):
            parser.open_xid = None  # junk the patterns half-matched: skip the line
    return parser.finish(now)
