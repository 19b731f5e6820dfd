"""Error text into facts: whatever a job, a tool or a log printed, scanned against the
signature table (:mod:`error_signatures`).

The input may be anything a responder pastes: one line, a traceback, a Docker error with
its hook chain quoted three levels deep, a ``kubectl logs`` dump. Each signature found
becomes one :class:`~gpu_triage.facts.ErrorTextEvent` (repeats of the same text folded
into a count), and the signatures that carry facts (versions, how NVML failed to start)
fill :class:`~gpu_triage.facts.DriverFacts`.
"""

from __future__ import annotations

import bisect
import re

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.error_signatures import Signature, compiled
from gpu_triage.collectors.pci import normalize_pci
from gpu_triage.model.facts import DriverFacts, ErrorTextEvent, Facts

MAX_EVENTS_PER_SIGNATURE = 32  # distinct subjects kept per signature; the rest are counted
MAX_MESSAGE_CHARS = 300

# Escaped quoting from nested JSON / Go error strings: \" \\" \\\\n ...
# Only from the start of a run of backslashes, taken whole: a long run stays linear.
_ESCAPES = re.compile(r"(?<!\\)\\++[nt\"]")


def _unescape(text: str) -> str:
    """Docker and containerd quote the hook's stderr inside an error string inside an error
    string: ``\\\\n`` is a line break three levels down. Turn the escapes into what they
    stand for, keeping the text's length so line numbers stay right."""

    def repl(m: re.Match[str]) -> str:
        s = m.group(0)
        ch = {"n": "\n", "t": " ", '"': '"'}[s[-1]]
        return " " * (len(s) - 1) + ch

    return _ESCAPES.sub(repl, text)


def scan_error_text(
    text: str, source: str = "error text", only: frozenset[str] | None = None
) -> tuple[list[ErrorTextEvent], DriverFacts]:
    """Every signature of the table found in ``text`` (of ``only`` when given), and the
    driver facts they set."""
    text = _unescape(text)
    newlines = _Lines(text)
    driver = DriverFacts(source=source)
    events: list[ErrorTextEvent] = []
    lowered = text.lower()
    for sig, pattern in compiled():
        if only is not None and sig.id not in only:
            continue
        # A regex over a megabyte log costs; a substring test is cheap. Most signatures
        # are absent from any one paste, so most patterns never run.
        if sig.keys and not any(k in lowered for k in sig.keys):
            continue
        seen: dict[tuple[str | None, str | None], ErrorTextEvent] = {}
        for m in pattern.finditer(text):
            if sig.sets is not None:
                sig.sets(m, driver)
            if sig.cause is None:
                continue
            key = (_group(m, sig.value_group), _bus(m, sig))
            event = seen.get(key)
            if event is not None:
                event.count = (event.count or 1) + 1
                continue
            if len(seen) >= MAX_EVENTS_PER_SIGNATURE:
                first = next(iter(seen.values()))
                first.count = (first.count or 1) + 1
                continue
            seen[key] = event = _event(sig, m, text, newlines, source, key)
            events.append(event)
    events.sort(key=lambda e: e.line or 0)
    return events, driver


class _Lines:
    """Offsets of the newlines of a text, found on the first event only: most texts a
    kernel log brings hold no signature, and a 32 MiB log must not pay for an index."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._at: list[int] | None = None

    @property
    def at(self) -> list[int]:
        if self._at is None:
            self._at = [m.start() for m in re.finditer("\n", self.text)]
        return self._at


# Signatures the kernel itself prints: read from the kernel log (live and pasted) as well
# as from pasted error text. Lines the kernel-log parser already turns into events of
# their own (Xid, fallen off the bus, NVLink errors) are not here.
KERNEL_LOG_SIGNATURES = frozenset(
    {
        "nvrm-api-mismatch",
        "nvrm-module-version",
        "nvrm-rminitadapter-failed",
        "nvrm-gpu-not-supported",
        "nvrm-probe-failed",
        "nvrm-no-adapters-initialized",
        "msix-enable-failed",
        "nvidia-unknown-symbol",
        "mlx5-slot-power",
        "mlx5-module-high-temperature",
        "mlx5-access-reg",
        "peermem-invalid-context",
        "nccl-segfault",
    }
)


# Signatures of lines the kernel-log parser turns into events of its own.
PARSED_BY_KERNEL_LOG = frozenset({"gpu-fallen-off-bus", "nvlink-rx-detect-failed"})


def _kernel_log_signatures() -> frozenset[str]:
    return frozenset(s.id for s, _ in compiled() if s.id not in PARSED_BY_KERNEL_LOG)


def scan_kernel_log_errors(
    text: str, source: str = "kernel log"
) -> tuple[list[ErrorTextEvent], DriverFacts | None]:
    """The known error lines of a kernel log or a journal (``journalctl -b`` holds the
    daemons' lines too) as error events, and the driver facts they set (None when none).
    Lines the kernel-log parser reads itself are left to it. A module loaded after a line
    ("NVRM: loading NVIDIA UNIX ... Kernel Module") is a new driver: the driver-state
    lines before it are history."""
    events, driver = scan_error_text(text, source, only=_kernel_log_signatures())
    load = _last_module_load(text)
    if load is not None:
        events = [e for e in events if e.component != "driver" or (e.line or 0) > load]
        if not any(e.signature == "nvrm-api-mismatch" for e in events):
            driver.library_version = None  # the mismatch it came from is history
            if driver.nvml_init is not None and driver.nvml_init.value == "version_mismatch":
                driver.nvml_init = None
    values = driver.model_dump(exclude={"unavailable", "source"}, exclude_computed_fields=True)
    return events, driver if any(v is not None for v in values.values()) else None


_KERNEL_WORDS = re.compile(r"nvrm|nvidia|mlx5|segfault|peermem")  # on lower-cased text
_WORDS = ("nvrm", "nvidia", "mlx5", "segfault", "peermem")
MAX_SIEVED_CHARS = 4 << 20  # driver lines kept from one log; a flood is counted, not kept


class KernelLineSieve:
    """The lines of a streamed kernel log a driver-line scan can use (those naming NVRM,
    nvidia, mlx5, a segfault or peermem; not the Xid lines the kernel-log parser reads
    itself), kept chunk by chunk so a log read in pieces is never held whole. A chunk
    with none of the words costs one lower-casing and five substring searches; lines
    are looked at only in chunks that have one."""

    def __init__(self) -> None:
        self.kept: list[str] = []
        self.size = 0
        self.carry = ""

    def feed(self, chunk: str) -> None:
        text = self.carry + chunk
        cut = text.rfind("\n")
        if cut < 0:
            self.carry = text[-65536:]  # one line longer than this is no kernel line
            return
        self.carry = text[cut + 1 :][-65536:]
        self._take(text[:cut])

    def _take(self, text: str) -> None:
        if self.size >= MAX_SIEVED_CHARS:
            return
        low = text.lower()
        if not any(w in low for w in _WORDS):
            return
        for line, lowered in zip(text.split("\n"), low.split("\n"), strict=False):
            if "xid (" in lowered or not _KERNEL_WORDS.search(lowered):
                continue
            self.kept.append(line)
            self.size += len(line) + 1
            if self.size >= MAX_SIEVED_CHARS:
                return

    def text(self) -> str:
        self._take(self.carry)
        self.carry = ""
        return "\n".join(self.kept)


def _last_module_load(text: str) -> int | None:
    """Line number of the last "Kernel Module <version>" load line, None when none."""
    if "kernel module" not in text.lower():
        return None
    pattern = next(p for s, p in compiled() if s.id == "nvrm-module-version")
    last = None
    for m in pattern.finditer(text):
        last = m.start()
    return None if last is None else text.count("\n", 0, last) + 1


def _group(m: re.Match[str], name: str | None) -> str | None:
    if name is None:
        return None
    value = m.groupdict().get(name)
    return value if value else None


def _bus(m: re.Match[str], sig: Signature) -> str | None:
    raw = _group(m, sig.bus_group)
    return normalize_pci(raw, anywhere=False) if raw else None


def _event(
    sig: Signature,
    m: re.Match[str],
    text: str,
    lines: _Lines,
    source: str,
    key: tuple[str | None, str | None],
) -> ErrorTextEvent:
    newlines = lines.at
    line = bisect.bisect_left(newlines, m.start()) + 1
    start = newlines[line - 2] + 1 if line >= 2 else 0
    end = text.find("\n", m.end())
    whole = text[start : end if end >= 0 else len(text)]
    return ErrorTextEvent(
        signature=sig.id,
        cause=sig.cause,
        component=sig.component,
        verified=sig.verified,
        message=" ".join(m.group(0).split())[:MAX_MESSAGE_CHARS],
        raw=" ".join(whole.split())[:MAX_MESSAGE_CHARS],
        value=key[0],
        pci_bus_id=key[1],
        line=line,
        count=1,
        source=source,
    )


def parse_error_text(text: str, source: str = "error text") -> Facts:
    """A paste of error output as facts. Text with no known signature is an error: the
    responder must hear that nothing in it was recognised, not get an empty snapshot."""
    events, driver = scan_error_text(text, source)
    values = driver.model_dump(exclude={"unavailable", "source"}, exclude_computed_fields=True)
    has_driver = any(v is not None for v in values.values())
    if not events and not has_driver:
        raise ParseError(
            "no known error text in this output (see `gpu-triage facts docs`, kind error, "
            "for what is recognised)",
            source=source,
        )
    return Facts(errors=events, driver=driver if has_driver else None)


def recognises(text: str) -> bool:
    """Whether ``text`` holds at least one known signature (for content detection)."""
    text = _unescape(text)
    lowered = text.lower()
    return any(
        p.search(text)
        for sig, p in compiled()
        if not sig.keys or any(k in lowered for k in sig.keys)
    )
