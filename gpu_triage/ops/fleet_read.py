"""Reading many nodes' history for `gpu-triage fleet`: streaming, parallel, bounded.

What is kept per node is a fixed set of counters (the latest run, runs per rule, bad
findings per GPU, Xid codes per driver, and per GPU the count, sum and sum of squares of
its utilisation and temperature samples), so memory grows with nodes and GPUs, never with
the length of the history. Files are read line by line in binary with a cap on a line's
length; a big file is split into byte ranges read by separate processes. A line that is
not a run record (torn by a crash, cut short by a copy, not JSON, NaN/Infinity, wrong
types) is reported with its file and line and skipped; the first
:data:`MAX_ERRORS_KEPT` are kept, the rest only counted.
"""

from __future__ import annotations

import gc
import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpu_triage.io import jsonio
from gpu_triage.ops.fleet_documents import open_regular, records_from_document
from gpu_triage.ops.load_bands import IDLE_BELOW, LIGHT_BELOW

BAD = ("warning", "critical")
SEV_RANK = {"info": 0, "warning": 1, "critical": 2}
MAX_LINE_BYTES = 16 * 2**20  # a run record of a 4,096-GPU node is well under 4 MiB
MAX_ERRORS_KEPT = 50
SPLIT_BYTES = 64 * 2**20  # files bigger than this are read in ranges, in parallel
DEFAULT_UTIL_TARGET = 85.0  # fleet/F9: keep GPUs busy 85% of the time or more


def worse(a: str, b: str) -> str:
    """The worse of two severities (unknown words rank as info)."""
    return a if SEV_RANK.get(a, 0) >= SEV_RANK.get(b, 0) else b


# --------------------------------------------------------------------------- per-node state


@dataclass(slots=True)
class GpuWindow:
    """One GPU's samples over the history window, as running sums."""

    serial: str = ""
    util_n: int = 0
    util_sum: float = 0.0
    util_sq: float = 0.0
    util_at_target: int = 0
    temp_n: int = 0
    temp_sum: float = 0.0
    # temperature per load band (idle, light, busy) of the samples with both readings
    band_n: list[int] = field(default_factory=lambda: [0, 0, 0])
    band_sum: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    band_sq: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])

    def merge(self, other: GpuWindow) -> None:
        self.serial = self.serial or other.serial
        self.util_n += other.util_n
        self.util_sum += other.util_sum
        self.util_sq += other.util_sq
        self.util_at_target += other.util_at_target
        self.temp_n += other.temp_n
        self.temp_sum += other.temp_sum
        for b in range(3):
            self.band_n[b] += other.band_n[b]
            self.band_sum[b] += other.band_sum[b]
            self.band_sq[b] += other.band_sq[b]


# The order of two runs of one node: timestamp, then where the line is (file, offset), so
# the latest run is the same whatever the number of processes.
Order = tuple[str, int, int]


@dataclass
class NodeState:
    """What the fleet analysis keeps per node: the latest run and counters over history."""

    runs: int = 0
    first_ts: str = ""
    last: Order = ("", -1, -1)
    last_rules: list[str] = field(default_factory=list)  # what fired in the latest run
    gpus: list[dict[str, Any]] = field(default_factory=list)  # the latest run's, as read
    driver: str | None = None
    rack: str | None = None
    row: str | None = None
    drivers: set[str] = field(default_factory=set)  # every driver seen in the window
    rule_runs: Counter[str] = field(default_factory=Counter)  # runs in which it fired
    rule_sev: dict[str, str] = field(default_factory=dict)  # worst severity seen
    gpu_bad: Counter[str] = field(default_factory=Counter)  # "bus|serial" -> bad findings
    gpu_rules: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    gpu_sev: dict[str, str] = field(default_factory=dict)
    xids: dict[tuple[int, str], set[str]] = field(default_factory=dict)  # (code, driver)->gpus
    window: dict[str, GpuWindow] = field(default_factory=dict)  # bus -> samples
    versions: dict[str, str] = field(default_factory=dict)  # the latest run's image versions

    @property
    def last_ts(self) -> str:
        return self.last[0]

    def merge(self, other: NodeState) -> None:
        """Fold another reader's state of the same node into this one (order-free)."""
        self.runs += other.runs
        if other.first_ts and (not self.first_ts or other.first_ts < self.first_ts):
            self.first_ts = other.first_ts
        self.drivers |= other.drivers
        self.rule_runs.update(other.rule_runs)
        for rule, sev in other.rule_sev.items():
            self.rule_sev[rule] = worse(self.rule_sev.get(rule, sev), sev)
        self.gpu_bad.update(other.gpu_bad)
        for key, rules in other.gpu_rules.items():
            self.gpu_rules[key] |= rules
        for key, sev in other.gpu_sev.items():
            self.gpu_sev[key] = worse(self.gpu_sev.get(key, sev), sev)
        for xk, gpus in other.xids.items():
            self.xids.setdefault(xk, set()).update(gpus)
        for bus, w in other.window.items():
            mine = self.window.get(bus)
            if mine is None:
                self.window[bus] = w
            else:
                mine.merge(w)
        if other.last > self.last:
            self.last, self.last_rules, self.gpus = other.last, other.last_rules, other.gpus
            self.driver, self.rack, self.row = other.driver, other.rack, other.row
            self.versions = other.versions


# --------------------------------------------------------------------------- one record


class BadRecord(ValueError):
    """A JSON value that is not a run record; the message says what is wrong."""


def _text(value: Any, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise BadRecord(f"{what} is not a string")


def _str(value: Any) -> str:
    """A field that is shown but decides nothing: anything but a string reads as empty."""
    return value if value.__class__ is str else ""


def _utc(ts: str) -> str:
    """The exporter writes UTC (``+00:00``); other offsets are converted so runs compare
    as text."""
    if ts.endswith("+00:00") or not ts:
        return ts
    try:
        stamp = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError as exc:
        raise BadRecord(f"ts {ts[:40]!r} is not an ISO 8601 time") from exc
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.astimezone(UTC).isoformat()


def _bus(g: dict[str, Any], pos: int) -> str:
    bus = g.get("bus")
    return bus if bus.__class__ is str and bus else f"#{pos}"


def _sample(value: Any, low: float, high: float) -> float | None:
    """A number within [low, high] (bools, strings, overflowed infinities and impossible
    values read as missing)."""
    if value.__class__ is float or value.__class__ is int:
        return value if low <= value <= high else None
    return None


def inventory(gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's GPU list with every field of the right type (the latest run's is shown)."""
    return [
        {
            "bus": _bus(g, pos),
            "serial": _str(g.get("serial")),
            "name": _str(g.get("name")),
            "vbios": _str(g.get("vbios")),
            "uuid": _str(g.get("uuid")),
            "temp": _sample(g.get("temp"), -100.0, 250.0),
            "util": _sample(g.get("util"), 0.0, 100.0),
            "temp_z": _sample(g.get("temp_z"), -1e6, 1e6),
        }
        for pos, g in enumerate(gpus)
    ]


def _check(rec: dict[str, Any]) -> tuple[str, list[Any], list[Any], list[Any]]:
    """The record's time, findings, GPUs and Xid codes, or :class:`BadRecord`."""
    ts = _utc(_text(rec.get("ts"), "ts") or "")
    findings = rec.get("findings") or []
    gpus = rec.get("gpus") or []
    codes = rec.get("xids") or []
    if findings.__class__ is not list:
        raise BadRecord("findings is not a list")
    if gpus.__class__ is not list:
        raise BadRecord("gpus is not a list")
    if codes.__class__ is not list:
        raise BadRecord("xids is not a list")
    for f in findings:
        if f.__class__ is not dict or f.get("rule").__class__ is not str:
            raise BadRecord("a finding without a rule id")
    for g in gpus:
        if g.__class__ is not dict:
            raise BadRecord("a GPU that is not an object")
    for key in ("driver", "rack", "row"):
        _text(rec.get(key), key)
    return ts, findings, gpus, codes


@dataclass(frozen=True)
class ReadOptions:
    target: float = DEFAULT_UTIL_TARGET  # utilisation counted "at target" from here (F9)
    since: str = ""  # UTC ISO time: earlier runs are outside the window and not read


def fold(st: NodeState, rec: dict[str, Any], where: tuple[int, int], opts: ReadOptions) -> bool:
    """Fold one run record (a dict as the exporter writes it) into its node's state;
    False, changing nothing, for a run before the window. Raises :class:`BadRecord`
    before changing anything when the record is malformed. This runs once per history
    line: it is written for speed (no copies of the record)."""
    ts, findings, gpus, codes = _check(rec)
    if ts and ts < opts.since:  # a run without a time is kept: it cannot be placed
        return False
    target = opts.target
    driver = rec.get("driver")
    st.runs += 1
    if ts and (not st.first_ts or ts < st.first_ts):
        st.first_ts = ts
    drv = driver or "?"
    if driver:
        st.drivers.add(driver)
    if findings:
        fired: set[str] = set()
        serial_of: dict[str, str] | None = None
        for f in findings:
            rule = f["rule"]
            sev = f.get("sev")
            if sev not in SEV_RANK:
                sev = "info"
            gpu = _str(f.get("gpu"))
            fired.add(rule)
            old = st.rule_sev.get(rule)
            if old is None or SEV_RANK[sev] > SEV_RANK[old]:
                st.rule_sev[rule] = sev
            if gpu and sev in BAD:
                if serial_of is None:
                    serial_of = {_bus(g, pos): _str(g.get("serial")) for pos, g in enumerate(gpus)}
                key = f"{gpu}|{serial_of.get(gpu, '')}"
                st.gpu_bad[key] += 1
                st.gpu_rules[key].add(rule)
                st.gpu_sev[key] = worse(st.gpu_sev.get(key, sev), sev)
            code = f.get("xid")
            if code.__class__ is int:
                on = st.xids.setdefault((code, drv), set())
                if gpu:
                    on.add(gpu)
        st.rule_runs.update(fired)
    for code in codes:
        if code.__class__ is int:
            st.xids.setdefault((code, drv), set())
    window = st.window
    for pos, g in enumerate(gpus):
        get = g.get
        bus = get("bus")
        w = window.get(bus)
        if w is None:
            if bus.__class__ is not str or not bus:
                bus = f"#{pos}"
            w = window.get(bus)
            if w is None:
                w = window[bus] = GpuWindow(serial=_str(get("serial")))
        util = get("util")
        util_ok = (util.__class__ is float or util.__class__ is int) and 0.0 <= util <= 100.0
        if util_ok:
            w.util_n += 1
            w.util_sum += util
            w.util_sq += util * util
            if util >= target:
                w.util_at_target += 1
        temp = get("temp")
        if (temp.__class__ is float or temp.__class__ is int) and -100.0 <= temp <= 250.0:
            w.temp_n += 1
            w.temp_sum += temp
            if util_ok:
                b = 0 if util < IDLE_BELOW else 1 if util < LIGHT_BELOW else 2  # band_index
                w.band_n[b] += 1
                w.band_sum[b] += temp
                w.band_sq[b] += temp * temp
    order = (ts, where[0], where[1])
    if order > st.last:
        st.last, st.gpus = order, gpus
        st.last_rules = [f["rule"] for f in findings]
        st.driver, st.rack, st.row = driver, rec.get("rack"), rec.get("row")
        st.versions = image_versions(rec.get("versions"))
    return True


MAX_VERSION_KEYS = 32


def image_versions(value: Any) -> dict[str, str]:
    """A record's ``versions`` (kernel, cuda, nic_firmware:28 ... -> version): shown and
    compared across nodes only, so anything but short strings is left out, not an error."""
    if value.__class__ is not dict:
        return {}
    out: dict[str, str] = {}
    for key, version in value.items():
        if len(out) >= MAX_VERSION_KEYS:
            break
        if key.__class__ is str and version.__class__ is str and 0 < len(version) <= 200:
            out[key[:64]] = version
    return out


# --------------------------------------------------------------------------- reading units


@dataclass
class Part:
    """What one reader returns: node states, run count, the first errors and their count.
    An error is (file index, byte offset of its line, line number within the range, or 0
    for the whole file, or -1 when the text names the file itself, text)."""

    nodes: dict[str, NodeState] = field(default_factory=dict)
    runs: int = 0
    errors: list[tuple[int, int, int, str]] = field(default_factory=list)
    error_count: int = 0
    outside: int = 0  # runs before the window

    def error(self, file_idx: int, offset: int, line: int, text: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS_KEPT:
            self.errors.append((file_idx, offset, line, text))

    def add(
        self, host: str, rec: dict[str, Any], where: tuple[int, int], opts: ReadOptions
    ) -> None:
        st = self.nodes.get(host)
        fresh = st is None
        if st is None:
            st = NodeState()
        if not fold(st, rec, where, opts):  # raises before changing st
            self.outside += 1
            return
        if fresh:
            self.nodes[host] = st
        self.runs += 1


# (file index, path, first byte, end byte): lines that start in [first, end) belong to it.
Unit = tuple[int, str, int, int]


def _host(rec: Any) -> str:
    if not isinstance(rec, dict):
        raise BadRecord("not a JSON object")
    host = rec.get("host")
    if not isinstance(host, str) or not host:
        raise BadRecord("no host")
    return host


def _refuse_constant(token: str) -> float:
    raise jsonio.NonFiniteNumber(1, 1, token)


# One decoder for every line: ``json.loads(text, parse_constant=...)`` would build a new
# decoder and scanner per call, a fifth of the parse time of a run record.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def _loads_line(raw: bytes) -> Any:
    """One JSONL line. The C parser does the work; NaN/Infinity are refused through its
    constant hook (called only for those tokens); an overflowing number (inf) is refused
    where the fleet reads a number (it is out of every range there). Bytes that are not
    UTF-8 become U+FFFD rather than losing the line."""
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "replace")
    if text[:1] != "{":
        return _DECODER.decode(text)  # leading blanks, or not an object: the general path
    # raw_decode is decode() without its two whitespace scans; what follows the value
    # must still be blank (a torn line with the next run appended is no record)
    value, end = _DECODER.raw_decode(text)
    if end != len(text) and not text[end:].isspace():
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def _lines(fh: Any, start: int, end: int) -> Iterator[tuple[int, bytes, bool]]:
    """(offset, line, too long) for each line starting in [start, end)."""
    if start:
        fh.seek(start - 1)
        if fh.read(1) != b"\n":
            fh.readline()  # the line straddling ``start`` belongs to the range before
    pos = fh.tell()
    while pos < end:
        raw = fh.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while True:  # skip the rest of the line without holding it
                more = fh.readline(2**20)
                if not more or more.endswith(b"\n"):
                    break
            yield pos, b"", True
            pos = fh.tell()
        else:
            yield pos, raw, False
            pos += len(raw)


_BLANK = b" \t\r\n"


def _read_jsonl(unit: Unit, part: Part, opts: ReadOptions) -> None:
    idx, path, start, end = unit
    try:
        fh = open_regular(path)
    except OSError as exc:
        part.error(idx, start, 0, f"cannot read: {exc.strerror or exc}")
        return
    with fh:
        for n, (offset, raw, too_long) in enumerate(_lines(fh, start, end), 1):
            if too_long:
                part.error(idx, offset, n, f"line longer than {MAX_LINE_BYTES:,} bytes: skipped")
                continue
            if raw[0] in _BLANK and not raw.strip():  # no copy of every line to test it
                continue
            try:
                rec = _loads_line(raw)
                part.add(_host(rec), rec, (idx, offset), opts)
            except jsonio.NonFiniteNumber as exc:
                part.error(idx, offset, n, f"{exc.token}: not a finite number")
            except (json.JSONDecodeError, RecursionError):
                torn = not raw.endswith(b"\n")
                why = "torn line (no newline at the end of the file)" if torn else "not JSON"
                part.error(idx, offset, n, why)
            except BadRecord as exc:
                part.error(idx, offset, n, f"not a run record: {exc}")


def _read_document(unit: Unit, part: Part, opts: ReadOptions) -> None:
    """A findings document or a snapshot (evaluated here), as one run record."""
    idx, path, _, _ = unit
    for rec, problem in records_from_document(Path(path)):
        if problem:
            part.error(idx, 0, -1, problem)  # the message names the file (and line) itself
            continue
        try:
            part.add(_host(rec), rec, (idx, 0), opts)
        except BadRecord as exc:
            part.error(idx, 0, 0, f"not a run record: {exc}")


def read_units(units: list[Unit], opts: ReadOptions | None = None) -> Part:
    opts = opts or ReadOptions()
    part = Part()
    # Every record is freed by its reference count; the cyclic collector would only walk
    # the young parsed dicts again and again (a tenth of the time), so it pauses here.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for unit in units:
            if unit[1].endswith(".jsonl"):
                _read_jsonl(unit, part, opts)
            else:
                _read_document(unit, part, opts)
    finally:
        if was_enabled:
            gc.enable()
    return part


def plan(files: list[Path], workers: int) -> list[list[Unit]]:
    """Units per worker: each file whole, or in byte ranges when it is big; balanced by
    size (largest first onto the least loaded worker)."""
    units: list[tuple[int, Unit]] = []
    for idx, p in enumerate(files):
        try:
            size = p.stat().st_size
        except OSError:
            size = 0
        if p.suffix == ".jsonl" and size > SPLIT_BYTES:
            for start in range(0, size, SPLIT_BYTES):
                units.append((SPLIT_BYTES, (idx, str(p), start, min(size, start + SPLIT_BYTES))))
        else:
            units.append((size, (idx, str(p), 0, 1 << 62)))
    loads = [0] * max(1, workers)
    groups: list[list[Unit]] = [[] for _ in loads]
    for size, unit in sorted(units, key=lambda u: -u[0]):
        w = loads.index(min(loads))
        loads[w] += size + 1
        groups[w].append(unit)
    return [g for g in groups if g]


def expand(paths: Iterable[Path]) -> list[Path]:
    """Files named, and the .jsonl/.json files under folders named, in a stable order.
    Symbolic links inside folders are not followed (a planted link could point anywhere)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(
                q
                for q in p.rglob("*")
                if q.suffix in (".jsonl", ".json") and q.is_file() and not q.is_symlink()
            )
        else:
            out.append(p)
    return out


def _line_base(path: str, offset: int) -> int:
    """How many lines end before ``offset`` (read in bounded blocks)."""
    count, done = 0, 0
    with open(path, "rb") as fh:
        while done < offset:
            block = fh.read(min(2**20, offset - done))
            if not block:
                break
            count += block.count(b"\n")
            done += len(block)
    return count


@dataclass
class FleetRead:
    nodes: dict[str, NodeState]
    runs: int
    errors: list[str]
    error_count: int
    files: int
    outside: int = 0  # runs before ``since``
    since: str = ""


def read_fleet(
    paths: Iterable[Path],
    workers: int | None = None,
    target: float = DEFAULT_UTIL_TARGET,
    since: str = "",
) -> FleetRead:
    """Every run record under ``paths`` (runs before ``since``, a UTC ISO time, left out)."""
    opts = ReadOptions(target, since)
    files = expand(paths)
    workers = workers or min(os.cpu_count() or 1, 8)
    groups = plan(files, workers)
    if len(groups) > 1:
        with ProcessPoolExecutor(len(groups)) as pool:
            parts = list(pool.map(read_units, groups, [opts] * len(groups)))
    else:
        parts = [read_units(groups[0] if groups else [], opts)]
    nodes: dict[str, NodeState] = {}
    raw_errors: list[tuple[int, int, int, str]] = []
    runs = error_count = outside = 0
    for part in parts:
        runs += part.runs
        outside += part.outside
        error_count += part.error_count
        raw_errors += part.errors
        for host, st in part.nodes.items():
            mine = nodes.get(host)
            if mine is None:
                nodes[host] = st
            else:
                mine.merge(st)
    errors = _locate(raw_errors, files)
    return FleetRead(nodes, runs, errors, error_count, len(files), outside, since)


def _locate(raw: list[tuple[int, int, int, str]], files: list[Path]) -> list[str]:
    """The first errors in file order as ``file:line: text`` (``file: text`` for a whole
    file; as written for a document's own message); a range that does not start the file
    counts the lines before it (only for the few errors kept)."""
    out = []
    for idx, offset, n, text in sorted(raw)[:MAX_ERRORS_KEPT]:
        path = str(files[idx])
        if n < 0:
            out.append(text)
            continue
        if n == 0:
            out.append(f"{path}: {text}")
            continue
        line = n if offset < SPLIT_BYTES else _line_base(path, offset) + 1
        out.append(f"{path}:{line}: {text}")
    return out
