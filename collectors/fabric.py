"""The NVSwitch fabric of the node: NVSwitch devices, the Fabric Manager's unit, version
and log.

NVSwitches are counted on the PCI bus (NVIDIA bridge functions, class 0680). The unit
state comes from ``systemctl show`` through the command runner (no systemctl: a node
without systemd, the state stays unknown with that reason); the version from
``nv-fabricmanager --version``, else from the log's start-up line. The log
(/var/log/fabricmanager.log) is opened without following a link, must be a regular file,
and only its newest part is read; only the lines that become facts are kept as evidence.
A node with no NVSwitch and no Fabric Manager yields facts that say so (rules stay quiet).
"""

from __future__ import annotations

import errno
import os
import stat

from gpu_triage.collectors.base import CollectContext
from gpu_triage.collectors.host import nvidia_pci_devices
from gpu_triage.collectors.parsers import ParseError
from gpu_triage.collectors.parsers.fabric_manager import (
    FM_UNIT,
    parse_fm_log,
    parse_fm_version,
    parse_systemctl_unit,
)
from gpu_triage.model.facts import FabricFacts, Facts, UnavailableReason

NAME = "fabric_manager"
NVSWITCH_CLASS = "0x0680"  # "Bridge: other": how NVSwitch functions enumerate
LOG_PARTS = ("var", "log", "fabricmanager.log")
LOG_MAX_BYTES = 4 << 20  # the log's newest 4 MiB: its last start and what followed
SHOW_ARGV = [
    "systemctl",
    "show",
    "--property=Id,LoadState,ActiveState,SubState,Result",
    f"{FM_UNIT}.service",
]
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class FabricManagerCollector:
    name = NAME
    # The SXids the log repeats are the kernel log's to report (kmsg has the same errors):
    # claiming the sxid kind here would call SXids "collected" when the kernel log was not.
    kinds = ("fabric",)
    budget_s = 15.0

    def collect(self, ctx: CollectContext, facts: Facts) -> None:
        fabric = FabricFacts(source="sysfs, systemctl, nv-fabricmanager, fabricmanager.log")
        self._nvswitches(ctx, fabric)
        self._unit(ctx, fabric)
        logged = self._log(ctx, fabric)
        self._version(ctx, fabric, logged)
        facts.fabric = fabric

    def _nvswitches(self, ctx: CollectContext, fabric: FabricFacts) -> None:
        try:
            devices = nvidia_pci_devices(ctx)
        except OSError as exc:
            fabric.mark_unavailable("nvswitch_count", UnavailableReason.NOT_SUPPORTED, str(exc))
            return
        fabric.nvswitch_count = sum(klass.startswith(NVSWITCH_CLASS) for _, klass in devices)

    def _unit(self, ctx: CollectContext, fabric: FabricFacts) -> None:
        res = ctx.run(NAME, SHOW_ARGV, min(ctx.command_timeout_s, 10.0))
        fields = ("fm_installed", "fm_active_state")
        if res.missing:
            for f in fields:
                fabric.mark_unavailable(
                    f, UnavailableReason.NOT_SUPPORTED, "no systemctl (no systemd)"
                )
            return
        if res.timed_out or res.cancelled:
            for f in fields:
                fabric.mark_unavailable(f, UnavailableReason.TIMED_OUT, "systemctl show")
            return
        try:
            unit = parse_systemctl_unit(res.stdout, " ".join(SHOW_ARGV))
        except ParseError as exc:
            detail = (res.stderr.strip() or str(exc))[:200]
            for f in fields:
                fabric.mark_unavailable(f, UnavailableReason.ERROR, detail)
            return
        for f in ("fm_installed", "fm_active_state", "fm_sub_state", "fm_result"):
            setattr(fabric, f, getattr(unit, f))

    def _log(self, ctx: CollectContext, fabric: FabricFacts) -> bool:
        path = ctx.path(*LOG_PARTS)
        text, why = read_log_tail(str(path), LOG_MAX_BYTES)
        if text is None:
            for f in ("fm_log_error", "fm_switches_mismatch"):
                fabric.mark_unavailable(f, UnavailableReason.NOT_COLLECTED, why)
            return False
        try:
            logged, sxids = parse_fm_log(text, "/" + "/".join(LOG_PARTS))
        except ParseError as exc:
            fabric.mark_unavailable("fm_log_error", UnavailableReason.ERROR, str(exc)[:200])
            return False
        kept = [ln for ln in (logged.fm_log_error, *(s.raw for s in sxids)) if ln]
        if kept:
            ctx.keep_raw(NAME, "/" + "/".join(LOG_PARTS) + " (lines used)", "\n".join(kept))
        for f in (
            "fm_version",
            "fm_log_error",
            "fm_log_errors",
            "fm_switches_mismatch",
            "fm_nothing_to_do",
        ):
            setattr(fabric, f, getattr(logged, f))
        return logged.fm_version is not None

    def _version(self, ctx: CollectContext, fabric: FabricFacts, from_log: bool) -> None:
        res = ctx.run(NAME, ["nv-fabricmanager", "--version"], min(ctx.command_timeout_s, 10.0))
        if res.missing:
            if not from_log:
                fabric.mark_unavailable(
                    "fm_version", UnavailableReason.NOT_SUPPORTED, "nv-fabricmanager not installed"
                )
                if fabric.fm_installed is None and "fm_installed" in fabric.unavailable:
                    # no systemd and no binary: nothing of the Fabric Manager is here
                    fabric.fm_installed = False
            return
        fabric.fm_installed = True  # the binary answers, whatever systemd knows of a unit
        try:
            fabric.fm_version = parse_fm_version(res.output)  # the binary beats an old log
        except ParseError as exc:
            if not from_log:
                fabric.mark_unavailable("fm_version", UnavailableReason.ERROR, str(exc)[:200])


def read_log_tail(path: str, max_bytes: int) -> tuple[str | None, str]:
    """The newest ``max_bytes`` of a root-owned log, or None and why. Opened without
    following a symlink, non-blocking (a FIFO planted there cannot stall the run), and only
    a regular file is read."""
    try:
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, f"no {path}"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, f"{path} is a symbolic link: not followed"
        return None, f"{path}: {exc.strerror}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, f"{path} is not a regular file: not read"
        start = max(0, st.st_size - max_bytes)
        data = os.pread(fd, max_bytes, start)
    finally:
        os.close(fd)
    if start:
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else b""
    return data.decode("utf-8", errors="replace"), ""
