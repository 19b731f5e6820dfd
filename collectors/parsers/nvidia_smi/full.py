"""``nvidia-smi -q`` (full, or sections with ``-d``): the nested key/value report."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.nvidia_smi.table import _type_letters
from gpu_triage.collectors.parsers.nvidia_smi.values import (
    _NO_GPU_RE,
    _int,
    _lines,
    _lost_gpus,
    _number,
    _Setter,
    _unavailable_reason,
    as_text,
    process_value_failed,
)
from gpu_triage.model.facts import THROTTLE_REASONS, GpuFacts, GpuProcess

# --------------------------------------------------------------------------- -q


@dataclass
class NvidiaSmiQ:
    """What ``nvidia-smi -q`` (full or ``-d`` subsets) shows."""

    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: list[GpuFacts] = field(default_factory=list)
    processes: list[GpuProcess] = field(default_factory=list)
    timestamp: str | None = None
    attached_gpus: int | None = None


def _names(text: str) -> frozenset[str]:
    """'a|b\n |c' -> {'a', 'b', 'c'}: long name lists stay compact and readable."""
    return frozenset(" ".join(n.split()) for n in text.split("|"))


# Printed reason label (lower case) -> GpuFacts throttle field suffix.
THROTTLE_LABELS: dict[str, str] = {
    "idle": "gpu_idle",
    "gpu idle": "gpu_idle",
    "applications clocks setting": "applications_clocks_setting",
    "application clocks setting": "applications_clocks_setting",
    "user defined clocks": "applications_clocks_setting",  # pre-2013 name
    "sw power cap": "sw_power_cap",
    "hw slowdown": "hw_slowdown",
    "sync boost": "sync_boost",
    "sw thermal slowdown": "sw_thermal_slowdown",
    "hw thermal slowdown": "hw_thermal_slowdown",
    "hw power brake slowdown": "hw_power_brake_slowdown",
    "display clock setting": "display_clock_setting",
    "display clocks setting": "display_clock_setting",
}

_THROTTLE_SECTIONS = {"clocks throttle reasons", "clocks event reasons", "clock throttle reasons"}

# Sections that sit directly under a GPU, used when a paste lost its indentation.
_TOP_SECTIONS = _names(
    """mig mode|mig devices|driver model|platform info|inforom version|inforom bbx object flush
    |gpu operation mode|gpu c2c mode|gpu virtualization mode|gpu reset status|ibmnpu|pci
    |clocks throttle reasons|clocks event reasons|clock throttle reasons
    |clocks event reasons counters|clocks throttle reasons counters|fb memory usage|memory usage
    |bar1 memory usage|conf compute protected memory usage|compute mode|utilization
    |encoder stats|fbc stats|ecc mode|ecc errors|retired pages|remapped rows|temperature
    |power readings|gpu power readings|gpu memory power readings|module power readings
    |power samples|clocks|applications clocks|default applications clocks|deferred clocks
    |max clocks|max customer boost clocks|clock policy|supported clocks|voltage|fabric
    |processes|accounted processes|capabilities|sram error status|utilization samples
    |memory utilization samples|gpu utilization samples|hic info|accounting mode
    |power smoothing|workload power profiles"""
)
_REPLAY_KEYS = ("replays since reset", "replays", "replay number", "replay counter")
_BANNER_KEYS = ("driver version", "cuda version", "timestamp", "attached gpus")
# GPU-level keys read but not modelled: recognising them keeps a fragment 'recognised'.
_GPU_LEVEL_UNMAPPED = _names(
    """product brand|product architecture|display mode|display active|addressing mode
    |accounting mode|accounting mode buffer size|minor number|multigpu board|board id
    |board part number|gpu part number|fru part number|module id|gsp firmware version
    |gpu c2c mode|sparse operation mode|driver model"""
)
_PCI_UNMAPPED = _names(
    """bus|device|domain|device id|sub system id|base classcode|sub classcode
    |replay number rollovers|tx throughput|rx throughput|atomic caps outbound
    |atomic caps inbound"""
)
# Known nested headers: section -> header -> depth below the section.
_CHILD_LEVELS: dict[str, dict[str, int]] = {
    "pci": {"gpu link info": 1, "bridge chip": 1, "pcie generation": 2, "link width": 2},
    "ecc errors": {
        "volatile": 1,
        "aggregate": 1,
        "aggregate uncorrectable sram sources": 1,
        "single bit": 2,
        "double bit": 2,
    },
    "remapped rows": {"bank remap availability histogram": 1},
    "fabric": {"health": 1},
}
# 'X T.Limit Temp' rows -> the threshold each one places relative to the T.Limit (the
# memory row is relative to the memory T.Limit, which is not printed: not derived).
_TLIMIT_ROWS = {
    "gpu shutdown t.limit temp": "temperature_shutdown_c",
    "gpu slowdown t.limit temp": "temperature_slowdown_c",
    "gpu max operating t.limit temp": "temperature_max_operating_c",
}
_GPU_HEADER_RE = re.compile(
    r"^\s*GPU\s+([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$"
)


def _norm(key: str) -> str:
    return " ".join(key.strip().lower().split())


def _anchor(path: tuple[str, ...]) -> tuple[str, ...]:
    """Re-root a section path on a known section (fragments start mid-way, pastes add titles)."""
    if not path or path[0] in _TOP_SECTIONS:
        return path
    for i, name in enumerate(path):
        if name in _TOP_SECTIONS:
            return path[i:]
    for top, levels in _CHILD_LEVELS.items():
        if path[0] in levels:
            return (top, *path)
    return path


@dataclass
class _EccCount:
    """One ECC counter: the printed Total (old layout) or the sum of its parts."""

    total: int | None = None
    parts_sum: int = 0
    parts: int = 0
    missing: str = ""  # the N/A-like text when a part could not be read


class _QGpu:
    """One GPU block of ``-q`` being read."""

    def __init__(self, source: str) -> None:
        self.gpu = GpuFacts(source=source, query_errors=0)
        self.s = _Setter(self.gpu)
        # ECC counters per (volatile|aggregate, corrected|uncorrected)
        self.ecc: dict[tuple[str, str], _EccCount] = {}
        self.sram_unc: int | None = None  # parity + SEC-DED, aggregate
        self.processes: list[GpuProcess] = []
        self.tlimit: dict[str, float | None] = {}  # T.Limit rows: margins, not temperatures

    # Each handler returns True when it used the key.
    def apply(self, path: tuple[str, ...], key: str, raw: str) -> bool:
        s = self.s
        path = _anchor(path)
        if not path:
            return self._gpu_level(key, raw)
        top, sub = path[0], path[1:]
        if top == "mig mode" and not sub and key in ("current", "pending"):
            s.set("mig_mode" if key == "current" else "mig_mode_pending", raw, "bool")
        elif top == "pci":
            return self._pci(sub, key, raw)
        elif top in _THROTTLE_SECTIONS:
            name = THROTTLE_LABELS.get(key)
            if name is None:
                return key == "unknown"
            s.set(f"throttle_{name}", raw, "bool")
        elif top in ("fb memory usage", "memory usage") and not sub:
            if key not in ("total", "used"):
                return key in ("free", "reserved")
            s.set(f"memory_{key}_mib", raw, "float")
        elif top == "utilization" and not sub:
            if key not in ("gpu", "memory"):
                return key in ("encoder", "decoder", "jpeg", "ofa")
            s.set(f"utilization_{key}_pct", raw, "float")
        elif top == "ecc mode" and not sub:
            if key != "current":
                return key == "pending"
            s.set("ecc_enabled", raw, "bool")
        elif top == "ecc errors":
            return self._ecc(sub, key, raw)
        elif top == "retired pages" and not sub:
            if key.startswith("single bit"):
                s.set("retired_pages_sbe", raw, "int")
            elif key.startswith("double bit"):
                s.set("retired_pages_dbe", raw, "int")
            elif key.startswith("pending"):
                s.set("retired_pages_pending", raw, "bool")
            else:
                return False
        elif top == "remapped rows" and not sub:
            names = {
                "correctable error": ("remapped_rows_correctable", "int"),
                "uncorrectable error": ("remapped_rows_uncorrectable", "int"),
                "pending": ("remapped_rows_pending", "bool"),
                "remapping failure occurred": ("remapped_rows_failure", "bool"),
            }
            if key not in names:
                return False
            s.set(names[key][0], raw, names[key][1])
        elif top == "temperature" and not sub:
            return self._temperature(key, raw)
        elif top in ("power readings", "gpu power readings") and not sub:
            return self._power(key, raw)
        elif top == "clocks" and not sub and key == "sm":
            s.set("clocks_sm_mhz", raw, "float")
        elif top == "max clocks" and not sub and key == "sm":
            s.set("clocks_sm_max_mhz", raw, "float")
        elif top == "applications clocks" and not sub and key == "graphics":
            s.set("clocks_applications_graphics_mhz", raw, "float")
        elif top == "default applications clocks" and not sub and key == "graphics":
            s.set("clocks_default_applications_graphics_mhz", raw, "float")
        elif top == "processes":
            return self._process(key, raw)
        elif top == "fabric" and not sub and key in ("state", "status"):
            s.set(f"fabric_{key}", raw, "fabric")
        else:
            return False
        return True

    def _gpu_level(self, key: str, raw: str) -> bool:
        s = self.s
        simple = {
            "product name": ("name", "str"),
            "serial number": ("serial", "str"),
            "gpu uuid": ("uuid", "str"),
            "vbios version": ("vbios_version", "str"),
            "persistence mode": ("persistence_mode", "bool"),
            "performance state": ("performance_state", "pstate"),
            "fan speed": ("fan_speed_pct", "float"),
            "compute mode": ("compute_mode", "compute"),
            "gpu recovery action": ("recovery_action", "recovery"),
            "mig mode": ("mig_mode", "bool"),
        }
        if key in simple:
            s.set(simple[key][0], raw, simple[key][1])
            return True
        if key in _REPLAY_KEYS or key == "bus id":
            # a fragment that starts inside PCI: these names exist nowhere else
            return self._pci((), key, raw)
        reason = _unavailable_reason(raw)
        if key in _THROTTLE_SECTIONS and reason is not None:
            for name in THROTTLE_REASONS:
                s.set(f"throttle_{name}", raw, "bool")
            return True
        groups = {
            "remapped rows": (
                "remapped_rows_correctable",
                "remapped_rows_uncorrectable",
                "remapped_rows_pending",
                "remapped_rows_failure",
            ),
            "retired pages": ("retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending"),
            "ecc mode": ("ecc_enabled",),
        }
        if key in groups and reason is not None:
            for name in groups[key]:
                s.set(name, raw)
            return True
        if key == "processes" and raw.strip().lower() == "none":
            s.value("process_count", 0)
            return True
        return key in _GPU_LEVEL_UNMAPPED

    def _pci(self, sub: tuple[str, ...], key: str, raw: str) -> bool:
        s = self.s
        # these names are unique inside PCI, whatever subsection a flat paste leaves us in
        if key == "bus id":
            s.set("pci_bus_id", raw, "pci")
            return True
        if key in _REPLAY_KEYS:
            s.set("pcie_replay_count", raw, "int")
            return True
        leaf = sub[-1] if sub else None
        if leaf == "pcie generation":
            if key == "max":
                s.set("pcie_link_gen_max", raw, "int")
            elif key == "current":
                s.set("pcie_link_gen", raw, "int")
            else:
                return key in ("device current", "device max", "host max")
            return True
        if leaf == "link width":
            if key == "max":
                s.set("pcie_link_width_max", raw, "width")
            elif key == "current":
                s.set("pcie_link_width", raw, "width")
            else:
                return False
            return True
        return leaf is None and key in _PCI_UNMAPPED

    def _ecc(self, sub: tuple[str, ...], key: str, raw: str) -> bool:
        if not sub or sub[0] not in ("volatile", "aggregate"):
            return False
        scope = sub[0]
        if scope == "aggregate" and len(sub) == 1:
            self._sram(key, raw)
        if len(sub) >= 2 and sub[1] in ("single bit", "double bit"):
            # old layout: per-memory counts, then Total
            kind = "corrected" if sub[1] == "single bit" else "uncorrected"
        elif "uncorrectable" in key:
            kind = "uncorrected"
        elif "correctable" in key:
            kind = "corrected"
        else:
            return key.endswith("threshold exceeded")
        acc = self.ecc.setdefault((scope, kind), _EccCount())
        reason = _unavailable_reason(raw)
        if reason is not None:
            acc.missing = raw.strip()
            return True
        n = _int(raw)
        if n is None:
            return False
        if key == "total":
            acc.total = n
        else:
            acc.parts_sum += n
            acc.parts += 1
        return True

    def _temperature(self, key: str, raw: str) -> bool:
        names = {
            "gpu current temp": "temperature_gpu_c",
            "gpu": "temperature_gpu_c",
            "gpu temp": "temperature_gpu_c",
            "memory current temp": "temperature_memory_c",
            "gpu slowdown temp": "temperature_slowdown_c",
            "gpu shutdown temp": "temperature_shutdown_c",
            "gpu max operating temp": "temperature_max_operating_c",
            "memory max operating temp": "temperature_memory_max_c",
            "gpu target temperature": "temperature_target_c",
        }
        if key in _TLIMIT_ROWS or key == "gpu t.limit temp":
            # 'T.Limit' rows (R565+) are margins to the T.Limit, not temperatures: kept
            # apart and turned into thresholds at the end of the GPU (finish).
            self.tlimit[key] = _number(raw)
            return True
        if key not in names:
            return "temp" in key or "t.limit" in key
        self.s.set(names[key], raw, "float")
        return True

    def _thresholds_from_tlimit(self) -> None:
        """R565+ prints thresholds as margins: 'GPU T.Limit Temp' is how far the GPU is
        below its T.Limit (= GPU Max Operating Temp), and each 'X T.Limit Temp' row is
        where X sits relative to it (-8: eight degrees above). A printed absolute value
        always wins."""
        margin = self.tlimit.get("gpu t.limit temp")
        current = self.gpu.temperature_gpu_c
        if margin is None or current is None:
            return
        tlimit = current + margin
        for key, name in _TLIMIT_ROWS.items():
            offset = self.tlimit.get(key)
            if offset is not None and getattr(self.gpu, name) is None:
                self.s.value(name, round(tlimit - offset, 1))

    def _power(self, key: str, raw: str) -> bool:
        draws = {"average power draw": 2, "power draw": 1, "instantaneous power draw": 0}
        limits = {"enforced power limit": 2, "current power limit": 2, "power limit": 1}
        if key in draws:
            self.s.set("power_draw_w", raw, "float", prio=draws[key])
        elif key in limits:
            self.s.set("power_limit_w", raw, "float", prio=limits[key])
        elif key == "default power limit":
            self.s.set("power_limit_default_w", raw, "float")
        elif key == "power state" and self.gpu.performance_state is None:
            self.s.set("performance_state", raw, "pstate")
        else:
            return "power" in key
        return True

    def _process(self, key: str, raw: str) -> bool:
        if key == "process id":
            proc = GpuProcess(source=self.gpu.source, pid=_int(raw))
            self.processes.append(proc)
            return True
        if not self.processes:
            return key in ("gpu instance id", "compute instance id")
        proc = self.processes[-1]
        if key == "type":
            kind = raw.strip()
            proc.type = {"C": "compute", "G": "graphics", "C+G": "compute+graphics"}.get(
                kind, kind.lower() or None
            )
        elif key in ("name", "process name"):
            if not process_value_failed(proc, "name", raw):
                proc.name = raw.strip() or None
        elif key == "used gpu memory":
            if process_value_failed(proc, "used_memory_mib", raw):
                return True
            reason = _unavailable_reason(raw)
            if reason is not None:
                proc.mark_unavailable("used_memory_mib", reason, raw.strip())
            else:
                proc.used_memory_mib = _number(raw)
        else:
            return False
        return True

    def _sram(self, key: str, raw: str) -> None:
        """SRAM counters of the Aggregate block (R525+), kept apart for the SRAM rules."""
        if key == "sram threshold exceeded":
            self.s.set("sram_threshold_exceeded", raw, "bool")
        elif key == "sram correctable":
            self.s.set("sram_corrected", raw, "int")
        elif key.startswith("sram uncorrectable"):
            n = _int(raw)
            if n is None:
                self.s.set("sram_uncorrected", raw)
            else:
                self.sram_unc = (self.sram_unc or 0) + n

    def finish(self) -> None:
        self._thresholds_from_tlimit()
        if self.sram_unc is not None:
            self.s.value("sram_uncorrected", self.sram_unc)
        for scope in ("volatile", "aggregate"):
            for kind in ("corrected", "uncorrected"):
                acc = self.ecc.get((scope, kind))
                if acc is None:
                    continue
                name = f"ecc_{scope}_{kind}"
                total = acc.total
                if total is None and acc.parts:
                    total = acc.parts_sum
                if total is not None:
                    self.s.value(name, total)
                elif acc.missing:
                    self.s.set(name, acc.missing)
        for proc in self.processes:
            proc.gpu_pci_bus_id = self.gpu.pci_bus_id
        if self.processes:
            self.s.value(
                "process_count",
                sum(1 for p in self.processes if "C" in _type_letters(p.type)),
            )


def parse_nvidia_smi_q(text: str | bytes, source: str = "<text>") -> NvidiaSmiQ:
    """Parse ``nvidia-smi -q`` (full, ``-d`` subsets, old drivers, pastes that lost indentation).

    Structure comes from indentation when the text has any, from known section names
    when it has none. Raises :class:`ParseError` when the text is not this output.
    """
    text = as_text(text)
    lines = _lines(text)
    result = NvidiaSmiQ()
    indented = any(line[:1] == " " and line.strip() for line in lines)
    stack: list[tuple[str, int]] = []  # (section name, indent), GPU level excluded
    cur: _QGpu | None = None
    blocks: list[_QGpu] = []
    recognised = False
    gpu_indent = -1

    def new_gpu() -> _QGpu:
        block = _QGpu(source)
        blocks.append(block)
        return block

    for line in lines:
        if not line.strip():
            continue
        if "NVSMI LOG" in line:
            recognised = True
            continue
        indent = len(line) - len(line.lstrip())
        hm = _GPU_HEADER_RE.match(line)
        if hm:
            cur = new_gpu()
            cur.s.set("pci_bus_id", hm.group(1), "pci")
            stack, gpu_indent, recognised = [], indent, True
            continue
        if ":" not in line:
            # a section header
            name = _norm(line)
            if not re.search(r"[a-z]", name) or len(name) > 80:
                continue
            if name in _TOP_SECTIONS or name in _THROTTLE_SECTIONS:
                recognised = True
            if indented:
                while stack and stack[-1][1] >= indent:
                    stack.pop()
                if indent <= gpu_indent and name not in _TOP_SECTIONS:
                    stack = []  # text back at the GPU line's column: not a GPU section
                    continue
                stack.append((name, indent))
            else:
                levels = _CHILD_LEVELS.get(stack[0][0], {}) if stack else {}
                if name in levels:
                    stack = [*stack[: levels[name]], (name, indent)]
                else:
                    stack = [(name, indent)]
            continue

        key_text, _, raw = line.partition(":")
        key, raw = _norm(key_text), raw.strip()
        if not re.search(r"[a-z]", key) or len(key) > 80:
            continue
        if (indent <= gpu_indent or cur is None) and key in _BANNER_KEYS:
            # banner keys before the first GPU block
            recognised = True
            value = raw if raw and _unavailable_reason(raw) is None else None
            if key == "driver version":
                result.driver_version = value
            elif key == "cuda version":
                result.cuda_version = value
            elif key == "timestamp":
                result.timestamp = value
            else:
                result.attached_gpus = _int(raw)
            continue
        popped = [(n, i) for n, i in stack if i < indent] if indented else stack
        block = cur if cur is not None else _QGpu(source)
        handled = False
        for cand in (popped, stack, []):
            if block.apply(tuple(n for n, _ in cand), key, raw):
                handled = True
                # keep the deeper context only when indentation proved unreliable
                if cand is popped or (not indented and not cand):
                    stack = list(cand)
                break
        else:
            stack = popped
        if cur is None and handled:
            # a fragment without its 'GPU <bus id>' line: keep the implicit GPU
            cur = block
            blocks.append(block)
        if cur is not None:
            cur.s.count_error(raw)
        recognised = recognised or handled

    for block in blocks:
        block.finish()
        block.gpu.driver_version = result.driver_version
        block.gpu.cuda_version = result.cuda_version
        result.gpus.append(block.gpu)
        result.processes.extend(block.processes)
    known = {g.pci_bus_id for g in result.gpus if g.pci_bus_id}
    lost = _lost_gpus(lines, source, known)
    result.gpus.extend(lost)
    if not recognised and not lost and text.strip():
        if _NO_GPU_RE.search(text):
            return result
        raise ParseError("not nvidia-smi -q output", source=source)
    return result
