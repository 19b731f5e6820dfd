"""The exit code, decided once from what was found and from what could not be looked at.

The contract (README "Exit codes", SECURITY.md):

* 2 critical: a critical finding. It wins over "unknown": a critical finding that
  explains the blindness (a broken driver, a GPU off the bus) is the answer.
* 3 unknown: gpu-triage could not look. A collector failed or timed out; or, for a
  live collection, no GPU facts at all (NVML unavailable on a node with NVIDIA PCI
  devices, or whose inventory expects GPUs; or no NVIDIA GPU visible at all).
* 1 warning: a warning finding, and nothing above.
* 0 healthy: every collector that could matter answered and nothing fired at warning
  or above. A collector whose source is absent here (no kubectl, no Slurm) is *not
  present*, not a failure; output cut at a cap is recorded, still ok.

A snapshot built from pasted outputs (``collect --from-text``) is judged on what it
holds: kinds it does not contain are *not provided*, never a reason for 3; a pasted
file that could not be parsed is a failure like a collector's.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum

from gpu_triage.model.facts import Facts
from gpu_triage.model.snapshot import CollectorState, CollectorStatus, is_supplied

MAX_REASON_CHARS = 400


class ExitCode(IntEnum):
    """Nagios-style exit codes, as monitoring systems read them."""

    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3  # could not look: a collector failed or timed out, no GPU facts, ...
    USAGE = 64


WORDS = {
    ExitCode.OK: "HEALTHY",
    ExitCode.WARNING: "WARNING",
    ExitCode.CRITICAL: "CRITICAL",
    ExitCode.UNKNOWN: "UNKNOWN",
}


def one_line(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """Printable, single-line, bounded: reasons quote collector errors (node strings)."""
    text = text[: limit * 4]
    flat = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def blind_spots(collectors: Sequence[CollectorStatus], facts: Facts) -> list[str]:
    """Why gpu-triage could not look, in words; empty when it could."""
    out: list[str] = []
    for c in collectors:
        if c.state is CollectorState.FAILED:
            out.append(f"{c.name} failed" + (f" ({c.error})" if c.error else ""))
        elif c.state is CollectorState.TIMED_OUT:
            out.append(f"{c.name} timed out" + (f" ({c.error})" if c.error else ""))
    live = [c for c in collectors if not is_supplied(c.name)]
    if live and not facts.gpus:
        nvml = next((c for c in live if c.name == "nvml"), None)
        why = f"nvml {nvml.state.value}: {nvml.error}" if nvml and nvml.error else "no GPU facts"
        pci = facts.host.gpu_count_pci if facts.host else None
        expected = facts.site.expected_gpu_count if facts.site else None
        if pci:
            out.append(f"GPU facts unavailable ({why}) on a node with {pci} NVIDIA PCI device(s)")
        elif expected:
            out.append(f"GPU facts unavailable ({why}); the inventory expects {expected} GPU(s)")
        else:
            out.append(f"no NVIDIA GPU visible ({why})")
    return out


def judge(
    critical: int, warning: int, collectors: Sequence[CollectorStatus], facts: Facts
) -> tuple[ExitCode, str]:
    """(exit code, the first line of every report: the code and why, in words)."""
    blind = blind_spots(collectors, facts)
    if critical:
        code = ExitCode.CRITICAL
        why = f"{critical} critical finding(s)"
        if blind:
            why += "; also could not look: " + "; ".join(blind)
    elif blind:
        code, why = ExitCode.UNKNOWN, "could not look: " + "; ".join(blind)
    elif warning:
        code, why = ExitCode.WARNING, f"{warning} warning finding(s)"
    else:
        code = ExitCode.OK
        why = "every collector that could matter answered; no warning or critical finding"
        cut = [c.name for c in collectors if c.truncated]
        if cut:
            why += f" (output cut at the cap: {', '.join(cut)})"
    return code, one_line(f"{WORDS[code]} (exit {int(code)}): {why}")
