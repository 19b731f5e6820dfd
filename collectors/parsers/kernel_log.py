"""Kernel log parser: NVRM Xid, NVSwitch SXid, PCIe AER, bus loss, OOM kills, NVLink errors,
PCIe links trained below their capability.

Reads any of the forms a kernel log reaches us in (see
:mod:`~gpu_triage.collectors.parsers.kernel_timestamps`). Lines it
does not recognise are skipped; it never raises on garbage.

Cost is linear in the input and small per line: the text is searched for the keywords of
every line kind at once (:data:`LINE_KINDS`), and only the lines holding one (plus the
line right after an open Xid report, which may continue it) are split into stamp and
message and handed to the handlers. Events are assembled as :class:`Draft` s and become
pydantic models once, at the end; a merged event keeps at most :data:`MAX_RAW_LINES` raw
lines, so a storm of identical lines costs the same per line as the first one.

Adding a line kind: write a handler ``(parser, line) -> bool`` (True: the line is taken)
that adds drafts with :meth:`KernelLogParser.emit`, give its event list a field on
:class:`KernelLog`, and add a :class:`LineKind` row with the substrings every such line
contains.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, ClassVar

from gpu_triage.collectors.parsers.kernel_timestamps import (
    MAX_LINE_CHARS,
    MEMO_SIZE,
    Line,
    LineSplitter,
    age_s,
    month_number,
    parse_iso,
    unquoted,
)
from gpu_triage.collectors.pci import normalize_pci
from gpu_triage.model.facts import (
    AerEvent,
    BusLossEvent,
    HostEvent,
    KernelEvent,
    NvlinkErrorEvent,
    OomKillEvent,
    PcieLimitEvent,
    SxidEvent,
    XidEvent,
)

__all__ = [
    "LINE_KINDS",
    "MAX_LINE_CHARS",
    "KernelLog",
    "KernelLogParser",
    "LineKind",
    "month_number",
    "normalize_pci",
    "parse_iso",
    "parse_kernel_log",
]

# Raw lines one event keeps; the rest of a merged storm is counted, not stored.
MAX_RAW_LINES = 64


@dataclass
class KernelLog:
    """Everything :func:`parse_kernel_log` found, in log order. The event lists are named
    as the :class:`~gpu_triage.model.facts.Facts` lists they fill."""

    xids: list[XidEvent] = field(default_factory=list)
    sxids: list[SxidEvent] = field(default_factory=list)
    aers: list[AerEvent] = field(default_factory=list)
    bus_losses: list[BusLossEvent] = field(default_factory=list)
    ooms: list[OomKillEvent] = field(default_factory=list)
    nvlink_errors: list[NvlinkErrorEvent] = field(default_factory=list)
    pcie_limits: list[PcieLimitEvent] = field(default_factory=list)
    host_events: list[HostEvent] = field(default_factory=list)
    lines_read: int = 0
    # PCI id (normalised) -> GPU UUID, from "NVRM: GPU at PCI:...: GPU-..." lines
    gpu_uuids: dict[str, str] = field(default_factory=dict)

    @classmethod
    def event_lists(cls) -> tuple[str, ...]:
        """Names of the fields that hold events."""
        return tuple(f.name for f in fields(cls) if f.name not in ("lines_read", "gpu_uuids"))

    def events(self) -> list[KernelEvent]:
        """All events of every kind, ordered by line."""
        out: list[KernelEvent] = [ev for name in self.event_lists() for ev in getattr(self, name)]
        return sorted(out, key=lambda e: e.line or 0)


# The fields a line's stamp gives an event (see KernelLogParser._stamp_values), plus the
# age :meth:`Draft.build` adds: what differs between the events of identical lines.
_STAMP_FIELDS = frozenset({"line", "time_text", "monotonic_s", "time", "source", "age_s"})


class Draft:
    """An event being assembled. Field values live in a plain dict (a pydantic fact model
    validates every assignment, too slow per line); :meth:`build` makes the model once.

    ``shared``: values memoised for a message and shared by the drafts of every line
    holding it (never written to). A draft whose own values are only its stamp is built
    as a copy of one model validated per shared dict: a storm of identical lines validates
    its message once."""

    __slots__ = ("last_line", "lines", "model", "more_lines", "shared", "values")
    _defaults: ClassVar[dict[type[KernelEvent], dict[str, Any]]] = {}

    values: dict[str, Any]
    last_line: int
    lines: list[str]
    more_lines: int

    def __init__(
        self,
        model: type[KernelEvent],
        ln: Line,
        values: dict[str, Any],
        shared: dict[str, Any] | None = None,
    ) -> None:
        # slots, not a __dict__: one object less per event for the cyclic collector
        init = object.__setattr__
        init(self, "model", model)
        init(self, "values", values)
        init(self, "shared", shared)
        init(self, "lines", [ln.raw])
        init(self, "last_line", ln.no)
        init(self, "more_lines", 0)

    def __getattr__(self, name: str) -> Any:
        # only names that are not slots get here: the event's fields
        values = self.values
        if name in values:
            return values[name]
        shared = self.shared
        if shared is not None and name in shared:
            return shared[name]
        model = self.model
        defaults = Draft._defaults.get(model)
        if defaults is None:
            defaults = Draft._defaults[model] = {
                k: f.get_default(call_default_factory=True) for k, f in model.model_fields.items()
            }
        if name not in defaults:
            raise AttributeError(name)
        value = defaults[name]
        return list(value) if isinstance(value, list) else value

    def __setattr__(self, name: str, value: Any) -> None:
        self.values[name] = value

    def add_line(self, ln: Line) -> None:
        lines = self.lines
        if len(lines) < MAX_RAW_LINES:
            lines.append(ln.raw)
        else:
            object.__setattr__(self, "more_lines", self.more_lines + 1)
        object.__setattr__(self, "last_line", ln.no)

    @property
    def raw(self) -> str:
        lines = self.lines
        text = lines[0] if len(lines) == 1 else "\n".join(lines)
        if self.more_lines:
            text += f"\n[gpu-triage: {self.more_lines} more lines of this event not kept]"
        return text

    def build(self, now: datetime | None, templates: dict[int, _Template]) -> KernelEvent:
        """The fact model; ``templates`` (one per :meth:`KernelLogParser.finish`) holds the
        model validated for each shared dict met so far."""
        values, shared, model = self.values, self.shared, self.model
        if now is not None and values.get("time") is not None:
            try:
                values["age_s"] = round(age_s(now, values["time"]), 6)
            except (TypeError, OverflowError, ValueError):
                values["age_s"] = None
        if shared is None:
            return model(raw=self.raw, **values)
        if not _STAMP_FIELDS.issuperset(values):
            return model(**{**shared, **values, "raw": self.raw})
        held = templates.get(id(shared))
        if held is None:
            # the shared dict is kept beside its model: its id stays unique while held
            held = templates[id(shared)] = _Template(shared, model(**shared))
        return held.copy(values, self.raw)


class _Template:
    """A model validated once, copied for each event of the same message."""

    __slots__ = ("fields_set", "model", "mutable", "shared", "values")

    def __init__(self, shared: dict[str, Any], model: KernelEvent) -> None:
        self.shared = shared
        self.model = model
        self.values = model.__dict__
        self.fields_set = model.model_fields_set
        self.mutable = tuple(
            k for k, v in model.__dict__.items() if isinstance(v, dict | list | set)
        )

    def copy(self, stamp: dict[str, Any], raw: str) -> KernelEvent:
        """The template with one event's stamp fields and raw lines. The stamp values are
        the parser's own (int line, float seconds, datetime, str: the fields' types); the
        mutable values (the ``unavailable`` dict, lists) are the copy's own."""
        stamp["raw"] = raw
        values = {**self.values, **stamp}
        for name in self.mutable:
            values[name] = values[name].copy()
        # what model_construct does, without its walk over every field's default
        cls = type(self.model)
        event = cls.__new__(cls)
        _set = object.__setattr__
        _set(event, "__dict__", values)
        _set(event, "__pydantic_fields_set__", self.fields_set | stamp.keys())
        _set(event, "__pydantic_extra__", None)
        _set(event, "__pydantic_private__", None)
        return event


LineHandler = Callable[["KernelLogParser", Line], bool]


@dataclass(frozen=True)
class LineKind:
    """One kind of line the parser reads.

    ``keywords``: substrings (case-sensitive) of which every line of this kind holds one;
    they make the prefilter, and the handler sees only lines holding one. ``patterns``:
    regexes for lines no substring finds; a kind with patterns sees every candidate line.
    ``handle`` returns True when it took the line (the kinds after it do not see it).
    """

    name: str
    keywords: tuple[str, ...]
    handle: LineHandler
    patterns: tuple[str, ...] = ()


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
# "NVRM: GPU 0000:18:00.0:" and, from some drivers, "NVRM: GPU 18:00.0:" (no domain)
_NVRM_GPU_PREFIX = re.compile(
    rf"NVRM: GPU (?:at )?(?:PCI:)?(?P<pci>(?:{_HEX}{{4,8}}:)?{_HEX}{{2}}:{_HEX}{{2}}(?:\.[0-7])?):"
)
# The first line of the older three-line report: "NVRM: The NVIDIA GPU 0000:02:00.0" /
# "NVRM: (PCI ID: 10de:1db6) installed in this system has" / "NVRM: fallen off the bus ..."
_NVIDIA_GPU_HEAD = re.compile(
    rf"NVRM: The NVIDIA GPU (?:at )?(?:PCI:)?(?P<pci>(?:{_HEX}{{4,8}}:)?{_HEX}{{2}}:{_HEX}{{2}}"
    r"(?:\.[0-7])?)\b"
)
_FALLEN = re.compile(r"(?i)fallen\s+off\s+the\s+bus")
_BUS_MSG = re.compile(
    rf"^(?:NVRM:\s*)?(?:GPU\s+(?:at\s+)?(?:PCI:)?(?:{_HEX}{{4,8}}:)?{_HEX}{{2}}:{_HEX}{{2}}"
    r"(?:\.[0-7])?:?\s*)?"
)
_NVRM_TAG = re.compile(r"^NVRM:\s*")
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
    _OOM_MEMCG + r"Killed process (?P<pid>\d+) \((?P<name>.*?)\)(?=[\s,.]|$)(?P<tail>.*)$"
)
_OOM_KILL_OLD = re.compile(_OOM_MEMCG + r"Kill process (?P<pid>\d+) \((?P<name>.*?)\)(?=[\s,.]|$)")
# task= may hold spaces: the rest of the line, stripped in code (a lazy match before
# "\s*$" would try every trailing space from every position: quadratic)
_OOM_KV = re.compile(r"oom-kill:(?P<kv>\S.*)$")
_OOM_TASK_IN = re.compile(r"Task in (?P<task>\S+) killed as a result of limit of (?P<limit>\S+)")
_OOM_REAPED = re.compile(r"oom_reaper: reaped process (?P<pid>\d+) \(")
_OOM_INVOKED = re.compile(r"invoked oom-killer:")
_ANON_RSS = re.compile(r"anon-rss:\s*(\d+)\s*kB", re.I)


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


# "pci 0000:3b:00.0: 63.008 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x8 link
# at 0000:3a:00.0 (capable of 252.048 Gb/s with 16.0 GT/s PCIe x16 link)" (drivers/pci/pci.c)
_SPEED = r"(?:(?P<{0}>\d+(?:\.\d+)?)\s*GT/s(?:\s+PCIe)?|Unknown(?:\s+PCIe)?|[^\s,()]+)"
_PCIE_LIMIT = re.compile(
    r"(?P<avail>\d+(?:\.\d+)?)\s*Gb/s available PCIe bandwidth,\s*limited by\s*"
    + _SPEED.format("speed")
    + r"\s*x(?P<width>\d{1,2})\s+link\s+at\s+(?P<at>\S+?)"
    r"(?:\s*\(capable of\s*(?P<cap>\d+(?:\.\d+)?)\s*Gb/s with\s*"
    + _SPEED.format("cap_speed")
    + r"\s*x(?P<cap_width>\d{1,2})\s+link\))?\s*$"
)


# --------------------------------------------------------------------------- the parser


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Parsing makes many objects and no reference cycles: the cyclic collector would only
    walk the growing event lists again and again (a third of the time of a storm)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class KernelLogParser:
    """Streaming parser: :meth:`feed` text in pieces of any size (lines may span pieces),
    then :meth:`finish`. Memory is bounded by the events found, not by the text."""

    def __init__(
        self,
        source: str = "<text>",
        *,
        boot_time: datetime | None = None,
        year: int | None = None,
        now: datetime | None = None,
        kinds: Iterable[LineKind] | None = None,
    ) -> None:
        self.source = source
        self.boot_time = boot_time
        self.year = year
        self.now = now
        self.kinds = tuple(LINE_KINDS if kinds is None else kinds)
        self._passes = _prefilter(self.kinds)
        self._splitter = LineSplitter(year, now)
        self._gated = tuple((k, _gate(k)) for k in self.kinds)
        self.out = KernelLog()
        self.drafts: dict[str, list[Draft]] = {name: [] for name in KernelLog.event_lists()}
        self.lines_seen = 0  # complete lines before the current piece
        self._tail = ""  # a line not yet ended by a newline
        self._tail_overlong = False
        # state the handlers share
        self.open_xid: Draft | None = None
        self.open_xid_line: Line | None = None
        self.open_sxid: tuple[Draft, str | None, int, int, set[str]] | None = None
        self.aer: Draft | None = None
        self.aer_devices: set[str] = set()  # prefixes whose detail lines belong to self.aer
        self.aer_line = 0
        self.aer_block_filled = False
        self.ghes_sev: str | None = None
        self.ghes_line = 0
        self.gpu_pcis: set[str] = set()  # devices the log ties to the nvidia driver
        self.non_gpu: dict[str, str] = {}  # pci -> another driver named for it
        self.last_identity: tuple[str | None, int] | None = None
        self.report_head: tuple[Line, str | None, list[Line]] | None = None
        self.oom_by_pid: dict[int, tuple[Draft, set[str], int]] = {}
        self.oom_pending: dict[str, str] = {}  # "Task in ..." info waiting for its kill
        self.pcie_limit_by_device: dict[str, Draft] = {}
        self.scratch: dict[str, Any] = {}  # state of kinds added outside this class
        # memos by message text, bounded (MEMO_SIZE): a storm repeats few texts
        self.xid_memo: dict[tuple[Any, ...], dict[str, Any]] = {}  # -> the Xid's fields
        self.driver_memo: dict[str, tuple[str | None, str]] = {}  # -> the device named

    # ---------------------------------------------------------------- input

    def feed(self, text: str | bytes) -> None:
        """Parse the complete lines of ``text`` (after what earlier pieces left open)."""
        if isinstance(text, bytes | bytearray):
            text = bytes(text).decode("utf-8", errors="replace")
        if not text:
            return
        with _gc_paused():
            self._feed(text)

    def _feed(self, text: str) -> None:
        cut = text.rfind("\n")
        if cut == -1:
            self._grow_tail(text)
            return
        head, rest = text[: cut + 1], text[cut + 1 :]
        if self._tail or self._tail_overlong:
            first = head.find("\n")
            self._grow_tail(head[:first])
            self._scan(self._tail + "\n")
            self._tail, self._tail_overlong = "", False
            head = head[first + 1 :]
        self._scan(head)
        self._grow_tail(rest)

    def _grow_tail(self, piece: str) -> None:
        if self._tail_overlong:
            return  # the rest of a line past MAX_LINE_CHARS is never read
        self._tail += piece
        if len(self._tail) > MAX_LINE_CHARS:
            self._tail, self._tail_overlong = self._tail[:MAX_LINE_CHARS], True

    def finish(self) -> KernelLog:
        """Parse what is left and build the events."""
        with _gc_paused():
            return self._finish()

    def _finish(self) -> KernelLog:
        if self._tail or self._tail_overlong:
            self._scan(self._tail)
            self._tail, self._tail_overlong = "", False
        self.out.lines_read = self.lines_seen
        self._settle_aer()
        now = self.now
        templates: dict[int, _Template] = {}
        for name, drafts in self.drafts.items():
            setattr(self.out, name, [d.build(now, templates) for d in drafts])
            drafts.clear()  # freed now, while the collector is paused: it never walks them
        return self.out

    # ---------------------------------------------------------------- scanning

    def _scan(self, text: str) -> None:
        """Hand the candidate lines of ``text`` (whole lines) to the handlers, in order."""
        starts = _candidates(text, self._passes)
        n, pos, i, no = len(text), 0, 0, self.lines_seen + 1
        count = text.count
        while pos < n:
            if self.open_xid is not None:
                start = pos  # the line after an open Xid may continue it
            else:
                while i < len(starts) and starts[i] < pos:
                    i += 1
                if i == len(starts):
                    break
                start = starts[i]
                no += count("\n", pos, start)
            end = text.find("\n", start)
            if end == -1:
                end = n
            self._line(no, text[start:end])
            pos, no = end + 1, no + 1
        # the lines up to pos are counted in no; the newlines after it once more, the text
        # is not walked twice
        rest = count("\n", pos) + (1 if pos < n and not text.endswith("\n") else 0)
        self.lines_seen = no - 1 + rest

    def _line(self, no: int, raw: str) -> None:
        try:
            ln = self._splitter.line(no, raw)
            if ln is None:
                self.open_xid = None
                return
            self._feed_line(ln)
        except (ValueError, TypeError, OverflowError, IndexError, KeyError, AssertionError):
            self.open_xid = None  # junk the patterns half-matched: skip the line

    def _feed_line(self, ln: Line) -> None:
        if self.open_xid is not None:
            if self._xid_continuation(ln):
                self.open_xid.add_line(ln)
                if self.open_xid.code == 74:
                    self._nvlink(ln)
                return
            self.open_xid = None
        text = ln.text
        for kind, gate in self._gated:
            if gate is not None and gate(text) is None:
                continue
            if kind.handle(self, ln):
                return

    # ---------------------------------------------------------------- helpers

    def emit(self, kind: str, model: type[KernelEvent], ln: Line, **values: Any) -> Draft:
        """A new event of ``model`` stamped by ``ln``, added to the list ``kind``."""
        values.update(self._stamp_values(ln))
        ev = Draft(model, ln, values)
        self.drafts[kind].append(ev)
        return ev

    def emit_shared(
        self, kind: str, model: type[KernelEvent], ln: Line, shared: dict[str, Any]
    ) -> Draft:
        """:meth:`emit` for values memoised per message: ``shared`` is not copied, so it
        must never change after this call."""
        ev = Draft(model, ln, self._stamp_values(ln), shared)
        self.drafts[kind].append(ev)
        return ev

    def stamp(self, ev: Draft, ln: Line) -> None:
        """Date ``ev`` by ``ln``."""
        ev.values.update(self._stamp_values(ln))

    def _stamp_values(self, ln: Line) -> dict[str, Any]:
        t = ln.time
        if t is None and ln.monotonic_s is not None and self.boot_time is not None:
            t = self.boot_time + timedelta(seconds=ln.monotonic_s)
        return {
            "line": ln.no,
            "time_text": ln.time_text,
            "monotonic_s": ln.monotonic_s,
            "time": t,
            "source": self.source,
        }

    def on_driver(self, ln: Line) -> bool:
        """Remember which devices the log ties to the nvidia driver (and which to others)."""
        text = ln.text
        named = self.driver_memo.get(text)
        if named is None:
            named = _driver_named(text)
            if len(self.driver_memo) >= MEMO_SIZE:
                self.driver_memo.clear()
            self.driver_memo[text] = named
        pci, drv = named
        if not pci:
            return False
        if drv == "nvidia":
            self.gpu_pcis.add(pci)
        else:
            self.non_gpu.setdefault(pci, drv)
        return False

    # ---------------------------------------------------------------- Xid

    def on_xid(self, ln: Line) -> bool:
        text = ln.text
        key: tuple[str, str] | tuple[str, str, bool, bool] = (text, ln.quote)
        if not ln.quote and text.endswith(('"', "'")):
            # whether a closing quote is one depends on the whole line (unquoted)
            key = (text, "", '"' in ln.raw[:-1], "'" in ln.raw[:-1])
        values = self.xid_memo.get(key)
        if values is None:
            values = _xid_values(ln)
            if len(self.xid_memo) >= MEMO_SIZE:
                self.xid_memo.clear()  # a storm repeats few texts; a bounded memo holds them
            self.xid_memo[key] = values
        if not values:
            return False
        ev = self.emit_shared("xids", XidEvent, ln, values)
        pci, message = values["pci_bus_id"], values["message"]
        if pci:
            self.gpu_pcis.add(pci)
        self.open_xid, self.open_xid_line = ev, ln
        if values["code"] == 79 or _FALLEN.search(message):
            self._bus_loss(ln, pci, message)
        return True

    def _xid_continuation(self, ln: Line) -> bool:
        """Lines that carry on the open Xid report: indented NVRM lines (GSP CrashCat,
        register dumps), hex dumps, and wrapped paste fragments."""
        head, ev = self.open_xid_line, self.open_xid
        assert head is not None and ev is not None
        if ln.no != ev.last_line + 1:
            return False
        text = ln.text
        if text == head.text or ("Xid" in text and (_XID.search(text) or _SXID.search(text))):
            return False  # the next report (a storm repeats the head's very text)
        if "NVRM: GPU at" in text and _GPU_AT.search(text):
            return False
        if ln.time is not None and head.time is not None:
            try:
                if abs(age_s(ln.time, head.time)) > 2.0:
                    return False
            except (TypeError, OverflowError, ValueError):
                return False
        elif (
            ln.monotonic_s is not None
            and head.monotonic_s is not None
            and abs(ln.monotonic_s - head.monotonic_s) > 2.0
        ):
            return False
        if text.startswith("NVRM:") and (_NVRM_INDENT.match(text) or _NVRM_HEXDUMP.match(text)):
            return True
        if ev.code == 74 and text.startswith("NVRM:"):
            return bool(re.search(r"(?i)nvlink|\blink\s*\d+|0x[0-9a-f]{2,}", text))
        # a paste that wrapped the report: no stamp of its own, starts indented
        return head.stamped and not ln.stamped and ln.raw[:1] in (" ", "\t")

    # ---------------------------------------------------------------- SXid

    def on_sxid(self, ln: Line) -> bool:
        text = ln.text
        m = _SXID.search(text) if "SXid" in text else None
        if m is None:
            self.open_sxid = None  # any other line ends a multi-line SXid report
            return False
        pci = normalize_pci(m.group("paren"))
        code = int(m.group("code"))
        rest = unquoted(m.group("rest").rstrip(), ln)
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
                ev.add_line(ln)
                self.open_sxid = (ev, opci, ocode, ln.no, parts)
                return True
        ev = self.emit("sxids", SxidEvent, ln, code=code, message=rest, pci_bus_id=pci)
        if re.search(r"(?i)\bnon-?\s?fatal\b", rest):
            ev.fatal = False
        elif re.search(r"(?i)\bfatal\b", rest):
            ev.fatal = True
        if lk := _LINK_NO.search(rest):
            ev.link = int(lk.group(1))
        self.open_sxid = (ev, pci, code, ln.no, {part})
        return True

    # ---------------------------------------------------------------- GPU identity

    def on_identity(self, ln: Line) -> bool:
        text = ln.text
        if m := _GPU_AT.search(text):
            pci = normalize_pci(m.group("pci"))
            self.last_identity = (pci, ln.no)
            if pci:
                self.out.gpu_uuids[pci] = m.group("uuid")
                self.gpu_pcis.add(pci)
            return True
        if (m := _NVIDIA_GPU_HEAD.search(text)) and not _FALLEN.search(text):
            self.report_head = (ln, normalize_pci(m.group("pci")), [])
            return True
        head = self.report_head
        if head is not None and not _FALLEN.search(text):
            first, _, middle = head
            last = middle[-1].no if middle else first.no
            if ln.no == last + 1 and text.startswith("NVRM:") and len(middle) < 2:
                middle.append(ln)  # "(PCI ID: 10de:1db6) installed in this system has"
                return True
            self.report_head = None
        return False

    # ---------------------------------------------------------------- bus loss

    def on_bus_loss(self, ln: Line) -> bool:
        if not _FALLEN.search(ln.text):
            return False
        head, self.report_head = self.report_head, None
        if head is not None:
            first, pci, middle = head
            last = middle[-1].no if middle else first.no
            if ln.no == last + 1:
                # the report's first line names the GPU and dates it
                parts = [first, *middle, ln]
                message = " ".join(_NVRM_TAG.sub("", p.text, count=1).strip() for p in parts)
                ev = self._bus_loss(first, pci, unquoted(message, ln))
                for part in parts[1:]:
                    ev.add_line(part)
                return True
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
        msg = unquoted(_BUS_MSG.sub("", text, count=1).strip(), ln)
        self._bus_loss(ln, pci, msg)
        return True

    def _bus_loss(self, ln: Line, pci: str | None, message: str | None) -> Draft:
        if pci:
            self.gpu_pcis.add(pci)
        for ev in reversed(self.drafts["bus_losses"][-4:]):
            values = ev.values
            other = values.get("pci_bus_id")
            if other and pci and other != pci:
                continue
            # an unnamed GPU only merges with an adjacent report
            if ln.no - ev.last_line > (20 if other and pci else 3):
                continue
            if (t := values.get("time")) is not None and ln.time is not None:
                try:
                    if abs(age_s(ln.time, t)) > 60:
                        continue
                except (TypeError, OverflowError, ValueError):
                    continue
            # the same loss reported again (Xid 79 and the "GPU ...: fallen off" line)
            ev.add_line(ln)
            if other is None and pci:
                values["pci_bus_id"] = pci
            return ev
        return self.emit("bus_losses", BusLossEvent, ln, message=message, pci_bus_id=pci)

    # ---------------------------------------------------------------- NVLink

    def on_nvlink(self, ln: Line) -> bool:
        return self._nvlink(ln)

    def _nvlink(self, ln: Line) -> bool:
        m = _NVLINK_LINE.match(ln.text)
        if not m or not _NVLINK_ERR.search(ln.text):
            return False
        msg = unquoted(m.group("msg").strip(), ln)
        ev = self.emit("nvlink_errors", NvlinkErrorEvent, ln, message=msg)
        if lk := _LINK_NO.search(msg):
            ev.link = int(lk.group(1))
        if p := _BDF.search(msg):
            ev.pci_bus_id = normalize_pci(p.group(0))
        return True

    # ---------------------------------------------------------------- PCIe link limits

    def on_pcie_limit(self, ln: Line) -> bool:
        dm = _DEV_PREFIX.match(ln.text)
        if not dm or not (m := _PCIE_LIMIT.search(dm.group("msg"))):
            return False
        pci = normalize_pci(dm.group("pci"))
        assert pci is not None
        values: dict[str, Any] = {
            "pci_bus_id": pci,
            "driver": dm.group("drv"),
            "available_gbps": float(m.group("avail")),
            "speed_gts": _float(m.group("speed")),
            "width": int(m.group("width")),
            "limited_at": normalize_pci(m.group("at"), anywhere=False),
            "capable_gbps": _float(m.group("cap")),
            "capable_speed_gts": _float(m.group("cap_speed")),
            "capable_width": int(m.group("cap_width")) if m.group("cap_width") else None,
        }
        if dm.group("drv") == "nvidia":
            values["device_is_gpu"] = True
        ev = self.pcie_limit_by_device.get(pci)
        if ev is None:
            self.pcie_limit_by_device[pci] = self.emit("pcie_limits", PcieLimitEvent, ln, **values)
            return True
        # one event per device: a later report (the driver loading) is the newest reading
        ev.add_line(ln)
        self.stamp(ev, ln)
        ev.values.update(values)
        return True

    # ---------------------------------------------------------------- host health

    def on_host_health(self, ln: Line) -> bool:
        text = ln.text
        for problem, rx in _HOST_PATTERNS:
            if m := rx.search(text):
                groups = m.groupdict()
                dev = groups.get("dev") or groups.get("dev2") or groups.get("dev3")
                values: dict[str, Any] = {
                    "problem": problem,
                    "device": dev or None,
                    "message": text[m.start() :].strip()[:500],
                }
                if groups.get("proc"):
                    values["process_name"] = groups["proc"]
                if groups.get("pid"):
                    values["pid"] = int(groups["pid"])
                self.emit("host_events", HostEvent, ln, **values)
                return True
        return False

    # ---------------------------------------------------------------- AER

    def on_aer(self, ln: Line) -> bool:
        text = ln.text
        if "[Hardware Error]" in text:
            if m := _GHES_SEV.search(text):
                self.ghes_sev, self.ghes_line = _aer_severity(m.group("sev")), ln.no
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
            ev = self.emit(
                "aers",
                AerEvent,
                ln,
                reporter=f"{drv} {pci}",
                severity=_aer_severity(sev),
                pci_bus_id=dev or pci,
            )
            self._open_aer(ev, ln, {pci, dev or pci})
            self.aer_block_filled = False
            return True
        if m := _AER_BUS_ERROR.search(msg):
            dev = _decode_requester_id(m.group("id"), pci) if m.group("id") else pci
            sev = _aer_severity(m.group("sev"))
            if recent and not self.aer_block_filled and pci in self.aer_devices:
                ev = self.aer  # type: ignore[assignment]
                ev.add_line(ln)
                if m.group("id") or ev.pci_bus_id is None:
                    ev.pci_bus_id = dev
            else:
                ev = self.emit("aers", AerEvent, ln, reporter=f"{drv} {pci}", pci_bus_id=dev)
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
            ev = self.emit("aers", AerEvent, ln, reporter=f"{drv} {pci}", pci_bus_id=pci)
            if self.ghes_sev and ln.no - self.ghes_line <= 40:
                ev.severity = self.ghes_sev
            if drv == "nvidia":
                ev.device_is_gpu = True
            self._open_aer(ev, ln, {pci})
            self.aer_block_filled = True
            return True
        if _CANT_RECOVER.search(msg):
            ev = self.emit("aers", AerEvent, ln, pci_bus_id=pci)
            ev.device_is_gpu = drv == "nvidia" or pci in self.gpu_pcis
            if recent and self.aer is not None:
                ev.reporter = self.aer.reporter
                ev.severity = self.aer.severity
                ev.error_type = self.aer.error_type
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
        ev.add_line(ln)
        self.aer_line = ln.no
        return True

    def _open_aer(self, ev: Draft, ln: Line, devices: set[str]) -> None:
        self.aer, self.aer_line = ev, ln.no
        self.aer_devices = devices

    def _settle_aer(self) -> None:
        """Whether the failing device is a GPU, from everything the log said about it."""
        for ev in self.drafts["aers"]:
            if ev.device_is_gpu is None and ev.pci_bus_id:
                if ev.pci_bus_id in self.gpu_pcis:
                    ev.device_is_gpu = True
                elif ev.pci_bus_id in self.non_gpu:
                    ev.device_is_gpu = False
            elif ev.device_is_gpu is False and ev.pci_bus_id in self.gpu_pcis:
                ev.device_is_gpu = True
        for ev in self.drafts["pcie_limits"]:
            if ev.device_is_gpu is None:
                ev.device_is_gpu = ev.pci_bus_id in self.gpu_pcis or None

    # ---------------------------------------------------------------- OOM

    def _oom_event(self, pid: int, ln: Line, part: str) -> tuple[Draft, set[str]]:
        """The event of the kill of ``pid`` this line adds to, or a new one."""
        if pid in self.oom_by_pid:
            ev, parts, last = self.oom_by_pid[pid]
            if part not in parts and ln.no - last <= 200:
                parts.add(part)
                ev.add_line(ln)
                self.oom_by_pid[pid] = (ev, parts, ln.no)
                return ev, parts
        ev = self.emit("ooms", OomKillEvent, ln, pid=pid)
        if cg := self.oom_pending.pop("cgroup", None):
            ev.cgroup = cg
        if tcg := self.oom_pending.pop("task_cgroup", None):
            ev.task_cgroup = tcg
        parts = {part}
        self.oom_by_pid[pid] = (ev, parts, ln.no)
        return ev, parts

    def on_oom(self, ln: Line) -> bool:
        text = ln.text
        if "invoked oom-killer:" in text:
            self.oom_pending.clear()  # a new episode
            return True
        if m := _OOM_TASK_IN.search(text):
            self.oom_pending = {"task_cgroup": m.group("task"), "cgroup": m.group("limit")}
            return True
        if m := _OOM_KV.search(text):
            kv = _parse_oom_kv(m.group("kv").rstrip())
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
            self.stamp(ev, ln)  # the kill line itself dates the event
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
                    ev.add_line(ln)
            return True
        return False


def _driver_named(text: str) -> tuple[str | None, str]:
    """The device a line names and the driver that names it ("nvidia" for NVRM lines)."""
    if m := _DEV_PREFIX.match(text):
        return normalize_pci(m.group("pci")), m.group("drv")
    if "NVRM: GPU" in text and (m := _NVRM_GPU_PREFIX.search(text)):
        return normalize_pci(m.group("pci")), "nvidia"
    return None, ""


_XID_FIELD_NAMES = ("pid", "name", "ch", "gi", "ci")


def _xid_values(ln: Line) -> dict[str, Any]:
    """The fields of an Xid line (empty when it is none): what the memo keeps per text."""
    m = _XID.search(ln.text)
    if m is None:
        return {}
    paren, rest = m.group("paren"), unquoted(m.group("rest").rstrip(), ln)
    values: dict[str, Any] = {"code": int(m.group("code")), "pci_bus_id": normalize_pci(paren)}
    if "GPU-I" in paren and (g := _GPU_I.search(paren)):
        values["gpu_instance"] = int(g.group(1))
    pos, seen = 0, set()
    while pos < len(rest) and (f := _XID_FIELD.match(rest, pos)):
        kind, value = "", None
        for kind in _XID_FIELD_NAMES:
            if (value := f.group(kind)) is not None:
                break
        if kind in seen or value is None:
            break
        seen.add(kind)
        if kind == "pid":
            values["pid"] = int(value) if value.isdigit() else None
        elif kind == "name":
            values["process_name"] = value
        elif kind == "ch":
            values["channel"] = value
        elif kind == "gi":
            values["gpu_instance"] = int(value)
        pos = f.end()
        if not f.group("sep"):
            break
    values["message"] = rest[pos:]
    return values


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


# --------------------------------------------------------------------------- line kinds

# Checked in this order on each candidate line; the first handler that takes it wins.
# Host problems node-problem-detector's kernel monitor reports (its default
# kernel-monitor.json: task hung, filesystem read-only / errors, I/O errors, NFS, MCE).
_HOST_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "hung_task",
        re.compile(
            r"INFO: task (?P<proc>.{1,64}?):(?P<pid>\d{1,10}) blocked for more than \d+ seconds"
        ),
    ),
    (
        "fs_error",
        re.compile(
            r"(?:EXT4-fs|EXT3-fs|BTRFS) (?:error|critical)\s*\((?:device )?(?P<dev>[^)\s]{1,64})\)"
            r"|(?:EXT4-fs|EXT3-fs) \((?P<dev2>[^)\s]{1,64})\): Remounting filesystem read-only"
            r"|XFS \((?P<dev3>[^)\s]{1,64})\): (?:Corruption|.{0,40}shut(?:ting)? down|"
            r"metadata I/O error|log I/O error|Internal error)"
        ),
    ),
    (
        "io_error",
        re.compile(
            r"(?:blk_update_request|print_req_error|critical medium error|I/O error),? dev "
            r"(?P<dev>[\w-]{1,32}), sector|Buffer I/O error on dev(?:ice)? (?P<dev2>[\w-]{1,32})"
        ),
    ),
    ("nfs_not_responding", re.compile(r"nfs: server (?P<dev>\S{1,128}) not responding")),
    (
        "machine_check",
        re.compile(r"Machine [Cc]heck(?: Exception| events logged|:)|mce: \[Hardware Error\]"),
    ),
    ("disk_full", re.compile(r"No space left on device")),
)

LINE_KINDS: tuple[LineKind, ...] = (
    LineKind("driver", (), KernelLogParser.on_driver),  # notes, never takes a line
    LineKind("xid", ("Xid",), KernelLogParser.on_xid),
    LineKind("sxid", (), KernelLogParser.on_sxid),  # sees every line: ends open reports
    LineKind(
        "gpu_identity",
        ("NVRM: GPU at", "NVRM: The NVIDIA GPU", "NVRM: (PCI ID"),
        KernelLogParser.on_identity,
    ),
    # The driver's "fallen off the bus" forms: "GPU has fallen off the bus" (alone, or after
    # an Xid 79), "NVRM: GPU [at] 0000:..: [GPU] has fallen ...", the older report's first
    # line ("NVRM: The NVIDIA GPU ...", the GPU and time) and its third ("NVRM: fallen off
    # the bus ..."). Not every "NVRM" line: the driver's load notices are chatter.
    LineKind(
        "bus_loss",
        ("GPU has fallen", "NVRM: GPU", "NVRM: fallen", "NVRM: The NVIDIA GPU", "Fallen", "FALLEN"),
        KernelLogParser.on_bus_loss,
    ),
    LineKind("pcie_limit", ("PCIe bandwidth",), KernelLogParser.on_pcie_limit),
    LineKind(
        "host_health",
        (
            "INFO: task",  # hung tasks
            "EXT4-fs error",  # not "EXT4-fs": its mount notices are chatter
            "EXT4-fs critical",
            "EXT3-fs error",
            "EXT3-fs critical",
            "Remounting filesystem read-only",
            "BTRFS error",
            "BTRFS critical",
            "XFS (",
            "I/O error",
            "error, dev ",  # block layer: "critical medium error, dev sdb, sector ..."
            "responding, still trying",  # "nfs: server X not responding, still trying"
            "responding, timed out",
            "Machine Check",
            "Machine check",
            "No space left",
        ),
        KernelLogParser.on_host_health,
    ),
    LineKind(
        "aer",
        (
            "AER",
            "PCIe Bus Error",
            "[Hardware Error]",
            "] error status/mask",  # "device [10de:2330] error status/mask=..."
            "TLP Header",
            "aer_status",
            "aer_mask",
            "aer_layer",
            "aer_agent",
            "aer_uncor",
            "Error of this Agent",
            "Root Port",
            "'t recover",  # the kernel's "can't recover (no error_detected callback)"
        ),
        KernelLogParser.on_aer,
        patterns=(r"\[\s?\d{1,2}\]\s",),  # an error bit: "[ 5] SDES", "[14] CmpltTO"
    ),
    LineKind(
        "oom",
        (
            "invoked oom-killer",
            "oom_reaper",
            "constraint=CONSTRAINT_",  # the "oom-kill:" summary (kernel 4.19 on)
            "Out of memory",  # "Memory cgroup out of memory: Kill(ed) process" below
            "Killed process",
            "Kill process",
            "Task in ",
        ),
        KernelLogParser.on_oom,
    ),
    LineKind(
        "nvlink", ("NVLink", "NVLINK", "Nvlink", "NvLink", "nvlink"), KernelLogParser.on_nvlink
    ),
)


# --------------------------------------------------------------------------- prefilter


# Characters ranked by how often they occur in kernel-log chatter, most frequent first
# (measured over the 1M-line journal of benchmarks/make_kernel_log.py: what a Kubernetes
# GPU node logs all day, timestamps and host names included). Only the order matters, and
# a wrong guess costs speed, never a line: the prefilter looks for each keyword from its
# rarest character on, because the regex engine skips ahead to the first characters of
# one alternation and the fewer places it stops at, the faster the pass.
_CHAR_RANK = " 0e2:nor1-tdlapi4su679.k35mfg8cTb+v/h_)(\"y=xPEDwCN,ISjVA>MRXLGFOYH][QqUBK<'@}{W"
_COMMON_CHARS = frozenset(_CHAR_RANK[: _CHAR_RANK.index("c") + 1])  # over 1% of the text
_ANCHOR_MIN = 5  # a shorter rest of a keyword would stop the scan at too many lines


def _anchor(word: str) -> str:
    """The rest of ``word`` from its rarest character on (at least ``_ANCHOR_MIN`` long
    where the word is): every line holding ``word`` holds it."""
    last = max(0, len(word) - _ANCHOR_MIN)
    at = min(range(last + 1), key=lambda i: (_rarity(word[i]), i))
    return word[at:]


def _rarity(ch: str) -> int:
    """Lower is rarer; characters the table does not know are the rarest."""
    return len(_CHAR_RANK) - _CHAR_RANK.index(ch) if ch in _CHAR_RANK else 0


def _prefilter(kinds: Iterable[LineKind]) -> tuple[re.Pattern[str], ...]:
    """Searches that together find every line some kind may want.

    One alternation of the keywords' anchors that start with a rare character (its cost
    is one pass over the text plus a check wherever such a character stands), and one
    literal search per keyword made only of frequent characters and per pattern that
    starts with no literal rare character (a lone literal is searched at memory speed,
    but each costs a pass of its own)."""
    words: list[str] = []
    patterns: list[str] = []
    for kind in kinds:
        words += [w for w in kind.keywords if w not in words]
        patterns += [p for p in kind.patterns if p not in patterns]
    # keywords already holding another keyword add nothing
    words = [w for w in words if not any(o != w and o in w for o in words)]
    anchors: list[str] = []
    alone: list[str] = []
    for word in words:
        anchor = _anchor(word)
        if anchor[0] in _COMMON_CHARS:
            alone.append(word)
        else:
            anchors.append(anchor)
    anchors = [a for a in anchors if not any(o != a and o in a for o in anchors)]
    branches = [re.escape(a) for a in sorted(anchors, key=len, reverse=True)]
    lone: list[str] = []
    for pattern in patterns:
        head = _literal_head(pattern) if "|" not in pattern else None
        (lone if head is None or head in _COMMON_CHARS else branches).append(pattern)
    passes = [_grouped(branches)] if branches else []
    passes += [re.compile(re.escape(w)) for w in alone]
    passes += [re.compile(p) for p in lone]
    return tuple(passes)


def _literal_head(pattern: str) -> str | None:
    """The character every match of ``pattern`` starts with, when it is a plain one (not
    one a quantifier may leave out)."""
    if len(pattern) >= 2 and pattern[0] == "\\" and not pattern[1].isalnum():
        head, rest = pattern[1], pattern[2:]
    elif pattern and (pattern[0].isalnum() or pattern[0] in " _-:'/"):
        head, rest = pattern[0], pattern[1:]
    else:
        return None
    return None if rest[:1] in ("?", "*", "{") else head


def _grouped(branches: list[str]) -> re.Pattern[str]:
    """One alternation, its branches grouped by their first character so that the engine
    tries one group, not every branch, where it stops."""
    groups: dict[str, list[str]] = {}
    for branch in branches:
        head = 2 if branch.startswith("\\") else 1
        groups.setdefault(branch[:head], []).append(branch[head:])
    return re.compile(
        "|".join(
            head + (rests[0] if len(rests) == 1 else "(?:" + "|".join(rests) + ")")
            for head, rests in groups.items()
        )
    )


def _gate(kind: LineKind) -> Callable[[str], object] | None:
    """A fast test that a line may be of ``kind`` (None: every line may be)."""
    if kind.patterns or not kind.keywords:
        return None
    return re.compile("|".join(re.escape(k) for k in kind.keywords)).search


def _candidates(text: str, passes: tuple[re.Pattern[str], ...]) -> list[int]:
    """Start offsets of the lines of ``text`` that hold a match of any pass, sorted."""
    starts: set[int] = set()
    add, rfind, find = starts.add, text.rfind, text.find
    for rx in passes:
        search, pos = rx.search, 0
        while m := search(text, pos):
            hit = m.start()
            start = rfind("\n", 0, hit) + 1
            if hit - start < MAX_LINE_CHARS:
                add(start)
            pos = find("\n", hit) + 1
            if pos == 0:
                break
    return sorted(starts)


def parse_kernel_log(
    text: str | bytes,
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
    parser = KernelLogParser(source, boot_time=boot_time, year=year, now=now)
    with _gc_paused():  # one pause: the collector would walk the drafts between the two
        parser.feed(text)
        return parser.finish()
