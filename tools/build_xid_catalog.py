"""Generate rulebook/xid/catalog.yaml from the Xid reference (../shared/xid-reference.md).

The reference condenses NVIDIA's Xid catalogue (sheet dated 2025-09-30), the Fabric
Manager SXid classes and how other health tools treat each code. This script turns
its tables into the rulebook's catalogue document and adds the two things the
reference leaves to us: a severity for one occurrence (following NVIDIA's buckets)
and a likely cause class. The YAML is what ships; this script only regenerates it:

    python tools/build_xid_catalog.py [--reference ../shared/xid-reference.md]
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_REFERENCE = ROOT.parent / "shared" / "xid-reference.md"
OUT = ROOT / "rulebook" / "xid" / "catalog.yaml"

APPLIES = {"A": "A100", "H": "H100", "B": "B100", "GB": "GB200"}

# Severity for ONE occurrence, from NVIDIA's immediate bucket; exceptions below.
BUCKET_SEVERITY = {
    "RESTART_BM": "critical",
    "RESET_GPU": "critical",
    "CONTACT_SUPPORT": "critical",
    "CHECK_MECHANICALS": "critical",
    "RESTART_VM": "critical",
    "WORKFLOW_XID_48": "critical",
    "RESTART_APP": "warning",
    "UPDATE_SWFW": "warning",
    "CHECK_UVM": "warning",
    "XID_154": "warning",
    "WORKFLOW_XID_45": "warning",
    "WORKFLOW_NVLINK_ERR": "warning",
    "WORKFLOW_NVLINK5_ERR": "warning",
    "IGNORE": "info",
}
SEVERITY_EXCEPTIONS = {
    # IGNORE now, but NVIDIA wants support to hear of it: worth a warning.
    38: "warning",
    44: "warning",
    67: "warning",
    92: "warning",
    93: "warning",
    121: "warning",
    141: "warning",
    157: "warning",
    # No NVIDIA bucket ("-"): judged from the trigger notes.
    162: "info",
    163: "warning",
    164: "warning",
    165: "warning",
    166: "warning",
    167: "critical",
    168: "warning",
    169: "critical",
    170: "warning",
    171: "critical",
    172: "critical",
}

CAUSE = {
    8: "driver",
    11: "application",
    13: "application",
    25: "application",
    31: "application",
    32: "bus",
    37: "firmware",
    38: "firmware",
    43: "application",
    44: "driver",
    45: "application",
    46: "hardware",
    48: "memory",
    54: "power",
    60: "hardware",
    62: "firmware",
    63: "memory",
    64: "memory",
    66: "driver",
    67: "driver",
    69: "application",
    78: "virtualization",
    79: "bus",
    80: "bus",
    92: "memory",
    93: "firmware",
    94: "memory",
    95: "memory",
    106: "informational",
    107: "informational",
    109: "driver",
    110: "hardware",
    119: "firmware",
    120: "firmware",
    121: "bus",
    136: "nvlink",
    137: "application",
    140: "memory",
    141: "driver",
    143: "hardware",
    151: "security",
    152: "driver",
    153: "driver",
    154: "informational",
    155: "nvlink",
    156: "memory",
    157: "memory",
    158: "hardware",
    159: "bus",
    160: "driver",
    161: "driver",
    162: "power",
    163: "power",
    164: "power",
    165: "power",
    166: "security",
    167: "bus",
    168: "memory",
    169: "firmware",
    170: "security",
    171: "memory",
    172: "memory",
}
for _c in (144, 145, 146, 147, 148, 149, 150, 74):
    CAUSE[_c] = "nvlink"
# engine exceptions: copy engines, video decoders/encoders, JPEG, optical flow
ENGINE_MNEMONIC = re.compile(r"_(CE\d+|NVDEC\d|NVJPG\d|NVENC\d|OFA\d)_ERROR$")

# The catalogue's trigger-condition notes, per code (condensed in the reference).
TRIGGER_NOTES = {
    13: "General application fault (out-of-bounds access, illegal instruction or register); "
    "rarely hardware or system software.",
    31: "MMU fault from an illegal address: usually the application, can be driver or "
    "hardware; reproduce under cuda-gdb or compute-sanitizer.",
    32: "DMA controller fault on the PCIe stream: mostly PCIe link quality, not the app.",
    43: "The application hit a software-induced fault and must terminate; the GPU is healthy.",
    45: "Teardown after an application abort (Ctrl-C, reset, SIGKILL); usually not a bug.",
    48: "Uncorrectable error, also reported to the application; a reset or reboot clears it. "
    "For SRAM, check the SRAM DBE thresholds (RMA criterion).",
    63: "Row remapper activity (A100 and newer); page retirement on older GPUs.",
    64: "Row remapping failure (A100 and newer); page retirement failure on older GPUs.",
    74: "NVLink problem to a GPU or NVSwitch; reset or reboot needed; the fault may be at "
    "the remote end. Fatal SXids on NVSwitch systems propagate to GPUs as Xid 74.",
    79: "GPU inaccessible over PCIe, often a PCIe link hardware failure; review the system "
    "and kernel PCI event logs. Can appear as 'GPU has fallen off the bus' without an Xid "
    "line, and in multi-line form.",
    92: "High single-bit ECC error rate.",
    93: "InfoROM wear limit (set via nvflash) exceeded.",
    94: "Contained to one application: restart it, reset the GPU when convenient.",
    95: "Affects several applications: a GPU reset is required (GPU debug guidelines).",
    110: "Uncommon unless a hardware failure: revert hardware changes and cold reset.",
    119: "GSP RPC timeout: reset or power-cycle if persistent, then the GPU debug guidelines.",
    120: "GSP error: reset or power-cycle if persistent, then the GPU debug guidelines.",
    121: "Corrected C2C errors, no impact; reset at a service window.",
    137: "Illegal NVLink peer access, usually the application.",
    140: "Uncorrectable memory error that escaped page offlining / row remapping: reset, "
    "vendor if it persists.",
    154: "Summarizes the recovery action for other Xids and always accompanies another Xid "
    "(e.g. 'GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)'); the "
    "same value is NVML's GPU recovery action (gpu.recovery_action).",
    155: "Intentional link down (including sleep).",
    157: "No repair resources left.",
    159: "Any C2C-linked GPU.",
    163: "Power smoothing disengaged: replace the GPU if power swings are unacceptable.",
    164: "Power smoothing circuitry low lifetime: replace the GPU if swings are unacceptable.",
    165: "Power smoothing circuitry exhausted: replace the GPU if swings are unacceptable.",
    166: "Confidential-computing mode only.",
    170: "Confidential-computing mode only.",
    168: "Only with ECC disabled: enable ECC or reboot with a shifted WPR.",
}

NVLINK5_FORMAT = (
    "Message: '<Xid> <sub component> <fatal|nonfatal> <Crosscontain> <injected> Link <n> "
    "(<intrInfo> <errorStatus> <debug0..4>)'; the subcode is IntrInfo[9:5] before R575, "
    "IntrInfo[6:0] from R575. GPU fatal brings all links down and RCs every channel; link "
    "fatal means drain and reset recommended, then reset required after the drain. Decode "
    "(errorStatus: immediate / severity [/ investigatory]; rsn = IntrInfo[25:20]):"
)
NETIR_OVERRIDE = (
    " GPUd treats NETIR_LINK_EVT subcode 4 (cartridge error) and 10 (PHY retransmission "
    "timeout) as Fatal + hardware inspection."
)

# NVSentinel's action where the reference's cross-tool table names it.
NVSENTINEL = {
    13: "NONE (+analyzer)",
    31: "NONE (+analyzer)",
    43: "NONE",
    45: "CONTACT_SUPPORT (unmapped bucket)",
    48: "COMPONENT_RESET",
    63: "NONE",
    64: "COMPONENT_RESET",
    68: "NONE",
    74: "CONTACT_SUPPORT (unmapped bucket; +13 register rules)",
    79: "RESTART_BM",
    92: "NONE",
    94: "NONE",
    95: "COMPONENT_RESET",
    109: "COMPONENT_RESET",
    119: "COMPONENT_RESET",
    121: "NONE",
    136: "COMPONENT_RESET",
}
GPUD_EVENT = {"F": "Fatal", "C": "Critical", "W": "Warning", "I": "Info"}

SXID_CLASS = {
    "Non-fatal": "non_fatal",
    "Potentially fatal (D.5)": "potentially_fatal",
    "Always fatal (D.6)": "always_fatal",
    "Other notable (host/thermal)": "host",
}


def table_after(text: str, heading: str) -> list[list[str]]:
    """Rows (cells stripped) of the first Markdown table after a heading."""
    start = text.index(heading)
    rows: list[list[str]] = []
    started = False
    for line in text[start:].splitlines()[1:]:
        if line.startswith("|"):
            started = True
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if set("".join(cells)) <= set("-: "):
                continue
            rows.append(cells)
        elif started:
            break
    return rows[1:]  # without the header


def others_note(code: int, gpud: str, others: str, driver_154: str) -> str:
    parts: list[str] = []
    if driver_154:
        parts.append(
            "Also drives Xid 154 (recovery action) from driver "
            + (driver_154 if driver_154 != "yes" else "versions that support it")
            + "."
        )
    if gpud and gpud != "(absent)":
        ev, _, act = gpud.partition("/")
        parts.append(f"GPUd: {GPUD_EVENT.get(ev, ev)}, actions {act or '-'}.")
    elif gpud == "(absent)":
        parts.append("GPUd: not listed.")
    if code in NVSENTINEL:
        parts.append(f"NVSentinel: {NVSENTINEL[code]}.")
    if others:
        expanded = (
            others.replace("Az", "AzNHC fatal list")
            .replace("DP", "ignored by k8s-device-plugin")
            .replace("GCM-nc", "GCM non-critical")
        )
        parts.append(f"Other tools: {expanded}.")
    return " ".join(parts)


def build(reference: Path) -> dict[str, Any]:
    text = reference.read_text(encoding="utf-8")
    buckets = {row[0]: row[1] for row in table_after(text, "## NVIDIA resolution buckets")}
    nvlink5: dict[int, str] = {}
    for row in table_after(text, "## Xid 144-150 (NVLink5) decode"):
        code = int(row[0])
        prev = nvlink5.get(code) or NVLINK5_FORMAT
        nvlink5[code] = f"{prev} {row[1]}: {row[2]}."
    nvlink5[149] += NETIR_OVERRIDE
    codes: list[dict[str, Any]] = []
    for row in table_after(text, "## Xid table"):
        code = int(row[0])
        mnemonic, meaning, applies, immediate, investigatory, d154, gpud, others = row[1:9]
        severity = SEVERITY_EXCEPTIONS.get(code)
        if severity is None:
            severity = BUCKET_SEVERITY[immediate]
        cause = CAUSE.get(code) or ("hardware" if ENGINE_MNEMONIC.search(mnemonic) else "")
        if not cause:
            raise SystemExit(f"no cause class for Xid {code} ({mnemonic})")
        notes = " ".join(
            n
            for n in (
                TRIGGER_NOTES.get(code, ""),
                nvlink5.get(code, ""),
                others_note(code, gpud, others, d154),
            )
            if n
        )
        entry: dict[str, Any] = {
            "code": code,
            "mnemonic": mnemonic,
            "meaning": meaning,
            "applies_to": [APPLIES[a] for a in applies.split(",") if a in APPLIES],
            "immediate": immediate,
            "investigatory": investigatory,
            "severity": severity,
            "cause": cause,
        }
        if notes:
            entry["notes"] = notes
        codes.append(entry)

    unused = re.search(r'Codes marked "Unused" in the catalog.*?:\s*(.*?)\. GPUd also', text, re.S)
    if unused is None:
        raise SystemExit("no list of unused codes in the reference")
    older = {9: "Driver error programming GPU", 16: "Display engine", 19: "Display engine"}
    older.update(dict.fromkeys(range(27, 37), "Video processor"))
    for m in re.finditer(r"(\d+) \(([^)]*)\)", unused.group(1)):
        code, treatment = int(m.group(1)), m.group(2)
        gpud, _, rest = treatment.partition(";")
        ev, _, act = gpud.strip().partition("/")
        note = f"GPUd still treats it as {GPUD_EVENT.get(ev, ev)} (actions {act or '-'})"
        if code in older:
            note += f" with the older description '{older[code]}'"
        if rest.strip():
            others = rest.strip().replace("Az", "AzNHC fatal list")
            note += f"; other tools: {others}"
        entry = {
            "code": code,
            "mnemonic": "",
            "meaning": "Unused (deprecated, or V100 and earlier)",
            "applies_to": [],
            "immediate": "IGNORE" if code in (14, 108) else "CONTACT_SUPPORT",
            "investigatory": "XID_137_FLOW" if code == 108 else "",
            "severity": "info",
            "cause": "retired",
            "retired": True,
            "notes": note + ".",
        }
        codes.append(entry)
    codes.sort(key=lambda c: c["code"])

    sxids: list[dict[str, Any]] = []
    for row in table_after(text, "## SXid (NVSwitch) catalog"):
        cls = SXID_CLASS[row[0]]
        for item in row[2].split(";"):
            num, _, meaning = item.strip().partition(" ")
            sxids.append({"code": int(num), "meaning": meaning.strip(), "sxid_class": cls})
    sxids.sort(key=lambda s: s["code"])

    return {
        "xid_catalog": "NVIDIA Xid catalog 2025-09-30",
        "source": (
            "NVIDIA Xid-Catalog.xlsx (sheets 'Xids' and 'Resolution Buckets', last modified "
            "2025-09-30; docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog), as condensed "
            "in ../shared/xid-reference.md; SXid classes from NVIDIA's Fabric Manager user guide "
            "DU-09883-001 v1.3 as encoded in GPUd. Severity and cause class are this rulebook's "
            "reading of NVIDIA's buckets. Generated by tools/build_xid_catalog.py."
        ),
        "buckets": buckets,
        "codes": codes,
        "sxids": sxids,
    }


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True  # the rulebook loader refuses anchors and aliases


def render(doc: dict[str, Any]) -> str:
    head = (
        "# NVIDIA's Xid and SXid catalogue as rulebook data (xid/CATALOG).\n"
        "# Generated by tools/build_xid_catalog.py from ../shared/xid-reference.md; edit the\n"
        "# generator (severity, cause class) rather than this file.\n"
    )
    body = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    return head + body


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(build(args.reference)), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
