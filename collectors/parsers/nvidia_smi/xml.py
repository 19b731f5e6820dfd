"""`nvidia-smi -q -x` (the XML report) into GPU facts.

The XML is parsed with the standard library, but only after refusing what could make a
parser misbehave: entity declarations and internal DTD subsets (an entity-expansion
bomb), and processing instructions other than the XML declaration. The report's
``<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_vNN.dtd">`` is removed first; the DTD is
never loaded. Tag names differ across drivers (``clocks_throttle_reasons`` before R535,
``clocks_event_reasons`` after; ``power_readings`` / ``gpu_power_readings``;
``pending_blacklist`` / ``pending_retirement``; single/double-bit ECC before Ampere,
SRAM/DRAM counters after): each value is looked up under every name it had.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.pci import normalize_pci
from gpu_triage.model.facts import GpuFacts, RecoveryAction

MAX_XML_CHARS = 64 * 1024 * 1024
_DOCTYPE = re.compile(
    r"<!DOCTYPE\s+[\w.-]+(?:\s+(?:SYSTEM|PUBLIC)(?:\s+\"[^\"<>\[\]]*\"){1,2})?\s*>"
)
_FORBIDDEN = re.compile(r"<!DOCTYPE|<!ENTITY|<\?(?!xml\s)", re.I)
_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")

_RECOVERY = {
    "none": RecoveryAction.NONE,
    "gpu reset required": RecoveryAction.GPU_RESET,
    "gpu reset": RecoveryAction.GPU_RESET,
    "node reboot required": RecoveryAction.NODE_REBOOT,
    "drain p2p": RecoveryAction.DRAIN_P2P,
    "drain and reset": RecoveryAction.DRAIN_AND_RESET,
}
_THROTTLE = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
)


@dataclass
class SmiXmlReport:
    gpus: list[GpuFacts] = field(default_factory=list)
    driver_version: str | None = None
    cuda_version: str | None = None
    attached_gpus: int | None = None


def parse_nvidia_smi_xml(text: str, source: str = "nvidia-smi -q -x") -> SmiXmlReport:
    if len(text) > MAX_XML_CHARS:
        raise ParseError(f"XML report larger than {MAX_XML_CHARS} characters", source=source)
    body = _DOCTYPE.sub("", text, count=1)
    if m := _FORBIDDEN.search(body):
        line = body.count("\n", 0, m.start()) + 1
        raise ParseError(
            "refusing XML with a DTD, entity declaration or processing instruction",
            source=source,
            line=line,
        )
    try:
        root = ET.fromstring(body)  # noqa: S314 - entities and DTDs refused above
    except ET.ParseError as exc:
        where: tuple[int, int] | tuple[None, None] = getattr(exc, "position", (None, None))
        raise ParseError(
            f"not well-formed XML: {exc}", source=source, line=where[0], col=where[1]
        ) from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"not an nvidia-smi XML report (root <{root.tag}>)", source=source)
    rep = SmiXmlReport(
        driver_version=_text(root, "driver_version"),
        cuda_version=_text(root, "cuda_version"),
        attached_gpus=_int(_text(root, "attached_gpus")),
    )
    for index, gpu in enumerate(root.findall("gpu")):
        g = _gpu(gpu, index, source)
        g.driver_version = rep.driver_version
        g.cuda_version = rep.cuda_version
        rep.gpus.append(g)
    return rep


def _text(node: ET.Element | None, *paths: str) -> str | None:
    if node is None:
        return None
    for path in paths:
        found = node.find(path)
        if found is not None and found.text is not None:
            value = found.text.strip()
            if value and value.upper() not in ("N/A", "[N/A]", "NOT SUPPORTED", "[NOT SUPPORTED]"):
                return value
    return None


def _int(value: str | None) -> int | None:
    if value is None or not (m := _NUMBER.match(value)):
        return None
    try:
        return int(float(m.group(1)))
    except (ValueError, OverflowError):
        return None


def _float(value: str | None) -> float | None:
    if value is None or not (m := _NUMBER.match(value)):
        return None
    return float(m.group(1))


def _yes(value: str | None) -> bool | None:
    if value is None:
        return None
    v = value.strip().lower()
    if v in ("yes", "enabled", "active", "on", "true"):
        return True
    if v in ("no", "disabled", "not active", "off", "false"):
        return False
    return None


def _sum(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _gpu(node: ET.Element, index: int, source: str) -> GpuFacts:
    t = lambda *paths: _text(node, *paths)  # noqa: E731
    g = GpuFacts(index=_int(t("minor_number")) if t("minor_number") else index, source=source)
    g.name = t("product_name")
    g.uuid = t("uuid")
    g.serial = t("serial")
    g.vbios_version = t("vbios_version")
    g.pci_bus_id = normalize_pci(t("pci/pci_bus_id") or node.get("id") or "")
    g.persistence_mode = _yes(t("persistence_mode"))
    g.mig_mode = _yes(t("mig_mode/current_mig"))
    g.mig_mode_pending = _yes(t("mig_mode/pending_mig"))
    g.compute_mode = (t("compute_mode") or "").lower().replace(" ", "_") or None
    link = "pci/pci_gpu_link_info"
    g.pcie_link_gen = _int(t(f"{link}/pcie_gen/current_link_gen"))
    g.pcie_link_gen_max = _int(t(f"{link}/pcie_gen/max_link_gen"))
    g.pcie_link_width = _int(t(f"{link}/link_widths/current_link_width"))
    g.pcie_link_width_max = _int(t(f"{link}/link_widths/max_link_width"))
    g.pcie_replay_count = _int(t("pci/replay_counter"))
    ps = t("performance_state")
    g.performance_state = _int(ps[1:]) if ps and ps[:1] in "Pp" else None
    g.fan_speed_pct = _float(t("fan_speed"))
    g.memory_total_mib = _float(t("fb_memory_usage/total"))
    g.memory_used_mib = _float(t("fb_memory_usage/used"))
    g.utilization_gpu_pct = _float(t("utilization/gpu_util"))
    g.utilization_memory_pct = _float(t("utilization/memory_util"))
    g.temperature_gpu_c = _float(t("temperature/gpu_temp"))
    g.temperature_memory_c = _float(t("temperature/memory_temp"))
    g.temperature_slowdown_c = _float(t("temperature/gpu_temp_slow_threshold"))
    g.temperature_shutdown_c = _float(t("temperature/gpu_temp_max_threshold"))
    g.temperature_max_operating_c = _float(t("temperature/gpu_temp_max_gpu_threshold"))
    g.temperature_target_c = _float(t("temperature/gpu_target_temperature"))
    for readings in ("gpu_power_readings", "power_readings"):
        draw = _float(t(f"{readings}/power_draw", f"{readings}/instant_power_draw"))
        limit = _float(t(f"{readings}/current_power_limit", f"{readings}/enforced_power_limit"))
        if draw is not None or limit is not None:
            g.power_draw_w, g.power_limit_w = draw, limit
            g.power_limit_default_w = _float(t(f"{readings}/default_power_limit"))
            break
    g.temperature_memory_max_c = _float(t("temperature/gpu_temp_max_mem_threshold"))
    g.clocks_applications_graphics_mhz = _float(t("applications_clocks/graphics_clock"))
    g.clocks_default_applications_graphics_mhz = _float(
        t("default_applications_clocks/graphics_clock")
    )
    g.clocks_sm_mhz = _float(t("clocks/sm_clock"))
    g.clocks_sm_max_mhz = _float(t("max_clocks/sm_clock"))
    for group, prefix in (
        ("clocks_event_reasons", "clocks_event_reason_"),
        ("clocks_throttle_reasons", "clocks_throttle_reason_"),
    ):
        if node.find(group) is None:
            continue
        for reason in _THROTTLE:
            names = [f"{group}/{prefix}{reason}"]
            if reason == "display_clock_setting":
                names.append(f"{group}/{prefix}display_clocks_setting")
            setattr(g, f"throttle_{reason}", _yes(t(*names)))
        break
    _memory(g, node)
    action = (t("gpu_recovery_action") or "").lower()
    g.recovery_action = _RECOVERY.get(action)
    for key in ("state", "status"):
        value = t(f"fabric/{key}")
        if value:
            setattr(g, f"fabric_{key}", "_".join(value.lower().replace("-", " ").split()))
    return g


def _memory(g: GpuFacts, node: ET.Element) -> None:
    t = lambda *paths: _text(node, *paths)  # noqa: E731
    g.ecc_enabled = _yes(t("ecc_mode/current_ecc"))
    for scope, corr_field, unc_field in (
        ("volatile", "ecc_volatile_corrected", "ecc_volatile_uncorrected"),
        ("aggregate", "ecc_aggregate_corrected", "ecc_aggregate_uncorrected"),
    ):
        base = f"ecc_errors/{scope}"
        sram_unc = _sum(
            _int(t(f"{base}/sram_uncorrectable")),
            _int(t(f"{base}/sram_uncorrectable_parity")),
            _int(t(f"{base}/sram_uncorrectable_secded")),
        )
        dram_corr, dram_unc = (
            _int(t(f"{base}/dram_correctable")),
            _int(t(f"{base}/dram_uncorrectable")),
        )
        sram_corr = _int(t(f"{base}/sram_correctable"))
        corr = _sum(sram_corr, dram_corr)
        unc = _sum(sram_unc, dram_unc)
        if corr is None and unc is None:  # before Ampere: single/double bit totals
            corr = _int(t(f"{base}/single_bit/total"))
            unc = _int(t(f"{base}/double_bit/total"))
        setattr(g, corr_field, corr)
        setattr(g, unc_field, unc)
        if scope == "aggregate":
            g.sram_uncorrected = sram_unc
            g.sram_corrected = sram_corr
            g.sram_threshold_exceeded = _yes(t(f"{base}/sram_threshold_exceeded"))
    g.retired_pages_sbe = _int(t("retired_pages/multiple_single_bit_retirement/retired_count"))
    g.retired_pages_dbe = _int(t("retired_pages/double_bit_retirement/retired_count"))
    g.retired_pages_pending = _yes(
        t("retired_pages/pending_retirement", "retired_pages/pending_blacklist")
    )
    g.remapped_rows_correctable = _int(t("remapped_rows/remapped_row_corr"))
    g.remapped_rows_uncorrectable = _int(t("remapped_rows/remapped_row_unc"))
    g.remapped_rows_pending = _yes(t("remapped_rows/remapped_row_pending"))
    g.remapped_rows_failure = _yes(t("remapped_rows/remapped_row_failure"))
